"""Provider costs: how fast each vendor's stream is parsed, and what the client adds to the first token.

1. throughput: a recorded-style stream of a few MB per vendor (many responses: token-sized text
   deltas, tool calls whose arguments come in fragments, usage, the end markers), as SSE text lines.
   The lines are fed from an async iterator over a list (no network, no decoding of bytes) through
   `iter_sse` and the vendor's parser (`ChunkParser` for OpenAI, `StreamParser` for Anthropic), one
   fresh parser per response, the way the providers drive them, and checked once against what was
   generated. MB/s is SSE bytes (UTF-8) per second of this process's CPU time (immune to neighbours
   taking the CPU) and per second of wall time; the best of `--repeat` rounds is kept. A second
   table splits the CPU per event: the async iterator alone, + `iter_sse`, + the parser.
2. first token: a minimal streaming HTTP/1.1 server in a child process on loopback (its own
   interpreter, no GIL shared with the client) answers every POST with chunked SSE, one HTTP chunk
   per event; the events up to the first content chunk go out in the same write as the headers, the
   rest `--gap` ms later. Per iteration, three calls, their order rotating:
   (a) raw httpx: `client.stream("POST", ...)` with the provider's exact URL, body bytes and headers,
       timed from the call to the first content line from `aiter_lines()`;
   (b) the provider: from `provider.stream(request)` to its first `TextDelta`;
   (c) raw httpx again, on a client that keeps no connection alive: what a new connection costs.
   All read their reply to the end (not timed). Each has its own `httpx.AsyncClient`, built like the
   providers' own (`timeout=http.TIMEOUT`, default limits) with a transport wrapper that notes when
   httpx hands the request to its transport and when the response headers are in (the phases).
   Reported: median and p95 of (a), (b) and the per-iteration difference (b) - (a), the phases, and
   new TCP connections per call (counted by the server). Requests: system prompt, 7 tools and 0 or
   100 history messages (`--history`). `--tls` runs the same over TLS (openssl CLI needed).
3. the same first token without a socket (httpx.MockTransport answering at once), to get the
   client's CPU alone, with the provider's pieces timed apart: `build_body`, the JSON encoding httpx
   does for `json=`, and `iter_sse` + parser up to the first TextDelta.

    .venv/bin/python bench/providers.py                       # full run (~1 min)
    .venv/bin/python bench/providers.py --quick               # smoke run (~10 s)
    .venv/bin/python bench/providers.py --only first-token    # one section: throughput | first-token
    .venv/bin/python bench/providers.py --only first-token --tls --history 0
    .venv/bin/python bench/providers.py --profile anthropic   # cProfile of the provider up to its first token
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import random
import socket
import statistics
import string
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import httpx
import msgspec
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine import _WORDS, machine, pct, text_of  # noqa: E402  (bench/engine.py)

from orchestrator.core.types import (  # noqa: E402
    ModelMessage, Request, StreamEnd, TextBlock, TextDelta, ToolCallBlock, ToolCallDone, ToolResultBlock, ToolSpec,
)
from orchestrator.providers import anthropic, http, openai  # noqa: E402
from orchestrator.providers.anthropic import Anthropic, StreamParser  # noqa: E402
from orchestrator.providers.openai import ChunkParser, OpenAICompatible  # noqa: E402
from orchestrator.providers.sse import iter_sse  # noqa: E402

VENDORS = ("openai", "anthropic")
TARGET_MS = 1.0  # the client's share of the first token (the target)
KEY = {"openai": "sk-bench-0123456789abcdef0123456789abcdef", "anthropic": "sk-ant-bench-0123456789abcdef0123456789"}
MODEL = {"openai": "gpt-4o-2024-08-06", "anthropic": "claude-sonnet-4-5-20250929"}


def compact(obj: Any) -> str:
    return msgspec.json.encode(obj).decode()


def rid(rng: random.Random, n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


# --- 1. a recorded-style stream -------------------------------------------------------------------

_CODE = ("def", " return", " self", ".", "(", ")", ":", "\n", "    ", " =", " None", "_", "path", "[", "]",
         " if", " not", " in", " for", " x", ",", " import", " from", "`", "``", "`\n", "'", '"', "0", "1")
_PUNCT = (",", ".", ".", ":", " -", "\n\n", "\n", " (", ")", " **", "**", " `", "`", ";")
_RARE = (" é", "é", " —", " →", " ✓", "ü", " 🙂", " naïve", " “", "”")


def tokens(rng: random.Random, n: int) -> list[str]:
    """Token-sized pieces of English with markdown and code, some non-ASCII: what a model streams."""
    out: list[str] = []
    code = False
    for _ in range(n):
        r = rng.random()
        if r < 0.01:
            code = not code
            out.append("\n```python\n" if code else "\n```\n")
        elif code:
            out.append(rng.choice(_CODE))
        elif r < 0.17:
            out.append(rng.choice(_PUNCT))
        elif r < 0.18:
            out.append(rng.choice(_RARE))
        else:
            w = rng.choice(_WORDS)
            if len(w) > 6 and rng.random() < 0.4:  # longer words are often two tokens
                out += [" " + w[:4], w[4:]]
            else:
                out.append(" " + w)
    return out


def tool_call(rng: random.Random) -> tuple[str, dict]:
    """A plausible coding-agent call; edits and writes carry long escaped strings."""
    path = f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}_{rng.choice(_WORDS)}.py"
    kind = rng.random()
    if kind < 0.35:
        return "read_file", {"path": path, "offset": rng.randrange(1, 400), "limit": rng.choice((50, 100, 200))}
    if kind < 0.55:
        return "grep", {"pattern": rf"def {rng.choice(_WORDS)}_\w+\(", "path": "src", "glob": "*.py"}
    if kind < 0.70:
        return "run", {"command": f"python -m pytest -q tests/test_{rng.choice(_WORDS)}.py -x", "timeout": 120}
    if kind < 0.93:
        return "edit_file", {"path": path, "old": "".join(tokens(rng, rng.randint(30, 150))),
                             "new": "".join(tokens(rng, rng.randint(40, 220)))}
    return "write_file", {"path": path, "content": "".join(tokens(rng, rng.randint(300, 900)))}


def fragments(rng: random.Random, text: str, lo: int, hi: int) -> list[str]:
    out, i = [], 0
    while i < len(text):
        n = rng.randint(lo, hi)
        out.append(text[i:i + n])
        i += n
    return out


class Reply(msgspec.Struct):
    """What one response says, to check the parser against."""
    text: str
    calls: list[tuple[str, dict]]
    lines: list[str]
    nbytes: int
    events: int


def shape(rng: random.Random) -> tuple[int, int]:
    """(text tokens, tool calls): a preamble and calls, a medium answer, or a long one with code."""
    r = rng.random()
    if r < 0.55:
        return rng.randint(10, 80), rng.randint(1, 3)
    if r < 0.85:
        return rng.randint(150, 600), 0
    return rng.randint(600, 2000), 0


def sse_lines(events: list[tuple[str, str]]) -> tuple[list[str], int]:
    """(event name or "", data) pairs as the SSE text lines a server sends, and their size in bytes."""
    text = "".join((f"event: {name}\n" if name else "") + f"data: {data}\n\n" for name, data in events)
    return text.split("\n")[:-1], len(text.encode())


def openai_reply(rng: random.Random) -> Reply:
    n_text, n_calls = shape(rng)
    head = {"id": f"chatcmpl-{rid(rng, 29)}", "object": "chat.completion.chunk",
            "created": 1764400000 + rng.randrange(10**5), "model": MODEL["openai"], "service_tier": "default",
            "system_fingerprint": f"fp_{rid(rng, 10, '0123456789abcdef')}"}

    def chunk(delta: dict, finish: str | None = None) -> tuple[str, str]:
        return "", compact({**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                 "finish_reason": finish}], "usage": None})

    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    toks = tokens(rng, n_text)
    events += [chunk({"content": t}) for t in toks]
    calls = [tool_call(rng) for _ in range(n_calls)]
    for i, (name, args) in enumerate(calls):
        events.append(chunk({"tool_calls": [{"index": i, "id": f"call_{rid(rng, 24)}", "type": "function",
                                             "function": {"name": name, "arguments": ""}}]}))
        events += [chunk({"tool_calls": [{"index": i, "function": {"arguments": f}}]})
                   for f in fragments(rng, compact(args), 1, 8)]
    events.append(chunk({}, "tool_calls" if calls else "stop"))
    prompt = rng.randint(2_000, 60_000)
    events.append(("", compact({**head, "choices": [], "usage": {
        "prompt_tokens": prompt, "completion_tokens": len(events), "total_tokens": prompt + len(events),
        "prompt_tokens_details": {"cached_tokens": prompt // 2 // 1024 * 1024, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0,
                                      "rejected_prediction_tokens": 0}}})))
    events.append(("", "[DONE]"))
    lines, nbytes = sse_lines(events)
    return Reply("".join(toks), calls, lines, nbytes, len(events))


def anthropic_reply(rng: random.Random) -> Reply:
    n_text, n_calls = shape(rng)
    prompt = rng.randint(2_000, 60_000)
    events: list[tuple[str, str]] = []

    def ev(obj: dict) -> None:
        events.append((obj["type"], compact(obj)))

    ev({"type": "message_start", "message": {
        "id": f"msg_01{rid(rng, 22)}", "type": "message", "role": "assistant", "model": MODEL["anthropic"],
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": rng.randint(3, 900), "cache_creation_input_tokens": rng.randint(0, 3000),
                  "cache_read_input_tokens": prompt, "cache_creation": {"ephemeral_5m_input_tokens": 0,
                                                                        "ephemeral_1h_input_tokens": 0},
                  "output_tokens": 1, "service_tier": "standard"}}})
    ev({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    ev({"type": "ping"})
    toks = tokens(rng, n_text)
    i = 0
    while i < len(toks):  # Claude's text deltas hold a few tokens each
        n = rng.randint(1, 6)
        ev({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "".join(toks[i:i + n])}})
        i += n
    ev({"type": "content_block_stop", "index": 0})
    calls = [tool_call(rng) for _ in range(n_calls)]
    for j, (name, args) in enumerate(calls, 1):
        ev({"type": "content_block_start", "index": j,
            "content_block": {"type": "tool_use", "id": f"toolu_01{rid(rng, 22)}", "name": name, "input": {}}})
        for f in [""] + fragments(rng, compact(args), 5, 60):
            ev({"type": "content_block_delta", "index": j, "delta": {"type": "input_json_delta", "partial_json": f}})
        ev({"type": "content_block_stop", "index": j})
    ev({"type": "message_delta", "delta": {"stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": len(events)}})
    ev({"type": "message_stop"})
    lines, nbytes = sse_lines(events)
    return Reply("".join(toks), calls, lines, nbytes, len(events))


def recording(vendor: str, mb: float, seed: int = 17) -> list[Reply]:
    """Responses until the SSE text reaches `mb` megabytes (10^6 bytes)."""
    rng = random.Random(seed)
    make = openai_reply if vendor == "openai" else anthropic_reply
    out: list[Reply] = []
    while sum(r.nbytes for r in out) < mb * 1e6:
        out.append(make(rng))
    return out


async def lines_of(lines: list[str]) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def parse(vendor: str, reply: Reply, sink: list | None = None) -> int:
    """One response through iter_sse and a fresh parser, as the provider drives them; events out."""
    n = 0
    if vendor == "openai":
        parser = ChunkParser("openai", [KEY["openai"]])
        async for sse in iter_sse(lines_of(reply.lines)):
            out = parser.feed(sse)
            n += len(out)
            if sink is not None:
                sink += out
            if parser.done:
                break
        out = parser.finish()
        if sink is not None:
            sink += out
        return n + len(out)
    sparser = StreamParser("anthropic", [KEY["anthropic"]])
    async for sse in iter_sse(lines_of(reply.lines)):
        out = sparser.feed(sse)
        n += len(out)
        if sink is not None:
            sink += out
        if sparser.done:
            break
    sparser.finish()
    return n


async def check(vendor: str, replies: list[Reply]) -> None:
    """Untimed: every response parses back to its text, its calls (in order) and a StreamEnd."""
    for r in replies:
        events: list = []
        await parse(vendor, r, events)
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == r.text
        assert [(e.name, e.input) for e in events if isinstance(e, ToolCallDone)] == r.calls
        assert isinstance(events[-1], StreamEnd)
        assert events[-1].stop_reason == ("tool_use" if r.calls else "end_turn"), events[-1]


async def drain_lines(replies: list[Reply]) -> None:
    for r in replies:
        async for _ in lines_of(r.lines):
            pass


async def drain_sse(replies: list[Reply]) -> None:
    for r in replies:
        async for _ in iter_sse(lines_of(r.lines)):
            pass


async def best_of(repeat: int, work: Callable[[], Any]) -> tuple[float, float]:
    """The lowest wall time and the lowest CPU time (this process) of `repeat` rounds, in seconds."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        await work()
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
    return wall, cpu


async def throughput(args) -> None:
    rows = []
    for vendor in VENDORS:
        replies = recording(vendor, args.mb)
        await check(vendor, replies)
        nbytes = sum(r.nbytes for r in replies)
        nev = sum(r.events for r in replies)

        async def full(v: str = vendor, rs: list[Reply] = replies) -> None:
            for r in rs:
                await parse(v, r)
        await full()  # warm up
        wall, cpu = await best_of(args.repeat, full)
        _, t_lines = await best_of(args.repeat, lambda rs=replies: drain_lines(rs))
        _, t_sse = await best_of(args.repeat, lambda rs=replies: drain_sse(rs))
        datas = [ln[6:] for r in replies for ln in r.lines if ln.startswith("data: ") and ln != "data: [DONE]"]

        async def decode(ds: list[str] = datas) -> None:
            for d in ds:
                msgspec.json.decode(d)
        _, t_json = await best_of(args.repeat, decode)
        rows.append((vendor, nbytes, len(replies), nev, sum(len(r.calls) for r in replies), wall, cpu,
                     t_lines, t_sse, t_json))
    print(f"#### Stream parsing throughput: iter_sse + parser, in memory, best of {args.repeat}")
    print()
    print("| vendor | stream MB | responses | SSE events | bytes/event | tool calls | best CPU s | MB/s (CPU time) "
          "| µs/event (CPU time) | MB/s (wall) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for vendor, nbytes, nresp, nev, ncalls, wall, cpu, *_ in rows:
        print(f"| {vendor} | {nbytes / 1e6:.2f} | {nresp:,} | {nev:,} | {nbytes / nev:.0f} | {ncalls:,} | {cpu:.3f} | "
              f"{nbytes / 1e6 / cpu:.1f} | {cpu / nev * 1e6:.2f} | {nbytes / 1e6 / wall:.1f} |")
    print()
    print("#### Where the parsing time goes (µs of CPU per SSE event, cumulative)")
    print()
    print("| vendor | async iterator over the lines | + iter_sse | + parser (full) | parser's share "
          "| for comparison: msgspec.json.decode of the data alone |")
    print("|---|---:|---:|---:|---:|---:|")
    for vendor, nbytes, nresp, nev, ncalls, wall, t, t_lines, t_sse, t_json in rows:
        us = lambda s: s / nev * 1e6  # noqa: E731
        print(f"| {vendor} | {us(t_lines):.2f} | {us(t_sse):.2f} | {us(t):.2f} | {(t - t_sse) / t * 100:.0f} % "
              f"| {us(t_json):.2f} |")
    print()


# --- 2. the loopback server -------------------------------------------------------------------------

def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def first_token_reply(vendor: str) -> tuple[bytes, bytes, int]:
    """(headers + the events up to and including the first content chunk, the rest, data lines in the first part).

    Every SSE event is its own HTTP chunk, as real servers send them."""
    rng = random.Random(5)
    toks = tokens(rng, 40)
    if vendor == "openai":
        head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1764400000,
                "model": MODEL["openai"], "system_fingerprint": "fp_0123456789"}

        def c(delta: dict, finish: str | None = None) -> str:
            return compact({**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                 "finish_reason": finish}], "usage": None})
        first = [("", c({"role": "assistant", "content": "", "refusal": None})), ("", c({"content": "Sure"}))]
        rest = [("", c({"content": t})) for t in toks] + [("", c({}, "stop")), ("", compact(
            {**head, "choices": [], "usage": {"prompt_tokens": 900, "completion_tokens": 41, "total_tokens": 941,
                                              "prompt_tokens_details": {"cached_tokens": 0}}})), ("", "[DONE]")]
        extra = {"openai-organization": "bench", "openai-processing-ms": "212", "openai-version": "2020-10-01",
                 "x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "9999",
                 "x-ratelimit-limit-tokens": "30000000", "x-ratelimit-remaining-tokens": "29999000",
                 "x-request-id": "req_0123456789abcdef0123456789abcdef"}
    else:
        def e(obj: dict) -> tuple[str, str]:
            return obj["type"], compact(obj)
        first = [e({"type": "message_start", "message": {
            "id": "msg_01bench", "type": "message", "role": "assistant", "model": MODEL["anthropic"], "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 900, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                      "output_tokens": 1, "service_tier": "standard"}}}),
            e({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            e({"type": "ping"}),
            e({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Sure"}})]
        rest = [e({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}})
                for t in toks] + [e({"type": "content_block_stop", "index": 0}),
                                  e({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                     "usage": {"output_tokens": 41}}),
                                  e({"type": "message_stop"})]
        extra = {"request-id": "req_011CVbench0123456789", "anthropic-organization-id": "bench",
                 "anthropic-ratelimit-requests-limit": "4000", "anthropic-ratelimit-requests-remaining": "3999",
                 "anthropic-ratelimit-input-tokens-limit": "2000000", "anthropic-ratelimit-input-tokens-remaining":
                 "1999000", "anthropic-ratelimit-output-tokens-limit": "400000", "via": "1.1 google"}
    lines = ["HTTP/1.1 200 OK", "date: Sun, 29 Nov 2026 12:00:00 GMT", "content-type: text/event-stream; charset=utf-8",
             "transfer-encoding: chunked", "connection: keep-alive", "cache-control: no-cache",
             *(f"{k}: {v}" for k, v in extra.items())]
    head_bytes = ("\r\n".join(lines) + "\r\n\r\n").encode()

    def body(events: list[tuple[str, str]]) -> bytes:
        return b"".join(chunked(((f"event: {n}\n" if n else "") + f"data: {d}\n\n").encode()) for n, d in events)
    return head_bytes + body(first), body(rest) + b"0\r\n\r\n", len(first)


def serve(gap: float, tls_dir: str = "") -> None:
    """The child process: answer POSTs on /v1/chat/completions and /v1/messages; GET /stats counts connections.
    With `tls_dir` (cert.pem, key.pem), every connection is TLS."""
    ctx = None
    if tls_dir:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(f"{tls_dir}/cert.pem", f"{tls_dir}/key.pem")
    replies = {"/v1/chat/completions": first_token_reply("openai"), "/v1/messages": first_token_reply("anthropic")}
    stats = {"connections": 0, "requests": 0}
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    print(lsock.getsockname()[1], flush=True)

    def handle(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        try:
            if ctx:
                conn = ctx.wrap_socket(conn, server_side=True)  # the handshake, right here
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                request_line, *headers = head.decode("latin-1").split("\r\n")
                method, path, _ = request_line.split(" ", 2)
                length = next((int(h.split(":", 1)[1]) for h in headers if h.lower().startswith("content-length:")), 0)
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                buf = buf[length:]
                if method == "GET" and path == "/stats":
                    body = json.dumps(stats).encode()
                    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                                 % (len(body), body))
                    continue
                stats["requests"] += 1
                first, rest, _ = replies[path]
                conn.sendall(first)
                if gap:
                    time.sleep(gap)
                conn.sendall(rest)
        except (ConnectionError, OSError):  # ssl.SSLError is an OSError
            pass
        finally:
            conn.close()

    while True:
        conn, _ = lsock.accept()
        stats["connections"] += 1
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def self_signed(folder: Path) -> ssl.SSLContext:
    """A throwaway P-256 certificate for 127.0.0.1 (made with the openssl CLI), and a client context trusting it."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(folder / "key.pem"), "-out", str(folder / "cert.pem"), "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return ssl.create_default_context(cafile=str(folder / "cert.pem"))


class Server:
    """The child process running `serve`, on its own CPU and interpreter; TLS if `tls` (a folder) is given."""

    def __init__(self, gap_ms: float, tls: Path | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", "--gap", str(gap_ms),
                                      "--tls-dir", str(tls or "")], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{int(self.proc.stdout.readline())}"
        self.verify: ssl.SSLContext | bool = True

    def stats(self) -> dict:
        return httpx.get(f"{self.url}/stats", verify=self.verify).json()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=5)


# --- 2. first token --------------------------------------------------------------------------------

TOOLS = [ToolSpec(name, f"{name.replace('_', ' ').capitalize()}: " + text_of(random.Random(i), 200, 400), {
    "type": "object", "properties": {p: {"type": "string", "description": text_of(random.Random(i * 7 + j), 40, 90)}
                                     for j, p in enumerate(("path", "pattern", "content", "command")[:2 + i % 3])},
    "required": ["path"], "additionalProperties": False})
    for i, name in enumerate(("read_file", "write_file", "edit_file", "grep", "glob", "run", "dispatch_to"))]


def make_request(vendor: str, history: int) -> Request:
    """The system prompt (~3 KB), 7 tools, then `history` messages (user, assistant, tool pairs) and a user line."""
    rng = random.Random(23)
    messages: list[ModelMessage] = []
    for i in range(history):
        if i % 4 == 1:
            cid = f"call_{i}"
            messages.append(ModelMessage("assistant", [TextBlock(text_of(rng, 40, 160)),
                                                       ToolCallBlock(cid, "read_file", {"path": f"src/m{i}.py"})],
                                         provider=vendor, model=MODEL[vendor]))
            messages.append(ModelMessage("user", [ToolResultBlock(cid, "read_file", text_of(rng, 300, 1200))]))
        elif i % 4 == 3:
            messages.append(ModelMessage("assistant", [TextBlock(text_of(rng, 200, 500))],
                                         provider=vendor, model=MODEL[vendor]))
        else:
            messages.append(ModelMessage("user", [TextBlock(text_of(rng, 60, 300))]))
    messages.append(ModelMessage("user", [TextBlock("Say hello.")]))
    return Request(agent="bench", model=MODEL[vendor], system=text_of(rng, 3000, 3000), messages=messages,
                   tools=TOOLS, cache_key="bench")


def make_provider(vendor: str, url: str, client: httpx.AsyncClient):
    if vendor == "openai":
        return OpenAICompatible(id="openai", base_url=f"{url}/v1", api_key=KEY[vendor], client=client, official=True)
    return Anthropic(base_url=url, api_key=KEY[vendor], client=client)


def raw_call(vendor: str, provider, request: Request) -> tuple[str, bytes, dict[str, str]]:
    """The URL, body bytes and headers the provider sends, for raw httpx to send as they are."""
    if vendor == "openai":
        body = openai.build_body(request, provider.id, official=provider.official)
        url, headers = f"{provider.base_url}/chat/completions", dict(provider._headers)
    else:
        body = anthropic.build_body(request, provider.id,
                                    request.max_output_tokens or provider._max_tokens_for(request.model))
        url, headers = f"{provider._base}/v1/messages", dict(provider._headers)
    # Exactly httpx's `json=` encoding (httpx._content.encode_json) and the header it adds.
    content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    headers = {"content-type": "application/json", **headers}
    return url, content, headers


class Stamped(httpx.AsyncBaseTransport):
    """httpx's own transport, noting when a request is handed to it and when its response headers are in."""

    def __init__(self, **kw: Any) -> None:
        self.inner = httpx.AsyncHTTPTransport(**kw)
        self.sent = self.headers = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent = time.perf_counter_ns()
        resp = await self.inner.handle_async_request(request)
        self.headers = time.perf_counter_ns()
        return resp

    async def aclose(self) -> None:
        await self.inner.aclose()


def new_client(verify: ssl.SSLContext | bool = True, **limits: int) -> httpx.AsyncClient:
    """What both providers build when given no client (`timeout=http.TIMEOUT`, default limits), stamped;
    `verify` is only set for the self-signed certificate of `--tls`."""
    kw: dict[str, Any] = {"limits": httpx.Limits(**limits)} if limits else {}
    return httpx.AsyncClient(timeout=http.TIMEOUT, transport=Stamped(verify=verify, **kw))


def stamps(client: httpx.AsyncClient, t0: int, first: int) -> tuple[int, int, int, int]:
    """(total, before the transport, in the transport until headers, headers to first token) in ns."""
    tr = client._transport
    assert isinstance(tr, Stamped) and t0 < tr.sent < tr.headers < first
    return first - t0, tr.sent - t0, tr.headers - tr.sent, first - tr.headers


async def raw_once(client: httpx.AsyncClient, url: str, content: bytes, headers: dict[str, str],
                   k: int) -> tuple[int, int, int, int]:
    """From the request to the k-th `data:` line (the first content); the reply is read to its end."""
    clock = time.perf_counter_ns
    t0 = clock()
    first = 0
    async with client.stream("POST", url, content=content, headers=headers) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}")
        n = 0
        async for line in resp.aiter_lines():
            if not first and line.startswith("data:"):
                n += 1
                if n == k:
                    first = clock()
    assert first, "no content line"
    return stamps(client, t0, first)


async def provider_once(provider, client: httpx.AsyncClient, request: Request) -> tuple[int, int, int, int]:
    """From `provider.stream(request)` to the first TextDelta; the stream is read to its StreamEnd."""
    clock = time.perf_counter_ns
    t0 = clock()
    first = 0
    last = None
    async with aclosing(provider.stream(request)) as events:
        async for ev in events:
            if not first and isinstance(ev, TextDelta):
                first = clock()
            last = ev
    assert first and isinstance(last, StreamEnd), last
    return stamps(client, t0, first)


async def connections_per_call(server: Server, call: Callable[[], Any], n: int = 20) -> float:
    """New TCP connections the server accepted per call (the /stats requests' own are taken off)."""
    before = await trio.to_thread.run_sync(server.stats)
    for _ in range(n):
        await call()
    after = await trio.to_thread.run_sync(server.stats)
    return (after["connections"] - before["connections"] - 1) / n  # `after` came on a connection of its own


MODES = ("raw", "fresh", "prov")
MODE_NAMES = {"raw": "raw httpx, pooled connection", "fresh": "raw httpx, new connection each call",
              "prov": "provider"}


async def first_token_case(server: Server, vendor: str, history: int, iterations: int) -> dict:
    """Per iteration, one call in each mode, the order rotating: raw httpx on its pooled connection,
    raw httpx on a new connection (a client that keeps none alive: the cost of connecting), the provider."""
    request = make_request(vendor, history)
    k = first_token_reply(vendor)[2]
    v = server.verify
    async with new_client(v) as raw_client, new_client(v) as prov_client, \
            new_client(v, max_keepalive_connections=0) as fresh_client:
        provider = make_provider(vendor, server.url, prov_client)
        url, content, headers = raw_call(vendor, provider, request)
        calls = {"raw": lambda: raw_once(raw_client, url, content, headers, k),
                 "fresh": lambda: raw_once(fresh_client, url, content, headers, k),
                 "prov": lambda: provider_once(provider, prov_client, request)}
        for _ in range(30):  # warm: connections open, imports and caches filled
            for mode in MODES:
                await calls[mode]()
        conns = {mode: await connections_per_call(server, calls[mode]) for mode in MODES}
        gc.collect()
        out: dict[str, list[tuple[int, int, int, int]]] = {mode: [] for mode in MODES}
        for i in range(iterations):
            for j in range(3):
                mode = MODES[(i + j) % 3]
                out[mode].append(await calls[mode]())
    total = {mode: [x[0] for x in xs] for mode, xs in out.items()}
    return {"vendor": vendor, "history": history, "body": len(content), "phases": out, "conns": conns, **total,
            "diff": [p - r for p, r in zip(total["prov"], total["raw"])]}


def ms(xs: list[int]) -> str:
    return f"{statistics.median(xs) / 1e6:.3f}"


async def first_token(args) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="bench-providers-") as tmp:
        tls = Path(tmp) if args.tls else None
        verify = self_signed(tls) if tls else True
        server = Server(args.gap, tls)
        server.verify = verify
        try:
            return await first_token_report(args, server)
        finally:
            server.close()


async def first_token_report(args, server: Server) -> list[dict]:
    results = [await first_token_case(server, vendor, history, args.iterations)
               for vendor in VENDORS for history in args.history]
    over = "TLS (self-signed P-256 certificate) on loopback" if args.tls else "loopback"
    print(f"#### Time to first token over {over}: raw httpx vs the provider, ms "
          f"({args.iterations} iterations, modes alternating; rest of the reply {args.gap:g} ms after the first chunk)")
    print()
    print("| vendor | history | body KB | raw median | raw p95 | provider median | provider p95 | "
          "added median | added p95 | target: added < 1 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        med = statistics.median(r["diff"]) / 1e6
        verdict = "meets" if med < TARGET_MS else "MISSES"
        print(f"| {r['vendor']} | {r['history']} msgs | {r['body'] / 1000:.1f} | "
              f"{ms(r['raw'])} | {pct(r['raw'], 95):.3f} | {ms(r['prov'])} | {pct(r['prov'], 95):.3f} | "
              f"{med:.3f} | {pct(r['diff'], 95):.3f} | {verdict} |")
    print()
    print("\"added\" is the per-iteration difference, provider minus raw httpx (its median and p95, not the "
          "difference of the medians).")
    print()
    print("#### Where the first-token time goes, by phase: medians, ms (same iterations)")
    print()
    print("| vendor | history | mode | new connections per call | total | before httpx's transport "
          "| transport: request out, until the response headers | headers → first token |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for r in results:
        for mode in MODES:
            ph = r["phases"][mode]
            print(f"| {r['vendor']} | {r['history']} msgs | {MODE_NAMES[mode]} | {r['conns'][mode]:.2f} | "
                  + " | ".join(ms([x[i] for x in ph]) for i in range(4)) + " |")
    print()
    return results


# --- where the provider's time goes ---------------------------------------------------------------

class _Parts(httpx.AsyncByteStream):
    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            yield part


def mock_client(vendor: str) -> httpx.AsyncClient:
    """A client whose transport answers at once, in process, with the loopback server's reply (same chunks)."""
    first, rest, _ = first_token_reply(vendor)
    head, body = first.split(b"\r\n\r\n", 1)
    chunks = [c for b in (body, rest) for i, c in enumerate(b.split(b"\r\n")[:-1]) if i % 2 == 1]
    headers = [tuple(h.split(": ", 1)) for h in head.decode().split("\r\n")[1:] if not h.startswith("transfer")]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=headers, stream=_Parts(chunks))
    return httpx.AsyncClient(timeout=http.TIMEOUT, transport=httpx.MockTransport(handler))


def median_us(fn: Callable[[], Any], n: int) -> float:
    xs = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        xs.append(time.perf_counter_ns() - t0)
    return statistics.median(xs) / 1e3


async def in_process(args) -> None:
    """The client's CPU on the first-token path, without a socket: raw httpx and the provider against
    httpx.MockTransport, and the provider's pieces timed alone."""
    n = args.inproc
    rows = []
    for vendor in VENDORS:
        k = first_token_reply(vendor)[2]
        first_part = first_token_reply(vendor)[0].split(b"\r\n\r\n", 1)[1]
        lines = b"".join(c for i, c in enumerate(first_part.split(b"\r\n")) if i % 2 == 1).decode().split("\n")[:-1]
        for history in args.history:
            request = make_request(vendor, history)
            async with mock_client(vendor) as client:
                provider = make_provider(vendor, "http://127.0.0.1:9", client)
                url, content, headers = raw_call(vendor, provider, request)
                raw, prov = [], []
                for i in range(n + 50):
                    t0 = time.perf_counter_ns()
                    f = 0
                    async with client.stream("POST", url, content=content, headers=headers) as resp:
                        seen = 0
                        async for line in resp.aiter_lines():
                            if not f and line.startswith("data:"):
                                seen += 1
                                if seen == k:
                                    f = time.perf_counter_ns()
                    t1 = time.perf_counter_ns()
                    async with aclosing(provider.stream(request)) as events:
                        async for ev in events:
                            if isinstance(ev, TextDelta):
                                t2 = time.perf_counter_ns()
                                break
                    if i >= 50:  # warm-up dropped
                        raw.append(f - t0)
                        prov.append(t2 - t1)
            if vendor == "openai":
                def build(r: Request = request) -> dict:
                    return openai.build_body(r, "openai", official=True)
            else:
                def build(r: Request = request) -> dict:
                    return anthropic.build_body(r, "anthropic", 8192)
            body = build()

            def encode(b: dict = body) -> bytes:  # httpx's `json=` (httpx._content.encode_json)
                return json.dumps(b, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()

            def fast(b: dict = body) -> bytes:
                return msgspec.json.encode(b)
            assert json.loads(fast()) == json.loads(encode())

            async def parse_first(v: str = vendor, ls: list[str] = lines) -> None:
                parser = ChunkParser(v) if v == "openai" else StreamParser(v)
                async for sse in iter_sse(lines_of(ls)):
                    if any(isinstance(e, TextDelta) for e in parser.feed(sse)):
                        return
                raise AssertionError("no TextDelta")
            xs = []
            for _ in range(n):
                t0 = time.perf_counter_ns()
                await parse_first()
                xs.append(time.perf_counter_ns() - t0)
            rows.append((vendor, history, raw, prov, median_us(build, n), median_us(encode, n),
                         statistics.median(xs) / 1e3, median_us(fast, n)))
    print(f"#### The client's CPU on the first-token path, no socket (httpx.MockTransport), µs, median of {n:,}")
    print()
    print("| vendor | history | raw httpx | provider | added | of which: build_body | JSON encoding of the body "
          "(httpx `json=`, stdlib) | iter_sse + parser to the first TextDelta | for comparison: msgspec.json.encode |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for vendor, history, raw, prov, t_build, t_enc, t_parse, t_fast in rows:
        added = statistics.median([p - r for p, r in zip(prov, raw)]) / 1e3
        print(f"| {vendor} | {history} msgs | {statistics.median(raw) / 1e3:.0f} | {statistics.median(prov) / 1e3:.0f} | "
              f"{added:.0f} | {t_build:.0f} | {t_enc:.0f} | {t_parse:.0f} | {t_fast:.0f} |")
    print()


def profile(args) -> None:
    """cProfile of the provider alone, from `stream()` to its first TextDelta and the close, on the in-process
    transport. cProfile's overhead skews the times (Python calls more than C ones): read it for the ranking."""
    vendor = args.profile
    history = args.history[-1]
    prof = cProfile.Profile()

    async def go() -> None:
        request = make_request(vendor, history)
        async with mock_client(vendor) as client:
            provider = make_provider(vendor, "http://127.0.0.1:9", client)
            for i in range(args.inproc + 50):
                if i == 50:
                    prof.enable()
                async with aclosing(provider.stream(request)) as events:
                    async for ev in events:
                        if isinstance(ev, TextDelta):
                            break
            prof.disable()
    trio.run(go)
    buf = io.StringIO()
    st = pstats.Stats(prof, stream=buf)
    st.sort_stats("tottime").print_stats(args.top)
    st.sort_stats("cumulative").print_stats(args.top)
    print(f"# cProfile: {args.inproc} provider calls ({vendor}, history {history}) up to the first TextDelta, "
          "then closing the stream (Anthropic drains the rest there), httpx.MockTransport (no socket)")
    print(buf.getvalue())


async def main_async(args) -> None:
    if args.only in ("all", "throughput"):
        await throughput(args)
    if args.only in ("all", "first-token"):
        await first_token(args)
        await in_process(args)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 0.5 MB streams, 1 round, 60 iterations")
    ap.add_argument("--only", choices=("all", "throughput", "first-token"), default="all")
    ap.add_argument("--mb", type=float, default=0, help="stream size per vendor, MB (default 4; 0.5 quick)")
    ap.add_argument("--repeat", type=int, default=0, help="throughput rounds, best kept (default 5; 1 quick)")
    ap.add_argument("--iterations", type=int, default=0, help="first-token calls per mode (default 300; 60 quick)")
    ap.add_argument("--history", type=lambda s: [int(x) for x in s.split(",")], default=[0, 100],
                    help="messages before the last user line (default 0,100)")
    ap.add_argument("--gap", type=float, default=1.0, help="ms between the first chunk and the rest (default 1)")
    ap.add_argument("--inproc", type=int, default=0,
                    help="calls per case without a socket, and per profile (default 2,000; 300 quick)")
    ap.add_argument("--profile", choices=VENDORS,
                    help="cProfile the provider up to its first TextDelta, without a socket (last --history size)")
    ap.add_argument("--top", type=int, default=30, help="rows of profile output")
    ap.add_argument("--tls", action="store_true",
                    help="first token over TLS on loopback (a throwaway certificate made with the openssl CLI)")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tls-dir", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.gap / 1000, args.tls_dir)
        return
    args.mb = args.mb or (0.5 if args.quick else 4.0)
    args.repeat = args.repeat or (1 if args.quick else 5)
    args.iterations = args.iterations or (60 if args.quick else 300)
    args.inproc = args.inproc or (300 if args.quick else 2_000)
    if args.profile:
        profile(args)
        return
    print(f"<!-- {machine()}, httpx {httpx.__version__}, {platform.system()} {platform.release()}; "
          f"{time.strftime('%Y-%m-%d')}; load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs -->")
    print()
    trio.run(main_async, args)


if __name__ == "__main__":
    main()
