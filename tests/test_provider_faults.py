"""Vendor replies that once went wrong, for both wire formats, through the engine and a loopback server:
a tool call cut off by the output limit (replayed on every request), and a complete JSON message sent
where a stream was asked for (what LiteLLM's Anthropic route does).
"""
from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from orchestrator.core import errors as E
from orchestrator.core.events import Retry, TextDeltaEvent
from orchestrator.core.types import ModelMessage, Request, StreamEnd, TextBlock, TextDelta, ToolCallDone, Usage
from orchestrator.core.retry import RetryPolicy
from orchestrator.engine.runner import Agent
from orchestrator.providers.anthropic import Anthropic
from orchestrator.providers.base import complete
from orchestrator.providers.openai import OpenAICompatible
from orchestrator.tools.base import Registry
from orchestrator.tools.builtin import BUILTIN
from tests.fakeserver import FakeServer, Reply, json_body, sse
from tests.test_engine import Harness, done_of, drive

PARTIAL = '{"path": "notes.md", "content": "# Plan\\n\\nStep one: write the parser. Step two: wri'


# --- the two vendors' replies ------------------------------------------------------------------

def anthropic_cut() -> Reply:
    events = [
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [],
                                              "model": "claude-x", "usage": {"input_tokens": 20, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Writing the plan."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}},
        *({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": part}}
          for part in (PARTIAL[:30], PARTIAL[30:])),
        # The server closes the cut block before it says why: the stop reason comes after.
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 64}},
        {"type": "message_stop"},
    ]
    return Reply(chunks=sse(*events, event_names=True))


def openai_cut() -> Reply:
    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {"id": "c", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": delta, "finish_reason": finish}]}

    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "write_file", "arguments": ""}}
    return Reply(chunks=sse(chunk({"role": "assistant", "content": "Writing the plan."}),
                            chunk({"tool_calls": [call]}),
                            chunk({"tool_calls": [{"index": 0, "function": {"arguments": PARTIAL[:30]}}]}),
                            chunk({"tool_calls": [{"index": 0, "function": {"arguments": PARTIAL[30:]}}]}),
                            chunk({}, "length"),
                            {"id": "c", "choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 64}},
                            done=True))


def anthropic_whole() -> Reply:
    return json_body(200, {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "thinking", "thinking": "They want a file.", "signature": "sig"},
                    {"type": "text", "text": "Here it is."},
                    {"type": "tool_use", "id": "toolu_9", "name": "write_file",
                     "input": {"path": "a.txt", "content": "hello"}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 30, "output_tokens": 12, "cache_read_input_tokens": 5}})


def openai_whole() -> Reply:
    return json_body(200, {
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Here it is.",
            "tool_calls": [{"id": "call_9", "type": "function",
                            "function": {"name": "write_file", "arguments": '{"path": "a.txt", "content": "hello"}'}}]}}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}})


def anthropic_text(text: str) -> Reply:
    return json_body(200, {"type": "message", "role": "assistant", "content": [{"type": "text", "text": text}],
                           "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}})


def openai_text(text: str) -> Reply:
    return json_body(200, {"object": "chat.completion", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]})


VENDORS: dict[str, tuple[Callable[[str], object], Callable[[], Reply], Callable[[], Reply], Callable[[str], Reply]]] = {
    "anthropic": (lambda url: Anthropic(base_url=url, api_key="k"), anthropic_cut, anthropic_whole, anthropic_text),
    "openai": (lambda url: OpenAICompatible(base_url=url + "/v1", api_key="k"), openai_cut, openai_whole, openai_text),
}


@pytest.fixture(scope="module")
def shared_server():
    with FakeServer() as srv:
        yield srv


@pytest.fixture
def server(shared_server):
    shared_server.replies.clear()
    shared_server.requests.clear()
    return shared_server


def agent_on(provider, tmp_path) -> Agent:
    return Agent(name="a", provider=provider, model="m", system="You write files.",
                 tools=Registry([BUILTIN["write_file"], BUILTIN["read_file"]]), workspace=tmp_path,
                 retry=RetryPolicy(attempts=6, base=0.01, cap=0.05))


def request_text(body: dict) -> str:
    return json.dumps(body["messages"])


# --- a call cut off by the output limit ---------------------------------------------------------

@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_cut_off_call_is_answered_with_an_error_and_never_retried_or_run(server, tmp_path, vendor):
    make, cut, _, text = VENDORS[vendor]
    server.replies.extend(cut() for _ in range(6))  # a server that cuts off every time
    provider = make(server.url)
    try:
        h = Harness()
        h.user("write the plan to notes.md")
        events = await drive(agent_on(provider, tmp_path), h)
        assert len(server.requests) == 1
        assert not [e for e in events if isinstance(e, Retry)]
        assert done_of(events).stop_reason == "max_tokens"
        assert not (tmp_path / "notes.md").exists()
        h.check_pairing()
        reply, result = h.messages[1], h.messages[2]
        assert reply.kind == "tool_call" and reply.text == "Writing the plan."
        assert [(c.name, c.input) for c in reply.calls] == [("write_file", {})]
        assert result.kind == "tool_result" and result.result.is_error
        assert result.result.call_id == reply.calls[0].id
        assert f"{len(PARTIAL)} characters" in result.result.content
        assert "# Plan" in result.result.content and "max_tokens" in result.result.content

        # The next turn shows the model its cut call and the error that answers it.
        server.replies.clear()
        server.replies.append(text("I will write it in parts."))
        h.user("go on")
        await drive(agent_on(provider, tmp_path), h)
        sent = request_text(server.requests[1]["json"])
        assert "write_file" in sent and "Not run" in sent and "# Plan" in sent
    finally:
        await provider.aclose()


async def test_invalid_arguments_without_the_limit_are_still_a_protocol_error(server):
    broken = anthropic_cut().chunks
    broken = [c.replace(b'"stop_reason": "max_tokens"', b'"stop_reason": "tool_use"') for c in broken]
    server.replies.append(Reply(chunks=broken))
    provider = Anthropic(base_url=server.url, api_key="k")
    try:
        with pytest.raises(E.ProtocolError, match="invalid JSON arguments"):
            await complete(provider, Request(agent="a", model="m", system="",
                                             messages=[ModelMessage("user", [TextBlock("hi")])]))
    finally:
        await provider.aclose()


# --- a complete JSON message where a stream was asked for ----------------------------------------

@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_complete_json_reply_is_taken_as_the_whole_answer(server, tmp_path, vendor):
    make, _, whole, text = VENDORS[vendor]
    server.replies.extend([whole(), text("Done: a.txt holds hello.")])
    provider = make(server.url)
    try:
        h = Harness()
        h.user("write hello to a.txt")
        events = await drive(agent_on(provider, tmp_path), h)
        assert server.requests[0]["json"]["stream"] is True
        assert len(server.requests) == 2  # the answer, then the turn after the tool ran: no retry
        assert not [e for e in events if isinstance(e, Retry)]
        assert (tmp_path / "a.txt").read_text() == "hello"
        assert [m.kind for m in h.messages] == ["user", "tool_call", "tool_result", "text"]
        assert h.messages[1].text == "Here it is."
        assert h.messages[-1].text == "Done: a.txt holds hello."
        assert "".join(e.text for e in events if isinstance(e, TextDeltaEvent)) == "Here it is.Done: a.txt holds hello."
        h.check_pairing()
    finally:
        await provider.aclose()


async def test_the_whole_anthropic_message_keeps_thinking_and_usage(server):
    server.replies.append(anthropic_whole())
    provider = Anthropic(base_url=server.url, api_key="k")
    try:
        events = [ev async for ev in provider.stream(
            Request(agent="a", model="m", system="", messages=[ModelMessage("user", [TextBlock("hi")])]))]
    finally:
        await provider.aclose()
    assert [type(e).__name__ for e in events] == ["ThinkingDelta", "ThinkingDelta", "TextDelta", "ToolCallDone",
                                                 "StreamEnd"]
    assert events[1].signature == "sig" and events[2] == TextDelta("Here it is.")
    assert events[3] == ToolCallDone("toolu_9", "write_file", {"path": "a.txt", "content": "hello"})
    assert events[4] == StreamEnd("tool_use", Usage(input=35, output=12, cached=5))


@pytest.mark.parametrize("vendor, body, kind", [
    ("anthropic", {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}, "overloaded"),
    ("anthropic", {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: "
                                                                                          "9 tokens > 5 maximum"}},
     "context_overflow"),
    ("openai", {"error": {"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}}, "quota"),
    ("openai", {"error": {"message": "This model's maximum context length is 5 tokens", "code":
                          "context_length_exceeded"}}, "context_overflow"),
    ("anthropic", {"id": "x", "object": "something else"}, "protocol"),
    ("openai", {"id": "x", "object": "something else"}, "protocol"),
    ("openai", ["not", "an", "object"], "protocol"),
])
async def test_an_error_in_a_complete_json_reply_is_classified_as_in_a_stream(server, vendor, body, kind):
    server.replies.append(json_body(200, body))
    provider = VENDORS[vendor][0](server.url)
    try:
        with pytest.raises(E.ProviderError) as caught:
            await complete(provider, Request(agent="a", model="m", system="",
                                             messages=[ModelMessage("user", [TextBlock("hi")])]))
    finally:
        await provider.aclose()
    assert caught.value.kind == kind
    assert len(server.requests) == 1


async def test_a_json_content_type_that_is_not_json_is_a_protocol_error(server):
    server.replies.append(Reply(chunks=[b"{not json"], content_type="application/json; charset=utf-8"))
    provider = OpenAICompatible(base_url=server.url + "/v1", api_key="k")
    try:
        with pytest.raises(E.ProtocolError, match="says it is JSON"):
            await complete(provider, Request(agent="a", model="m", system="",
                                             messages=[ModelMessage("user", [TextBlock("hi")])]))
    finally:
        await provider.aclose()


# --- Ollama's silent truncation -------------------------------------------------------------------

def ollama_reply(prompt_tokens: int) -> Reply:
    return Reply(chunks=sse({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"content": "Sure."},
                                                              "finish_reason": "stop"}]},
                            {"id": "chatcmpl-1", "choices": [],
                             "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 2}}, done=True))


def long_request(words: int) -> Request:
    text = " ".join(f"word{i % 97} means something" for i in range(words))
    return Request(agent="a", model="qwen3", system="You help.", messages=[ModelMessage("user", [TextBlock(text)])])


@pytest.mark.parametrize("ps, window", [
    ({"models": [{"name": "qwen3:latest", "model": "qwen3:latest", "context_length": 4096}]}, "num_ctx 4,096"),
    ({"models": []}, ""),
])
async def test_ollama_cutting_the_prompt_silently_is_reported(server, ps, window):
    request = long_request(3000)
    server.replies.extend([ollama_reply(4096), json_body(200, ps)])
    provider = OpenAICompatible(id="ollama", base_url=server.url + "/v1", ollama=True)
    try:
        with pytest.raises(E.ContextOverflowError) as caught:
            await complete(provider, request)
    finally:
        await provider.aclose()
    message = str(caught.value)
    assert "read only 4,096 of about" in message and 'models."ollama/qwen3"' in message
    assert window in message if window else "num_ctx" not in message
    assert [r["path"] for r in server.requests] == ["/v1/chat/completions", "/api/ps"]


@pytest.mark.parametrize("words, read, ollama", [
    (3000, 12_000, True),  # about what was sent: nothing dropped
    (3000, 9_000, True),  # a tokenizer that counts fewer tokens than our estimate
    (100, 30, True),  # a short prompt: too coarse to judge
    (3000, 4096, False),  # not Ollama: its counts are not checked
])
async def test_counts_that_do_not_prove_truncation_pass(server, words, read, ollama):
    server.replies.append(ollama_reply(read))
    provider = OpenAICompatible(id="ollama", base_url=server.url + "/v1", ollama=ollama)
    try:
        response = await complete(provider, long_request(words))
    finally:
        await provider.aclose()
    assert response.blocks == [TextBlock("Sure.")] and response.usage.input == read


# --- in a room: the user is told ------------------------------------------------------------------

@pytest.mark.parametrize("vendor", VENDORS)
async def test_in_a_room_the_user_gets_a_notice_and_the_history_survives(server, tmp_path, vendor):
    from orchestrator.room.room import Room
    from orchestrator.store.db import Store
    from orchestrator.store.heal import pairing_problems
    from orchestrator.team.schema import AgentDef, Team

    make, cut, _, _ = VENDORS[vendor]
    server.replies.extend(cut() for _ in range(6))
    provider = make(server.url)
    store = await Store.open(tmp_path / "room.db")
    try:
        team = Team(commander=AgentDef(name="commander", model="x", tools=["write_file"]))
        async with Room.create(store, team, lambda model: (provider, "m"), workspace=tmp_path) as room:
            await room.post("write the plan to notes.md")
            await room.idle()
            room_id = room.id
        messages = await store.load(room_id)
    finally:
        await store.close()
        await provider.aclose()
    assert len(server.requests) == 1
    assert pairing_problems(messages) == []
    notice = [m for m in messages if m.kind == "notice"]
    assert len(notice) == 1 and "user" in notice[0].visible_to
    assert "cut off by the model's output limit" in notice[0].text and "write_file" in notice[0].text
    assert [m.kind for m in messages] == ["user", "tool_call", "tool_result", "notice"]
