"""The Anthropic provider against a loopback server: streams, faults, and the request body it sends."""
from __future__ import annotations

import re
import socket
from contextlib import aclosing

import httpx
import msgspec
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.core import errors as E
from orchestrator.core.types import (
    ImageBlock, ModelMessage, Request, StreamEnd, TextBlock, TextDelta, ThinkingBlock, ThinkingDelta, ToolCallBlock,
    ToolCallDone, ToolResultBlock, ToolSpec, Usage,
)
from orchestrator.providers.anthropic import Anthropic, StreamParser, build_body
from orchestrator.providers.base import Assembler, complete
from orchestrator.providers.sse import SSE, iter_sse
from tests.fakeserver import FakeServer, Reply, json_body, sse

KEY = "sk-ant-test-0123456789abcdef"
MODEL = "claude-test-1"


def request(messages: list[ModelMessage] | None = None, **kw) -> Request:
    return Request(agent="alice", model=kw.pop("model", MODEL), system=kw.pop("system", "You are Alice."),
                   messages=messages if messages is not None else [ModelMessage("user", [TextBlock("hi")])], **kw)


def stream(*blocks: dict, stop: str | None = "end_turn", end: bool = True) -> list[bytes]:
    """A whole reply: message_start, the given events, message_delta and (unless cut) message_stop."""
    start = {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": MODEL, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                  "output_tokens": 1}}}
    tail = [{"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
             "usage": {"output_tokens": 7}}]
    if end:
        tail.append({"type": "message_stop"})
    return sse(start, *blocks, *tail, event_names=True)


def text_block(i: int, *parts: str) -> list[dict]:
    return [{"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
            *({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": p}} for p in parts),
            {"type": "content_block_stop", "index": i}]


def thinking_block(i: int, *parts: str, signature: str) -> list[dict]:
    return [{"type": "content_block_start", "index": i,
             "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
            *({"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta", "thinking": p}}
              for p in parts),
            {"type": "content_block_delta", "index": i, "delta": {"type": "signature_delta", "signature": signature}},
            {"type": "content_block_stop", "index": i}]


def tool_block(i: int, id: str, name: str, *fragments: str) -> list[dict]:  # noqa: A002
    return [{"type": "content_block_start", "index": i,
             "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}},
            *({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": f}}
              for f in fragments),
            {"type": "content_block_stop", "index": i}]


@pytest.fixture(scope="module")
def shared_server():
    with FakeServer() as srv:  # one per module: each shutdown costs half a second of polling
        yield srv


@pytest.fixture
def server(shared_server):
    shared_server.replies.clear()
    shared_server.requests.clear()
    return shared_server


@pytest.fixture
async def provider(server):
    p = Anthropic(base_url=server.url, api_key=KEY)
    yield p
    await p.aclose()


async def events_of(provider: Anthropic, req: Request | None = None) -> list:
    return [ev async for ev in provider.stream(req or request())]


# --- streams ----------------------------------------------------------------------------

async def test_text_stream(server, provider):
    server.replies.append(Reply(chunks=stream(*text_block(0, "Hel", "lo ", "world"))))
    evs = await events_of(provider)
    assert evs[:3] == [TextDelta("Hel"), TextDelta("lo "), TextDelta("world")]
    assert evs[3] == StreamEnd("end_turn", Usage(input=12, output=7, cached=0))
    req = server.requests[0]
    assert req["path"] == "/v1/messages"
    assert req["headers"]["x-api-key"] == KEY
    assert req["headers"]["anthropic-version"] == "2023-06-01"
    assert req["json"]["stream"] is True and req["json"]["model"] == MODEL
    assert req["json"]["max_tokens"] == 8192


async def test_max_tokens_from_request_or_catalog(server):
    p = Anthropic(base_url=server.url, api_key=KEY, max_tokens_for=lambda model: {MODEL: 64000}[model])
    server.replies.extend([Reply(chunks=stream(*text_block(0, "a"))), Reply(chunks=stream(*text_block(0, "b")))])
    await events_of(p)
    await events_of(p, request(max_output_tokens=500))
    await p.aclose()
    assert [r["json"]["max_tokens"] for r in server.requests] == [64000, 500]


async def test_thinking_with_signature(server, provider):
    server.replies.append(Reply(chunks=stream(*thinking_block(0, "Let me ", "think.", signature="sig-abc"),
                                              *text_block(1, "Answer"))))
    evs = await events_of(provider)
    assert ThinkingDelta("Let me ") in evs and ThinkingDelta("", "sig-abc") in evs
    asm = Assembler()
    for ev in evs:
        asm.feed(ev)
    assert asm.response.blocks == [ThinkingBlock("Let me think.", "sig-abc"), TextBlock("Answer")]


async def test_redacted_thinking_between_signed_blocks(server, provider):
    redacted = [{"type": "content_block_start", "index": 1,
                 "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}},
                {"type": "content_block_stop", "index": 1}]
    server.replies.append(Reply(chunks=stream(*thinking_block(0, "first", signature="s1"), *redacted,
                                              *thinking_block(2, "second", signature="s2"),
                                              *thinking_block(3, "third", signature="s3"), *text_block(4, "ok"))))
    resp = await complete(provider, request())
    assert resp.blocks == [ThinkingBlock("first", "s1"), ThinkingBlock("EmwKAhgBEgy3va3pzix/LafPsn4a", redacted=True),
                           ThinkingBlock("second", "s2"), ThinkingBlock("third", "s3"), TextBlock("ok")]


async def test_parallel_tool_calls(server, provider):
    server.replies.append(Reply(chunks=stream(
        *text_block(0, "Checking."),
        *tool_block(1, "toolu_1", "read_file", "", '{"path": ', '"a.txt"', ', "start": 3}'),
        *tool_block(2, "toolu_2", "stat_file", ""),
        stop="tool_use")))
    evs = await events_of(provider)
    calls = [ev for ev in evs if isinstance(ev, ToolCallDone)]
    assert calls == [ToolCallDone("toolu_1", "read_file", {"path": "a.txt", "start": 3}),
                     ToolCallDone("toolu_2", "stat_file", {})]
    assert evs[-1].stop_reason == "tool_use"


async def test_pings_and_unknown_events_are_ignored(server, provider):
    chunks = stream(
        {"type": "ping"},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "ping"},
        {"type": "brand_new_event", "payload": [1, 2]},
        *text_block(1, "fine")[:2],
        {"type": "content_block_delta", "index": 1, "delta": {"type": "citations_delta", "citation": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "future_delta", "x": 1}},
        {"type": "content_block_stop", "index": 1},
    )
    chunks.insert(1, b": a comment line\n\n")
    server.replies.append(Reply(chunks=chunks))
    evs = await events_of(provider)
    assert evs == [TextDelta("fine"), StreamEnd("end_turn", Usage(12, 7, 0))]


async def test_usage_with_cache_counts(server, provider):
    start = {"type": "message_start", "message": {"usage": {
        "input_tokens": 5, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000, "output_tokens": 1}}}
    server.replies.append(Reply(chunks=sse(start, *text_block(0, "x"),
                                           {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                            "usage": {"output_tokens": 40}},  # older streams: output only
                                           {"type": "message_stop"}, event_names=True)))
    assert (await events_of(provider))[-1].usage == Usage(input=3205, output=40, cached=3000)
    # newer streams repeat every count in message_delta: cumulative values replace message_start's
    server.replies.append(Reply(chunks=sse(start, *text_block(0, "x"),
                                           {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                            "usage": {"input_tokens": 6, "cache_creation_input_tokens": 0,
                                                      "cache_read_input_tokens": 3200, "output_tokens": 41}},
                                           {"type": "message_stop"}, event_names=True)))
    assert (await events_of(provider))[-1].usage == Usage(input=3206, output=41, cached=3200)


@pytest.mark.parametrize("wire, ours", [("end_turn", "end_turn"), ("tool_use", "tool_use"),
                                        ("max_tokens", "max_tokens"), ("stop_sequence", "stop_sequence"),
                                        ("refusal", "refusal"), ("pause_turn", "end_turn"), (None, "end_turn")])
async def test_stop_reasons(server, provider, wire, ours):
    server.replies.append(Reply(chunks=stream(*text_block(0, "x"), stop=wire)))
    assert (await events_of(provider))[-1].stop_reason == ours


async def test_context_window_exceeded_stop_is_overflow(server, provider):
    server.replies.append(Reply(chunks=stream(*text_block(0, "x"), stop="model_context_window_exceeded")))
    with pytest.raises(E.ContextOverflowError):
        await events_of(provider)


async def test_error_event_after_200(server, provider):
    err = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.replies.append(Reply(chunks=sse({"type": "message_start", "message": {"usage": {}}},
                                           *text_block(0, "partial"), err, event_names=True)))
    got = []
    with pytest.raises(E.OverloadedError) as info:
        async for ev in provider.stream(request()):
            got.append(ev)
    assert got == [TextDelta("partial")]
    assert info.value.retryable and info.value.provider == "anthropic"


@pytest.mark.parametrize("etype, message, cls", [
    ("api_error", "Internal server error", E.ServerError),
    ("rate_limit_error", "slow down", E.RateLimitError),
    ("authentication_error", "invalid x-api-key", E.AuthError),
    ("permission_error", "no access", E.AuthError),
    ("billing_error", "credit balance too low", E.QuotaError),
    ("invalid_request_error", "messages.1: bad", E.InvalidRequestError),
    ("invalid_request_error", "prompt is too long: 213462 tokens > 200000 maximum", E.ContextOverflowError),
    ("timeout_error", "took too long", E.ProviderTimeout),
    ("request_too_large", "Request exceeds the maximum size", E.InvalidRequestError),
    ("something_new", "?", E.ServerError),
])
async def test_stream_error_types(etype, message, cls):
    parser = StreamParser()
    with pytest.raises(cls):
        parser.feed(_sse("error", {"type": "error", "error": {"type": etype, "message": message}}))


# --- faults -----------------------------------------------------------------------------

def _err(etype: str, message: str, **extra) -> dict:
    return {"type": "error", "error": {"type": etype, "message": message, **extra}, "request_id": "req_1"}


@pytest.mark.parametrize("reply, cls, wait", [
    (json_body(429, _err("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
               {"retry-after": "7"}), E.RateLimitError, 7.0),
    (json_body(529, _err("overloaded_error", "Overloaded")), E.OverloadedError, None),
    (json_body(500, _err("api_error", "Internal server error")), E.ServerError, None),
    (json_body(401, _err("authentication_error", "invalid x-api-key")), E.AuthError, None),
    (json_body(400, _err("invalid_request_error", "prompt is too long: 213462 tokens > 200000 maximum")),
     E.ContextOverflowError, None),
    (json_body(429, _err("rate_limit_error", "spend limit reached",
                         details={"error_code": "enforced_spend_limit_reached"})), E.QuotaError, None),
    (json_body(400, _err("invalid_request_error", "messages.0.content: Field required")), E.InvalidRequestError, None),
    (Reply(status=502, chunks=[b"<html>Bad gateway</html>"], content_type="text/html"), E.ServerError, None),
])
async def test_http_errors(server, provider, reply, cls, wait):
    server.replies.append(reply)
    with pytest.raises(E.ProviderError) as info:
        await events_of(provider)
    assert type(info.value) is cls
    assert info.value.retry_after == wait


async def test_reset_before_first_byte(server, provider):
    server.replies.append(Reply(reset=True))
    with pytest.raises(E.ProviderConnectionError):
        await events_of(provider)


async def test_drop_mid_stream(server, provider):
    chunks = stream(*text_block(0, "a", "b", "c"))
    server.replies.append(Reply(chunks=chunks, drop_after=4))
    got = []
    with pytest.raises(E.ProviderConnectionError):
        async for ev in provider.stream(request()):
            got.append(ev)
    assert got == [TextDelta("a"), TextDelta("b")]


async def test_clean_close_without_message_stop(server, provider):
    server.replies.append(Reply(chunks=stream(*text_block(0, "a"), end=False)))
    with pytest.raises(E.ProviderConnectionError, match="end marker"):
        await events_of(provider)


async def test_malformed_json(server, provider):
    server.replies.append(Reply(chunks=[b"event: message_start\ndata: {\"type\": \"message_start\", \"mess\n\n"]))
    with pytest.raises(E.ProtocolError):
        await events_of(provider)


async def test_invalid_tool_arguments(server, provider):
    server.replies.append(Reply(chunks=stream(*tool_block(0, "toolu_1", "read_file", '{"path": '), stop="tool_use")))
    with pytest.raises(E.ProtocolError, match="read_file"):
        await events_of(provider)


async def test_stalled_stream_times_out(server):
    client = httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=0.2))
    p = Anthropic(base_url=server.url, api_key=KEY, client=client)
    server.replies.append(Reply(chunks=stream(*text_block(0, "a", "b")), stall=1.0, stall_at=3))
    with pytest.raises(E.ProviderTimeout):
        await events_of(p)
    await p.aclose()
    assert not client.is_closed  # a client passed in belongs to the caller
    await client.aclose()


async def test_early_stop_and_cancel_leave_nothing_open(server, provider):
    server.replies.append(Reply(chunks=stream(*text_block(0, "a", "b", "c"))))
    async with aclosing(provider.stream(request())) as evs:
        async for ev in evs:
            assert ev == TextDelta("a")
            break
    server.replies.append(Reply(chunks=stream(*text_block(0, "a", "b")), stall=2.0, stall_at=3))
    with trio.move_on_after(0.3) as scope:
        await events_of(provider)
    assert scope.cancelled_caught
    server.replies.append(Reply(chunks=stream(*text_block(0, "again"))))
    assert (await events_of(provider))[0] == TextDelta("again")  # the client is still usable


async def test_key_never_in_error_messages(server, provider):
    server.replies.append(json_body(401, _err("authentication_error", f"invalid x-api-key: {KEY}")))
    server.replies.append(Reply(status=403, chunks=[f"forbidden for {KEY}".encode()], content_type="text/plain"))
    server.replies.append(Reply(chunks=sse(_err("api_error", f"echo {KEY}"), event_names=True)))
    for _ in range(3):
        with pytest.raises(E.ProviderError) as info:
            await events_of(provider)
        assert KEY not in str(info.value) and "sk-" in str(info.value)


async def test_unreachable_server():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = Anthropic(base_url=f"http://127.0.0.1:{port}", api_key=KEY)
    with pytest.raises(E.ProviderConnectionError):
        await events_of(p)
    with pytest.raises(E.ProviderConnectionError):
        await p.validate_auth()
    await p.aclose()


# --- request body -----------------------------------------------------------------------

TOOLS = [ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),
         ToolSpec("stat_file", "Stat a file.", {"type": "object", "properties": {}})]
PNG = ImageBlock("image/png", "iVBORw0KGgo=")


def history(model: str = MODEL) -> list[ModelMessage]:
    return [
        ModelMessage("user", [TextBlock("look at a.png and b.txt")]),
        ModelMessage("assistant", [ThinkingBlock("I should read both.", "sig-1"),
                                   ThinkingBlock("opaque-data", redacted=True),
                                   TextBlock("Reading."), TextBlock(""),
                                   ToolCallBlock("toolu_a", "read_file", {"path": "a.png"}),
                                   ToolCallBlock("toolu_b", "read_file", {"path": "b.txt"})],
                     provider="anthropic", model=model),
        ModelMessage("user", [ToolResultBlock("toolu_a", "read_file", "an image", images=[PNG])]),
        ModelMessage("user", [TextBlock("[bob] also check c")]),  # a steering line landed mid-round
        ModelMessage("user", [ToolResultBlock("toolu_b", "read_file", "boom", is_error=True)]),
    ]


async def test_request_body_on_the_wire(server, provider):
    server.replies.append(Reply(chunks=stream(*text_block(0, "ok"))))
    await events_of(provider, request(history(), tools=TOOLS))
    body = server.requests[0]["json"]
    assert body["system"] == [{"type": "text", "text": "You are Alice.", "cache_control": {"type": "ephemeral"}}]
    assert [t["name"] for t in body["tools"]] == ["read_file", "stat_file"]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1] == {"name": "stat_file", "description": "Stat a file.",
                                "input_schema": {"type": "object", "properties": {}},
                                "cache_control": {"type": "ephemeral"}}
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assistant, results = body["messages"][1]["content"], body["messages"][2]["content"]
    assert assistant == [
        {"type": "thinking", "thinking": "I should read both.", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque-data"},
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a.png"}},
        {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {"path": "b.txt"}},
    ]
    assert [b["type"] for b in results] == ["tool_result", "tool_result", "text"]  # results first, merged
    assert results[0] == {"type": "tool_result", "tool_use_id": "toolu_a", "is_error": False, "content": [
        {"type": "text", "text": "an image"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}
    assert results[1] == {"type": "tool_result", "tool_use_id": "toolu_b", "is_error": True, "content": "boom"}
    # breakpoints: system, last tool, and the last block of each of the last two user messages
    assert results[-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert msgspec.json.encode(body).count(b"cache_control") == 4


def test_thinking_downgraded_for_another_model():
    body = build_body(request(history(model="claude-older")), "anthropic", 1000)
    assistant = body["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["text", "text", "tool_use", "tool_use"]
    assert assistant[0]["text"] == "(earlier reasoning) I should read both."
    assert b"opaque-data" not in msgspec.json.encode(body)


def test_thinking_from_another_provider_is_downgraded():
    msgs = history()
    msgs[1] = ModelMessage("assistant", msgs[1].blocks, provider="openai", model=MODEL)
    assistant = build_body(request(msgs), "anthropic", 1000)["messages"][1]["content"]
    assert not any(b["type"] in ("thinking", "redacted_thinking") for b in assistant)


def test_history_starting_with_assistant_and_empty_pieces():
    msgs = [ModelMessage("assistant", [TextBlock("Hello, I am the summary.")]),
            ModelMessage("assistant", [TextBlock("  ")]),  # nothing to send: dropped, not an empty message
            ModelMessage("user", [TextBlock(""), PNG]),
            ModelMessage("user", [TextBlock("what is this?")])]
    body = build_body(request(msgs, system=""), "anthropic", 1000)
    assert "system" not in body and "tools" not in body
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][0]["content"][0]["type"] == "text"
    assert [b["type"] for b in body["messages"][2]["content"]] == ["image", "text"]
    assert build_body(request([]), "anthropic", 10)["messages"][0]["role"] == "user"


def test_at_most_four_breakpoints_in_a_long_history():
    msgs = []
    for i in range(30):
        msgs.append(ModelMessage("user", [TextBlock(f"q{i}")]))
        msgs.append(ModelMessage("assistant", [TextBlock(f"a{i}")]))
    body = build_body(request(msgs, tools=TOOLS), "anthropic", 1000)
    assert msgspec.json.encode(body).count(b"cache_control") == 4


# --- validate_auth ----------------------------------------------------------------------

async def test_validate_auth(server, provider):
    handler = server._httpd.RequestHandlerClass
    handler.do_GET = handler.do_POST  # the fake server answers GET the same way (it only defines POST)
    server.replies.append(json_body(200, {"data": [{"id": MODEL, "type": "model"}], "has_more": False}))
    await provider.validate_auth()
    server.replies.append(json_body(401, _err("authentication_error", "invalid x-api-key")))
    with pytest.raises(E.AuthError):
        await provider.validate_auth()
    assert [r["path"] for r in server.requests] == ["/v1/models", "/v1/models"]
    assert server.requests[0]["headers"]["x-api-key"] == KEY


# --- fuzz -------------------------------------------------------------------------------

def _sse(event: str, data: dict) -> SSE:
    return SSE(event, msgspec.json.encode(data).decode())


NAMES = ["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta",
         "message_stop", "ping", "error", "bogus", "message"]
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2, 3) | st.text(max_size=4),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                    max_leaves=6)
SHORT = st.text(max_size=6) | JSON
FRAGMENT = st.sampled_from(["", "{", '{"a": ', "1", "}", "[]", '"x"', "nul", '{"a": 1}']) | st.text(max_size=4)
DELTA = st.fixed_dictionaries(
    {"type": st.sampled_from(["text_delta", "thinking_delta", "signature_delta", "input_json_delta", "other"])},
    optional={"text": SHORT, "thinking": SHORT, "signature": SHORT, "partial_json": FRAGMENT | JSON})
BLOCK_FIELDS = st.fixed_dictionaries(
    {}, optional={"text": SHORT, "thinking": SHORT, "data": SHORT, "id": SHORT, "name": SHORT, "input": JSON})
DELTA_FOR = {  # the deltas each block kind really gets, so sequences reach deep states often
    "text": st.builds(lambda t: {"type": "text_delta", "text": t}, SHORT),
    "thinking": st.builds(lambda t, sig: {"type": "thinking_delta" if sig else "signature_delta",
                                          "thinking" if sig else "signature": t}, SHORT, st.booleans()),
    "tool_use": st.builds(lambda f: {"type": "input_json_delta", "partial_json": f}, FRAGMENT | JSON),
}
KINDS = st.sampled_from(["text", "thinking", "redacted_thinking", "tool_use", "server_tool_use"])
USAGE = st.dictionaries(st.sampled_from(["input_tokens", "output_tokens", "cache_read_input_tokens",
                                         "cache_creation_input_tokens"]), st.none() | st.integers(0, 99) | JSON)
STOPS = st.sampled_from(["end_turn", "tool_use", "model_context_window_exceeded", "pause_turn", "weird"]) | JSON
ERROR = st.fixed_dictionaries({}, optional={"type": st.sampled_from(["overloaded_error", "x"]) | SHORT,
                                            "message": SHORT, "details": JSON})
EVENT = st.builds(
    lambda name, typed, body: {**({"type": name} if typed else {}), **body},
    st.sampled_from(NAMES) | JSON, st.booleans(),
    st.fixed_dictionaries({}, optional={
        "index": st.integers(0, 2) | JSON,
        "delta": DELTA | st.fixed_dictionaries({}, optional={"stop_reason": STOPS}) | JSON,
        "content_block": st.builds(lambda kind, rest: {"type": kind, **rest}, KINDS | JSON, BLOCK_FIELDS) | JSON,
        "usage": USAGE | JSON, "message": st.fixed_dictionaries({}, optional={"usage": USAGE | JSON}) | JSON,
        "error": ERROR | JSON}))


@st.composite
def plausible_stream(draw) -> list[dict]:
    """A well-formed reply with random payloads, then a few random drops, repeats and foreign events."""
    evs: list[dict] = [{"type": "message_start", "message": {"usage": draw(USAGE)}}]
    for i in range(draw(st.integers(0, 4))):
        kind = draw(KINDS)
        evs.append({"type": "content_block_start", "index": i, "content_block": {"type": kind, **draw(BLOCK_FIELDS)}})
        deltas = st.lists(DELTA_FOR.get(kind, DELTA) | DELTA, max_size=3)
        evs += [{"type": "content_block_delta", "index": i, "delta": d} for d in draw(deltas)]
        evs.append({"type": "content_block_stop", "index": i})
    evs.append({"type": "message_delta", "delta": {"stop_reason": draw(STOPS)}, "usage": draw(USAGE)})
    evs.append({"type": "message_stop"})
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(evs)))
        op = draw(st.sampled_from(["drop", "repeat", "insert", "error"]))
        if op == "drop" and at < len(evs):
            del evs[at]
        elif op == "repeat" and at < len(evs):
            evs.insert(at, evs[at])
        elif op == "insert":
            evs.insert(at, draw(EVENT))
        elif op == "error":
            evs.insert(at, {"type": "error", "error": draw(ERROR)})
    return evs


def _wire(ev: dict, named: bool) -> str:
    name = ev.get("type")
    head = f"event: {name}\n" if named and isinstance(name, str) and "\n" not in name and "\r" not in name else ""
    return head + f"data: {msgspec.json.encode(ev).decode()}\n\n"


WIRE_EVENT = st.one_of(
    st.builds(_wire, EVENT, st.booleans()),
    st.text(max_size=30),  # garbage lines, half events, comments
)


class _Lines:
    """Lines as httpx's aiter_lines splits them; a plain iterator, so nothing is left to close."""

    def __init__(self, text: str):
        self._lines = iter(re.split(r"\r\n|\r|\n", text))

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        await trio.lowlevel.checkpoint()
        try:
            return next(self._lines)
        except StopIteration:
            raise StopAsyncIteration from None


async def _run(text: str) -> None:
    parser, asm = StreamParser(secrets=[KEY]), Assembler()
    try:
        async with aclosing(iter_sse(_Lines(text))) as items:
            async for item in items:
                for ev in parser.feed(item):
                    assert isinstance(ev, (TextDelta, ThinkingDelta, ToolCallDone, StreamEnd))
                    assert msgspec.convert(msgspec.to_builtins(ev), type(ev)) == ev  # every field well-typed
                    asm.feed(ev)
        parser.finish()
    except E.ProviderError:
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(WIRE_EVENT, max_size=12))
async def test_fuzz_random_event_sequences(wire):
    await _run("".join(wire))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plausible_stream(), st.lists(st.booleans(), min_size=30, max_size=30))
async def test_fuzz_plausible_streams(evs, named):
    await _run("".join(_wire(ev, n) for ev, n in zip(evs, named + [True] * len(evs))))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
async def test_fuzz_bytes(raw):
    await _run(raw.decode("utf-8", errors="replace"))
