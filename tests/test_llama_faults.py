"""Faults found against a real llama.cpp llama-server, replayed against a loopback imitation of one.

`Llama` answers on a real socket the way llama-server does: /v1/models and /props say its window (n_ctx), a
prompt longer than the window is refused with llama-server's 400 body, a reply may end at `length`, and a
malformed tool call comes back as an in-stream 500. Rooms reach it through a Registry and a config file, as
`orchestrator chat` does.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core import errors as E
from orchestrator.core.events import Compaction, Done, ErrorEvent, Event, Retry
from orchestrator.core.retry import RetryPolicy
from orchestrator.core.tokens import estimate
from orchestrator.core.types import Message, ModelMessage, Request, TextBlock
from orchestrator.providers import windows
from orchestrator.providers.base import complete, server_window
from orchestrator.providers.catalog import UNKNOWN
from orchestrator.providers.openai import OpenAICompatible
from orchestrator.providers.registry import Registry
from orchestrator.room.room import Room
from orchestrator.store.db import Store
from orchestrator.team.schema import AgentDef, Team
from orchestrator.trace import semconv as sc
from tests.fakeserver import FakeServer, Reply, sse
from tests.tracing import in_memory

pytestmark = pytest.mark.filterwarnings(r"ignore:Async generator 'http(x|core)\.:ResourceWarning")

ROOT = Path(__file__).resolve().parent.parent
SERVED = "X-Q4_K_M.gguf"  # llama-server names the model by its file, whatever the request asked for


# --- a loopback llama-server -----------------------------------------------------------------------

Answer = Callable[[dict, int], list[bytes]]  # (request body, prompt tokens) -> the SSE body


def prompt_tokens(body: dict) -> int:
    """The prompt's size as the server counts it (our estimate, so the numbers in a test line up)."""
    parts = []
    for m in body["messages"]:
        content = m.get("content") or ""
        parts.append(content if isinstance(content, str) else " ".join(p.get("text", "") for p in content))
        parts += [json.dumps(c) for c in m.get("tool_calls") or []]
    parts += [json.dumps(t) for t in body.get("tools") or []]
    return estimate("\n".join(parts))


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up on a stalled answer closed its socket: that is the point


class Llama:
    """Chat answers come from `answers` in order; summary requests (the compaction prompt) are answered apart."""

    def __init__(self, n_ctx: int = 2048, *, meta: bool = True, props: bool = True, stall: float = 0.0):
        self.n_ctx, self.meta, self.props, self.stall = n_ctx, meta, props, stall
        self.answers: deque[Answer] = deque()
        self.requests: list[tuple[str, str, Any]] = []  # (method, path, JSON body)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                server.requests.append(("GET", self.path, None))
                if self.path == "/v1/models":
                    time.sleep(server.stall)
                    meta = {"n_ctx_train": 131072, **({"n_ctx": server.n_ctx} if server.meta else {})}
                    return self._send(200, json.dumps({"object": "list", "data": [
                        {"id": SERVED, "object": "model", "owned_by": "llamacpp", "meta": meta}]}).encode())
                if self.path == "/props" and server.props:
                    return self._send(200, json.dumps({"default_generation_settings": {"n_ctx": server.n_ctx},
                                                       "total_slots": 1}).encode())
                self._send(404, b'{"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}')

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                server.requests.append(("POST", self.path, body))
                prompt = prompt_tokens(body)
                if prompt > server.n_ctx:
                    refusal = {"code": 400, "message": "the request exceeds the available context size, try "
                                                       "increasing it", "type": "exceed_context_size_error",
                               "n_prompt_tokens": prompt, "n_ctx": server.n_ctx}
                    return self._send(400, json.dumps({"error": refusal}).encode())
                if is_summary(body):
                    return self._send(200, b"".join(say("Summary: lines about words.")(body, prompt)),
                                      "text/event-stream")
                if not server.answers:
                    return self._send(500, b'{"error": {"code": 500, "message": "no answer queued"}}')
                self._send(200, b"".join(server.answers.popleft()(body, prompt)), "text/event-stream")

        self._httpd = _Quiet(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def chats(self) -> list[dict]:
        return [body for method, path, body in self.requests if path == "/v1/chat/completions"]

    def lookups(self) -> list[str]:
        return [path for method, path, _ in self.requests if method == "GET"]

    def __enter__(self) -> Llama:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def is_summary(body: dict) -> bool:
    """The compaction call: the agent's own request, its last message asking for a summary."""
    return "write a summary" in str(body["messages"][-1].get("content", "")).lower()


def replies(messages: list[Message]) -> list[str]:
    return [m.text for m in messages if m.author == "commander" and m.kind == "text"]


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": SERVED,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def say(text: str, *, finish: str = "stop", completion: int | None = None,
        prompt: Callable[[int], int] | None = None) -> Answer:
    """A streamed answer; its usage reports the prompt as counted (or `prompt(counted)`) and `completion`."""
    def answer(body: dict, counted: int) -> list[bytes]:
        usage = {"prompt_tokens": prompt(counted) if prompt else counted,
                 "completion_tokens": completion if completion is not None else estimate(text)}
        return sse(chunk({"role": "assistant", "content": text}), chunk({}, finish),
                   {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": SERVED, "choices": [],
                    "usage": usage}, done=True)
    return answer


def unparsable(body: dict, counted: int) -> list[bytes]:
    """What llama-server streams when the model's tool call does not fit the chat format: an error frame."""
    error = {"error": {"code": 500, "message": 'Failed to parse input at pos 12: <tool_call>{"name": "read_file", '
                                               '"arguments": {"path": "a.txt"</tool_call>', "type": "server_error"}}
    return sse(chunk({"role": "assistant", "content": ""}), error)


def words(units: int) -> str:
    """About 5.2 tokens per unit."""
    return " ".join(f"word{i % 97} means something" for i in range(units))


# --- rooms on the imitation ------------------------------------------------------------------------

def registry_for(tmp_path: Path, toml: str, **env: str) -> Registry:
    path = tmp_path / "config.toml"
    path.write_text(toml)
    return Registry.load({"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "ORCHESTRATOR_CONFIG": str(path), **env})


def lab(url: str, extra: str = "") -> str:
    return f'[endpoints.lab]\nbase_url = "{url}/v1"\n{extra}'


async def chat(tmp_path: Path, reg: Registry, lines: list[str], model: str = "lab/X",
               tools: tuple[str, ...] = ()) -> tuple[list[Message], list[Event]]:
    """The lines posted one after the other into a fresh room whose commander runs on `model`."""
    events: list[Event] = []
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = await Store.open(tmp_path / "room.db")
    try:
        team = Team(commander=AgentDef(name="commander", model=model, tools=list(tools)))
        async with Room.create(store, team, reg.resolve, workspace=tmp_path, models=reg.windows(), config=reg.config,
                               retry=RetryPolicy(base=0.01, cap=0.05), on_event=events.append) as room:
            for line in lines:
                await room.post(line)
                await room.idle()
            messages = await store.load(room.id)
    finally:
        await store.close()
    return messages, events


def notices(messages: list[Message]) -> list[str]:
    return [m.text for m in messages if m.kind == "notice"]


# --- the output cap reaches every vendor -----------------------------------------------------------

async def test_every_chat_completions_request_carries_the_configured_or_catalog_cap(tmp_path):
    with Llama() as srv:
        srv.answers.extend([say("Hello."), say("Hi.")])
        async with registry_for(tmp_path, lab(srv.url, '[models."lab/X"]\nmax_output = 32\n')) as reg:
            await chat(tmp_path, reg, ["hello"], model="lab/X")
            await chat(tmp_path / "b", reg, ["hello"], model="lab/Unlisted")
    capped, unknown = srv.chats()
    assert capped["max_tokens"] == 32 and "max_completion_tokens" not in capped
    assert unknown["max_tokens"] == UNKNOWN.max_output  # a model nobody describes is still capped


async def test_official_openai_gets_max_completion_tokens_from_the_catalog():
    with FakeServer() as srv:
        srv.replies.append(Reply(chunks=sse(chunk({"content": "ok"}, "stop"), done=True)))
        provider = OpenAICompatible(base_url=srv.url + "/v1", api_key="k", official=True,
                                    max_tokens_for=lambda model: {"gpt-4.1": 32_768}[model])
        try:
            await complete(provider, Request(agent="a", model="gpt-4.1", system="",
                                             messages=[ModelMessage("user", [TextBlock("hi")])]))
        finally:
            await provider.aclose()
    body = srv.requests[0]["json"]
    assert body["max_completion_tokens"] == 32_768 and "max_tokens" not in body


# One short Messages API reply, as an Anthropic server streams it, naming the model it ran.
ANTHROPIC_HI = [
    {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [],
                                          "model": "claude-opus-4-1-20250805", "usage": {"input_tokens": 3}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Hi."}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    {"type": "message_stop"}]


async def test_the_anthropic_path_takes_the_configured_cap_too(tmp_path):
    with FakeServer() as srv:
        srv.replies.append(Reply(chunks=sse(*ANTHROPIC_HI, event_names=True)))
        toml = '[models."anthropic/claude-opus-4-1"]\nmax_output = 32\n'
        async with registry_for(tmp_path, toml, ANTHROPIC_API_KEY="sk-ant-x", ANTHROPIC_BASE_URL=srv.url) as reg:
            await chat(tmp_path, reg, ["hello"], model="anthropic/claude-opus-4-1")
    assert srv.requests[0]["json"]["max_tokens"] == 32


# --- the window, learned from the server -----------------------------------------------------------

async def test_the_window_is_learned_from_v1_models_and_compaction_comes_before_any_refusal(tmp_path):
    with Llama(n_ctx=2048) as srv:
        srv.answers.extend([say("Noted."), say("Noted again."), say("Still with you.")])
        async with registry_for(tmp_path, lab(srv.url)) as reg:
            assert reg.info("lab/X").context_window == UNKNOWN.context_window  # assumed, until the server says
            messages, events = await chat(tmp_path, reg, [words(120), words(80), words(80)])
            assert reg.info("lab/X").context_window == 2048  # what the room's next turns are built with
    assert srv.lookups() == ["/v1/models"]  # asked once, on first use, and never again
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    assert [e for e in events if isinstance(e, Compaction)]  # before the window filled, not after a refusal
    assert all(prompt_tokens(body) + body["max_tokens"] <= 2048 for body in srv.chats())
    assert replies(messages) == ["Noted.", "Noted again.", "Still with you."]


async def test_without_meta_n_ctx_the_window_comes_from_props(tmp_path):
    with Llama(n_ctx=4096, meta=False) as srv:
        srv.answers.append(say("Noted."))
        async with registry_for(tmp_path, lab(srv.url)) as reg:
            await chat(tmp_path, reg, [words(200)])
            assert reg.info("lab/X").context_window == 4096
    assert srv.lookups() == ["/v1/models", "/props"]


async def test_a_lookup_that_hangs_costs_one_short_wait_and_is_not_repeated(tmp_path):
    with Llama(n_ctx=8192, stall=6.0) as srv:
        srv.answers.extend([say("First."), say("Second.")])
        async with registry_for(tmp_path, lab(srv.url)) as reg:
            started = time.monotonic()
            messages, events = await chat(tmp_path, reg, [words(200), words(200)])
            took = time.monotonic() - started
            assert reg.info("lab/X").context_window == UNKNOWN.context_window
    assert srv.lookups() == ["/v1/models"]  # the failure is remembered too
    assert took < windows.LOOKUP_SECONDS + 2.5, took
    assert replies(messages) == ["First.", "Second."]


async def test_the_window_is_learned_from_a_refusal_and_the_summary_fits_what_it_leaves(tmp_path):
    # A server that names no window when asked (an older llama.cpp): the catalog's 32,768 tokens for this model
    # are wrong for it, and only its refusal says how large its window is.
    with Llama(n_ctx=1536, meta=False, props=False) as srv:
        srv.answers.extend([say("First noted."), say("Second noted.")])
        async with registry_for(tmp_path, lab(srv.url)) as reg:
            messages, events = await chat(tmp_path, reg, [words(90), words(90)], model="lab/qwen2.5-7b")
            assert await server_window(reg.provider("lab"), "qwen2.5-7b", ask=False) == 1536
    assert srv.lookups() == ["/v1/models", "/props"]  # asked once: what it runs on is the user's own server
    summary = next(body for body in srv.chats() if is_summary(body))
    assert prompt_tokens(summary) + summary["max_tokens"] <= 1536  # not 2,048 whatever the window
    assert [e for e in events if isinstance(e, Compaction)]
    assert replies(messages) == ["First noted.", "Second noted."]
    assert not [e for e in events if isinstance(e, ErrorEvent)]


async def test_a_model_the_catalog_knows_takes_the_window_the_users_own_server_runs_it_with(tmp_path):
    # The catalog's figure is what the model was trained for; a local server runs it with the window it was
    # started with, and says so: that one counts, unless the config file names a window.
    with Llama(n_ctx=2048) as srv:
        srv.answers.extend([say("Noted.")])
        async with registry_for(tmp_path, lab(srv.url)) as reg:
            assert reg.info("lab/qwen2.5-7b").context_window == 32_768  # nothing asked yet
            messages, _ = await chat(tmp_path, reg, [words(300)], model="lab/qwen2.5-7b")
            assert replies(messages) == ["Noted."]
            assert reg.info("lab/qwen2.5-7b").context_window == 2048
    assert srv.lookups() == ["/v1/models"]
    with Llama(n_ctx=2048) as srv:
        srv.answers.extend([say("Noted.")])
        given = lab(srv.url, '[models."lab/qwen2.5-7b"]\ncontext_window = 4096\n')
        (tmp_path / "given").mkdir()
        async with registry_for(tmp_path / "given", given) as reg:
            await chat(tmp_path / "given", reg, [words(100)], model="lab/qwen2.5-7b")
            assert reg.info("lab/qwen2.5-7b").context_window == 4096
    assert srv.lookups() == []


def test_the_window_in_refusal_bodies_and_model_listings():
    assert windows.from_refusal({"error": {"code": 400, "type": "exceed_context_size_error",
                                           "n_prompt_tokens": 2500, "n_ctx": 2048}}, "") == 2048
    assert windows.from_refusal(None, "This model's maximum context length is 8,192 tokens. However, your "
                                      "messages resulted in 9000 tokens.") == 8192
    assert windows.from_refusal(None, "prompt is too long: 210000 tokens > 200000 maximum") == 200_000
    assert windows.from_refusal(None, "context length exceeded") is None
    listing = {"data": [{"id": "Qwen/Qwen3-8B", "max_model_len": 40960},
                        {"id": "m.gguf", "meta": {"n_ctx_train": 131072}}]}  # the trained length is no window
    assert windows.from_listing(listing) == {"Qwen/Qwen3-8B": 40960}
    show = {"parameters": "stop \"<|im_end|>\"\nnum_ctx 8192", "model_info": {"general.architecture": "qwen3",
                                                                             "qwen3.context_length": 40960}}
    assert windows.from_show(show) == 8192
    trained = {"model_info": {"general.architecture": "llama", "llama.context_length": 131072}}
    assert windows.from_show(trained) == 131072


async def test_ollama_is_asked_through_api_show():
    with FakeServer() as srv:
        srv.replies.append(Reply(chunks=[json.dumps({"parameters": "num_ctx 6144", "model_info": {
            "general.architecture": "llama", "llama.context_length": 131072}}).encode()],
                                 content_type="application/json"))
        provider = OpenAICompatible(id="ollama", base_url=srv.url + "/v1", ollama=True, learn_window=lambda m: True)
        try:
            assert await provider.window("my-model") == 6144
            assert await provider.window("my-model") == 6144
        finally:
            await provider.aclose()
    assert [(r["path"], r["json"]) for r in srv.requests] == [("/api/show", {"model": "my-model"})]


def test_models_shows_the_window_the_server_reports(tmp_path):
    with Llama(n_ctx=2048) as srv:
        path = tmp_path / "config.toml"
        path.write_text(lab(srv.url))
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_HOST")}
        out = subprocess.run([sys.executable, "-m", "orchestrator", "models", "--timeout", "5"], cwd=ROOT,
                             env={**env, "ORCHESTRATOR_CONFIG": str(path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
                                  "OLLAMA_HOST": "127.0.0.1:9"}, capture_output=True, text=True, timeout=60)
    assert f"{SERVED}: a 2,048-token context window, as the server reports it" in out.stdout, out.stdout + out.stderr


# --- a reply cut off says which limit cut it -------------------------------------------------------

@pytest.mark.parametrize("completion, prompt, says", [
    (32, None, "cut off by the model's output limit (max_tokens 32)"),  # our cap
    (20, None, "cut off by the model server's own limit, before the 32-token output cap"),  # llama-server -n 20
    (18, lambda counted: 2048 - 18, "context window (2,048 tokens) was full"),  # prompt + reply == n_ctx
])
async def test_the_cut_off_notice_names_the_limit_that_ended_the_reply(tmp_path, completion, prompt, says):
    with Llama(n_ctx=2048) as srv:
        srv.answers.append(say("The poem goes", finish="length", completion=completion, prompt=prompt))
        async with registry_for(tmp_path, lab(srv.url, '[models."lab/qwen2.5-7b"]\nmax_output = 32\n')) as reg:
            messages, events = await chat(tmp_path, reg, ["a long poem, please"], model="lab/qwen2.5-7b")
    done = next(e for e in events if isinstance(e, Done))
    assert done.stop_reason == "max_tokens"
    [notice] = notices(messages)
    assert says in notice, notice
    if "output limit" not in says:
        assert "max_output under" not in notice  # raising our cap would not help


# --- the model's malformed output is its own class -------------------------------------------------

async def test_an_unparsable_tool_call_is_the_models_fault_retried_twice_then_given_up(tmp_path):
    with Llama() as srv:
        srv.answers.extend([unparsable, unparsable, say("Read it.")])
        async with registry_for(tmp_path, lab(srv.url)) as reg:
            messages, events = await chat(tmp_path, reg, ["read a.txt"], tools=("read_file",))
            retries = [e for e in events if isinstance(e, Retry)]
            assert [(r.attempt, r.reason) for r in retries] == [(1, "malformed_output"), (2, "malformed_output")]
            assert replies(messages) == ["Read it."]

            srv.answers.extend([unparsable] * 6)
            messages, events = await chat(tmp_path / "b", reg, ["read a.txt"], tools=("read_file",))
    assert len([e for e in events if isinstance(e, Retry)]) == 2  # not five, as for a server fault
    [error] = [e for e in events if isinstance(e, ErrorEvent)]
    assert error.error_class == "malformed_output" and "malformed" in error.message
    assert len(srv.answers) == 3  # three calls in all


async def test_the_same_failure_outside_a_stream_is_classified_alike():
    with FakeServer() as srv:
        body = {"error": {"code": 500, "message": "The model produced output that does not match the expected "
                                                  "peg-native format", "type": "server_error"}}
        srv.replies.append(Reply(status=500, chunks=[json.dumps(body).encode()], content_type="application/json"))
        provider = OpenAICompatible(base_url=srv.url + "/v1")
        try:
            with pytest.raises(E.MalformedOutputError, match="malformed"):
                await complete(provider, Request(agent="a", model="m", system="",
                                                 messages=[ModelMessage("user", [TextBlock("hi")])]))
        finally:
            await provider.aclose()


def test_the_malformed_class_gets_two_retries_and_a_server_fault_still_five():
    policy = RetryPolicy()
    malformed, server = E.MalformedOutputError("x"), E.ServerError("x")
    assert [policy.delay(n, malformed) is not None for n in range(1, 7)] == [True, True, False, False, False, False]
    assert [policy.delay(n, server) is not None for n in range(1, 7)] == [True] * 5 + [False]
    assert E.ERROR_KINDS["malformed_output"] is E.MalformedOutputError


# --- the trace says which model answered -----------------------------------------------------------

async def test_the_response_model_is_what_the_server_reported(tmp_path):
    with Llama() as srv, in_memory() as exported:
        srv.answers.append(say("Hello."))
        async with registry_for(tmp_path, lab(srv.url)) as reg:
            await chat(tmp_path, reg, ["hello"])
        chats = [s for s in exported.get_finished_spans() if s.attributes.get(sc.OPERATION_NAME) == "chat"]
    assert [(s.attributes[sc.REQUEST_MODEL], s.attributes[sc.RESPONSE_MODEL]) for s in chats] == [("X", SERVED)]


async def test_a_server_that_names_no_model_claims_none(tmp_path):
    with FakeServer() as srv, in_memory() as exported:
        srv.replies.append(Reply(chunks=sse({"choices": [{"index": 0, "delta": {"content": "ok"},
                                                          "finish_reason": "stop"}]}, done=True)))
        async with registry_for(tmp_path, lab(srv.url)) as reg:
            await chat(tmp_path, reg, ["hello"])
        chats = [s for s in exported.get_finished_spans() if s.attributes.get(sc.OPERATION_NAME) == "chat"]
    assert len(chats) == 1 and sc.RESPONSE_MODEL not in chats[0].attributes


async def test_anthropic_reports_its_model_in_message_start(tmp_path):
    with FakeServer() as srv, in_memory() as exported:
        srv.replies.append(Reply(chunks=sse(*ANTHROPIC_HI, event_names=True)))
        async with registry_for(tmp_path, "", ANTHROPIC_API_KEY="sk-ant-x", ANTHROPIC_BASE_URL=srv.url) as reg:
            await chat(tmp_path, reg, ["hello"], model="anthropic/claude-opus-4-1")
        [span] = [s for s in exported.get_finished_spans() if s.attributes.get(sc.OPERATION_NAME) == "chat"]
    assert span.attributes[sc.RESPONSE_MODEL] == "claude-opus-4-1-20250805"


# --- one line longer than the window ---------------------------------------------------------------

async def test_a_line_longer_than_the_window_is_left_out_and_the_room_goes_on(tmp_path):
    with Llama(n_ctx=2048) as srv:
        srv.answers.extend([say("That was too long to read."), say("Fine, and you?"), say("Yes.")])
        async with registry_for(tmp_path, lab(srv.url)) as reg:
            messages, events = await chat(tmp_path, reg, [words(700), "how are you?", "still there?"])
    huge = words(700)
    assert any(m.text == huge for m in messages)  # the room keeps it
    assert not any(huge[:200] in json.dumps(body) for body in srv.chats())
    assert replies(messages) == ["That was too long to read.", "Fine, and you?", "Yes."]
    assert "too long for the model's context window" in json.dumps(srv.chats()[0])  # a note in its place


# --- a keep-alive connection the server closed while idle ------------------------------------------

async def test_a_request_on_a_connection_the_server_closed_while_idle_goes_once_more_on_a_new_one():
    """llama-server closes an idle keep-alive connection after 5 s, on its own clock: a request sent on it at
    that moment got "Server disconnected without sending a response" and failed a compaction live. Here the
    server answers each connection's first request and closes it without a word at its second."""
    import socket

    body = b"".join(sse({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]},
                        done=True))
    answer = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n"
              b"connection: keep-alive\r\n\r\n%s" % (len(body), body))
    listener = socket.create_server(("127.0.0.1", 0))
    connections: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            connections.append(1)
            with conn:
                served = 0
                while True:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    if not data:
                        break
                    head, _, rest = data.partition(b"\r\n\r\n")
                    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                                   if line.lower().startswith(b"content-length:")), 0)
                    while len(rest) < length:
                        rest += conn.recv(65536)
                    if served == 1:
                        break  # closed without an answer, as an idle timeout does
                    conn.sendall(answer)
                    served += 1

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    provider = OpenAICompatible(base_url=f"http://127.0.0.1:{listener.getsockname()[1]}/v1", api_key="")
    try:
        for _ in range(2):
            response = await complete(provider, Request(agent="a", model="m", system="", messages=[
                ModelMessage("user", [TextBlock("hello")])]))
            assert "".join(b.text for b in response.blocks if isinstance(b, TextBlock)) == "hi"
    finally:
        await provider.aclose()
        listener.close()
    assert len(connections) == 2  # the second request went on a new connection, at once


async def test_an_auxiliary_call_is_retried_as_its_policy_says():
    """The summary call has no turn loop around it: a server fault during it (a live llama-server dropped one)
    waits and tries again, while a fault that no retry fixes goes up at once."""
    from orchestrator.core.types import StreamEnd, TextDelta, Usage

    class Flaky:
        id = "flaky"

        def __init__(self, faults: list[Exception]) -> None:
            self.faults, self.calls = faults, 0

        async def validate_auth(self) -> None:
            return None

        async def stream(self, request):
            self.calls += 1
            if self.faults:
                raise self.faults.pop(0)
            yield TextDelta("summary")
            yield StreamEnd("end_turn", Usage())

    request = Request(agent="a", model="m", system="", messages=[ModelMessage("user", [TextBlock("x")])])
    flaky = Flaky([E.ServerError("boom"), E.ProviderConnectionError("dropped")])
    response = await complete(flaky, request, RetryPolicy(base=0.01))
    assert flaky.calls == 3 and response.blocks[0].text == "summary"
    with pytest.raises(E.ServerError):
        await complete(Flaky([E.ServerError("boom")]), request)  # no policy: no retry
    refused = Flaky([E.ModelNotFoundError("no such model")])
    with pytest.raises(E.ModelNotFoundError):
        await complete(refused, request, RetryPolicy(base=0.01))
    assert refused.calls == 1
