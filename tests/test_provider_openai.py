"""The OpenAI-compatible provider against a loopback server: streams of each server family, faults, the body.

Every stream test runs the real provider over real sockets (tests/fakeserver.py); the parser is also
fuzzed alone (iter_sse + ChunkParser, no server): arbitrary input yields events or a ProviderError.
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from contextlib import aclosing, asynccontextmanager
from typing import Any, AsyncIterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.core import errors as E
from orchestrator.core.types import (
    ImageBlock, ModelMessage, Request, StreamEnd, TextBlock, TextDelta, ThinkingBlock, ThinkingDelta,
    ToolCallBlock, ToolCallDone, ToolResultBlock, ToolSpec, Usage,
)
from orchestrator.providers.base import complete
from orchestrator.providers.openai import ChunkParser, OpenAICompatible, build_body
from orchestrator.providers.sse import iter_sse
from tests.fakeserver import FakeServer, Reply, json_body, sse

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


@asynccontextmanager
async def provider(*replies: Reply, client: httpx.AsyncClient | None = None,
                   **kw: Any) -> AsyncIterator[tuple[OpenAICompatible, FakeServer]]:
    with FakeServer() as srv:
        # FakeServer only answers POST; validate_auth needs GET, which it serves the same way.
        handler = srv._httpd.RequestHandlerClass
        handler.do_GET = handler.do_POST  # type: ignore[attr-defined]
        srv.replies.extend(replies)
        p = OpenAICompatible(base_url=srv.url + "/v1", api_key=KEY, client=client, **kw)
        try:
            yield p, srv
        finally:
            await p.aclose()


async def events_of(*replies: Reply, request: Request = REQ, **kw: Any) -> list:
    async with provider(*replies, **kw) as (p, _):
        async with aclosing(p.stream(request)) as s:
            return [ev async for ev in s]


async def failure(*replies: Reply, **kw: Any) -> E.ProviderError:
    with pytest.raises(E.ProviderError) as info:
        await events_of(*replies, **kw)
    assert KEY not in str(info.value)
    return info.value


def header(req: dict, name: str) -> str | None:
    return next((v for k, v in req["headers"].items() if k.lower() == name), None)


# --- streams ---------------------------------------------------------------------------------

async def test_text_stream_in_deltas_with_usage_and_the_request_sent():
    chunks = sse(chunk({"role": "assistant", "content": "", "refusal": None}), chunk({"content": "Hel"}),
                 chunk({"content": "lo, "}), chunk({"content": "world"}), chunk({}, "stop"),
                 usage(120, 3, cached=64), done=True)
    async with provider(Reply(chunks=chunks)) as (p, srv):
        async with aclosing(p.stream(REQ)) as s:
            events = [ev async for ev in s]
    assert events == [TextDelta("Hel"), TextDelta("lo, "), TextDelta("world"),
                      StreamEnd("end_turn", Usage(input=120, output=3, cached=64))]
    req = srv.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert header(req, "authorization") == f"Bearer {KEY}"
    assert req["json"] == build_body(REQ, "openai", official=False)
    assert req["json"]["stream"] is True and req["json"]["stream_options"] == {"include_usage": True}
    assert req["json"]["messages"][0] == {"role": "system", "content": "You are terse."}


async def test_two_tool_calls_from_argument_fragments_in_index_order():
    chunks = sse(chunk({"role": "assistant", "content": None}),
                 chunk(call(0, "call_w", "get_weather", "")), chunk(call(0, args='{"ci')),
                 chunk(call(1, "call_t", "get_time", "")),  # interleaved: keyed by index, not by arrival
                 chunk(call(0, args='ty": "Paris"}')), chunk(call(1, args='{"tz": "CET"}')),
                 chunk({}, "tool_calls"), usage(50, 20), done=True)
    events = await events_of(Reply(chunks=chunks))
    assert events == [ToolCallDone("call_w", "get_weather", {"city": "Paris"}),
                      ToolCallDone("call_t", "get_time", {"tz": "CET"}),
                      StreamEnd("tool_use", Usage(50, 20, 0))]


async def test_ollama_whole_calls_content_empty_finish_stop_and_no_done():
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
    events = await events_of(Reply(chunks=chunks))
    assert events == [ThinkingDelta("The user wants a file."),
                      ToolCallDone("call_ab12cd34", "read_file", {"path": "a.txt"}),
                      ToolCallDone("call_ef56gh78", "read_file", {"path": "b.txt"}),
                      StreamEnd("tool_use", Usage(30, 9, 0))]


async def test_vllm_no_arguments_key_reasoning_in_both_fields_and_a_call_without_arguments():
    chunks = sse(chunk({"role": "assistant", "reasoning": "Think.", "reasoning_content": "Think."}),
                 chunk({"tool_calls": [{"index": 0, "id": "chatcmpl-tool-1", "type": "function",
                                        "function": {"name": "search"}}]}),
                 chunk(call(0, args='{"q": '), finish=None), chunk(call(0, args='"x"}')),
                 chunk({"tool_calls": [{"index": 1, "id": "chatcmpl-tool-2", "function": {"name": "now"}}]}),
                 {**chunk({}, "tool_calls"), "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls",
                                                          "stop_reason": None}]},
                 done=True)
    events = await events_of(Reply(chunks=chunks))
    assert events == [ThinkingDelta("Think."), ToolCallDone("chatcmpl-tool-1", "search", {"q": "x"}),
                      ToolCallDone("chatcmpl-tool-2", "now", {}), StreamEnd("tool_use", Usage())]


async def test_repeated_and_changing_ids_are_never_concatenated():
    chunks = sse(chunk(call(0, "call_dup", "write", '{"a"')), chunk(call(0, "call_dup", "write", ': 1')),
                 chunk(call(0, "call_other", None, "}")),  # Poolside: a different id after the first chunk
                 chunk({}, "tool_calls"), done=True)
    assert await events_of(Reply(chunks=chunks)) == [ToolCallDone("call_dup", "write", {"a": 1}),
                                                     StreamEnd("tool_use", Usage())]


async def test_missing_ids_are_generated_and_unique():
    chunks = sse(chunk(call(0, name="f", args="{}")), chunk(call(1, name="g", args="{}")), chunk({}, "tool_calls"),
                 done=True)
    events = await events_of(Reply(chunks=chunks))
    ids = [e.id for e in events if isinstance(e, ToolCallDone)]
    assert len(ids) == 2 and len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)


async def test_calls_without_index_are_told_apart_by_id():
    no_index = [{"id": f"call_{n}", "type": "function", "function": {"name": n, "arguments": "{}"}} for n in "ab"]
    chunks = sse(chunk({"tool_calls": [no_index[0]]}), chunk({"tool_calls": [no_index[1]]}),
                 chunk({}, "tool_calls"), done=True)
    events = await events_of(Reply(chunks=chunks))
    assert [(e.id, e.name) for e in events if isinstance(e, ToolCallDone)] == [("call_a", "a"), ("call_b", "b")]


async def test_finish_reason_on_the_last_content_chunk_and_role_in_every_delta():
    chunks = sse(chunk({"role": "assistant", "content": "Hi"}), chunk({"role": "assistant", "content": "!"}, "stop"),
                 done=True)
    events = await events_of(Reply(chunks=chunks))
    assert events == [TextDelta("Hi"), TextDelta("!"), StreamEnd("end_turn", Usage())]


async def test_length_and_content_filter_stop_reasons_and_a_call_cut_by_the_limit():
    cut = sse(chunk({"content": "Writing"}), chunk(call(0, "call_1", "write_file", '{"path": "a", "text": "lo')),
              chunk({}, "length"), done=True)
    assert await events_of(Reply(chunks=cut)) == [TextDelta("Writing"), StreamEnd("max_tokens", Usage())]
    filtered = sse(chunk({"content": "I"}), chunk({}, "content_filter"), done=True)
    assert await events_of(Reply(chunks=filtered)) == [TextDelta("I"), StreamEnd("refusal", Usage())]


async def test_done_ends_reading_even_if_the_server_keeps_the_connection_open():
    chunks = sse(chunk({"content": "ok"}, "stop"), done=True) + [b": still here\n\n"]
    start = time.monotonic()
    events = await events_of(Reply(chunks=chunks, stall=1.0, stall_at=2))
    assert events == [TextDelta("ok"), StreamEnd("end_turn", Usage())]
    assert time.monotonic() - start < 0.8


async def test_openrouter_comments_then_text():
    chunks = [b": OPENROUTER PROCESSING\n\n", b": OPENROUTER PROCESSING\n\n",
              *sse(chunk({"content": "yes"}, "stop", provider="OpenAI", native_finish_reason="stop"), done=True)]
    assert await events_of(Reply(chunks=chunks)) == [TextDelta("yes"), StreamEnd("end_turn", Usage())]


async def test_complete_folds_the_stream():
    chunks = sse(chunk({"reasoning_content": "hmm"}), chunk({"content": "A"}), chunk(call(0, "c1", "f", '{"x": 1}')),
                 chunk({}, "tool_calls"), done=True)
    async with provider(Reply(chunks=chunks)) as (p, _):
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
                  *sse(chunk({"content": "so"}), {**chunk({"content": ""}, "error"),
                                                  "error": {"code": "server_error", "message": "Provider disconnected"}})],
                 E.ServerError, id="openrouter-error-chunk"),
    pytest.param(sse(chunk({"content": "so"}), chunk({}, "error"), done=True), E.ServerError,
                 id="finish-reason-error-alone"),
    pytest.param(sse({"error": {"message": "Rate limit reached. Please try again in 1.5s.",
                                "code": "rate_limit_exceeded"}}), E.RateLimitError, id="in-stream-rate-limit"),
    pytest.param(sse(chunk({"content": "ok"}), chunk({})), E.ConnectionError, id="ollama-silent-failure"),
    pytest.param([b"data: {\"choices\": [\n\n"], E.ProtocolError, id="malformed-json"),
    pytest.param(sse({"choices": "nope"}), E.ProtocolError, id="wrong-shape"),
    pytest.param(sse(chunk(call(0, "c1", "edit", "{not json")), chunk({}, "tool_calls"), done=True),
                 E.ProtocolError, id="bad-arguments"),
])
async def test_errors_inside_the_stream(chunks, cls):
    err = await failure(Reply(chunks=chunks))
    assert type(err) is cls
    assert err.provider == "openai"


async def test_in_stream_rate_limit_takes_the_delay_from_the_message_and_bad_arguments_name_the_tool():
    err = await failure(Reply(chunks=sse({"error": {"message": "Please try again in 1.5s.", "code": "rate_limit_exceeded"}})))
    assert err.retry_after == 1.5
    err = await failure(Reply(chunks=sse(chunk(call(0, "c1", "edit", "{not json")), chunk({}, "tool_calls"), done=True)))
    assert "'edit'" in str(err)


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
    pytest.param(json_body(404, {"error": "model 'llama9' not found"}), E.InvalidRequestError, None,
                 id="404-ollama-string-error"),
])
async def test_http_errors_are_classified(reply, cls, wait):
    err = await failure(reply)
    assert type(err) is cls
    assert err.retry_after == pytest.approx(wait) if wait is not None else err.retry_after is None
    assert err.provider == "openai"


async def test_quota_is_an_account_error_and_never_retried():
    err = await failure(_err(429, "You exceeded your current quota", "insufficient_quota", "insufficient_quota"))
    assert isinstance(err, E.QuotaError) and not err.retryable and err.account
    assert "insufficient_quota" in str(err)


async def test_reset_before_the_first_byte_is_a_connection_error():
    err = await failure(Reply(reset=True))
    assert type(err) is E.ConnectionError and err.retryable


async def test_disconnect_mid_stream_is_an_interrupted_transfer():
    chunks = sse(chunk({"content": "par"}), chunk({"content": "tial"}), chunk({}, "stop"), done=True)
    err = await failure(Reply(chunks=chunks, drop_after=2))
    assert type(err) is E.ConnectionError and err.retryable


async def test_disconnect_after_finish_reason_keeps_the_whole_answer():
    chunks = sse(chunk({"content": "whole"}, "stop"), usage(5, 1), done=True)
    assert await events_of(Reply(chunks=chunks, drop_after=1)) == [TextDelta("whole"), StreamEnd("end_turn", Usage())]


async def test_a_stalled_stream_times_out():
    chunks = sse(chunk({"content": "a"}), chunk({"content": "b"}, "stop"), done=True)
    async with httpx.AsyncClient(timeout=httpx.Timeout(5, read=0.3)) as client:
        err = await failure(Reply(chunks=chunks, stall=1.0, stall_at=1), client=client)
    assert type(err) is E.TimeoutError and err.retryable


async def test_unreachable_server_is_a_connection_error():
    with FakeServer() as srv:
        url = srv.url
    p = OpenAICompatible(base_url=url + "/v1", api_key=KEY)
    try:
        with pytest.raises(E.ConnectionError):
            async with aclosing(p.stream(REQ)) as s:
                [ev async for ev in s]
        with pytest.raises(E.ConnectionError):
            await p.validate_auth()
    finally:
        await p.aclose()


# --- validate_auth, construction -------------------------------------------------------------

async def test_validate_auth():
    ok = json_body(200, {"object": "list", "data": [{"id": "gpt-x", "object": "model"}]})
    denied = _err(401, f"Incorrect API key provided: {KEY}", "invalid_api_key", "invalid_request_error")
    async with provider(ok, denied) as (p, srv):
        await p.validate_auth()
        with pytest.raises(E.AuthError) as info:
            await p.validate_auth()
    assert KEY not in str(info.value)
    assert [r["path"] for r in srv.requests] == ["/v1/models", "/v1/models"]
    assert header(srv.requests[0], "authorization") == f"Bearer {KEY}"


async def test_official_is_derived_from_the_url_and_extra_headers_are_sent():
    assert OpenAICompatible(api_key=KEY).official
    local = OpenAICompatible(base_url="http://localhost:11434/v1/")
    assert not local.official and local.base_url == "http://localhost:11434/v1"
    for p in (OpenAICompatible(api_key=KEY), local):
        await p.aclose()
    chunks = sse(chunk({"content": "x"}, "stop"), done=True)
    async with provider(Reply(chunks=chunks), headers={"OpenAI-Project": "proj_1"}, official=True) as (p, srv):
        async with aclosing(p.stream(REQ)) as s:
            [ev async for ev in s]
    assert header(srv.requests[0], "openai-project") == "proj_1"


async def test_no_key_sends_no_authorization_and_a_given_client_is_left_open():
    chunks = sse(chunk({"content": "x"}, "stop"), done=True)
    async with httpx.AsyncClient() as client:
        with FakeServer() as srv:
            srv.replies.append(Reply(chunks=chunks))
            p = OpenAICompatible(base_url=srv.url + "/v1", client=client)
            async with aclosing(p.stream(REQ)) as s:
                [ev async for ev in s]
            await p.aclose()
        assert not client.is_closed
    assert header(srv.requests[0], "authorization") is None


# --- the request body (pure) -----------------------------------------------------------------

def test_body_history_tool_rounds_images_errors_and_thinking():
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
    body = build_body(req, "openai", official=False)
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
    async with aclosing(iter_sse(feed())) as stream:
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
    assert all(isinstance(e, (TextDelta, ThinkingDelta, ToolCallDone)) for e in events[:-1])
    assert all(isinstance(e.input, dict) for e in events if isinstance(e, ToolCallDone))


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=400))
async def test_parser_survives_arbitrary_bytes(data):
    await survives(re.split(r"\r\n|\r|\n", data.decode("utf-8", "replace")))


_json = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, allow_infinity=False)
                     | st.text(max_size=6),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                     max_leaves=6)
_fn = st.fixed_dictionaries({}, optional={"name": st.sampled_from(["f", "g", ""]) | _json,
                                          "arguments": st.sampled_from(['{"a"', ": 1}", "{}", "", "[1]", "}"]) | _json})
_tool_call = st.fixed_dictionaries({}, optional={"index": st.integers(0, 2) | _json,
                                                 "id": st.sampled_from(["call_a", "call_b", "", None]) | _json,
                                                 "function": _fn | _json})
_delta = st.fixed_dictionaries({}, optional={"content": st.text(max_size=5) | _json,
                                             "reasoning": st.text(max_size=5) | _json,
                                             "reasoning_content": st.text(max_size=5) | _json,
                                             "tool_calls": st.lists(_tool_call, max_size=2) | _json})
_choice = st.fixed_dictionaries({}, optional={
    "index": st.sampled_from([0, 1]) | _json, "delta": _delta | _json,
    "finish_reason": st.sampled_from(["stop", "length", "tool_calls", "content_filter", "error", None]) | _json})
_usage = st.fixed_dictionaries({}, optional={"prompt_tokens": st.integers(0, 9) | _json,
                                             "completion_tokens": st.integers(0, 9) | _json,
                                             "prompt_tokens_details": st.fixed_dictionaries(
                                                 {}, optional={"cached_tokens": st.integers(0, 9) | _json}) | _json})
_chunk = st.fixed_dictionaries({}, optional={"choices": st.lists(_choice, max_size=2) | _json, "usage": _usage | _json,
                                             "error": _json, "object": st.sampled_from(["error", "chat.completion.chunk"])})
_line = st.one_of(
    _chunk.map(lambda c: "data: " + json.dumps(c)),
    st.sampled_from(["", "", "data: [DONE]", ": OPENROUTER PROCESSING", "event: error", "data: {",
                     'error: {"code": 500, "message": "x"}', f'error: {{"message": "{KEY}"}}', "retry: 5", "error: "]),
    st.text(max_size=12),
)


@FUZZ
@given(st.lists(st.lists(_line, min_size=1, max_size=3).map(lambda ls: ls + [""]), max_size=8).map(
    lambda events: [line for ev in events for line in ev]))
async def test_parser_survives_random_sse_lines(lines):
    await survives(lines)
