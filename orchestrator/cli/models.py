"""`orchestrator models`: every configured provider and endpoint, its keys checked at once, and what to set,
with the context window each server says it runs its models with, where it says."""
from __future__ import annotations

from typing import Any

import msgspec

from orchestrator.providers.config import VENDORS
from orchestrator.providers.registry import Registry


_PROTOCOL = {"openai": "OpenAI-compatible", "anthropic": "Anthropic messages"}


async def cmd_models(args) -> int:
    """Every provider and endpoint, its candidates (keys masked) checked at once, and what to set."""
    async with Registry.load() as registry:
        checks = await registry.check(timeout=args.timeout)
    for c in checks:
        if args.json:
            print(msgspec.json.encode(c).decode())
            continue
        if not c.configured:
            print(c.hint)
            continue
        endpoint = "" if c.name in VENDORS else ", endpoint"
        print(f"{c.name} ({_PROTOCOL[c.kind]}{endpoint})")
        for cand in c.candidates:
            state = "ok     " if cand.ok else "FAILED "
            problem = f" — {cand.error_class}: {cand.error}" if not cand.ok else ""
            print(f"  {state} {cand.key} at {cand.base_url}{problem}")
            for model, tokens in (cand.windows or {}).items():
                print(f"           {model}: a {tokens:,}-token context window, as the server reports it")
        if c.hint:
            print(f"  {c.hint}")
    # Only what the user set up counts as a failure: an absent default Ollama is information.
    return 1 if any(not cand.ok for c in checks if c.explicit for cand in c.candidates) else 0


def add_parser(sub: Any) -> None:
    m = sub.add_parser("models", help="list configured providers and endpoints and check their keys",
                       description="Every provider and endpoint configured (environment variables and the "
                                   "config file), each key tried against its server at once, and what to set "
                                   "for those that are missing. Exit code 1 when a configured key fails.")
    m.add_argument("--json", action="store_true", help="one JSON object per provider")
    m.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each check (default: %(default)s)")
    m.set_defaults(fn=cmd_models)
