"""The self-improvement pass started by signals, on a host's schedule, and within its token caps: which lines
count as corrections, which rooms run the pass at all, the clock (trio's MockClock), the caps kept across a
restart, and one room's failing pass next to another's."""
from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio
import trio.testing

from orchestrator.core import startup
from orchestrator.core.events import Evolution, MessageEvent
from orchestrator.core.types import Usage
from orchestrator.providers.scripted import Reply, ScriptedProvider, request_text
from orchestrator.room.evolution import DAY, HOUR, bound
from orchestrator.room.host import RoomHost
from orchestrator.room.room import Room
from orchestrator.room.signals import is_correction, weaknesses
from orchestrator.store.db import Store
from orchestrator.team.schema import AgentDef, Evolve, Team

from test_room import Recorder, resolver, store  # noqa: F401 - the fixture

PROPOSAL = ('<proposal kind="memory" action="add" target="notes"><rationale>corrected twice</rationale>'
            '<text>This user wants bullet points.</text></proposal>')


def notices(events: Recorder) -> list[str]:
    return [ev.text for _, ev in events.of(MessageEvent) if ev.kind == "notice"]


def team(evolve: bool | Evolve = True, *, agents: bool = True) -> Team:
    return Team(commander=AgentDef(name="commander", model="scripted"), evolve=evolve,
                agents=[AgentDef(name="writer", model="scripted", description="writes")] if agents else [])


@pytest.mark.parametrize("line", ["No, the other file", "no, that's wrong", "That’s wrong, try the header",
                                  "@writer actually, use tabs", "this is not what I asked for", "I said three",
                                  "Nein, das ist falsch", "En fait, je voulais dire lundi", "No, eso está mal"])
def test_corrections_read_as_corrections(line):
    assert is_correction(line)


@pytest.mark.parametrize("line", ["no problem, thanks", "Nobody said it was easy", "Now a title please",
                                  "what did I say yesterday?", "actually good", "Known as Mr. Wrong"])
def test_ordinary_lines_do_not(line):
    assert not is_correction(line)


def test_known_weaknesses_are_the_topics_of_notes_that_name_one():
    assert weaknesses(["weakness: CSV totals - forgets the header row", "Avoid: rm -rf; ask first",
                       "likes tea", "weakness: ab"]) == ["csv totals", "rm -rf"]


def test_only_rooms_bound_to_an_agent_run_the_pass():
    assert bound(team()) and not bound(team(agents=False))
    assert bound(Team(commander=AgentDef(name="commander", from_="agents/tutor.md")))


async def test_two_corrections_start_the_pass_and_an_ordinary_line_does_not(store, tmp_path):  # noqa: F811
    events = Recorder()
    provider = ScriptedProvider({"commander": [Reply(say=s) for s in ("one", "two", "three", "four")],
                                 "evolve": [Reply(say=PROPOSAL)]})
    async with Room.create(store, team(), resolver(provider), workspace=tmp_path, on_event=events) as room:
        for line in ("summarise it", "thanks, a title now", "no, that's wrong"):
            await room.post(line)
            await room.idle()
        assert events.of(Evolution) == []
        assert room._signals is not None and room._signals.seen == ["correction"]
        await room.post("actually, shorter please")
        await room.idle()
        [(_, ev)] = events.of(Evolution)
        assert ev.status == "proposed" and ev.seq[0] == 1 and room._signals.total == 0
    [review] = [r for r in provider.requests if r.agent == "evolve"]
    assert "summarise it" in request_text(review) and "shorter please" in request_text(review)


async def test_a_correction_before_a_restart_counts_with_one_after_it(tmp_path):
    db = tmp_path / "rooms.db"
    provider = ScriptedProvider({"commander": [Reply(say=s) for s in ("one", "two", "three")],
                                 "evolve": [Reply(say=PROPOSAL)]})
    events = Recorder()
    db_store = await Store.open(db)
    try:
        async with Room.create(db_store, team(), resolver(provider), workspace=tmp_path, on_event=events) as room:
            rid = room.id
            for line in ("summarise it", "no, that's wrong"):
                await room.post(line)
                await room.idle()
    finally:
        await db_store.close()
    assert events.of(Evolution) == []
    db_store = await Store.open(db)  # a restart: the sum so far, and the line it began at, are read back
    try:
        async with Room.open(db_store, rid, resolver(provider), on_event=events) as room:
            assert room._signals is not None and room._signals.seen == ["correction"]
            await room.post("actually, shorter please")
            await room.idle()
            assert room._signals.total == 0
        async with Room.open(db_store, rid, resolver(provider)) as room:
            assert room._signals is not None and room._signals.total == 0  # the pass's reset was kept too
    finally:
        await db_store.close()
    [(_, ev)] = events.of(Evolution)
    assert ev.status == "proposed" and ev.seq[0] == 1  # from the first line, before the restart
    [review] = [r for r in provider.requests if r.agent == "evolve"]
    assert "summarise it" in request_text(review) and "shorter please" in request_text(review)


async def test_signals_kept_in_a_tampered_store_count_only_as_what_they_name(store, tmp_path):  # noqa: F811
    provider = ScriptedProvider({"commander": [Reply(say="one")]})
    async with Room.create(store, team(), resolver(provider), workspace=tmp_path) as room:
        rid = room.id
    record = await store.room(rid)
    await store.set_meta(rid, {**record.meta, "signals": {"total": 1e9, "seen": ["correction", "rm -rf", 7] * 3,
                                                          "line": "x"}})
    async with Room.open(store, rid, resolver(provider)) as room:
        assert room._signals is not None and room._signals.seen == ["correction"] * 3
        assert room._signals.total == 9.0 and room._line_seq is None


async def test_a_commander_only_room_never_runs_the_pass(store, tmp_path):  # noqa: F811
    events = Recorder()
    provider = ScriptedProvider({"commander": [Reply(say="one"), Reply(say="two")], "evolve": [Reply(say=PROPOSAL)]})
    async with Room.create(store, team(Evolve(threshold=0), agents=False), resolver(provider), workspace=tmp_path,
                           on_event=events, evolve=True) as room:
        await room.post("hello")
        await room.idle()
        await room.post("no, that's wrong")
        await room.idle()
    assert events.of(Evolution) == [] and not [r for r in provider.requests if r.agent == "evolve"]


async def test_a_recovered_tool_failure_and_a_known_weakness_add_their_weights(store, tmp_path):  # noqa: F811
    from orchestrator.memory.notes import Memory

    await Memory(store).add("notes", "weakness: quarterly totals - the header row is summed too")
    events = Recorder()
    provider = ScriptedProvider({"commander": [Reply(calls=[("read_file", {"path": "missing.csv"})]),
                                               Reply(say="done anyway")],
                                 "evolve": [Reply(say="NO_PROPOSAL")]})
    evolve = Evolve(threshold=4, weights=None)
    spec = team(evolve)
    spec.commander.tools = ["read_file"]
    async with Room.create(store, spec, resolver(provider), workspace=tmp_path, on_event=events) as room:
        await room.post("the quarterly totals please")
        await room.idle()
    [(_, ev)] = events.of(Evolution)
    assert ev.status == "nothing"


async def test_the_caps_stop_a_pass_and_the_days_total_survives_a_restart(tmp_path):
    db = tmp_path / "rooms.db"
    capped = Evolve(threshold=0, cooldown_hours=0, max_tokens_per_day=10_000)
    provider = ScriptedProvider({"commander": [Reply(say="one"), Reply(say="two"), Reply(say="three")],
                                 "evolve": [Reply(say="NO_PROPOSAL", usage=Usage(input=9_000, output=100))] * 2})
    events = Recorder()
    db_store = await Store.open(db)
    try:
        async with Room.create(db_store, team(capped), resolver(provider), workspace=tmp_path, on_event=events) as room:
            rid = room.id
            await room.post("first")
            await room.idle()
    finally:
        await db_store.close()
    db_store = await Store.open(db)  # a restart: the day's total is read back from the usage rows
    try:
        async with Room.open(db_store, rid, resolver(provider), on_event=events) as room:
            await room.post("second")
            await room.idle()
            report = await room.usage_report(lambda provider, model: None)
    finally:
        await db_store.close()
    assert [ev.status for _, ev in events.of(Evolution)] == ["nothing", "capped"]
    assert len([r for r in provider.requests if r.agent == "evolve"]) == 1  # the capped pass made no call
    [said] = notices(events)
    assert "was not run" in said and "per-day cap of 10,000 tokens (900 left" in said
    [line] = [u for u in report.lines if u.agent == "evolve"]
    assert (line.calls, line.input_tokens, line.output_tokens) == (1, 9_000, 100)


async def test_a_per_run_cap_too_small_for_the_prompt_makes_no_call(store, tmp_path):  # noqa: F811
    provider = ScriptedProvider({"commander": [Reply(say="one")], "evolve": [Reply(say=PROPOSAL)]})
    events = Recorder()
    async with Room.create(store, team(Evolve(threshold=0, max_tokens_per_run=600)), resolver(provider),
                           workspace=tmp_path, on_event=events) as room:
        await room.post("hello")
        await room.idle()
    assert [ev.status for _, ev in events.of(Evolution)] == ["capped"]
    assert not [r for r in provider.requests if r.agent == "evolve"]
    assert any("per-run cap of 600 tokens" in said for said in notices(events))


class Passes:
    """Every pass the rooms of a host ended, with the (mock) clock's time, as an `on_open` subscriber; `count`
    waits for the n-th, so a test never reads a pass whose room is still reopening in a thread."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, str, str]] = []
        self._more = trio.Event()

    def __call__(self, room: Room) -> None:
        room.subscribe(lambda ev: self._add(room.id, ev.status) if isinstance(ev, Evolution) else None)

    def _add(self, room: str, status: str) -> None:
        self.seen.append((trio.current_time(), room, status))
        self._more.set()

    async def count(self, n: int) -> list[tuple[float, str, str]]:
        while len(self.seen) < n:
            self._more = trio.Event()
            await self._more.wait()
        return self.seen


# While a pass reopens its room and runs, tasks wait on threads (the store) and the autojumping clock leaps to
# the rooms' own timers (idle close, each leap short) as often as the machine is slow: the pass is *recorded*
# some of those leaps after the schedule started it. Well under the next period, so "12 hours, not 24" and
# "3 days, not 12 hours" still hold however loaded the machine is.
SOON = 6 * 3600.0


@pytest.fixture
def no_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host without its collector policy (room/heap.py), which the CLI turns on for the whole process once any
    test imports it: the heap settles every second, and the autojumping clock would then crawl through each of
    the days these tests sleep, one second at a time."""
    monkeypatch.setattr(startup, "_TUNED", False)


@contextmanager
def held(clock: trio.testing.MockClock) -> Iterator[None]:
    """The mock clock stands still meanwhile: the user's lines are posted "now", even while the store works in a
    thread (with autojump on, every task waiting for a thread would let it leap to the schedule's next pass)."""
    clock.autojump_threshold = math.inf
    try:
        yield
    finally:
        clock.autojump_threshold = 0


async def test_the_schedule_runs_a_pass_every_12_hours_after_a_signal_and_after_3_days_without(
        store, tmp_path, autojump_clock, no_heap):  # noqa: F811
    passes = Passes()
    provider = ScriptedProvider({"commander": [Reply(say=s) for s in ("one", "two", "three")],
                                 "evolve": [Reply(say="NO_PROPOSAL")] * 2})
    async with RoomHost.open(store, resolver(provider), team=team(), on_open=passes, workspace=tmp_path) as host:
        start = trio.current_time()
        with held(autojump_clock):
            room, _ = await host.ask(None, "write the summary")
            await host.ask(room.id, "no, that's wrong")  # 3 of 5: not a pass by itself
        await trio.sleep(11 * HOUR)
        assert passes.seen == []  # the room closed meanwhile; the schedule reopens it
        [(at, _, status)] = await passes.count(1)
        assert status == "nothing" and 12 * HOUR <= at - start < 12 * HOUR + SOON
        with held(autojump_clock):
            await host.ask(room.id, "thanks, a title now")  # activity, no signal: only the fallback
        await trio.sleep(2 * DAY)
        assert len(passes.seen) == 1  # not 12 hours on
        second = (await passes.count(2))[1][0]
        assert 3 * DAY <= second - at < 3 * DAY + SOON
        await trio.sleep(5 * DAY)
        assert len(passes.seen) == 2  # no line since: nothing to review
    assert len([r for r in provider.requests if r.agent == "evolve"]) == 2


async def wait_all_closed(host: RoomHost) -> None:
    with trio.fail_after(10):
        while host.rooms:
            await trio.sleep(0.01)


async def test_a_room_a_host_closed_and_reopened_counts_its_signals_once(store, tmp_path):  # noqa: F811
    passes = Passes()
    provider = ScriptedProvider({"commander": [Reply(say=s) for s in ("one", "two", "three")],
                                 "evolve": [Reply(say="NO_PROPOSAL")]})
    async with RoomHost.open(store, resolver(provider), team=team(), on_open=passes, workspace=tmp_path,
                             idle_close=0) as host:
        room, _ = await host.ask(None, "write the summary")
        await host.ask(room.id, "no, that's wrong")  # 3 of 5
        await wait_all_closed(host)  # closed at once (idle_close=0), its sum kept with it
        again, _ = await host.ask(room.id, "thanks, a title now")  # reopened: still 3, so no pass
        assert again is not room and again._signals is not None and again._signals.total == 3.0
    assert passes.seen == [] and not [r for r in provider.requests if r.agent == "evolve"]


class Hanging:
    """A model that never answers (and sets no timer the mock clock could jump to)."""

    id = "hanging"

    async def stream(self, request):
        await trio.sleep_forever()
        yield  # an async generator, like every provider's stream


async def test_a_failing_or_hanging_pass_in_one_room_does_not_hold_back_another(store, tmp_path,  # noqa: F811
                                                                                 autojump_clock, no_heap):
    passes = Passes()
    good = ScriptedProvider({"commander": [Reply(say="one"), Reply(say="two")] * 3,
                             "evolve": [Reply(say=PROPOSAL)]})

    def resolve(model: str):
        if model == "broken":
            raise RuntimeError("no such model")
        return (Hanging() if model == "hanging" else good), "scripted"

    async with RoomHost.open(store, resolve, on_open=passes, workspace=tmp_path) as host:
        start = trio.current_time()
        rooms = {}
        with held(autojump_clock):
            for name, model in (("broken", "broken"), ("hanging", "hanging"), ("fine", "")):
                room, _ = await host.ask(None, "write it", name=name, team=team(Evolve(model=model)))
                await host.ask(room.id, "no, that's wrong")
                rooms[name] = room.id
        await passes.count(2)
        got = {rid: (status, at - start) for at, rid, status in passes.seen}
        assert got[rooms["broken"]][0] == "failed" and got[rooms["fine"]][0] == "proposed"
        assert 12 * HOUR <= got[rooms["fine"]][1] < 12 * HOUR + SOON
        assert host.schedule.tracks[rooms["hanging"]].running  # still waiting for its model
        await host.rooms[rooms["hanging"]].stop()  # the user's stop ends it, as any room task
    assert len(passes.seen) == 2
