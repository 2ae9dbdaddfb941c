"""The engine alone (E1-E3, E10-E15, G10): run_turn driven over a Partition with an in-memory commit.

No room and no store: `Harness.commit` gives each Draft an id, a seq and a timestamp, keeps it, and
appends it to the agent's partition, which is what a room does. Pairing is checked with
store.heal.pairing_problems over everything committed.
"""
from __future__ import annotations

import contextlib
import random
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any
from uuid import uuid4

import msgspec
import pytest
import trio

from orchestrator.core.errors import (
    AuthError, ContentPolicyError, InvalidRequestError, ProviderError, QuotaError, RateLimitError,
)
from orchestrator.core.events import Done, Event, Retry, TextDeltaEvent, ToolEnd, ToolStart
from orchestrator.core.prompts import render
from orchestrator.core.types import (
    Draft, Message, TextBlock, ToolCallBlock, ToolResultBlock,
)
from orchestrator.engine import runner
from orchestrator.engine.partition import Partition
from orchestrator.core.retry import RetryPolicy
from orchestrator.engine.runner import CANCELLED, Agent, run, run_turn
from orchestrator.engine.toolcalls import groups
from orchestrator.providers.scripted import Reply, ScriptedProvider, request_text
from orchestrator.store.heal import pairing_problems
from orchestrator.tools.base import Registry, Tool, ToolContext, ToolError, ToolOutput

AGENT = "a"
LOOP_STOP = render("loop_stop.md.j2")


# --- harness -------------------------------------------------------------------------------

class Harness:
    """An in-memory room for one agent: commit assigns id/seq/ts and feeds the partition."""

    def __init__(self, viewer: str = AGENT):
        self.partition = Partition(viewer)
        self.messages: list[Message] = []

    def _store(self, draft: Draft) -> Message:
        msg = Message(id=uuid4().hex, room="r", seq=len(self.messages) + 1, ts=time.time(),
                      **msgspec.structs.asdict(draft))
        self.messages.append(msg)
        if self.partition.viewer in msg.visible_to:
            self.partition.append(msg)
        return msg

    async def commit(self, draft: Draft) -> Message:
        await trio.sleep(0)  # a checkpoint, as a real store write is
        return self._store(draft)

    def user(self, text: str) -> Message:
        """A user line, committed synchronously (before the turn, or as an interjection)."""
        return self._store(Draft(author="user", kind="user", blocks=[TextBlock(text)],
                                 visible_to=["user", self.partition.viewer]))

    # views over what was committed
    def kinds(self) -> list[str]:
        return [m.kind for m in self.messages]

    def results(self) -> list[ToolResultBlock]:
        return [m.result for m in self.messages if m.kind == "tool_result"]

    def calls(self) -> list[ToolCallBlock]:
        return [c for m in self.messages if m.kind == "tool_call" for c in m.calls]

    def check_pairing(self) -> None:
        assert pairing_problems(self.messages) == []
        # and literally: each call has exactly one result, results in declared order, after the call
        for i, m in enumerate(self.messages):
            if m.kind != "tool_call":
                continue
            ids = [c.id for c in m.calls]
            later = [r.result.call_id for r in self.messages[i + 1:]
                     if r.kind == "tool_result" and r.author == m.author and r.result.call_id in ids]
            assert later == ids, f"results {later} for calls {ids}"


def make_agent(replies: list[Reply], tools: list[Tool] = (), *, retry: RetryPolicy = RetryPolicy(),
               provider: ScriptedProvider | None = None, workspace: Path | None = None) -> Agent:
    return Agent(name=AGENT, provider=provider or ScriptedProvider({AGENT: list(replies)}), model="scripted",
                 system="You are a test agent.", tools=Registry(list(tools)),
                 workspace=workspace or Path.cwd(), retry=retry)


async def drive(agent: Agent, h: Harness, on_event=None) -> list[Event]:
    """Consume one turn, returning every event it yielded."""
    events: list[Event] = []
    async with aclosing(run_turn(agent, h.partition, h.commit)) as stream:
        async for ev in stream:
            events.append(ev)
            if on_event is not None:
                on_event(ev)
    return events


def done_of(events: list[Event]) -> Done:
    assert isinstance(events[-1], Done), events[-1]
    assert sum(isinstance(e, Done) for e in events) == 1
    return events[-1]


# --- tools ---------------------------------------------------------------------------------

class NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    pass


class XArgs(msgspec.Struct, forbid_unknown_fields=True):
    x: int


class Clocked:
    """Tools that sleep and record (name, start, end) on trio's clock; they count their runs."""

    def __init__(self) -> None:
        self.spans: dict[str, tuple[float, float]] = {}
        self.runs: list[str] = []
        self.active = 0

    def tool(self, name: str, seconds: float, *, read_only: bool = True, parallel: bool | None = None) -> Tool:
        async def go(args: Any, ctx: ToolContext) -> str:
            self.runs.append(ctx.call_id)
            start = trio.current_time()
            self.active += 1
            try:
                await trio.sleep(seconds)
            finally:
                self.active -= 1
            self.spans[name] = (start, trio.current_time())
            return f"{name} done"

        return Tool(name, f"sleeps {seconds}s", NoArgs, go, read_only=read_only, parallel=parallel)


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


async def _echo(args: XArgs, ctx: ToolContext) -> str:
    return f"x={args.x}"


async def _tool_error(args: NoArgs, ctx: ToolContext) -> str:
    raise ToolError("the file is locked; try later")


async def _crash(args: NoArgs, ctx: ToolContext) -> str:
    raise ZeroDivisionError("division by zero in the tool")


async def _ends(args: NoArgs, ctx: ToolContext) -> ToolOutput:
    return ToolOutput("handed over", end_turn="handoff")


ECHO = Tool("echo", "echo x", XArgs, _echo, read_only=True)
LOCKED = Tool("locked", "always a ToolError", NoArgs, _tool_error)
CRASH = Tool("crash", "always raises", NoArgs, _crash, read_only=True)
ENDS = Tool("ends", "ends the turn", NoArgs, _ends)


# --- E3 pairing ----------------------------------------------------------------------------

async def test_every_call_gets_exactly_one_result_in_declared_order():
    h = Harness()
    h.user("do many things")
    agent = make_agent([
        Reply(say="Trying everything.", calls=[
            ("echo", {"x": 1}), ("nope", {"a": 1}), ("locked", {}), ("crash", {}),
            ("echo", {"x": "not a number"}), ("echo", {"y": 2}), ("echo", {"x": 3}),
        ]),
        Reply(calls=[("crash", {}), ("crash", {"extra": True}), ("nope", {}), ("echo", {"x": 4})]),
        Reply(say="All done."),
    ], [ECHO, LOCKED, CRASH])
    events = await drive(agent, h)
    done = done_of(events)
    assert done.stop_reason == "end_turn" and done.result == "All done."
    h.check_pairing()
    assert h.kinds() == ["user", "tool_call", *["tool_result"] * 7, "tool_call", *["tool_result"] * 4, "text"]

    by_id = {r.call_id: r for r in h.results()}
    calls = h.calls()
    content = [by_id[c.id].content for c in calls]
    errors = [by_id[c.id].is_error for c in calls]
    assert content[0] == "x=1" and not errors[0]
    assert "unknown tool 'nope'" in content[1] and "echo" in content[1] and errors[1]
    assert content[2] == "the file is locked; try later" and errors[2]
    assert content[3].startswith("crash failed: ZeroDivisionError") and errors[3]
    assert content[4].startswith("invalid arguments for echo") and errors[4]
    assert content[5].startswith("invalid arguments for echo") and errors[5]
    assert content[6] == "x=3" and not errors[6]
    assert "invalid arguments for crash" in content[8] and errors[8]
    assert content[10] == "x=4"
    # every result names its call's tool, and the model saw every result in the next request
    assert all(by_id[c.id].name == c.name for c in calls)
    last = request_text(agent.provider.requests[-1])
    assert "x=1" in last and "the file is locked" in last and "ZeroDivisionError" in last


async def test_pairing_holds_over_several_turns_on_one_partition():
    provider = ScriptedProvider({AGENT: [
        Reply(calls=[("echo", {"x": 1}), ("crash", {}), ("echo", {"x": 2})]),
        Reply(say="first done"),
        Reply(say="Again.", calls=[("locked", {}), ("nope", {}), ("echo", {"x": "bad"})]),
        Reply(calls=[("crash", {}), ("crash", {})]),
        Reply(say="second done", sees="x=2"),  # the first turn's results are still in the history
    ]})
    agent = make_agent([], [ECHO, LOCKED, CRASH], provider=provider)
    h = Harness()
    h.user("first")
    assert done_of(await drive(agent, h)).result == "first done"
    h.user("second")
    assert done_of(await drive(agent, h)).result == "second done"
    assert provider.failures == [] and provider.remaining() == {}
    h.check_pairing()
    assert len(h.calls()) == len(h.results()) == 8
    assert sum(r.is_error for r in h.results()) == 6
    # the history the model last saw is paired too: each result right after its own call message
    view = provider.requests[-1].messages
    for i, m in enumerate(view):
        ids = [b.id for b in m.blocks if isinstance(b, ToolCallBlock)]
        if ids:
            nxt = [b.call_id for mm in view[i + 1:i + 1 + len(ids)] for b in mm.blocks
                   if isinstance(b, ToolResultBlock)]
            assert nxt == ids


async def test_tool_events_bracket_each_call_in_declared_order():
    h = Harness()
    h.user("go")
    agent = make_agent([Reply(calls=[("echo", {"x": 1}), ("locked", {}), ("echo", {"x": 2})]), Reply(say="ok")],
                       [ECHO, LOCKED])
    events = await drive(agent, h)
    ids = [c.id for c in h.calls()]
    starts = [e.call_id for e in events if isinstance(e, ToolStart)]
    ends = [e for e in events if isinstance(e, ToolEnd)]
    assert starts == ids and [e.call_id for e in ends] == ids
    assert [e.is_error for e in ends] == [False, True, False]
    assert ends[0].result == "x=1" and ends[1].result == "the file is locked; try later"
    for cid in ids:  # each start comes before its end
        s = next(i for i, e in enumerate(events) if isinstance(e, ToolStart) and e.call_id == cid)
        t = next(i for i, e in enumerate(events) if isinstance(e, ToolEnd) and e.call_id == cid)
        assert s < t


async def test_a_tool_that_ends_the_turn_still_pairs_every_call():
    h = Harness()
    h.user("hand over")
    agent = make_agent([Reply(say="Over to you.", calls=[("ends", {}), ("echo", {"x": 5})])], [ENDS, ECHO])
    events = await drive(agent, h)
    done = done_of(events)
    assert done.stop_reason == "handoff"
    assert len(agent.provider.requests) == 1
    h.check_pairing()
    assert [r.content for r in h.results()] == ["handed over", "x=5"]


# --- E13 read-only groups --------------------------------------------------------------------

def test_grouping_of_calls():
    c = Clocked()
    reg = Registry([c.tool("r1", 0), c.tool("r2", 0), c.tool("w", 0, read_only=False),
                    c.tool("p", 0, read_only=False, parallel=True), c.tool("s", 0, parallel=False)])
    names = ["r1", "r2", "w", "r1", "nope", "r2", "r1", "p", "s", "r2"]
    calls = [ToolCallBlock(f"c{i}", n, {}) for i, n in enumerate(names)]
    assert groups(calls, reg) == [[0, 1], [2], [3], [4], [5, 6, 7], [8], [9]]
    assert groups([], reg) == []


async def test_read_only_calls_overlap_and_a_writer_is_a_barrier():
    """Real clock: r1 and r2 run together, then w alone, then r3 and r4 together."""
    c = Clocked()
    tools = [c.tool("r1", 0.2), c.tool("r2", 0.2), c.tool("w", 0.1, read_only=False),
             c.tool("r3", 0.2), c.tool("r4", 0.2)]
    h = Harness()
    h.user("read things")
    agent = make_agent([Reply(calls=[(n, {}) for n in ("r1", "r2", "w", "r3", "r4")]), Reply(say="ok")], tools)
    t0 = trio.current_time()
    await drive(agent, h)
    total = trio.current_time() - t0
    s = c.spans
    # the first read-only pair overlaps and takes about one sleep, not two
    assert overlap(s["r1"], s["r2"])
    first_group = max(s["r1"][1], s["r2"][1]) - min(s["r1"][0], s["r2"][0])
    assert first_group < 0.35
    # the writer starts after both readers ended and ends before the next readers start
    assert s["w"][0] >= max(s["r1"][1], s["r2"][1])
    assert s["w"][1] <= min(s["r3"][0], s["r4"][0])
    assert not any(overlap(s["w"], s[n]) for n in ("r1", "r2", "r3", "r4"))
    assert overlap(s["r3"], s["r4"])
    second_group = max(s["r3"][1], s["r4"][1]) - min(s["r3"][0], s["r4"][0])
    assert second_group < 0.35
    assert total < 0.2 + 0.1 + 0.2 + 0.3  # about 0.5 s; serial would be 0.9 s
    h.check_pairing()
    assert [r.content for r in h.results()] == [f"{n} done" for n in ("r1", "r2", "w", "r3", "r4")]


async def test_three_read_only_calls_run_as_one_group():
    c = Clocked()
    tools = [c.tool("r1", 0.2), c.tool("r2", 0.2), c.tool("r3", 0.2)]
    h = Harness()
    h.user("read")
    agent = make_agent([Reply(calls=[("r1", {}), ("r2", {}), ("r3", {})]), Reply(say="ok")], tools)
    await drive(agent, h)
    spans = list(c.spans.values())
    assert len(spans) == 3
    assert max(e for _, e in spans) - min(st for st, _ in spans) < 0.35
    assert all(overlap(a, b) for a in spans for b in spans if a is not b)


async def test_results_are_committed_in_declared_order_when_the_later_call_finishes_first():
    c = Clocked()
    tools = [c.tool("slow", 0.3), c.tool("fast", 0.05)]
    h = Harness()
    h.user("read")
    agent = make_agent([Reply(calls=[("slow", {}), ("fast", {})]), Reply(say="ok")], tools)
    events = await drive(agent, h)
    assert c.spans["fast"][1] < c.spans["slow"][1]  # fast really finished first
    assert [r.name for r in h.results()] == ["slow", "fast"]
    assert [e.name for e in events if isinstance(e, ToolEnd)] == ["slow", "fast"]
    h.check_pairing()
    # and the model sees them in declared order too
    follow_up = agent.provider.requests[1].messages
    results = [b.name for m in follow_up for b in m.blocks if isinstance(b, ToolResultBlock)]
    assert results == ["slow", "fast"]


# --- E15 loop guard ------------------------------------------------------------------------

async def test_identical_calls_get_a_notice_at_the_third_and_stop_at_the_fifth():
    runs: list[str] = []

    async def poll(args: XArgs, ctx: ToolContext) -> str:
        runs.append(ctx.call_id)
        return "still pending"

    tool = Tool("poll", "poll status", XArgs, poll, read_only=True)
    h = Harness()
    h.user("wait for it")
    replies = [Reply(calls=[("poll", {"x": 1})]) for _ in range(5)]
    replies[3] = Reply(calls=[("poll", {"x": 1})], sees="same tool call")  # the nudge reached the model
    agent = make_agent(replies + [Reply(say="never asked")], [tool])
    events = await drive(agent, h)
    done = done_of(events)
    assert done.stop_reason == "loop_detected"
    assert done.result == LOOP_STOP
    assert agent.provider.failures == []
    assert len(agent.provider.requests) == 5  # no model call after the stop
    calls = h.calls()
    assert len(calls) == 5
    assert runs == [c.id for c in calls[:4]]  # the 5th call was not executed...
    h.check_pairing()  # ...but it has a result
    last = h.results()[-1]
    assert last.call_id == calls[4].id and last.is_error and last.content == LOOP_STOP
    # exactly one notice, right after the 3rd call's result, written by the engine for this agent
    notices = [i for i, m in enumerate(h.messages) if m.kind == "notice"]
    assert len(notices) == 1
    third_result = next(i for i, m in enumerate(h.messages) if m.kind == "tool_result" and m.result.call_id == calls[2].id)
    assert notices[0] == third_result + 1
    notice = h.messages[notices[0]]
    assert "3 times" in notice.text and notice.visible_to == [AGENT]


async def test_a_different_call_resets_the_count():
    runs: list[dict] = []

    async def poll(args: XArgs, ctx: ToolContext) -> str:
        runs.append(args.x)
        return "pending"

    tool = Tool("poll", "poll status", XArgs, poll, read_only=True)
    h = Harness()
    h.user("poll")
    xs = [1, 1, 2, 1, 1, 1, 1]  # counts 1 2 1 1 2 3 4: a nudge at the 6th, never a stop
    agent = make_agent([Reply(calls=[("poll", {"x": x})]) for x in xs] + [Reply(say="finished")], [tool])
    events = await drive(agent, h)
    done = done_of(events)
    assert done.stop_reason == "end_turn" and done.result == "finished"
    assert runs == xs
    notices = [m for m in h.messages if m.kind == "notice"]
    assert len(notices) == 1
    # the notice follows the 6th call (the third identical one after the reset)
    idx = h.messages.index(notices[0])
    assert h.messages[idx - 1].result.call_id == h.calls()[5].id
    h.check_pairing()


async def test_paging_is_not_a_loop():
    h = Harness()
    h.user("page")
    agent = make_agent([Reply(calls=[("echo", {"x": i})]) for i in range(8)] + [Reply(say="paged")], [ECHO])
    done = done_of(await drive(agent, h))
    assert done.stop_reason == "end_turn"
    assert not [m for m in h.messages if m.kind == "notice"]


async def test_identical_calls_inside_one_response_count_too():
    c = Clocked()
    tool = c.tool("peek", 0.01)
    h = Harness()
    h.user("peek")
    agent = make_agent([Reply(calls=[("peek", {})] * 5), Reply(say="never")], [tool])
    done = done_of(await drive(agent, h))
    assert done.stop_reason == "loop_detected"
    calls = h.calls()
    assert sorted(c.runs) == sorted(x.id for x in calls[:4])  # the 5th identical call never ran
    h.check_pairing()
    assert h.results()[-1].content == LOOP_STOP
    assert h.kinds()[-1] == "notice"


# --- E10 retries ---------------------------------------------------------------------------

class TimedProvider(ScriptedProvider):
    """Records trio.current_time() at the start of every model call."""

    def __init__(self, replies: list[Reply]):
        super().__init__({AGENT: replies})
        self.times: list[float] = []

    async def stream(self, request):
        self.times.append(trio.current_time())
        async for ev in super().stream(request):
            yield ev


async def test_rate_limits_back_off_exponentially_with_jitter(autojump_clock):
    p = TimedProvider([Reply(error="rate_limit")] * 5 + [Reply(say="finally")])
    h = Harness()
    h.user("hi")
    events = await drive(make_agent([], provider=p), h)
    done = done_of(events)
    assert done.result == "finally"
    retries = [e for e in events if isinstance(e, Retry)]
    assert [r.attempt for r in retries] == [1, 2, 3, 4, 5]
    assert all(r.reason == "rate_limit" and r.agent == AGENT for r in retries)
    for r in retries:
        raw = 0.5 * 2 ** (r.attempt - 1)
        assert raw * 0.75 <= r.delay <= raw * 1.25
    delays = [r.delay for r in retries]
    assert all(b > a for a, b in zip(delays, delays[1:]))
    # the engine really waited that long between model calls
    waits = [b - a for a, b in zip(p.times, p.times[1:])]
    assert waits == pytest.approx(delays, abs=1e-6)
    # the user line is not repeated by retries (S3): one user message, one text
    assert h.kinds() == ["user", "text"]


async def test_backoff_is_capped_at_30_seconds(autojump_clock):
    p = TimedProvider([Reply(error="server")] * 9 + [Reply(say="up again")])
    h = Harness()
    h.user("hi")
    events = await drive(make_agent([], provider=p, retry=RetryPolicy(attempts=10)), h)
    retries = [e for e in events if isinstance(e, Retry)]
    assert len(retries) == 9
    assert all(r.delay <= 30.0 for r in retries)
    assert [r.delay for r in retries[7:]] == [30.0, 30.0]  # raw 64 and 128 s, even at -25%
    assert 32 * 0.75 <= retries[6].delay <= 30.0  # raw 32 s: jittered, then capped
    assert 16 * 0.75 <= retries[5].delay <= 16 * 1.25
    waits = [b - a for a, b in zip(p.times, p.times[1:])]
    assert waits == pytest.approx([r.delay for r in retries], abs=1e-6)


def test_jitter_stays_within_a_quarter_and_really_varies():
    policy = RetryPolicy()
    rng = random.Random(1234)
    err = RateLimitError("slow down")
    for attempt in range(1, 6):
        raw = 0.5 * 2 ** (attempt - 1)
        samples = [policy.delay(attempt, err, rng) for _ in range(500)]
        assert all(raw * 0.75 <= d <= raw * 1.25 for d in samples)
        assert min(samples) < raw * 0.8 and max(samples) > raw * 1.2  # the full ±25% band is used
    assert policy.delay(6, err, rng) is None  # 6 calls in all


async def test_retry_after_is_honored(autojump_clock):
    p = TimedProvider([Reply(error="rate_limit", retry_after=7.0), Reply(error="overloaded", retry_after=0.25),
                       Reply(say="ok")])
    h = Harness()
    h.user("hi")
    events = await drive(make_agent([], provider=p), h)
    retries = [e for e in events if isinstance(e, Retry)]
    assert [(r.attempt, r.reason, r.delay) for r in retries] == [(1, "rate_limit", 7.0), (2, "overloaded", 0.25)]
    assert [b - a for a, b in zip(p.times, p.times[1:])] == pytest.approx([7.0, 0.25], abs=1e-6)
    assert done_of(events).result == "ok"


@pytest.mark.parametrize("kind", ["overloaded", "server", "timeout", "connection"])
async def test_other_transient_errors_are_retried(autojump_clock, kind):
    p = TimedProvider([Reply(error=kind), Reply(say="ok")])
    h = Harness()
    h.user("hi")
    events = await drive(make_agent([], provider=p), h)
    retries = [e for e in events if isinstance(e, Retry)]
    assert [(r.attempt, r.reason) for r in retries] == [(1, kind)]
    assert 0.375 <= retries[0].delay <= 0.625
    assert done_of(events).result == "ok"


@pytest.mark.parametrize("kind, cls", [("auth", AuthError), ("invalid_request", InvalidRequestError),
                                       ("quota", QuotaError), ("content_policy", ContentPolicyError)])
async def test_permanent_errors_fail_at_once(autojump_clock, kind, cls):
    p = TimedProvider([Reply(error=kind), Reply(say="never")])
    h = Harness()
    h.user("hi")
    events: list[Event] = []
    start = trio.current_time()
    with pytest.raises(cls) as info:
        await drive(make_agent([], provider=p), h, on_event=events.append)
    assert info.value.kind == kind
    assert not [e for e in events if isinstance(e, Retry)]
    assert len(p.requests) == 1 and p.remaining() == {AGENT: 1}
    assert trio.current_time() == start  # no waiting either
    assert h.kinds() == ["user"]


async def test_the_error_goes_up_when_attempts_run_out(autojump_clock):
    p = TimedProvider([Reply(error="rate_limit")] * 3 + [Reply(say="never")])
    h = Harness()
    h.user("hi")
    events: list[Event] = []
    with pytest.raises(RateLimitError):
        await drive(make_agent([], provider=p, retry=RetryPolicy(attempts=3)), h, on_event=events.append)
    assert [e.attempt for e in events if isinstance(e, Retry)] == [1, 2]
    assert len(p.requests) == 3
    assert not [e for e in events if isinstance(e, Done)]


async def test_run_raises_provider_errors_too(autojump_clock):
    h = Harness()
    h.user("hi")
    with pytest.raises(ProviderError):
        await run(make_agent([Reply(error="auth")]), h.partition, h.commit)


async def test_cancel_during_backoff_starts_no_new_attempt(autojump_clock):
    """E11: a stop during the retry wait ends the turn; the next model call never starts."""
    p = TimedProvider([Reply(error="rate_limit", retry_after=10), Reply(say="never")])
    h = Harness()
    h.user("hi")
    events: list[Event] = []
    start = trio.current_time()
    with trio.move_on_after(3) as scope:
        await drive(make_agent([], provider=p), h, on_event=events.append)
    assert scope.cancelled_caught
    assert trio.current_time() - start == pytest.approx(3)
    assert [type(e) for e in events] == [Retry]
    await trio.sleep(20)
    assert len(p.requests) == 1


# --- E11 / G9 cancellation -------------------------------------------------------------------

async def test_cancel_while_a_slow_tool_runs_answers_every_open_call(autojump_clock):
    c = Clocked()
    tools = [c.tool("fast", 0.1), c.tool("w", 0.1, read_only=False), c.tool("slow1", 100), c.tool("slow2", 100),
             c.tool("after", 0.1, read_only=False)]
    h = Harness()
    h.user("work")
    agent = make_agent([Reply(say="Working.", calls=[("fast", {}), ("w", {}), ("slow1", {}), ("slow2", {}),
                                                     ("after", {})]), Reply(say="never")], tools)
    before = trio.lowlevel.current_statistics().tasks_living
    events: list[Event] = []
    with trio.move_on_after(5) as scope:
        await drive(agent, h, on_event=events.append)
    assert scope.cancelled_caught
    assert trio.lowlevel.current_statistics().tasks_living == before
    assert c.active == 0
    h.check_pairing()
    results = {r.name: r for r in h.results()}
    assert results["fast"].content == "fast done" and results["w"].content == "w done"
    for name in ("slow1", "slow2", "after"):
        assert results[name].content == CANCELLED and results[name].is_error
    assert "after" not in c.spans and sorted(c.runs) == sorted(x.id for x in h.calls()[:4])  # the barrier never started
    assert len(agent.provider.requests) == 1
    assert not [e for e in events if isinstance(e, Done)]


async def test_cancel_with_a_real_clock_leaves_nothing_running():
    """The test owns the nursery: after cancelling its scope the nursery exits at once."""
    c = Clocked()
    tools = [c.tool("slow1", 30), c.tool("slow2", 30)]
    h = Harness()
    h.user("work")
    agent = make_agent([Reply(calls=[("slow1", {}), ("slow2", {})]), Reply(say="never")], tools)
    before = trio.lowlevel.current_statistics().tasks_living
    started = trio.Event()

    async def turn(scope_box: list) -> None:
        with trio.CancelScope() as scope:
            scope_box.append(scope)
            started.set()
            await drive(agent, h)

    box: list[trio.CancelScope] = []
    t0 = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(turn, box)
        await started.wait()
        with trio.fail_after(10):
            while c.active < 2:
                await trio.sleep(0.01)
        assert c.active == 2
        cancelled_at = trio.current_time()
        box[0].cancel()
    assert trio.current_time() - cancelled_at < 0.1
    assert trio.current_time() - t0 < 1.0
    assert trio.lowlevel.current_statistics().tasks_living == before
    assert c.active == 0
    h.check_pairing()
    assert [r.content for r in h.results()] == [CANCELLED, CANCELLED]


async def test_cancel_during_the_model_call_commits_nothing_half_done(autojump_clock):
    h = Harness()
    h.user("hi")
    agent = make_agent([Reply(say="late answer", calls=[("echo", {"x": 1})], delay=10)], [ECHO])
    with trio.move_on_after(1):
        await drive(agent, h)
    assert h.kinds() == ["user"]
    h.check_pairing()


@pytest.mark.parametrize("how", ["break", "raise"])
async def test_closing_the_stream_mid_round_still_answers_open_calls(how):
    """A consumer that stops reading right after a tool_start (it breaks out, or its event handler
    raises, as a room subscriber writing to a closed stdout does) must not break pairing (E3)."""
    c = Clocked()
    h = Harness()
    h.user("work")
    agent = make_agent([Reply(calls=[("r1", {}), ("r2", {})]), Reply(say="never")],
                       [c.tool("r1", 0.01), c.tool("r2", 0.01)])
    with pytest.raises(BrokenPipeError) if how == "raise" else contextlib.nullcontext():
        async with aclosing(run_turn(agent, h.partition, h.commit)) as stream:
            async for ev in stream:
                if isinstance(ev, ToolStart):
                    if how == "raise":
                        raise BrokenPipeError("stdout is gone")
                    break
    # the turn is over for its consumer: every call it committed must have a result by now
    assert pairing_problems(h.messages) == []


# --- G10 interjections -------------------------------------------------------------------------

async def test_a_line_sent_while_a_tool_runs_is_in_the_next_request(autojump_clock):
    c = Clocked()
    h = Harness()
    h.user("read the first file")
    line = "also look at the second file please"
    agent = make_agent([
        Reply(calls=[("read", {})], not_sees=line),
        Reply(say="Reading the second one too.", sees=line),
    ], [c.tool("read", 1.0)])

    async def interject() -> None:
        await trio.sleep(0.5)
        assert c.active == 1  # the tool is running right now
        h.user(line)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interject)
        events = await drive(agent, h)
    assert agent.provider.failures == []
    assert done_of(events).result == "Reading the second one too."
    assert len(agent.provider.requests) == 2
    # the line is there, and it does not split the call from its result (E3)
    msgs = agent.provider.requests[1].messages
    kinds = [("call" if any(isinstance(b, ToolCallBlock) for b in m.blocks) else
              "result" if any(isinstance(b, ToolResultBlock) for b in m.blocks) else
              m.blocks[0].text if isinstance(m.blocks[0], TextBlock) else "?") for m in msgs]
    assert kinds == ["read the first file", "call", "result", line]
    assert h.kinds() == ["user", "tool_call", "user", "tool_result", "text"]


async def test_a_line_sent_while_the_final_answer_streams_gets_answered_in_the_same_turn():
    h = Harness()
    h.user("tell me a story")
    line = "make it shorter please"
    agent = make_agent([
        Reply(say="Once upon a time there was a very long story about many things"),
        Reply(say="Short version: the end.", sees=line),
    ])
    sent = False

    def on_event(ev: Event) -> None:
        nonlocal sent
        if isinstance(ev, TextDeltaEvent) and not sent:
            sent = True
            h.user(line)  # while the model is still streaming its answer

    events = await drive(agent, h, on_event)
    done = done_of(events)
    assert agent.provider.failures == []
    assert len(agent.provider.requests) == 2
    assert done.result == "Short version: the end."
    assert h.kinds() == ["user", "user", "text", "text"]
    assert line in request_text(agent.provider.requests[1])
    assert line not in request_text(agent.provider.requests[0])


async def test_no_extra_model_call_without_an_interjection():
    h = Harness()
    h.user("hi")
    agent = make_agent([Reply(say="hello there")])
    await drive(agent, h)
    assert len(agent.provider.requests) == 1


# --- E1 streaming and the non-streaming entry --------------------------------------------------

def _script() -> list[Reply]:
    return [Reply(say="Let me check two things.", calls=[("echo", {"x": 1}), ("locked", {})]),
            Reply(say="All checked: x is one and the file is locked for now.")]


async def test_run_returns_the_same_done_as_the_stream():
    h1, h2 = Harness(), Harness()
    h1.user("check")
    h2.user("check")
    events = await drive(make_agent(_script(), [ECHO, LOCKED]), h1)
    streamed = done_of(events)
    returned = await run(make_agent(_script(), [ECHO, LOCKED]), h2.partition, h2.commit)
    assert isinstance(returned, Done)
    assert msgspec.structs.replace(returned, ts=0.0) == msgspec.structs.replace(streamed, ts=0.0)
    assert returned.result == "All checked: x is one and the file is locked for now."
    assert [(m.author, m.kind, m.text) for m in h1.messages] == [(m.author, m.kind, m.text) for m in h2.messages]


async def test_text_arrives_as_several_deltas():
    h = Harness()
    h.user("hi")
    text = "Hello there, this is a reply that is long enough to be streamed in pieces."
    events = await drive(make_agent([Reply(say=text)]), h)
    deltas = [e for e in events if isinstance(e, TextDeltaEvent)]
    assert len(deltas) >= 2
    assert "".join(d.text for d in deltas) == text
    assert all(d.agent == AGENT for d in deltas)
    assert events.index(deltas[-1]) < len(events) - 1 and isinstance(events[-1], Done)
    assert h.messages[-1].kind == "text" and h.messages[-1].text == text
    assert h.messages[-1].provider == "scripted" and h.messages[-1].model == "scripted"


async def test_the_request_carries_tools_and_history():
    h = Harness()
    h.user("first line")
    agent = make_agent([Reply(calls=[("echo", {"x": 9})]), Reply(say="nine")], [ECHO, LOCKED])
    done = done_of(await drive(agent, h))
    assert done.stop_reason == "end_turn"
    req0, req1 = agent.provider.requests
    assert [t.name for t in req0.tools] == ["echo", "locked"]
    assert req0.tools[0].input_schema["required"] == ["x"]
    assert req0.system == "You are a test agent." and req0.agent == AGENT
    assert [m.role for m in req1.messages] == ["user", "assistant", "user"]


async def test_usage_is_summed_over_the_turn():
    from orchestrator.core.types import Usage
    h = Harness()
    h.user("hi")
    agent = make_agent([Reply(calls=[("echo", {"x": 1})], usage=Usage(10, 3, 1)),
                        Reply(say="done", usage=Usage(20, 5, 2))], [ECHO])
    done = done_of(await drive(agent, h))
    assert (done.input_tokens, done.output_tokens, done.cached_tokens) == (30, 8, 3)


def test_cancelled_text_is_the_runner_constant():
    # the room recognises synthesized results by this exact text
    assert runner.CANCELLED == CANCELLED and CANCELLED.startswith("cancelled")
