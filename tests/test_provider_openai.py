"""The OpenAI-compatible provider against a loopback server: streams of each server family, faults, the body.

Every stream test runs the real provider over real sockets (tests/fakeserver.py); the parser is also
fuzzed alone (iter_sse + ChunkParser, no server): arbitrary input yields events or a ProviderError.
"""
from __future__ import annotations

import hashlib
import json
import re
import socket
import time
from contextlib import aclosing, asynccontextmanager
from typing import Any, AsyncIterator, Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.core import errors as E
from orchestrator.core.types import (
    ImageBlock, ModelMessage, Request, StreamEnd, TextBlock, TextDelta, ThinkingBlock, ThinkingDelta,
    ToolCallBlock, ToolCallCut, ToolCallDone, ToolResultBlock, ToolSpec, Usage,
)
from orchestrator.providers.base import complete
from orchestrator.providers.openai import ChunkParser, OpenAICompatible, build_body
from orchestrator.providers.sse import iter_sse
from tests.fakeserver import FakeServer, Reply, json_body, sse

# httpx 0.28 nests async generators inside Response.aiter_lines that no caller can close, so trio warns when
# a stream is left before its end ([DONE], an error); trio still closes them (encode/httpx#3686).
pytestmark = pytest.mark.filterwarnings(r"ignore:Async generator 'http(x|core)\.:ResourceWarning")

KEY = "sk-test-0123456789abcdef"
REQ = Request(agent="a", model="gpt-x", system="You are terse.",
              messages=[ModelMessage("user", [TextBlock("hi")])])
DONE = b"data: [DONE]\n\n"


def chunk(delta: dict | None = None, finish: str | None = None, **extra: Any) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-x",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}], **extra}


def usage(prompt: int, completion: int, cached: int | None = None) -> dict:
    u: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached is not None:
        u["prompt_tokens_details"] = {"cached_tokens": cached}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": u}


def call(index: int, id: str | None = None, name: str | None = None, args: str | None = None) -> dict:  # noqa: A002
    fn = {k: v for k, v in (("name", name), ("arguments", args)) if v is not None}
    c: dict[str, Any] = {"index": index, "function": fn}
    if id is not None:
        c.update(id=id, type="function")
    return {"tool_calls": [c]}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    """One server for the module: starting and stopping one costs half a second (its shutdown poll)."""
    with FakeServer() as srv:
        # FakeServer only answers POST; validate_auth needs GET, which it serves the same way.
        handler = srv._httpd.RequestHandlerClass
        handler.do_GET = handler.do_POST  # type: ignore[attr-defined]
        yield srv


class Fake:
    """The shared server, emptied for one test, and providers pointed at it."""

    def __init__(self, srv: FakeServer):
        srv.replies.clear()
        srv.requests.clear()
        self.srv = srv
        self.requests = srv.requests

    @asynccontextmanager
    async def provider(self, *replies: Reply, **kw: Any) -> AsyncIterator[OpenAICompatible]:
        self.srv.replies.extend(replies)
        kw.setdefault("api_key", KEY)
        p = OpenAICompatible(base_url=self.srv.url + "/v1", **kw)
        try:
            yield p
        finally:
            await p.aclose()

    async def events(self, *replies: Reply, request: Request = REQ, **kw: Any) -> list:
        async with self.provider(*replies, **kw) as p:
            async with aclosing(p.stream(request)) as s:
                return [ev async for ev in s]

    async def failure(self, *replies: Reply, **kw: Any) -> E.ProviderError:
        with pytest.raises(E.ProviderError) as info:
            await self.events(*replies, **kw)
        assert KEY not in str(info.value)
        return info.value


@pytest.fixture
def fake(server: FakeServer) -> Fake:
    return Fake(server)


def header(req: dict, name: str) -> str | None:
    return next((v for k, v in req["headers"].items() if k.lower() == name), None)


# --- streams ---------------------------------------------------------------------------------

async def test_text_stream_in_deltas_with_usage_and_the_request_sent(fake):
    chunks = sse(chunk({"role": "assistant", "content": "", "refusal": None}), chunk({"content": "Hel"}),
                 chunk({"content": "lo, "}), chunk({"content": "world"}), chunk({}, "stop"),
                 usage(120, 3, cached=64), done=True)
    events = await fake.events(Reply(chunks=chunks))
    assert events == [TextDelta("Hel"), TextDelta("lo, "), TextDelta("world"),
                      StreamEnd("end_turn", Usage(input=120, output=3, cached=64))]
    req = fake.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert header(req, "authorization") == f"Bearer {KEY}"
    assert req["json"] == build_body(REQ, "openai", official=False)
    assert req["json"]["stream"] is True and req["json"]["stream_options"] == {"include_usage": True}
    assert req["json"]["messages"][0] == {"role": "system", "content": "You are terse."}


async def test_two_tool_calls_from_argument_fragments_in_index_order(fake):
    chunks = sse(chunk({"role": "assistant", "content": None}),
                 chunk(call(0, "call_w", "get_weather", "")), chunk(call(0, args='{"ci')),
                 chunk(call(1, "call_t", "get_time", "")),  # interleaved: keyed by index, not by arrival
                 chunk(call(0, args='ty": "Paris"}')), chunk(call(1, args='{"tz": "CET"}')),
                 chunk({}, "tool_calls"), usage(50, 20), done=True)
    events = await fake.events(Reply(chunks=chunks))
    assert events == [ToolCallDone("call_w", "get_weather", {"city": "Paris"}),
                      ToolCallDone("call_t", "get_time", {"tz": "CET"}),
                      StreamEnd("tool_use", Usage(50, 20, 0))]


async def test_ollama_whole_calls_content_empty_finish_stop_and_no_done(fake):
    chunks = sse(chunk({"role": "assistant", "content": "", "reasoning": "The user wants a file."}),
                 chunk({"role": "assistant", "content": "", "tool_calls": [
                     {"id": "call_ab12cd34", "index": 0, "type": "function",
                      "function": {"name": "read_file", "arguments": '{"path":"a.txt"}'}}]}),
                 chunk({"role": "assistant", "content": "", "tool_calls": [
                     {"id": "call_ef56gh78", "index": 1, "type": "function",
                      "function": {"name": "read_file", "arguments": '{"path":"b.txt"}'}}]}),
                 chunk({"role": "assistant", "content": ""}, "stop"),
                 {"id": "chatcmpl-7", "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 9}})
    # Our rule: finish_reason makes the answer complete, so a clean end without [DONE] is not a fault.
    events = await fake.events(Reply(chunks=chunks))
    assert events == [ThinkingDelta("The user wants a file."),
                      ToolCallDone("call_ab12cd34", "read_file", {"path": "a.txt"}),
                      ToolCallDone("call_ef56gh78", "read_file", {"path": "b.txt"}),
                      StreamEnd("tool_use", Usage(30, 9, 0))]


async def test_vllm_no_arguments_key_reasoning_in_both_fields_and_a_call_without_arguments(fake):
    chunks = sse(chunk({"role": "assistant", "reasoning": "Think.", "reasoning_content": "Think."}),
                 chunk({"tool_calls": [{"index": 0, "id": "chatcmpl-tool-1", "type": "function",
                                        "function": {"name": "search"}}]}),
                 chunk(call(0, args='{"q": '), finish=None), chunk(call(0, args='"x"}')),
                 chunk({"tool_calls": [{"index": 1, "id": "chatcmpl-tool-2", "function": {"name": "now"}}]}),
                 {**chunk({}, "tool_calls"), "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls",
                                                          "stop_reason": None}]},
                 done=True)
    events = await fake.events(Reply(chunks=chunks))
    assert events == [ThinkingDelta("Think."), ToolCallDone("chatcmpl-tool-1", "search", {"q": "x"}),
                      ToolCallDone("chatcmpl-tool-2", "now", {}), StreamEnd("tool_use")]


async def test_repeated_and_changing_ids_are_never_concatenated(fake):
    chunks = sse(chunk(call(0, "call_dup", "write", '{"a"')), chunk(call(0, "call_dup", "write", ': 1')),
                 chunk(call(0, "call_other", None, "}")),  # Poolside: a different id after the first chunk
                 chunk({}, "tool_calls"), done=True)
    assert await fake.events(Reply(chunks=chunks)) == [ToolCallDone("call_dup", "write", {"a": 1}),
                                                     StreamEnd("tool_use")]


async def test_missing_ids_are_generated_and_unique(fake):
    chunks = sse(chunk(call(0, name="f", args="{}")), chunk(call(1, name="g", args="{}")), chunk({}, "tool_calls"),
                 done=True)
    events = await fake.events(Reply(chunks=chunks))
    ids = [e.id for e in events if isinstance(e, ToolCallDone)]
    assert len(ids) == 2 and len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)


async def test_calls_without_index_are_told_apart_by_id(fake):
    no_index = [{"id": f"call_{n}", "type": "function", "function": {"name": n, "arguments": "{}"}} for n in "ab"]
    chunks = sse(chunk({"tool_calls": [no_index[0]]}), chunk({"tool_calls": [no_index[1]]}),
                 chunk({}, "tool_calls"), done=True)
    events = await fake.events(Reply(chunks=chunks))
    assert [(e.id, e.name) for e in events if isinstance(e, ToolCallDone)] == [("call_a", "a"), ("call_b", "b")]


async def test_finish_reason_on_the_last_content_chunk_and_role_in_every_delta(fake):
    chunks = sse(chunk({"role": "assistant", "content": "Hi"}), chunk({"role": "assistant", "content": "!"}, "stop"),
                 done=True)
    events = await fake.events(Reply(chunks=chunks))
    assert events == [TextDelta("Hi"), TextDelta("!"), StreamEnd("end_turn")]


async def test_length_and_content_filter_stop_reasons_and_a_call_cut_by_the_limit(fake):
    cut = sse(chunk({"content": "Writing"}), chunk(call(0, "call_1", "write_file", '{"path": "a", "text": "lo')),
              chunk({}, "length"), done=True)
    assert await fake.events(Reply(chunks=cut)) == [TextDelta("Writing"), ToolCallCut(
        "call_1", "write_file", '{"path": "a", "text": "lo'), StreamEnd("max_tokens")]
    filtered = sse(chunk({"content": "I"}), chunk({}, "content_filter"), done=True)
    assert await fake.events(Reply(chunks=filtered)) == [TextDelta("I"), StreamEnd("refusal")]


async def test_done_ends_reading_even_if_the_server_keeps_the_connection_open(fake):
    chunks = sse(chunk({"content": "ok"}, "stop"), done=True) + [b": still here\n\n"]
    start = time.monotonic()
    events = await fake.events(Reply(chunks=chunks, stall=1.0, stall_at=2))
    assert events == [TextDelta("ok"), StreamEnd("end_turn")]
    assert time.monotonic() - start < 0.8


async def test_openrouter_comments_then_text(fake):
    chunks = [b": OPENROUTER PROCESSING\n\n", b": OPENROUTER PROCESSING\n\n",
              *sse(chunk({"content": "yes"}, "stop", provider="OpenAI", native_finish_reason="stop"), done=True)]
    assert await fake.events(Reply(chunks=chunks)) == [TextDelta("yes"), StreamEnd("end_turn")]


async def test_complete_folds_the_stream(fake):
    chunks = sse(chunk({"reasoning_content": "hmm"}), chunk({"content": "A"}), chunk(call(0, "c1", "f", '{"x": 1}')),
                 chunk({}, "tool_calls"), done=True)
    async with fake.provider(Reply(chunks=chunks)) as p:
        response = await complete(p, REQ)
    assert response.blocks == [ThinkingBlock("hmm"), TextBlock("A"), ToolCallBlock("c1", "f", {"x": 1})]
    assert response.stop_reason == "tool_use"


# --- errors inside a 200 stream --------------------------------------------------------------

@pytest.mark.parametrize("chunks, cls", [
    pytest.param(sse(chunk({"content": "par"}), {"error": {"message": "engine died", "type": "InternalServerError",
                                                           "param": None, "code": 500}}, done=True),
                 E.ServerError, id="vllm-error-then-done"),
    pytest.param(sse({"object": "error", "message": "You passed 9000 input tokens and requested 100 output tokens. "
                      "However, the model's context length is only 8192 tokens.", "type": "BadRequestError",
                      "param": None, "code": 400}),
                 E.ContextOverflowError, id="vllm-flat-overflow"),
    pytest.param([b'error: {"code": 500, "message": "slot crashed", "type": "server_error"}\n\n', DONE],
                 E.ServerError, id="llamacpp-error-field"),
    pytest.param([b'error: {"code": 400, "message": "request (9000 tokens) exceeds the available context size '
                  b'(4096 tokens), try increasing it", "type": "exceed_context_size_error"}\n\n', DONE],
                 E.ContextOverflowError, id="llamacpp-error-field-overflow"),
    pytest.param([b": OPENROUTER PROCESSING\n\n",
                  *sse(chunk({"content": "so"}),
                       {**chunk({"content": ""}, "error"),
                        "error": {"code": "server_error", "message": "Provider disconnected"}})],
                 E.ServerError, id="openrouter-error-chunk"),
    pytest.param(sse(chunk({"content": "so"}), chunk({}, "error"), done=True), E.ServerError,
                 id="finish-reason-error-alone"),
    pytest.param(sse(chunk({"content": "ok"}), chunk({})), E.ProviderConnectionError, id="ollama-silent-failure"),
    pytest.param([b"data: {\"choices\": [\n\n"], E.ProtocolError, id="malformed-json"),
    pytest.param(sse({"choices": "nope"}), E.ProtocolError, id="wrong-shape"),
])
async def test_errors_inside_the_stream(chunks, cls, fake):
    err = await fake.failure(Reply(chunks=chunks))
    assert type(err) is cls
    assert err.provider == "openai"


async def test_in_stream_rate_limit_takes_its_delay_from_the_message(fake):
    limited = {"error": {"message": "Rate limit reached. Please try again in 1.5s.", "code": "rate_limit_exceeded"}}
    err = await fake.failure(Reply(chunks=sse(chunk({"content": "a"}), limited)))
    assert type(err) is E.RateLimitError and err.retry_after == 1.5


async def test_arguments_that_are_not_json_name_the_tool(fake):
    chunks = sse(chunk(call(0, "c1", "edit", "{not json")), chunk({}, "tool_calls"), done=True)
    err = await fake.failure(Reply(chunks=chunks))
    assert type(err) is E.ProtocolError and "'edit'" in str(err)


# --- HTTP faults -----------------------------------------------------------------------------

def _err(status: int, message: str, code: Any = None, type: str | None = None,  # noqa: A002
         headers: dict[str, str] | None = None) -> Reply:
    return json_body(status, {"error": {"message": message, "type": type, "param": None, "code": code}}, headers)


@pytest.mark.parametrize("reply, cls, wait", [
    pytest.param(_err(429, "Rate limit reached.", "rate_limit_exceeded", "requests", {"retry-after": "7"}),
                 E.RateLimitError, 7.0, id="429-retry-after"),
    pytest.param(_err(429, "Rate limit reached.", "rate_limit_exceeded", "tokens", {"retry-after-ms": "1500"}),
                 E.RateLimitError, 1.5, id="429-retry-after-ms"),
    pytest.param(_err(429, "Rate limit reached. Please try again in 2.09s. Visit ...", "rate_limit_exceeded", "tokens"),
                 E.RateLimitError, 2.09, id="429-delay-in-message"),
    pytest.param(_err(429, "Slow down.", "rate_limit_exceeded"), E.RateLimitError, None, id="429-no-delay"),
    pytest.param(_err(429, "Slow down.", headers={"retry-after": "soon"}), E.RateLimitError, None,
                 id="429-unreadable-retry-after"),
    pytest.param(_err(429, "You exceeded your current quota, please check your plan and billing details.",
                      "insufficient_quota", "insufficient_quota"), E.QuotaError, None, id="429-insufficient-quota"),
    pytest.param(_err(500, "The server had an error", None, "server_error"), E.ServerError, None, id="500"),
    pytest.param(_err(503, "The engine is currently overloaded"), E.ServerError, None, id="503"),
    pytest.param(_err(529, "Overloaded"), E.OverloadedError, None, id="529"),
    pytest.param(Reply(status=502, chunks=[b"<html>Bad gateway</html>"], content_type="text/html"),
                 E.ServerError, None, id="502-html"),
    pytest.param(_err(401, f"Incorrect API key provided: {KEY}.", "invalid_api_key", "invalid_request_error"),
                 E.AuthError, None, id="401-echoing-the-key"),
    pytest.param(_err(403, "Project does not have access"), E.AuthError, None, id="403"),
    pytest.param(_err(402, "Insufficient credits", 402), E.QuotaError, None, id="402-openrouter"),
    pytest.param(_err(400, "This model's maximum context length is 128000 tokens. However, your messages resulted "
                      "in 131532 tokens.", "context_length_exceeded", "invalid_request_error"),
                 E.ContextOverflowError, None, id="400-context-length-exceeded"),
    pytest.param(json_body(400, {"error": {"code": 400, "message": "request (5000 tokens) exceeds the available "
                                           "context size (4096 tokens), try increasing it",
                                           "type": "exceed_context_size_error", "n_prompt_tokens": 5000,
                                           "n_ctx": 4096}}),
                 E.ContextOverflowError, None, id="400-llamacpp-exceed-context-size"),
    pytest.param(_err(400, "This endpoint's maximum context length is 8192 tokens. However, you requested about "
                      "9000 tokens", 400), E.ContextOverflowError, None, id="400-openrouter-overflow-wording"),
    pytest.param(_err(400, "Invalid value for 'tools'", None, "invalid_request_error"), E.InvalidRequestError, None,
                 id="400-plain"),
    pytest.param(_err(400, "Your request was rejected by the safety system.", "content_policy_violation"),
                 E.ContentPolicyError, None, id="400-content-policy"),
    pytest.param(json_body(404, {"error": "model 'llama9' not found"}), E.ModelNotFoundError, None,
                 id="404-ollama-string-error"),
])
async def test_http_errors_are_classified(reply, cls, wait, fake):
    err = await fake.failure(reply)
    assert type(err) is cls
    assert err.retry_after == pytest.approx(wait) if wait is not None else err.retry_after is None
    assert err.provider == "openai"


async def test_quota_is_an_account_error_and_never_retried(fake):
    err = await fake.failure(_err(429, "You exceeded your current quota", "insufficient_quota", "insufficient_quota"))
    assert isinstance(err, E.QuotaError) and not err.retryable and err.account
    assert "insufficient_quota" in str(err)


async def test_reset_before_the_first_byte_is_a_connection_error(fake):
    err = await fake.failure(Reply(reset=True))
    assert type(err) is E.ProviderConnectionError and err.retryable


async def test_disconnect_mid_stream_is_an_interrupted_transfer(fake):
    chunks = sse(chunk({"content": "par"}), chunk({"content": "tial"}), chunk({}, "stop"), done=True)
    err = await fake.failure(Reply(chunks=chunks, drop_after=2))
    assert type(err) is E.ProviderConnectionError and err.retryable


async def test_disconnect_after_finish_reason_keeps_the_whole_answer(fake):
    chunks = sse(chunk({"content": "whole"}, "stop"), usage(5, 1), done=True)
    assert await fake.events(Reply(chunks=chunks, drop_after=1)) == [TextDelta("whole"), StreamEnd("end_turn")]


async def test_a_stalled_stream_times_out(fake):
    chunks = sse(chunk({"content": "a"}), chunk({"content": "b"}, "stop"), done=True)
    async with httpx.AsyncClient(timeout=httpx.Timeout(5, read=0.3)) as client:
        err = await fake.failure(Reply(chunks=chunks, stall=1.0, stall_at=1), client=client)
    assert type(err) is E.ProviderTimeout and err.retryable


async def test_unreachable_server_is_a_connection_error():
    with socket.socket() as sock:  # a port that was just free and has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    p = OpenAICompatible(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY)
    try:
        with pytest.raises(E.ProviderConnectionError):
            async with aclosing(p.stream(REQ)) as s:
                [ev async for ev in s]
        with pytest.raises(E.ProviderConnectionError):
            await p.validate_auth()
    finally:
        await p.aclose()


# --- validate_auth, construction -------------------------------------------------------------

async def test_validate_auth(fake):
    ok = json_body(200, {"object": "list", "data": [{"id": "gpt-x", "object": "model"}]})
    denied = _err(401, f"Incorrect API key provided: {KEY}", "invalid_api_key", "invalid_request_error")
    async with fake.provider(ok, denied) as p:
        await p.validate_auth()
        with pytest.raises(E.AuthError) as info:
            await p.validate_auth()
    assert KEY not in str(info.value)
    assert [r["path"] for r in fake.requests] == ["/v1/models", "/v1/models"]
    assert header(fake.requests[0], "authorization") == f"Bearer {KEY}"


async def test_official_is_derived_from_the_url_and_extra_headers_are_sent(fake):
    assert OpenAICompatible(api_key=KEY).official
    local = OpenAICompatible(base_url="http://localhost:11434/v1/")
    assert not local.official and local.base_url == "http://localhost:11434/v1"
    for p in (OpenAICompatible(api_key=KEY), local):
        await p.aclose()
    chunks = sse(chunk({"content": "x"}, "stop"), done=True)
    req = Request(agent="a", model="gpt-x", system="", messages=REQ.messages, max_output_tokens=64, cache_key="r1")
    await fake.events(Reply(chunks=chunks), request=req, headers={"OpenAI-Project": "proj_1"}, official=True)
    assert header(fake.requests[0], "openai-project") == "proj_1"
    body = fake.requests[0]["json"]
    assert body["max_completion_tokens"] == 64 and body["prompt_cache_key"] == "r1" and "max_tokens" not in body


async def test_no_key_sends_no_authorization_and_a_given_client_is_left_open(fake):
    chunks = sse(chunk({"content": "x"}, "stop"), done=True)
    async with httpx.AsyncClient() as client:
        await fake.events(Reply(chunks=chunks), api_key=None, client=client)
        assert not client.is_closed
    assert header(fake.requests[0], "authorization") is None


# --- the request body ------------------------------------------------------------------------

async def test_history_on_the_wire_tool_rounds_images_errors_and_thinking(fake):
    png, jpg = ImageBlock("image/png", "AAAA"), ImageBlock("image/jpeg", "BBBB")
    messages = [
        ModelMessage("user", [TextBlock("Check the screen.")]),
        ModelMessage("assistant", [ThinkingBlock("private plan", "sig"), TextBlock("Looking."),
                                   ToolCallBlock("call_1", "ls", {"path": "."}), ToolCallBlock("call_2", "shot", {})],
                     "openai", "gpt-x"),
        # The partition holds each result as its own message, and a user line may follow in the same run.
        ModelMessage("user", [ToolResultBlock("call_1", "ls", "a.txt")]),
        ModelMessage("user", [ToolResultBlock("call_2", "shot", "1 image", images=[png])]),
        ModelMessage("user", [TextBlock("[bob] also this"), jpg]),
        ModelMessage("assistant", [ThinkingBlock("mull"), TextBlock("Done.")], "anthropic", "claude-x"),
        ModelMessage("user", [TextBlock("Delete it.")]),
        ModelMessage("assistant", [ToolCallBlock("call_3", "rm", {"path": "a.txt"})], "openai", "gpt-x"),
        ModelMessage("user", [ToolResultBlock("call_3", "rm", "permission denied", is_error=True)]),
    ]
    tools = [ToolSpec("ls", "List files.", {"type": "object", "properties": {"path": {"type": "string"}}})]
    req = Request(agent="a", model="gpt-x", system="Be brief.", messages=messages, tools=tools)
    await fake.events(Reply(chunks=sse(chunk({"content": "ok"}, "stop"), done=True)), request=req)
    body = fake.requests[0]["json"]
    assert body == build_body(req, "openai", official=False)
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Check the screen."},
        {"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"path":"."}'}},
            {"id": "call_2", "type": "function", "function": {"name": "shot", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
        {"role": "tool", "tool_call_id": "call_2", "content": "1 image"},
        {"role": "user", "content": [
            {"type": "text", "text": "Image(s) returned by tool call shot (call_2):"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "text", "text": "[bob] also this"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,BBBB"}}]},
        {"role": "assistant", "content": "(earlier reasoning) mull\n\nDone."},
        {"role": "user", "content": "Delete it."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_3", "type": "function", "function": {"name": "rm", "arguments": '{"path":"a.txt"}'}}]},
        {"role": "tool", "tool_call_id": "call_3", "content": "ERROR: permission denied"},
    ]
    assert "private plan" not in json.dumps(body)
    assert body["tools"] == [{"type": "function", "function": {
        "name": "ls", "description": "List files.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
    assert "max_tokens" not in body and "max_completion_tokens" not in body and "prompt_cache_key" not in body


def test_body_max_tokens_field_and_cache_key_depend_on_official():
    req = Request(agent="a", model="m", system="", messages=[ModelMessage("user", [TextBlock("hi")])],
                  max_output_tokens=500, cache_key="room-1:a")
    local = build_body(req, "ollama", official=False)
    assert local["max_tokens"] == 500 and "max_completion_tokens" not in local and "prompt_cache_key" not in local
    assert local["messages"] == [{"role": "user", "content": "hi"}]  # no empty system message
    assert "tools" not in local
    official = build_body(req, "openai", official=True)
    assert official["max_completion_tokens"] == 500 and "max_tokens" not in official
    assert official["prompt_cache_key"] == "room-1:a"
    long = "k" * 65
    hashed = build_body(Request(agent="a", model="m", system="", messages=[], cache_key=long), "openai", official=True)
    assert hashed["prompt_cache_key"] == hashlib.sha256(long.encode()).hexdigest()
    assert len(hashed["prompt_cache_key"]) == 64


# --- fuzzing the parser ----------------------------------------------------------------------

async def parse(lines: list[str]) -> list:
    """What the provider does with a response's lines, without the socket."""
    async def feed() -> AsyncIterator[str]:
        for line in lines:
            yield line

    parser, events = ChunkParser("fuzz", [KEY]), []
    async with aclosing(feed()) as source, aclosing(iter_sse(source)) as stream:
        async for ev in stream:
            events += parser.feed(ev)
            if parser.done:
                break
    return events + parser.finish()


async def survives(lines: list[str]) -> None:
    try:
        events = await parse(lines)
    except E.ProviderError as err:
        assert KEY not in str(err)
        return
    assert isinstance(events[-1], StreamEnd)
    assert all(isinstance(e, (TextDelta, ThinkingDelta, ToolCallDone, ToolCallCut)) for e in events[:-1])
    # a call is cut (unreadable arguments kept, never run) only when the output limit ended the reply
    assert events[-1].stop_reason == "max_tokens" or not any(isinstance(e, ToolCallCut) for e in events)
    assert all(isinstance(e.input, dict) for e in events if isinstance(e, ToolCallDone))


FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=400))
async def test_parser_survives_arbitrary_bytes(data):
    await survives(re.split(r"\r\n|\r|\n", data.decode("utf-8", "replace")))


# Wild values in every field, and a well-formed vocabulary (fragments that may or may not join into JSON) so
# that a good share of the generated streams complete and reach the tool-call assembly.
_json = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, allow_infinity=False)
                     | st.text(max_size=6),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                     max_leaves=6)
_ids = st.sampled_from(["call_a", "call_b", ""])
_names = st.sampled_from(["f", "g", "f", "g", ""])
_fragments = st.sampled_from(["{}", '{"b": [1, 2]}', "{}", '{"a"', ": 1}", "", "[1]", "}"])
_finish = st.sampled_from(["stop", "length", "tool_calls", "content_filter", None, None])


def _chunk_of(value: Any, index: st.SearchStrategy) -> st.SearchStrategy:
    fn = st.fixed_dictionaries({}, optional={"name": value(_names), "arguments": value(_fragments)})
    tool_call = st.fixed_dictionaries({}, optional={"index": value(index), "id": value(_ids), "function": value(fn)})
    delta = st.fixed_dictionaries({}, optional={
        "content": value(st.text(max_size=5)), "reasoning": value(st.text(max_size=5)),
        "reasoning_content": value(st.text(max_size=5)), "tool_calls": value(st.lists(tool_call, max_size=2))})
    choice = st.fixed_dictionaries({}, optional={"index": value(st.just(0)), "delta": value(delta),
                                                 "finish_reason": value(_finish)})
    details = st.fixed_dictionaries({}, optional={"cached_tokens": value(st.integers(0, 9))})
    usage = st.fixed_dictionaries({}, optional={
        "prompt_tokens": value(st.integers(0, 9)), "completion_tokens": value(st.integers(0, 9)),
        "prompt_tokens_details": value(details)})
    return st.fixed_dictionaries({}, optional={"choices": value(st.lists(choice, max_size=2)), "usage": value(usage)})


_good_chunk = _chunk_of(lambda s: s, st.integers(0, 2))
_wild_chunk = _chunk_of(lambda s: s | _json | st.just("error"), st.integers(-1, 2)).flatmap(
    lambda c: st.fixed_dictionaries({"error": _json, "object": st.sampled_from(["error", "chat.completion.chunk"])})
    .map(lambda extra: {**c, **extra}) | st.just(c))
_good = _good_chunk.map(lambda c: ["data: " + json.dumps(c)])
_harmless = st.sampled_from([["data: [DONE]"], [": OPENROUTER PROCESSING"], ["retry: 5"], ["id: 7"],
                             ["data: " + json.dumps(chunk({}, "stop"))]])
_anything = st.one_of(
    _good, _harmless, _wild_chunk.map(lambda c: ["data: " + json.dumps(c)]),
    st.sampled_from([["event: error", 'data: {"message": "x"}'], ['error: {"code": 500, "message": "x"}'],
                     [f'error: {{"message": "{KEY}"}}'], ["data: {"], ["error: "]]),
    st.lists(st.text(max_size=12), min_size=1, max_size=2),
)


def _stream(event: st.SearchStrategy) -> st.SearchStrategy:
    return st.lists(event, max_size=10).map(lambda events: [line for ev in events for line in [*ev, ""]])


@FUZZ
@given(_stream(_good | _good | _harmless) | _stream(_anything))
async def test_parser_survives_random_sse_lines(lines):
    await survives(lines)


@FUZZ
@given(st.lists(st.dictionaries(st.text(max_size=3), st.integers(-999, 999) | st.text(max_size=3), max_size=3),
                min_size=1, max_size=3), st.randoms(use_true_random=False), st.booleans())
async def test_argument_fragments_reassemble_in_any_split_and_interleaving(inputs, rnd, repeat_ids):
    pending = []
    for args in inputs:
        text = json.dumps(args)
        cuts = sorted(rnd.sample(range(1, len(text)), k=min(len(text) - 1, rnd.randint(0, 4))))
        pending.append([text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])])
    lines, started = [], set()
    while any(pending):
        i = rnd.choice([k for k, frags in enumerate(pending) if frags])
        delta: dict[str, Any] = {"index": i, "function": {"arguments": pending[i].pop(0)}}
        if i not in started or repeat_ids:  # DeepSeek-style servers repeat id and name in every chunk
            delta.update(id=f"call_{i}", type="function")
            delta["function"]["name"] = f"tool{i}"
        started.add(i)
        lines += ["data: " + json.dumps(chunk({"tool_calls": [delta]})), ""]
    lines += ["data: " + json.dumps(chunk({}, "tool_calls")), "", "data: [DONE]", ""]
    assert await parse(lines) == [ToolCallDone(f"call_{i}", f"tool{i}", args) for i, args in enumerate(inputs)] + \
        [StreamEnd("tool_use")]
