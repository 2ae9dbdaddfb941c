"""The Room through its Python API (G1-G11), driven exactly as a scenario drives it.

Every test builds a scripted team, opens a real Room on a real SQLite store (a file in tmp_path, so
that restarts reopen it) and talks to it with post / idle / stop. What the models were sent is read
from `ScriptedProvider.requests`; what was stored is read back with `Store.load` (which heals) and
checked with `pairing_problems`.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from orchestrator.core.errors import InputError
from orchestrator.core.events import (
    Cancelled, ErrorEvent, Event, MessageEvent, State, TaskEvent, ToolEnd, TurnStart,
)
from orchestrator.core.types import Message
from orchestrator.providers.scripted import Reply, ScriptedProvider, request_text
from orchestrator.room.room import Room
from orchestrator.team.schema import AgentDef, Limits, Team
from orchestrator.store.db import Store
from orchestrator.store.heal import INTERRUPTED, pairing_problems
from orchestrator.store.usage import UsageLog


# --- helpers -----------------------------------------------------------------------------------

@pytest.fixture
async def store(tmp_path: Path):
    s = await Store.open(tmp_path / "room.db")
    yield s
    await s.close()


def resolver(provider: ScriptedProvider):
    def resolve(model: str):
        return provider, "scripted"

    return resolve


class Recorder:
    """An `on_event` subscriber that keeps every event with the wall time it arrived."""

    def __init__(self) -> None:
        self.events: list[tuple[float, Event]] = []

    def __call__(self, ev: Event) -> None:
        self.events.append((time.perf_counter(), ev))

    def of(self, kind: type) -> list[tuple[float, Event]]:
        return [(t, e) for t, e in self.events if isinstance(e, kind)]


def team(*agents: AgentDef, commander_tools: list[str] = (), limits: Limits | None = None) -> Team:
    return Team(commander=AgentDef(name="commander", model="scripted", tools=list(commander_tools)),
                agents=list(agents), limits=limits or Limits())


def agent(name: str, **kw) -> AgentDef:
    return AgentDef(name=name, model="scripted", description=f"the {name}", **kw)


def requests_of(provider: ScriptedProvider, name: str) -> list[str]:
    return [request_text(r) for r in provider.requests if r.agent == name and not r.auxiliary]


async def assert_pairing(store: Store, room_id: str) -> list[Message]:
    messages = await store.load(room_id)
    assert pairing_problems(messages) == []
    assert not [m for m in messages if m.kind == "tool_result" and m.result.content == INTERRUPTED]
    seqs = [m.seq for m in messages]
    assert seqs == sorted(set(seqs)), seqs
    return messages


async def commits_of_a_line(store: Store, members: Team, provider: ScriptedProvider, tmp_path: Path,
                            line: str) -> tuple[list[str], Recorder, str]:
    """The COMMITs the store runs for `line`, posted as a room's second line, the events and the room's id."""
    commits: list[str] = []
    rec = Recorder()
    async with Room.create(store, members, resolver(provider), workspace=tmp_path, on_event=rec) as room:
        await room.post("Are you there?")  # the memory and usage tables are made on first use: not counted
        await room.idle()
        store._db.conn.set_trace_callback(lambda sql: commits.append(sql) if sql.strip().upper() == "COMMIT" else None)
        await room.post(line)
        await room.idle()
        return commits, rec, room.id


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


# --- concurrency and the group stop (G4, G9) ---------------------------------------------------

async def test_four_dispatches_run_concurrently(store, tmp_path):
    names = ["a1", "a2", "a3", "a4"]
    provider = ScriptedProvider({
        "commander": [Reply(say="Fanning out.", calls=[("dispatch_to", {"agent": n, "task": f"job for {n}"})
                                                       for n in names]),
                      Reply(say="All four reported.", sees="report of a4")],
        **{n: [Reply(say=f"report of {n}", delay=0.5)] for n in names},
    })
    async with Room.create(store, team(*(agent(n) for n in names)), resolver(provider),
                           workspace=tmp_path) as room:
        start = time.perf_counter()
        await room.post("Do the four jobs.")
        await room.idle()
        elapsed = time.perf_counter() - start
        assert elapsed < 0.8, f"4 x 0.5 s dispatches took {elapsed:.2f} s: they did not run concurrently"
        assert elapsed >= 0.5
        assert sorted((t.agent, t.status) for t in room.ledger.tasks.values()) == [(n, "done") for n in names]
        room_id = room.id
    assert provider.failures == [] and provider.remaining() == {}
    await assert_pairing(store, room_id)


async def test_a_responses_assignments_commit_in_one_transaction(store, tmp_path):
    names = [f"w{i}" for i in range(8)]
    provider = ScriptedProvider({
        "commander": [Reply(say="Ready."),
                      Reply(calls=[("dispatch_to", {"agent": n, "task": f"part {n}"}) for n in names]
                            + [("run_worker", {"task": "a hidden part"})]),
                      Reply(say="All parts are in.")],
        **{n: [Reply(say=f"{n} done")] for n in names},
        "worker": [Reply(say="hidden part done")],
    })
    commits, rec, room_id = await commits_of_a_line(store, team(*(agent(n) for n in names)), provider, tmp_path,
                                                    "Nine parts at once.")
    tasks = [m for _, m in rec.events if getattr(m, "kind", "") == "task" and getattr(m, "author", "") == "commander"]
    assert len(tasks) == 9
    assert len({m.seq for m in tasks}) == 9 and max(m.seq for m in tasks) - min(m.seq for m in tasks) == 8
    running = [e for _, e in rec.of(TaskEvent) if e.status == "running"]
    assert len(running) == 9
    # all nine are announced as their commit lands, before any of their workers' turns starts
    starts = [e for _, e in rec.events if isinstance(e, TaskEvent) and e.status == "running"
              or isinstance(e, TurnStart) and e.agent != "commander"]
    assert all(isinstance(e, TaskEvent) for e in starts[:9]), starts
    # user line, ONE for the call and its nine assignments, nine reports, nine results (closes ride them), the
    # answer, the usage no message carried
    assert len(commits) == 1 + 1 + 9 + 9 + 1 + 1, len(commits)
    call = next(m for _, m in rec.events if getattr(m, "kind", "") == "tool_call")
    assert call.seq == min(m.seq for m in tasks) - 1
    assert sorted(t.status for t in (await store.tasks(room_id))) == ["done"] * 9
    await assert_pairing(store, room_id)


async def test_stop_cancels_eight_busy_workers_fast_and_leaves_nothing_behind(store, tmp_path):
    names = [f"w{i}" for i in range(8)]
    provider = ScriptedProvider({
        "commander": [Reply(say="Starting all eight.",
                            calls=[("dispatch_to", {"agent": n, "task": f"slow job {n}"}) for n in names]),
                      Reply(say="Fresh start: what next?", sees="a new line after the stop")],
        **{n: [Reply(say=f"{n} never reports", delay=30)] for n in names},
    })
    rec = Recorder()
    before = trio.lowlevel.current_statistics().tasks_living
    async with Room.create(store, team(*(agent(n) for n in names)), resolver(provider),
                           workspace=tmp_path, on_event=rec) as room:
        await room.post("Run the eight slow jobs.")
        with trio.fail_after(10):  # all eight at work, however loaded the machine
            while len(provider.requests) < 9:
                await trio.sleep(0.01)
        assert room.busy
        assert len([e for _, e in rec.of(TaskEvent) if e.status == "running"]) == 8
        assert len(provider.requests) == 9  # the commander and the eight workers are all waiting

        stop_at = time.perf_counter()
        await room.stop()
        cancelled = rec.of(Cancelled)
        assert len(cancelled) == 1
        took = cancelled[0][0] - stop_at
        assert took < 0.1, f"stop -> cancelled took {took * 1000:.0f} ms"
        assert not room.busy

        assert len(room.ledger.tasks) == 8
        assert all(t.status == "cancelled" for t in room.ledger.tasks.values()), room.ledger.tasks
        stored = await store.tasks(room.id)
        assert sorted(t.status for t in stored) == ["cancelled"] * 8
        messages = await assert_pairing(store, room.id)
        results = [m.result for m in messages if m.kind == "tool_result"]
        assert len(results) == 8 and all(r.is_error and r.content.startswith("cancelled") for r in results)
        assert not any("never reports" in m.text for m in messages)

        # the room takes the next line (G9)
        await room.post("a new line after the stop")
        await room.idle()
        last = (await store.load(room.id))[-1]
        assert (last.author, last.kind, last.text) == ("commander", "text", "Fresh start: what next?")
        room_id = room.id
    assert trio.lowlevel.current_statistics().tasks_living == before
    assert provider.failures == [] and provider.remaining() == {}
    await assert_pairing(store, room_id)


async def test_stop_reaches_anonymous_and_background_workers(store, tmp_path):
    provider = ScriptedProvider({
        "commander": [Reply(calls=[("dispatch_to", {"agent": "bg", "task": "slow in the back", "background": True}),
                                   ("run_worker", {"task": "hidden slow job"}),
                                   ("run_worker", {"task": "named slow job", "agent": "named"})]),
                      Reply(say="ready again")],
        "bg": [Reply(say="bg never", delay=30)],
        "named": [Reply(say="named never", delay=30)],
        "worker": [Reply(say="anon never", delay=30)],
    })
    rec = Recorder()
    before = trio.lowlevel.current_statistics().tasks_living
    async with Room.create(store, team(agent("bg"), agent("named")), resolver(provider),
                           workspace=tmp_path, on_event=rec) as room:
        await room.post("go")
        with trio.fail_after(10):  # all three at work (a fixed sleep was too short on a loaded machine)
            while len(room.ledger.running()) < 3:
                await trio.sleep(0.01)
        assert len(room.ledger.running()) == 3
        await room.stop()
        assert not room.busy
        assert sorted((t.agent, t.kind, t.status) for t in room.ledger.tasks.values()) == [
            ("bg", "dispatch", "cancelled"), ("named", "worker", "cancelled"), ("worker", "worker", "cancelled")]
        await assert_pairing(store, room.id)
        await room.post("again")
        await room.idle()
        room_id = room.id
    assert trio.lowlevel.current_statistics().tasks_living == before
    messages = await assert_pairing(store, room_id)
    assert messages[-1].text == "ready again"
    assert not any("never" in m.text for m in messages)


# --- partitions (G3) ---------------------------------------------------------------------------

async def test_partitions_keep_tasks_and_tool_results_where_they_belong(store, tmp_path):
    (tmp_path / "plan.txt").write_text("COMMANDER-FILE-SECRET")
    (tmp_path / "alpha.txt").write_text("ALPHA-FILE-SECRET")
    (tmp_path / "beta.txt").write_text("BETA-FILE-SECRET")
    provider = ScriptedProvider({
        "commander": [
            Reply(calls=[("read_file", {"path": "plan.txt"})]),
            Reply(say="Splitting the work.", calls=[
                ("dispatch_to", {"agent": "alpha", "task": "ALPHA-TASK-ONE"}),
                ("dispatch_to", {"agent": "beta", "task": "BETA-TASK-ONE"})]),
            Reply(calls=[("dispatch_to", {"agent": "alpha", "task": "ALPHA-TASK-TWO"})]),
            Reply(say="Done: both reports are in."),
        ],
        "alpha": [Reply(calls=[("read_file", {"path": "alpha.txt"})]), Reply(say="ALPHA-REPORT-ONE"),
                  Reply(say="ALPHA-REPORT-TWO")],
        "beta": [Reply(calls=[("read_file", {"path": "beta.txt"})]), Reply(say="BETA-REPORT-ONE")],
    })
    async with Room.create(store, team(agent("alpha", tools=["read_file"]), agent("beta", tools=["read_file"]),
                                       commander_tools=["read_file"]),
                           resolver(provider), workspace=tmp_path) as room:
        await room.post("USER-LINE-ONE: plan it and split it.")
        await room.idle()
        room_id = room.id
    assert provider.failures == [] and provider.remaining() == {}
    await assert_pairing(store, room_id)

    alpha, beta, commander = (requests_of(provider, n) for n in ("alpha", "beta", "commander"))
    assert len(alpha) == 3 and len(beta) == 2 and len(commander) == 4
    # each worker saw its own task and its own tool results ...
    assert "ALPHA-TASK-ONE" in alpha[0] and "ALPHA-FILE-SECRET" in alpha[1] and "ALPHA-TASK-TWO" in alpha[2]
    assert "BETA-TASK-ONE" in beta[0] and "BETA-FILE-SECRET" in beta[1]
    # ... never another worker's task, report or tool results, nor the commander's tool results
    for text in alpha:
        for foreign in ("BETA-TASK-ONE", "BETA-REPORT-ONE", "BETA-FILE-SECRET", "COMMANDER-FILE-SECRET"):
            assert foreign not in text
    for text in beta:
        for foreign in ("ALPHA-TASK", "ALPHA-REPORT", "ALPHA-FILE-SECRET", "COMMANDER-FILE-SECRET"):
            assert foreign not in text
    # workers never get the user's lines they were not addressed with
    assert not any("USER-LINE-ONE" in t for t in alpha + beta)
    # the commander gets the reports (as tool results) but not the workers' own tool results
    assert "COMMANDER-FILE-SECRET" in commander[1]
    assert "ALPHA-REPORT-ONE" in commander[2] and "BETA-REPORT-ONE" in commander[2]
    assert "ALPHA-REPORT-TWO" in commander[3]
    for text in commander:
        assert "ALPHA-FILE-SECRET" not in text and "BETA-FILE-SECRET" not in text

    # what was stored agrees: the reports reach the commander only through its tool results
    messages = await store.load(room_id)
    for m in messages:
        if m.author in ("alpha", "beta"):
            assert "commander" not in m.visible_to
            assert "user" in m.visible_to or m.kind == "tool_result"
        if m.kind == "tool_result" and m.author != "commander":
            assert m.visible_to == [m.author]


async def test_background_report_reaches_the_commander_as_a_message(store, tmp_path):
    (tmp_path / "logs.txt").write_text("LOG-FILE-SECRET")
    provider = ScriptedProvider({
        "commander": [Reply(say="On it in the background.",
                            calls=[("dispatch_to", {"agent": "digger", "task": "dig", "background": True})]),
                      Reply(say="Waiting for the digger."),
                      Reply(say="The digger says: DIGGER-REPORT.", sees="DIGGER-REPORT", not_sees="LOG-FILE-SECRET")],
        "digger": [Reply(calls=[("read_file", {"path": "logs.txt"})], delay=0.1), Reply(say="DIGGER-REPORT")],
    })
    async with Room.create(store, team(agent("digger", tools=["read_file"])), resolver(provider),
                           workspace=tmp_path) as room:
        await room.post("dig through the logs")
        await room.idle()
        assert [t.status for t in room.ledger.tasks.values()] == ["done"]
        room_id = room.id
    assert provider.failures == [] and provider.remaining() == {}
    messages = await assert_pairing(store, room_id)
    report = next(m for m in messages if m.author == "digger" and m.kind == "text")
    assert set(report.visible_to) == {"digger", "user", "commander"}


# --- restart (G5, G6, G7) ----------------------------------------------------------------------

async def test_restart_keeps_floor_ledger_seq_and_partitions(store, tmp_path):
    (tmp_path / "notes.txt").write_text("some notes")
    provider = ScriptedProvider({
        "commander": [
            Reply(say="Let me look.", calls=[("dispatch_to", {"agent": "researcher", "task": "look it up"}),
                                             ("run_worker", {"task": "count things"})]),
            Reply(say="Found it. Handing you to the tutor.",
                  calls=[("hand_off_to", {"agent": "tutor", "note": "explain it"})]),
        ],
        "researcher": [Reply(calls=[("read_file", {"path": "notes.txt"})]), Reply(say="the answer is 42")],
        "worker": [Reply(say="there are 3 things")],
        "tutor": [Reply(say="Hello, I am the tutor. What would you like to know?"),
                  Reply(say="Still here after the restart.", sees="after the restart")],
    })
    resolve = resolver(provider)
    members = ["commander", "researcher", "tutor"]
    async with Room.create(store, team(agent("researcher", tools=["read_file"]), agent("tutor", interactive=True),
                                       commander_tools=["read_file"]),
                           resolve, workspace=tmp_path) as room:
        await room.post("What is the answer?")
        await room.idle()
        assert room.floor == "tutor"
        room_id = room.id
        floor = room.floor
        ledger = {t.id: (t.agent, t.kind, t.status, t.result) for t in room.ledger.tasks.values()}
        partitions = {n: [m.id for m in room.members[n].partition.messages] for n in members}
        views = {n: list(room.members[n].partition.view) for n in members}
    before = await store.load(room_id)
    assert len(ledger) == 2 and all(s == "done" for _, _, s, _ in ledger.values())

    rec = Recorder()
    async with Room.open(store, room_id, resolve, on_event=rec) as room:
        assert room.floor == floor == "tutor"
        assert [e.floor for _, e in rec.of(State)] == ["tutor"]  # announced once on open
        assert {t.id: (t.agent, t.kind, t.status, t.result) for t in room.ledger.tasks.values()} == ledger
        for n in members:
            assert [m.id for m in room.members[n].partition.messages] == partitions[n], n
            assert list(room.members[n].partition.view) == views[n], n
            assert room.members[n].partition.unread == 0
        await room.post("Are you there after the restart?")
        await room.idle()
        assert room.floor == "tutor"
    after = await store.load(room_id)
    assert provider.failures == [] and provider.remaining() == {}
    assert [m.id for m in after[:len(before)]] == [m.id for m in before]
    new = after[len(before):]
    assert [m.seq for m in new] == list(range(before[-1].seq + 1, before[-1].seq + 1 + len(new)))
    assert [(m.author, m.kind) for m in new] == [("user", "user"), ("tutor", "text")]
    assert pairing_problems(after) == []


async def test_restart_after_a_stop_keeps_seq_strictly_increasing(store, tmp_path):
    provider = ScriptedProvider({
        "commander": [Reply(calls=[("dispatch_to", {"agent": "slow", "task": "forever"})]), Reply(say="back")],
        "slow": [Reply(say="never", delay=30)],
    })
    resolve = resolver(provider)
    async with Room.create(store, team(agent("slow")), resolve, workspace=tmp_path) as room:
        await room.post("start")
        await trio.sleep(0.1)
        await room.stop()
        room_id = room.id
    before = await assert_pairing(store, room_id)
    async with Room.open(store, room_id, resolve) as room:
        assert [t.status for t in room.ledger.tasks.values()] == ["cancelled"]
        await room.post("after restart")
        await room.idle()
    after = await assert_pairing(store, room_id)
    assert after[:len(before)] == before
    assert min(m.seq for m in after[len(before):]) > max(m.seq for m in before)


async def test_anonymous_worker_names_are_not_reused_after_a_restart(store, tmp_path):
    provider = ScriptedProvider({
        "commander": [Reply(calls=[("run_worker", {"task": "FIRST-JOB"})]),
                      Reply(calls=[("run_worker", {"task": "SECOND-JOB"})]), Reply(say="done")],
        "worker": [Reply(say="slow", delay=30), Reply(say="second result")],
    })
    resolve = resolver(provider)
    async with Room.create(store, team(), resolve, workspace=tmp_path) as room:
        await room.post("one")
        await trio.sleep(0.1)
        await room.stop()
        room_id = room.id
    async with Room.open(store, room_id, resolve) as room:
        await room.post("two")
        await room.idle()
        agents = [t.agent for t in room.ledger.tasks.values()]
    # Each run_worker call is a new hidden worker: one name each, as in a room that never restarted.
    assert len(set(agents)) == 2, agents
    # Otherwise the stored partition of that name (its visible_to) mixes two workers' assignments.
    messages = await store.load(room_id)
    second = next(t for t in (await store.tasks(room_id)) if t.task == "SECOND-JOB").agent
    assert not any("FIRST-JOB" in m.text for m in messages if second in m.visible_to)


# --- bad input and bad assignments -------------------------------------------------------------

async def test_unknown_tool_fails_room_creation_before_anything_runs(store, tmp_path):
    provider = ScriptedProvider({})
    bad = team(agent("coder", tools=["read_file", "teleport"]))
    with pytest.raises(BaseException) as info:
        async with Room.create(store, bad, resolver(provider), workspace=tmp_path):
            pytest.fail("the room opened with an unknown tool")  # pragma: no cover
    errors = leaves(info.value)
    assert len(errors) == 1 and isinstance(errors[0], InputError), errors
    assert "teleport" in str(errors[0]) and "coder" in str(errors[0]) and "read_file" in str(errors[0])
    assert provider.requests == []
    # the commander's tools are checked as well
    with pytest.raises(BaseException) as info:
        async with Room.create(store, team(commander_tools=["teleport"]), resolver(provider), workspace=tmp_path):
            pytest.fail("the room opened with an unknown tool")  # pragma: no cover
    assert [type(e) for e in leaves(info.value)] == [InputError]


async def test_unknown_tool_raises_input_error_itself(store, tmp_path):
    with pytest.raises(InputError, match="teleport"):
        async with Room.create(store, team(agent("coder", tools=["teleport"])), resolver(ScriptedProvider({})),
                               workspace=tmp_path):
            pass  # pragma: no cover


async def test_failed_creation_stores_no_room(store, tmp_path):
    with pytest.raises(InputError, match="unknown tool 'teleport'"):
        async with Room.create(store, team(agent("coder", tools=["teleport"])), resolver(ScriptedProvider({})),
                               workspace=tmp_path):
            pass  # pragma: no cover
    assert await store.rooms() == []


async def test_a_lone_assignment_commits_with_its_call_and_its_report_with_its_result(store, tmp_path):
    """A response that only assigns work commits in its first task's transaction: the call is on disk exactly when
    the task is, just before it, and is published just before it; a call whose tool fails before it posts rides
    with its error result instead. The report of a response's only assignment commits in its tool result's
    transaction, still recording the line it answers (a takeover reads that)."""
    provider = ScriptedProvider({
        "commander": [Reply(say="Ready."),
                      Reply(say="Asking a.", calls=[("dispatch_to", {"agent": "a", "task": "the part"})]),
                      Reply(calls=[("dispatch_to", {"agent": "nobody", "task": "a part"})]),
                      Reply(say="Done.")],
        "a": [Reply(say="a's part")],
    })
    commits, rec, room_id = await commits_of_a_line(store, team(agent("a")), provider, tmp_path, "Have a do it.")
    # the line, the call with its task, a's report with the result, the call with its error result, the answer, usage
    assert len(commits) == 6, commits
    published = [(e.kind, e.author, e.seq) for _, e in rec.of(MessageEvent)]
    line = next(i for i, (kind, _, _) in enumerate(published) if kind == "user" and i > 0)
    assert [p[:2] for p in published[line:]] == [
        ("user", "user"), ("tool_call", "commander"), ("task", "commander"), ("text", "a"),
        ("tool_result", "commander"), ("tool_call", "commander"), ("tool_result", "commander"), ("text", "commander")]
    assert [p[2] for p in published] == sorted(p[2] for p in published)  # in seq order
    messages = await assert_pairing(store, room_id)
    error = next(m for m in messages if m.kind == "tool_result" and m.result.is_error)
    assert "no member named 'nobody'" in error.result.content
    task = next(m for m in messages if m.kind == "task")
    assert (await store.answered(room_id))["a"] == task.seq
    assert [m.seq for m in messages] == list(range(1, len(messages) + 1))
    assert provider.failures == [] and provider.remaining() == {}


async def test_a_held_call_whose_carrier_fails_rides_with_the_next_message(store, tmp_path, monkeypatch):
    """The task's commit fails once (the disk, say): the call is not lost and not published alone; it is committed
    with the error result the tool then gets, and the room goes on."""
    provider = ScriptedProvider({
        "commander": [Reply(calls=[("dispatch_to", {"agent": "a", "task": "the part"})]), Reply(say="Noted.")],
        "a": [],
    })
    real, failed = store.append_many, []

    async def append_many(room_id, drafts, **kw):
        if any(d.kind == "task" for d in drafts) and not failed:
            failed.append([d.kind for d in drafts])
            raise OSError("disk I/O error")
        return await real(room_id, drafts, **kw)

    monkeypatch.setattr(store, "append_many", append_many)
    async with Room.create(store, team(agent("a")), resolver(provider), workspace=tmp_path) as room:
        await room.post("Have a do it.")
        await room.idle()
        room_id = room.id
    assert failed == [["tool_call", "task"]]
    messages = await assert_pairing(store, room_id)
    assert [m.kind for m in messages] == ["user", "tool_call", "tool_result", "text"]
    assert "disk I/O error" in messages[2].result.content and messages[2].result.is_error
    assert [t.status for t in await store.tasks(room_id)] == []
    assert provider.failures == [] and provider.remaining() == {}


async def test_a_relayed_line_costs_one_scheduler_pass_per_model_call(store, tmp_path):
    """At zero latency the only passes a line makes are the model calls' own (the scripted model yields once per
    call) and the one `idle` waits in: free locks, the worker limit and an assignment alone in its response are
    taken without one. A pass is a task step; each cost about a tenth of such a line."""
    script = {"commander": [], "a": [], "b": []}
    for i in range(3):
        script["commander"] += [Reply(calls=[("dispatch_to", {"agent": "a", "task": f"Draft part {i}."})]),
                                Reply(calls=[("dispatch_to", {"agent": "b", "task": f"Check part {i}."})]),
                                Reply(say=f"Part {i} is drafted and checked.")]
        script["a"].append(Reply(say=f"Part {i}: drafted, in three short paragraphs."))
        script["b"].append(Reply(say=f"Part {i}: checked, no problems found."))
    provider = ScriptedProvider(script)

    class Steps(trio.abc.Instrument):
        count = 0

        def before_task_step(self, task) -> None:
            self.count += 1

    steps = Steps()
    async with Room.create(store, team(agent("a"), agent("b")), resolver(provider), workspace=tmp_path) as room:
        await room.post("Line 0.")  # the first line makes the usage table and renders the prompts: not counted
        await room.idle()
        trio.lowlevel.add_instrument(steps)
        for i in (1, 2):
            await room.post(f"Line {i}.")
            await room.idle()
        trio.lowlevel.remove_instrument(steps)
    assert provider.failures == [] and provider.remaining() == {}
    # per line: the commander's turn starting, five model calls, the test's task back from idle; once: the task
    # that writes the usage rows the first line left (it sleeps until they are due)
    assert steps.count <= 2 * 7 + 1, steps.count


async def test_assignment_errors_explain_themselves(store, tmp_path):
    provider = ScriptedProvider({
        "commander": [Reply(calls=[("hand_off_to", {"agent": "coder", "note": "talk to them"}),
                                   ("dispatch_to", {"agent": "ghost", "task": "haunt"}),
                                   ("run_worker", {"task": "haunt", "agent": "ghost"}),
                                   ("hand_off_to", {"agent": "nobody"}),
                                   ("dispatch_to", {"agent": "commander", "task": "yourself"})]),
                      Reply(say="I'll do it differently.")],
    })
    async with Room.create(store, team(agent("coder"), agent("tutor", interactive=True)), resolver(provider),
                           workspace=tmp_path) as room:
        await room.post("hand me to the coder")
        await room.idle()
        assert room.floor == "commander"
        assert room.ledger.tasks == {}
        room_id = room.id
    assert provider.failures == [] and provider.remaining() == {}
    messages = await assert_pairing(store, room_id)
    results = [m.result for m in messages if m.kind == "tool_result"]
    assert [r.name for r in results] == ["hand_off_to", "dispatch_to", "run_worker", "hand_off_to", "dispatch_to"]
    assert all(r.is_error for r in results)
    handoff = results[0].content
    assert "coder" in handoff and "not interactive" in handoff and "dispatch_to" in handoff
    for r in results[1:]:
        assert "coder" in r.content and "tutor" in r.content, r.content  # the members are listed
    assert "ghost" in results[1].content and "nobody" in results[3].content
    assert not any(m.kind == "task" for m in messages)  # nothing was assigned


async def test_unknown_mention_is_kept_but_not_sent(store, tmp_path):
    provider = ScriptedProvider({})
    async with Room.create(store, team(agent("coder")), resolver(provider), workspace=tmp_path) as room:
        await room.post("@ghost are you there?")
        await room.idle()
        room_id = room.id
    messages = await store.load(room_id)
    assert [(m.author, m.kind, m.visible_to) for m in messages] == [("user", "user", ["user"]),
                                                                    ("room", "notice", ["user"])]
    assert "@ghost" in messages[1].text and "coder" in messages[1].text and "commander" in messages[1].text
    assert provider.requests == []


# --- limits ------------------------------------------------------------------------------------

async def test_max_model_calls_stops_the_group(store, tmp_path):
    provider = ScriptedProvider({
        "commander": [Reply(calls=[("read_file", {"path": f"f{i}.txt"})]) for i in range(6)],
    })
    rec = Recorder()
    limits = Limits(max_model_calls=2)
    async with Room.create(store, team(commander_tools=["read_file"], limits=limits), resolver(provider),
                           workspace=tmp_path, on_event=rec) as room:
        await room.post("loop forever")
        await room.idle()
        with trio.fail_after(2):
            while not any(m.kind == "notice" for m in await store.load(room.id)):
                await trio.sleep(0.01)
        await room.idle()
        assert not room.busy
        room_id = room.id
    assert len(requests_of(provider, "commander")) == 2
    assert len(rec.of(Cancelled)) == 1
    assert "2 model calls" in rec.of(Cancelled)[0][1].reason
    messages = await assert_pairing(store, room_id)
    notice = [m for m in messages if m.kind == "notice"]
    assert len(notice) == 1 and "limit" in notice[0].text and "2 model calls" in notice[0].text
    assert set(notice[0].visible_to) == {"user", "commander"}


async def test_max_turn_seconds_stops_a_slow_turn(store, tmp_path):
    provider = ScriptedProvider({
        "commander": [Reply(calls=[("dispatch_to", {"agent": "slow", "task": "take your time"})]),
                      Reply(say="next line answered")],
        "slow": [Reply(say="too late", delay=30)],
    })
    rec = Recorder()
    async with Room.create(store, team(agent("slow"), limits=Limits(max_turn_seconds=0.3)), resolver(provider),
                           workspace=tmp_path, on_event=rec) as room:
        start = time.perf_counter()
        await room.post("slow please")
        await room.idle()
        with trio.fail_after(2):
            while not rec.of(Cancelled):
                await trio.sleep(0.01)
        elapsed = time.perf_counter() - start
        assert 0.3 <= elapsed < 1.5, elapsed
        assert [t.status for t in room.ledger.tasks.values()] == ["cancelled"]
        messages = await assert_pairing(store, room.id)
        assert any(m.kind == "notice" and "0.3 s" in m.text for m in messages)
        assert "0.3 s" in rec.of(Cancelled)[0][1].reason
        # the next line gets a normal turn, with a fresh allowance
        await room.post("and now?")
        await room.idle()
        assert (await store.load(room.id))[-1].text == "next line answered"
        room_id = room.id
    await assert_pairing(store, room_id)


async def test_turn_deadline_does_not_outlive_the_turn(store, tmp_path, monkeypatch):
    """max_turn_seconds watches one line's work: once the room is idle no watcher is left, and
    closing the room does not wait for the allowance to run out."""
    from orchestrator.room import bus

    monkeypatch.setattr(bus, "DEFER", 0)  # the line's usage rows are written at once: no task waits for them
    provider = ScriptedProvider({"commander": [Reply(say="quick answer")]})
    before = trio.lowlevel.current_statistics().tasks_living
    start = time.perf_counter()
    with trio.fail_after(5):
        async with Room.create(store, team(limits=Limits(max_turn_seconds=3)), resolver(provider),
                               workspace=tmp_path) as room:
            opened = trio.lowlevel.current_statistics().tasks_living
            await room.post("hi")
            await room.idle()
            await trio.sleep(0.05)
            assert trio.lowlevel.current_statistics().tasks_living == opened
        assert time.perf_counter() - start < 1
    assert trio.lowlevel.current_statistics().tasks_living == before


# --- steering, limits and the ledger's read flag ---------------------------------------------

async def test_a_line_posted_while_a_limit_stop_unwinds_is_answered(store, tmp_path):
    names = [f"w{i}" for i in range(8)]
    provider = ScriptedProvider({
        "commander": [Reply(calls=[("dispatch_to", {"agent": n, "task": "slow"}) for n in names]),
                      Reply(say="Yes, still here.", sees="are you still there")],
        **{n: [Reply(say="too late", delay=30)] for n in names},
    })
    unwinding = trio.Event()

    def on_event(ev: Event) -> None:
        if isinstance(ev, ToolEnd) and ev.is_error:  # the first cancelled dispatch: the stop is under way
            unwinding.set()

    async with Room.create(store, team(*(agent(n) for n in names), limits=Limits(max_turn_seconds=0.2)),
                           resolver(provider), workspace=tmp_path, on_event=on_event) as room:
        await room.post("run the slow jobs")
        with trio.fail_after(5):
            await unwinding.wait()
        await room.post("are you still there?")
        await room.idle()
        room_id = room.id
    messages = await assert_pairing(store, room_id)
    assert any(m.kind == "notice" and "0.2 s" in m.text for m in messages)
    assert provider.remaining() == {}, "the line was kept but nobody answered it"
    assert messages[-1].text == "Yes, still here."


async def test_a_mention_does_not_make_a_busy_commander_answer_again(store, tmp_path):
    provider = ScriptedProvider({
        "commander": [Reply(say="Let me think about your question.", delay=0.3)],
        "alpha": [Reply(say="alpha answers the side question", sees="a side question")],
    })
    rec = Recorder()
    async with Room.create(store, team(agent("alpha")), resolver(provider), workspace=tmp_path,
                           on_event=rec) as room:
        await room.post("a question for the commander")
        await trio.sleep(0.1)
        await room.post("@alpha a side question")  # the commander is still thinking
        await room.idle()
        room_id = room.id
    await assert_pairing(store, room_id)
    # When the commander is idle, "@alpha ..." does not wake it (mentions.yaml); busy, it must not either.
    assert [r.agent for r in provider.requests] == ["commander", "alpha"]
    assert rec.of(ErrorEvent) == []


async def test_a_report_read_within_the_turn_is_marked_read(store, tmp_path):
    provider = ScriptedProvider({
        "commander": [
            Reply(say="Asking beta in the background.",
                  calls=[("dispatch_to", {"agent": "beta", "task": "look it up", "background": True})]),
            Reply(say="Meanwhile: hello.", delay=0.2),  # beta reports while this call streams (G10)
            Reply(say="Beta says 42; the tutor explains.", sees="the answer is 42",
                  calls=[("hand_off_to", {"agent": "tutor"})]),
        ],
        "beta": [Reply(say="the answer is 42")],
        "tutor": [Reply(say="Hi, let me explain 42."), Reply(say="Glad it helped. <handback />")],
    })
    async with Room.create(store, team(agent("beta"), agent("tutor", interactive=True)), resolver(provider),
                           workspace=tmp_path) as room:
        await room.post("what is the answer?")
        await room.idle()
        assert room.floor == "tutor"
        assert provider.remaining() == {"tutor": 1} and provider.failures == []
        [task] = room.ledger.tasks.values()
        assert (task.status, task.read) == ("done", True), "the commander read beta's report"
        await room.post("thanks")
        await room.idle()
        assert room.floor == "commander"
        room_id = room.id
    messages = await assert_pairing(store, room_id)
    assert not any(m.kind == "notice" for m in messages), "nothing was pending at the handback"
    assert [r.agent for r in provider.requests].count("commander") == 3


async def test_real_models_bring_their_window_and_compaction_point(store, tmp_path):
    from orchestrator.providers.catalog import ModelInfo

    provider = ScriptedProvider({})
    info = ModelInfo(context_window=5_000, max_output=1_000, compact_at=0.5)
    the_team = team(agent("pinned", context_window=9_000, compact_at=0.9), agent("plain"))
    async with Room.create(store, the_team, resolver(provider), workspace=tmp_path,
                           models=lambda model: info) as room:
        plain = await room._agent(room.members["plain"])
        pinned = await room._agent(room.members["pinned"])
    assert (plain.window, plain.compact_at) == (5_000, 0.5)
    assert (pinned.window, pinned.compact_at) == (9_000, 0.9)  # the agent's own settings win


def test_the_commander_prompt_set_from_its_frame_is_the_template_rendered_whole():
    """Room.Frame renders the commander's prompt once and sets each ledger into its slot: the same text as
    rendering commander.md.j2 with that ledger, whatever the task lines hold."""
    from orchestrator.core.prompts import render
    from orchestrator.room.assembly import Frame

    for values in (dict(instructions="Be brief.", roster=[agent("a"), agent("b")], floor="commander",
                        tools=["bash", "read_file"], memory="Profile: likes {{ braces }}.", skills=""),
                   dict(instructions="", roster=[], floor="a", tools=[], memory="", skills="Skills: one.")):
        frame = Frame(values)
        for ledger in ([], ["t1 a [running] Draft part 1."],
                       ["t1 a [done] Two\nlines {{ x }} {% if %} -> - done", "- t2 b [failed] \x00 odd", ""]):
            assert frame.text(ledger) == render("commander.md.j2", ledger=ledger, **values)


def _usage_transactions(store) -> tuple[list[list[str]], Callable[[str], None]]:
    """The tables each committed transaction wrote (usage and messages rows only), as SQLite runs them."""
    transactions: list[list[str]] = [[]]

    def seen(sql: str) -> None:
        if sql.startswith("INSERT INTO usage") or sql.startswith("INSERT INTO messages"):
            transactions[-1].append(sql.split()[2])
        elif sql == "COMMIT":
            transactions.append([])

    return transactions, seen


@pytest.mark.parametrize("defer", [1.0, 0.0])
async def test_a_turns_usage_rows_ride_a_message_once_due_or_are_written_when_the_room_closes(
        store, tmp_path, monkeypatch, defer):
    """Usage rows are deferred writes (room/bus.py): rows that waited Bus.DEFER ride the next message's commit;
    lines that follow each other faster than that leave theirs for the room's close, in one transaction."""
    from orchestrator.room import bus

    monkeypatch.setattr(bus, "DEFER", defer)
    provider = ScriptedProvider({
        "commander": [Reply(say="Ready."), Reply(calls=[("dispatch_to", {"agent": "a", "task": "draft it"})]),
                      Reply(say="Drafted.")],
        "a": [Reply(say="a draft")]})
    transactions, seen = _usage_transactions(store)
    async with Room.create(store, team(agent("a")), resolver(provider), workspace=tmp_path) as room:
        store._db.conn.set_trace_callback(seen)
        await room.post("Are you there?")
        await room.idle()
        await room.post("Draft it with a.")
        await room.idle()
        room_id = room.id
    store._db.conn.set_trace_callback(None)
    written = [t for t in transactions if t]
    with_usage = [t for t in written if "usage" in t]
    if defer:
        assert with_usage == [["usage"] * 5]  # four model calls and one tool run, all in the close's write
    else:
        assert len(with_usage) >= 2 and all("messages" in t for t in with_usage[:-1])
    assert sum(t.count("usage") for t in written) == 5
    report = await UsageLog(store).report([room_id], lambda *_: None)
    assert report.total.calls == 4 and report.total.tool_calls == 1


async def test_waiting_usage_rows_take_the_next_turns_rows_into_one_write(store):
    from orchestrator.room.bus import Bus
    from orchestrator.store.usage import Rows

    bus = Bus(store, "r", {})
    for n in range(3):
        bus.carry(Rows([{"turn": n}]), defer=True)
    bus.carry(lambda db: None, defer=True)  # a write of another kind waits beside them
    bus.carry(Rows([{"turn": 3}]), defer=True)
    waiting = bus._take(deferred=True)
    assert [w.rows if isinstance(w, Rows) else "other" for w in waiting] == [
        [{"turn": 0}, {"turn": 1}, {"turn": 2}], "other", [{"turn": 3}]]


async def test_a_room_closed_by_an_error_still_writes_its_waiting_usage_rows(store, tmp_path):
    provider = ScriptedProvider({"commander": [Reply(say="Ready.")]})
    failed = False
    try:
        async with Room.create(store, team(), resolver(provider), workspace=tmp_path) as room:
            await room.post("Are you there?")
            await room.idle()
            room_id = room.id
            raise RuntimeError("the caller failed")
    except* RuntimeError:
        failed = True
    assert failed
    assert (await UsageLog(store).report([room_id], lambda *_: None)).total.calls == 1


async def test_an_idle_rooms_usage_rows_are_written_once_due_without_a_message(store, tmp_path, monkeypatch):
    from orchestrator.room import bus

    monkeypatch.setattr(bus, "DEFER", 1.0)
    provider = ScriptedProvider({"commander": [Reply(say="Ready.")]})
    async with Room.create(store, team(), resolver(provider), workspace=tmp_path) as room:
        await room.post("Are you there?")
        await room.idle()
        assert (await UsageLog(store).report([room.id], lambda *_: None)).total.calls == 0  # not due yet
        with trio.fail_after(5):
            while not (await UsageLog(store).report([room.id], lambda *_: None)).total.calls:
                await trio.sleep(0.05)
        assert (await room.usage_report(lambda *_: None)).total.calls == 1
