"""Finished work is not re-read: at a new task, a member's earlier tool results are shown as the clearing note,
while its task lines, calls and reports stay whole, and the stored messages keep everything."""
from __future__ import annotations

import msgspec

from orchestrator.core.types import Message, TextBlock, ToolCallBlock, ToolResultBlock
from orchestrator.engine.budget import cleared_note
from orchestrator.engine.partition import Partition
from orchestrator.providers.scripted import Reply, ScriptedProvider
from orchestrator.room.room import Room
from orchestrator.skills.activation import NAME as ACTIVATE
from orchestrator.store.db import Store
from orchestrator.team.schema import AgentDef, Team

_seq = iter(range(1, 100_000))
SOURCE = "def parse(line):\n    return line.split(',')\n" * 60  # a source worth clearing


def m(author, kind, *blocks, viewer="w"):
    n = next(_seq)
    return Message(id=f"m{n}", room="r", seq=n, ts=float(n), author=author, kind=kind, blocks=list(blocks),
                   visible_to=[viewer])


def task(text):
    return m("commander", "task", TextBlock(text))


def call(cid, name="read_file"):
    return m("w", "tool_call", ToolCallBlock(cid, name, {"path": f"{cid}.py"}))


def result(cid, content=SOURCE, name="read_file"):
    return m("w", "tool_result", ToolResultBlock(cid, name, content))


def reply(text):
    return m("w", "text", TextBlock(text))


def contents(p: Partition) -> list[str]:
    return [b.content for v in p.view for b in v.blocks if isinstance(b, ToolResultBlock)]


def finished_task(p: Partition, n: int) -> None:
    for msg in (task(f"task {n}"), call(f"c{n}"), result(f"c{n}"), reply(f"REPORT {n}: parse splits on commas")):
        p.append(msg)


def test_a_new_task_clears_the_results_of_the_finished_ones_and_keeps_the_rest():
    p = Partition("w")
    finished_task(p, 1)
    before = p.tokens
    assert contents(p) == [SOURCE]  # within its own task, a result stays whole
    p.append(task("task 2"))
    assert contents(p) == [cleared_note()]
    texts = [b.text for v in p.view for b in v.blocks if isinstance(b, TextBlock)]
    assert texts == ["[task from commander] task 1", "REPORT 1: parse splits on commas",
                     "[task from commander] task 2"]
    assert p.view[1].blocks[0] == ToolCallBlock("c1", "read_file", {"path": "c1.py"})  # the call is kept
    assert p.messages[2].result.content == SOURCE  # the stored message is untouched
    assert p.tokens == sum(p.sizes) < before


def test_the_prefix_changes_once_per_task_and_not_within_it():
    p = Partition("w")
    finished_task(p, 1)
    p.append(task("task 2"))
    start = list(p.view)
    for msg in (call("c2"), result("c2"), call("c3"), result("c3")):
        p.append(msg)
        assert p.view[:len(start)] == start  # every request of the task starts with the same messages
    assert contents(p) == [cleared_note(), SOURCE, SOURCE]


def test_work_still_going_when_the_next_task_arrives_stays_whole():
    """A task posted while the member works on the previous one (it answers both in one turn): the running
    task's results are not finished, so they stay; the work before its last report is cleared."""
    p = Partition("w")
    finished_task(p, 1)
    p.append(task("task 2"))
    p.append(call("c2"))
    p.append(result("c2"))
    p.append(task("task 3"))  # no report for task 2 yet
    assert contents(p) == [cleared_note(), SOURCE]
    p.append(reply("REPORT 2"))
    p.append(task("task 4"))
    assert contents(p) == [cleared_note(), cleared_note()]


def test_a_user_line_is_no_task_boundary():
    """An interactive member holding the floor: its conversation with the user keeps its results."""
    p = Partition("w")
    p.append(task("The commander handed you the floor; talk with the user directly."))
    p.append(m("user", "user", TextBlock("look at a.py")))
    p.append(call("c1"))
    p.append(result("c1"))
    p.append(reply("a.py parses lines"))
    p.append(m("user", "user", TextBlock("and what else?")))
    assert contents(p) == [SOURCE]
    p.append(task("next task"))  # handed back, then given work: that conversation is finished
    assert contents(p) == [cleared_note()]


def test_small_results_and_activated_skills_stay():
    p = Partition("w")
    p.append(task("task 1"))
    p.append(call("s1", ACTIVATE))
    p.append(result("s1", "SKILL-RULE: report in one line. " * 40, ACTIVATE))
    p.append(call("c1"))
    p.append(result("c1", "ok"))
    p.append(reply("REPORT 1"))
    p.append(task("task 2"))
    assert contents(p) == ["SKILL-RULE: report in one line. " * 40, "ok"]


def test_a_reload_and_a_summary_rebuild_give_the_same_view():
    messages = []
    p = Partition("w")
    for n in (1, 2, 3):
        for msg in (task(f"task {n}"), call(f"c{n}"), result(f"c{n}"), reply(f"REPORT {n}")):
            p.append(msg)
            messages.append(msg)
    reloaded = Partition("w")
    for msg in messages:
        reloaded.append(msg)
    assert reloaded.view == p.view and reloaded.sizes == p.sizes and reloaded.tokens == p.tokens
    summary = Message(id="s", room="r", seq=next(_seq), ts=0.0, author="w", kind="summary",
                      blocks=[TextBlock("[Summary] tasks 1 and 2")], visible_to=["w"],
                      replaces=[x.id for x in messages[:8]])
    p.append(summary)
    p.append(task("task 4"))
    assert contents(p) == [cleared_note()]  # task 3's result, cleared at task 4 after the rebuild too
    assert p.tokens == sum(p.sizes)


def _tool_results(r) -> list[str]:
    return [b.content for mm in r.messages for b in mm.blocks if isinstance(b, ToolResultBlock)]


def _texts(r) -> str:
    return "\n".join(b.text for mm in r.messages for b in mm.blocks if isinstance(b, TextBlock))


async def test_a_workers_second_task_is_sent_its_first_report_but_not_its_first_source(tmp_path):
    (tmp_path / "a.py").write_text("ALPHA_SOURCE = 1\n" * 200)
    (tmp_path / "b.py").write_text("BETA_SOURCE = 2\n" * 200)
    provider = ScriptedProvider({
        "commander": [Reply(calls=[("dispatch_to", {"agent": "reader", "task": "Review a.py."})]),
                      Reply(calls=[("dispatch_to", {"agent": "reader", "task": "Review b.py."})]),
                      Reply(say="both reviewed")],
        "reader": [Reply(calls=[("read_file", {"path": "a.py"})]), Reply(say="REPORT-A: a.py sets one constant."),
                   Reply(calls=[("read_file", {"path": "b.py"})]), Reply(say="REPORT-B: b.py sets another.")],
    })
    team = Team(commander=AgentDef(name="commander", model="scripted"),
                agents=[AgentDef(name="reader", model="scripted", tools=["read_file"])])
    store = await Store.open(tmp_path / "room.db")
    try:
        async with Room.create(store, team, lambda _: (provider, "scripted"), workspace=tmp_path) as room:
            await room.post("Review a.py, then b.py.")
            await room.idle()
            stored = [msg for msg in await store.load(room.id) if msg.kind == "tool_result" and msg.author == "reader"]
    finally:
        await store.close()
    first, report_a, second, report_b = [r for r in provider.requests if r.agent == "reader"]
    assert "ALPHA_SOURCE" in "".join(_tool_results(report_a))
    assert _tool_results(second) == [cleared_note()]  # task 2 starts: task 1's source is not sent again
    assert "Review a.py." in _texts(second) and "REPORT-A: a.py sets one constant." in _texts(second)
    assert "Review b.py." in _texts(second)
    assert _tool_results(report_b)[0] == cleared_note() and "BETA_SOURCE" in _tool_results(report_b)[1]
    encoded = [msgspec.json.encode(x) for x in second.messages]
    assert [msgspec.json.encode(x) for x in report_b.messages[:len(encoded)]] == encoded  # one prefix per task
    assert report_b.system == second.system and report_b.tools == second.tools
    assert "ALPHA_SOURCE" in stored[0].result.content  # the room keeps the source
