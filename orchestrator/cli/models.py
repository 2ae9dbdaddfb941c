"""`orchestrator models`: every configured provider and endpoint, its keys checked at once, and what to set,
with the context window each server says it runs its models with, where it says."""
from __future__ import annotations

from typing import Any

import msgspec
import trio

from orchestrator.providers.config import VENDORS, mask
from orchestrator.providers.registry import CandidateCheck, Registry, SourceCheck


_PROTOCOL = {"openai": "OpenAI-compatible", "anthropic": "Anthropic messages"}
# The scenarios' model is always there: it needs no key and no server, so it is listed without a check.
SCRIPTED = SourceCheck(name="scripted", kind="scripted", configured=True, explicit=False, candidates=[])
_SCRIPTED_LINE = ("scripted (built in)\n  ok      always available, no key: it plays a scenario's scripted replies "
                  "(`run SCENARIO`, `check SCENARIO`, `chat --scripted SCENARIO`, `serve --scripted SCENARIO`)")
_DOWN = ("unreachable", "connection")  # nothing answered at the address


async def cmd_models(args) -> int:
    """Every provider and endpoint, its candidates (keys masked) checked at once, and what to set."""
    # config.toml may name `${secret:...}` keys: a keyring lookup, so off the loop
    async with await trio.to_thread.run_sync(Registry.load) as registry:
        checks = await registry.check(timeout=args.timeout)
    for c in [*checks, SCRIPTED]:
        if args.json:
            print(msgspec.json.encode(c).decode())
        elif c is SCRIPTED:
            print(_SCRIPTED_LINE)
        elif not c.configured:
            print(c.hint)
        else:
            endpoint = "" if c.name in VENDORS else ", endpoint"
            print(f"{c.name} ({_PROTOCOL[c.kind]}{endpoint})")
            for cand in c.candidates:
                print(_line(cand, c))
                for model, tokens in (cand.windows or {}).items():
                    print(f"           {model}: a {tokens:,}-token context window, as the server reports it")
            if c.hint:
                print(f"  {c.hint}")
    # Only what the user set up counts as a failure: an absent default Ollama is information.
    return 1 if any(not cand.ok for c in checks if c.explicit for cand in c.candidates) else 0


def _line(cand: CandidateCheck, source: SourceCheck) -> str:
    """One candidate: its state, then the key and the address. A candidate without a key is a local server
    that needs none, so its state is whether it runs, never a failure for want of a key."""
    problem = f" — {cand.error_class}: {cand.error}" if not cand.ok else ""
    if cand.key != mask(None):
        return f"  {'ok     ' if cand.ok else 'FAILED '} {cand.key} at {cand.base_url}{problem}"
    unset = f" ({' and '.join(source.missing)} unset)" if source.missing else ""
    if cand.ok:
        return f"  ok      {cand.base_url}, no key{unset}"
    if cand.error_class in _DOWN:  # the error says what to start or set
        return f"  not running at {cand.base_url} — {cand.error}"
    if cand.error_class == "timeout":
        return f"  no answer at {cand.base_url} — {cand.error}"
    return f"  FAILED  {cand.base_url}, sent without a key{unset}{problem}"


def add_parser(sub: Any) -> None:
    m = sub.add_parser("models", help="list configured providers and endpoints and check their keys",
                       description="Every provider and endpoint configured (environment variables and the "
                                   "config file), each key tried against its server at once, and what to set "
                                   "for those that are missing; the scripted model, which needs nothing, last. "
                                   "Exit code 1 when a configured key or endpoint fails.")
    m.add_argument("--json", action="store_true", help="one JSON object per provider")
    m.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each check (default: %(default)s)")
    m.set_defaults(fn=cmd_models)
