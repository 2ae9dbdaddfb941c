"""Tracing (issue 18): the span recorder, the JSONL record, the OpenTelemetry bridge, the engine's
GenAI spans and usage, and the async-generator case (an abandoned run_turn leaves nothing current)."""
from __future__ import annotations

import gc
import json
import logging
import time
from contextlib import aclosing
from pathlib import Path
from uuid import uuid4

import msgspec
import pytest
import structlog.testing
import trio

from orchestrator.core.events import CallUsage, Done, TextDeltaEvent, ToolEnd
from orchestrator.core.types import Draft, Message, TextBlock, Usage
from orchestrator.engine.partition import Partition
from orchestrator.engine.runner import Agent, run, run_turn
from orchestrator.providers.scripted import Reply, ScriptedProvider
from orchestrator.tools.base import Registry, Tool, ToolContext
from orchestrator.trace import semconv as sc
from orchestrator.trace.jsonl import JsonlSink, record
from orchestrator.trace.spans import OFF, TRACER, active, current
from tests.tracing import in_memory, jsonl_tree, tree


class EchoArgs(msgspec.Struct):
    x: int


async def _echo(args: EchoArgs, ctx: ToolContext) -> str:
    await trio.sleep(0)
    return f"echo {args.x}"


ECHO = Tool("echo", "Echo x.", EchoArgs, _echo, read_only=True)


class Harness:
    def __init__(self) -> None:
        self.partition = Partition("a")
        self.messages: list[Message] = []

    async def commit(self, draft: Draft) -> Message:
        await trio.sleep(0)
        msg = Message(id=uuid4().hex, room="r", seq=len(self.messages) + 1, ts=time.time(),
                      **msgspec.structs.asdict(draft))
        self.messages.append(msg)
        self.partition.append(msg)
        return msg

    def user(self, text: str) -> None:
        msg = Message(id=uuid4().hex, room="r", seq=len(self.messages) + 1, ts=time.time(), author="user",
                      kind="user", blocks=[TextBlock(text)], visible_to=["a"])
        self.messages.append(msg)
        self.partition.append(msg)


def agent(replies: list[Reply], tools=()) -> Agent:
    return Agent(name="a", provider=ScriptedProvider({"a": replies}), model="m1", system="You are a test agent.",
                 tools=Registry(list(tools)), workspace=Path("."))


# --- the recorder ----------------------------------------------------------------------------

def test_off_costs_one_check_and_records_nothing():
    assert not TRACER.on
    span = TRACER.start("x", attributes={"a": 1})
    assert span is OFF and not span.recording
    with active(span):
        assert current() is None
    span.event("e")
    span.end(RuntimeError("boom"))


def test_spans_nest_through_active_and_carry_the_conversation_id(tmp_path):
    sink = JsonlSink(tmp_path / "t.jsonl")
    TRACER.add(sink)
    try:
        root = TRACER.start("invoke_workflow r", attributes={sc.CONVERSATION_ID: "room1"})
        with active(root):
            child = TRACER.start("invoke_agent a")
            assert current() is root
        assert current() is None
        lone = TRACER.start("other")  # nothing current: a trace of its own
        child.event(sc.RETRY, {sc.ATTEMPT: 1})
        child.end(ValueError("bad"))
        child.end()  # a second end changes nothing
        lone.end()
        root.end()
    finally:
        TRACER.remove(sink)
        sink.close()
    assert not TRACER.on
    recs = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [r["name"] for r in recs] == ["invoke_agent a", "other", "invoke_workflow r"]
    a, other, r = recs
    assert a["parent_id"] == r["span_id"] and a["trace_id"] == r["trace_id"] and r["parent_id"] is None
    assert other["trace_id"] != r["trace_id"]
    assert a["attributes"][sc.CONVERSATION_ID] == "room1" and sc.CONVERSATION_ID not in other["attributes"]
    assert a["status"] == "error" and a["status_message"] == "bad" and a["attributes"][sc.ERROR_TYPE] == "ValueError"
    assert a["events"][0]["name"] == sc.RETRY and a["events"][0]["attributes"] == {sc.ATTEMPT: 1}
    assert len(r["trace_id"]) == 32 and len(r["span_id"]) == 16 and r["start"] <= a["start"] <= a["end"] <= r["end"]
    assert set(r) >= {"name", "trace_id", "span_id", "parent_id", "start", "end", "status", "attributes", "events"}


def test_a_cancelled_span_says_so():
    sink = _Collect()
    TRACER.add(sink)
    try:
        async def main():
            span = TRACER.start("x")
            with trio.move_on_after(0):
                try:
                    await trio.sleep(1)
                except BaseException as exc:
                    span.end(exc)
                    raise
        trio.run(main)
    finally:
        TRACER.remove(sink)
    rec = record(sink.ended[0])
    assert rec["status"] == "error" and rec["attributes"][sc.ERROR_TYPE] == "cancelled"


class _Collect:
    def __init__(self):
        self.ended = []

    def on_start(self, span):
        pass

    def on_end(self, span):
        self.ended.append(span)


# --- the engine's spans and usage --------------------------------------------------------------

async def test_engine_spans_follow_the_genai_conventions():
    h = Harness()
    h.user("hi")
    a = agent([Reply(calls=[("echo", {"x": 1}), ("echo", {"x": 2})], usage=Usage(100, 20, 60)),
               Reply(say="done")], [ECHO])
    with in_memory() as exported:
        events = []
        async with aclosing(run_turn(a, h.partition, h.commit)) as stream:
            async for ev in stream:
                events.append(ev)
        spans = exported.get_finished_spans()
    assert tree(spans) == [("invoke_agent a", [
        ("chat m1", []), ("execute_tool echo", []), ("execute_tool echo", []), ("chat m1", [])])]
    by = {s.name: s for s in spans}
    agent_span = by["invoke_agent a"]
    assert agent_span.attributes[sc.OPERATION_NAME] == "invoke_agent"
    assert agent_span.attributes[sc.AGENT_NAME] == "a" and agent_span.attributes[sc.PROVIDER_NAME] == "scripted"
    chats = [s for s in spans if s.name == "chat m1"]
    first, second = sorted(chats, key=lambda s: s.start_time)
    assert first.kind.name == "CLIENT" and first.attributes[sc.OPERATION_NAME] == "chat"
    assert (first.attributes[sc.USAGE_INPUT_TOKENS], first.attributes[sc.USAGE_OUTPUT_TOKENS],
            first.attributes[sc.USAGE_CACHE_READ_INPUT_TOKENS]) == (100, 20, 60)
    assert sc.USAGE_ESTIMATED not in first.attributes and second.attributes[sc.USAGE_ESTIMATED] is True
    assert first.attributes[sc.RESPONSE_FINISH_REASONS] == ("tool_use",)
    tools = sorted((s for s in spans if s.name == "execute_tool echo"), key=lambda s: s.start_time)
    assert {t.attributes[sc.TOOL_CALL_ID] for t in tools} == {"call_a_1_0", "call_a_1_1"}  # concurrent: any order
    assert all(sc.TOOL_CALL_ARGUMENTS not in t.attributes for t in tools)  # content is opt-in
    assert all(s.status.status_code.name == "UNSET" for s in spans)
    # usage events: the provider's counts as they came, then our estimate, marked
    usage = [e for e in events if isinstance(e, CallUsage)]
    assert [(u.input_tokens, u.output_tokens, u.cached_tokens, u.estimated) for u in usage][0] == (100, 20, 60, False)
    assert usage[1].estimated and usage[1].input_tokens > 0 and usage[1].output_tokens > 0
    done = events[-1]
    assert isinstance(done, Done) and done.input_tokens == 100 + usage[1].input_tokens
    assert all(e.seconds >= 0 for e in events if isinstance(e, ToolEnd))


async def test_content_is_recorded_only_when_asked(monkeypatch):
    monkeypatch.setenv(sc.CAPTURE_CONTENT_ENV, "true")
    h = Harness()
    h.user("hi there")
    a = agent([Reply(calls=[("echo", {"x": 7})]), Reply(say="the end")], [ECHO])
    with in_memory() as exported:
        await run(a, h.partition, h.commit)
        spans = exported.get_finished_spans()
    tool = next(s for s in spans if s.name == "execute_tool echo")
    assert tool.attributes[sc.TOOL_CALL_ARGUMENTS] == '{"x":7}' and tool.attributes[sc.TOOL_CALL_RESULT] == "echo 7"
    last = max((s for s in spans if s.name == "chat m1"), key=lambda s: s.start_time)
    assert "the end" in last.attributes[sc.OUTPUT_MESSAGES] and "hi there" in last.attributes[sc.INPUT_MESSAGES]


async def test_a_failed_call_and_its_retry():
    from orchestrator.core.retry import RetryPolicy
    h = Harness()
    h.user("hi")
    a = agent([Reply(error="overloaded", retry_after=0), Reply(say="ok")])
    a.retry = RetryPolicy(attempts=3)
    with in_memory() as exported:
        await run(a, h.partition, h.commit)
        spans = exported.get_finished_spans()
    assert tree(spans) == [("invoke_agent a", [("chat m1", []), ("chat m1", [])])]
    failed, ok = sorted((s for s in spans if s.name == "chat m1"), key=lambda s: s.start_time)
    assert failed.status.status_code.name == "ERROR" and failed.attributes[sc.ERROR_TYPE] == "overloaded"
    assert ok.status.status_code.name == "UNSET"
    top = next(s for s in spans if s.name == "invoke_agent a")
    assert [e.name for e in top.events] == [sc.RETRY] and top.events[0].attributes[sc.REASON] == "overloaded"


# --- the async-generator case -------------------------------------------------------------------

# trio warns about the abandoned generator: that is the case under test
@pytest.mark.filterwarnings("ignore:Async generator 'orchestrator.engine.runner.run_turn':ResourceWarning")
async def test_a_consumer_that_stops_early_leaves_no_span_current_and_no_detach_error(caplog):
    otel_trace = pytest.importorskip("opentelemetry.trace", reason="the `otel` extra is not installed")
    h = Harness()
    h.user("hi")
    a = agent([Reply(say="a long answer in several pieces, streamed one delta at a time")])
    caplog.set_level(logging.DEBUG)
    with in_memory() as exported:
        before = otel_trace.get_current_span()
        gen = run_turn(a, h.partition, h.commit)
        async for ev in gen:  # no aclosing on purpose: the consumer just walks away
            if isinstance(ev, TextDeltaEvent):
                break
        assert current() is None
        assert otel_trace.get_current_span() is before
        del gen
        gc.collect()
        await trio.sleep(0.01)  # trio finalizes the abandoned generator in a system task
        await trio.testing.wait_all_tasks_blocked()
        spans = exported.get_finished_spans()
    assert current() is None
    assert not [r for r in caplog.records if "detach" in r.getMessage().lower()]
    assert sorted(s.name for s in spans) == ["chat m1", "invoke_agent a"]
    assert all(s.status.status_code.name == "ERROR" and s.attributes[sc.ERROR_TYPE] == "abandoned" for s in spans)


async def test_usage_totals_and_cost(tmp_path):
    from orchestrator.providers.catalog import Catalog, Override
    from orchestrator.store.db import Store
    from orchestrator.store.usage import UsageLog, UsageRow, summary, table

    store = await Store.open(tmp_path / "u.db")
    try:
        log = UsageLog(store)
        rows = [UsageRow(room="r", ts=1.0, agent="commander", provider="openai", model="gpt-4o", kind="model",
                         input_tokens=1000, output_tokens=200, cached_tokens=400, seconds=1.5),
                UsageRow(room="r", ts=2.0, agent="commander", provider="openai", model="gpt-4o", kind="tool",
                         name="read_file", seconds=0.25),
                UsageRow(room="r", ts=3.0, agent="coder", provider="ollama", model="qwen3:8b", kind="model",
                         input_tokens=50, output_tokens=5, estimated=True, seconds=0.5),
                UsageRow(room="other", ts=3.0, agent="coder", provider="x", model="y", kind="model",
                         input_tokens=9, output_tokens=9)]
        await log.add(rows)
        catalog = Catalog({"openai/gpt-4o": Override(output_price=12.0)})
        report = await log.report(["r"], catalog.price)
    finally:
        await store.close()
    cmd, coder = report.lines
    assert (cmd.agent, cmd.calls, cmd.input_tokens, cmd.output_tokens, cmd.cached_tokens) == (
        "commander", 1, 1000, 200, 400)
    assert (cmd.model_seconds, cmd.tool_calls, cmd.tool_seconds, cmd.estimated_calls) == (1.5, 1, 0.25, 0)
    assert cmd.cost == pytest.approx((600 * 2.5 + 400 * 1.25 + 200 * 12.0) / 1e6)
    assert coder.estimated_calls == 1 and coder.cost == 0.0
    assert report.total.calls == 2 and report.total.input_tokens == 1050
    assert report.total.cost == pytest.approx(cmd.cost)
    text = table(report)
    assert "~50" in text and "estimates" in text and "0.0044" in text
    assert summary(report).startswith("usage: 2 model calls, ~1,050 in / ~205 out (400 cached, 38%)")


# --- where spans go: a session with --trace and OTLP -------------------------------------------

def otlp_tree(spans) -> list[tuple]:
    return tree(spans, ids=lambda s: (s.span_id.hex(), s.parent_span_id.hex() or None), name=lambda s: s.name,
                start=lambda s: s.start_time_unix_nano)


async def test_a_session_writes_jsonl_and_sends_the_same_tree_over_otlp(tmp_path, monkeypatch):
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the `otel` extra is not installed")
    from orchestrator.trace.session import tracing
    from tests.otlp_receiver import Receiver

    receiver = Receiver()
    async with trio.open_nursery() as nursery:
        await nursery.start(receiver.serve)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "orchestrator-test")
        h = Harness()
        h.user("hi")
        a = agent([Reply(calls=[("echo", {"x": 1})]), Reply(say="done")], [ECHO])
        async with tracing(tmp_path / "t.jsonl") as on:
            assert on == [str(tmp_path / "t.jsonl"), "otlp"]
            await run(a, h.partition, h.commit)
        assert not TRACER.on
        nursery.cancel_scope.cancel()
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    expected = [("invoke_agent a", [("chat m1", []), ("execute_tool echo", []), ("chat m1", [])])]
    assert jsonl_tree(records) == expected
    assert otlp_tree(receiver.spans()) == expected
    assert receiver.paths == ["/v1/traces"] and receiver.resources()[0]["service.name"] == "orchestrator-test"
    # the same ids on both sides
    assert {r["span_id"] for r in records} == {s.span_id.hex() for s in receiver.spans()}


async def test_an_endpoint_without_the_extra_is_one_warning(tmp_path, monkeypatch, capsys):
    import builtins

    from orchestrator.trace import session
    real_import = builtins.__import__

    def no_otel(name, *args, **kwargs):
        if name.startswith("orchestrator.trace.otel") or name.startswith("opentelemetry"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_otel)
    with structlog.testing.capture_logs() as logs:
        async with session.tracing(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}) as on:
            assert on == [] and not TRACER.on
    assert [e["event"] for e in logs] == [session.MISSING_EXTRA]



async def test_an_unwritable_trace_file_is_bad_input(tmp_path):
    from orchestrator.core.errors import InputError
    from orchestrator.trace.session import tracing

    with pytest.raises(InputError, match="cannot write the trace file .*: No such file or directory"):
        async with tracing(tmp_path / "missing" / "t.jsonl", {}):
            pass
    assert not TRACER.on
