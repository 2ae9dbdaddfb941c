"""Fitting requests into their budget (E7) and compaction (E5), from unit level to a crowded room."""
from __future__ import annotations

import time
import uuid

import msgspec

from orchestrator.core.tokens import estimate
from orchestrator.core.types import Draft, Message, ModelMessage, TextBlock, ToolCallBlock, ToolResultBlock
from orchestrator.engine import budget
from orchestrator.engine.partition import Partition, tokens_of
from orchestrator.engine.runner import Agent, run
from orchestrator.providers.scripted import Reply, ScriptedProvider
from orchestrator.room.room import Room
from orchestrator.team.schema import AgentDef, Team
from orchestrator.store.db import Store
from orchestrator.tools.base import Registry, Tool


class Args(msgspec.Struct):
    n: int


def chapter(n: int, chars: int = 4000) -> str:
    return (f"chapter {n}: " + "words about the history of distributed caches. " * (chars // 40))[:chars]


async def read_chapter(args: Args, ctx) -> str:
    return chapter(args.n)


CHAPTERS = Tool("read_chapter", "Read chapter n.", Args, read_chapter, read_only=True)


def pairing_ok(messages: list[ModelMessage]) -> bool:
    open_calls: list[str] = []
    for m in messages:
        results = [b.call_id for b in m.blocks if isinstance(b, ToolResultBlock)]
        if open_calls:
            if results != open_calls:
                return False
            open_calls = []
        elif results:
            return False
        open_calls = [b.id for b in m.blocks if isinstance(b, ToolCallBlock)]
    return not open_calls


def history(rounds: int, result_chars: int = 4000) -> tuple[list[ModelMessage], list[int]]:
    view = [ModelMessage("user", [TextBlock("read the whole book")])]
    for i in range(rounds):
        view.append(ModelMessage("assistant", [ToolCallBlock(f"c{i}", "read_chapter", {"n": i})]))
        view.append(ModelMessage("user", [ToolResultBlock(f"c{i}", "read_chapter", chapter(i, result_chars))]))
    return view, [tokens_of(m) for m in view]


def cost(messages: list[ModelMessage]) -> int:
    return sum(tokens_of(m) for m in messages)


def test_a_fitting_request_is_left_alone():
    view, sizes = history(3)
    assert budget.fit(view, sizes, sum(sizes)) is view


def test_oldest_results_are_cleared_in_batches_of_four_and_the_newest_kept():
    view, sizes = history(12)
    fitted = budget.fit(view, sizes, sum(sizes) - 1)  # one token over: still a whole batch cleared
    cleared = [i for i, m in enumerate(fitted) if isinstance(m.blocks[0], ToolResultBlock)
               and m.blocks[0].content == budget.cleared_note()]
    assert cleared == [2, 4, 6, 8]
    assert fitted[-1] == view[-1] and pairing_ok(fitted)
    assert cost(fitted) <= sum(sizes) - 1


def test_small_results_stay_and_at_least_the_newest_result_survives():
    view, sizes = history(6)
    small = ModelMessage("user", [ToolResultBlock("c0", "read_chapter", "ok")])
    view[2], sizes[2] = small, tokens_of(small)
    fitted = budget.fit(view, sizes, 400)  # far too small: every clearable result goes
    results = [m for m in fitted if m.blocks and isinstance(m.blocks[0], ToolResultBlock)]
    assert pairing_ok(fitted)
    assert fitted[-1].blocks[0].content == chapter(5)  # always at least one intact
    if small in fitted:
        assert small.blocks[0].content == "ok"
    assert all(r.blocks[0].content in (budget.cleared_note(), "ok", chapter(5)) for r in results)


def test_clearing_may_aim_below_the_budget_and_only_the_budget_cuts():
    """Clearing is cheap, so it aims where compaction would start (`clear_to`); turns are cut only past the budget."""
    view, sizes = history(12)
    total = sum(sizes)
    sent, after = budget.fitted(view, sizes, total + 1000, total, clear_to=total // 2)
    cleared = [m for m in sent if isinstance(m.blocks[0], ToolResultBlock) and m.blocks[0].content == budget.cleared_note()]
    assert len(sent) == len(view) and pairing_ok(sent)  # cleared, not cut
    assert cleared and len(cleared) % budget.BATCH == 0 and after == cost(sent) <= total // 2
    assert budget.fit(view, sizes, total + 1000, total, clear_to=total // 2) == sent
    # results too small to clear: clearing cannot reach its aim, and under the budget nothing is cut either
    small, small_sizes = history(12, result_chars=150)
    sent, after = budget.fitted(small, small_sizes, sum(small_sizes), clear_to=sum(small_sizes) // 2)
    assert sent == small and after == sum(small_sizes)  # what the engine then weighs against compaction


def test_whole_user_turns_then_whole_rounds():
    turns = []
    for t in range(4):
        turns.append(ModelMessage("user", [TextBlock(f"question {t} " + "x" * 2000)]))
        turns.append(ModelMessage("assistant", [TextBlock(f"answer {t} " + "y" * 2000)]))
    sizes = [tokens_of(m) for m in turns]
    fitted = budget.fit(turns, sizes, sum(sizes[:1]) + sum(sizes[-4:]) + 60)
    texts = [m.blocks[0].text.split()[0] + m.blocks[0].text.split()[1] for m in fitted if isinstance(m.blocks[0], TextBlock)]
    assert texts[0] == "question0" and "Earlier" in fitted[1].blocks[0].text
    assert texts[2:] == ["question2", "answer2", "question3", "answer3"]
    # one long turn of tool rounds (a worker's only kind): whole rounds from the end
    view, sizes = history(10, result_chars=150)  # results too small to be worth clearing
    fitted = budget.fit(view, sizes, sizes[0] + 5 * (sizes[1] + sizes[2]) + 60)
    assert pairing_ok(fitted) and fitted[0] == view[0]
    assert fitted[2:] == view[-10:]


def _message(author, kind, blocks, seq):
    return Message(id=uuid.uuid4().hex, room="r", seq=seq, ts=time.time(), author=author, kind=kind,
                   blocks=blocks, visible_to=[author])


async def test_prefix_stays_identical_between_most_consecutive_requests(tmp_path):
    part = Partition("reader")
    seq = iter(range(1, 10_000))

    async def commit(d: Draft) -> Message:
        m = Message(id=uuid.uuid4().hex, room="r", seq=next(seq), ts=time.time(), author=d.author, kind=d.kind,
                    blocks=d.blocks, visible_to=d.visible_to, replaces=d.replaces)
        part.append(m)
        return m

    await commit(Draft(author="user", kind="user", blocks=[TextBlock("read 20 chapters")], visible_to=["reader"]))
    provider = ScriptedProvider({"reader": [Reply(calls=[("read_chapter", {"n": i})]) for i in range(20)]
                                 + [Reply(say="done")]})
    agent = Agent("reader", provider, "scripted", "You read.", Registry([CHAPTERS]), tmp_path, budget=8000)
    await run(agent, part, commit)
    encoded = [[msgspec.json.encode(m) for m in r.messages] for r in provider.requests]
    assert len(encoded) == 21
    stable = sum(1 for a, b in zip(encoded, encoded[1:]) if b[:len(a)] == a)
    fitted = sum(1 for r in provider.requests if any(
        isinstance(b, ToolResultBlock) and b.content == budget.cleared_note() for m in r.messages for b in m.blocks))
    assert fitted >= 10  # the budget really was binding
    assert stable >= 14, stable  # batches of four: most consecutive requests share the whole prefix
    assert all(estimate("You read.") + cost(r.messages) <= 8000 for r in provider.requests)


async def test_eight_workers_forty_long_chapters_each_stay_under_budget(tmp_path):
    """The sub-agent failure the spec describes: one instruction turn growing to far past the budget."""
    for n in range(40):
        (tmp_path / f"ch{n:02d}.txt").write_text(chapter(n, chars=48_000))  # ~12k tokens each
    workers = [f"w{i}" for i in range(8)]
    script = {"commander": [Reply(calls=[("dispatch_to", {"agent": w, "task": "Read ch00..ch39 and summarize."})
                                         for w in workers]), Reply(say="all eight are done")]}
    for w in workers:
        script[w] = [Reply(calls=[("read_file", {"path": f"ch{n:02d}.txt"})]) for n in range(40)] + \
                    [Reply(say=f"{w}: summary of forty chapters")]
    provider = ScriptedProvider(script)
    team = Team(commander=AgentDef(name="commander", model="scripted"),
                agents=[AgentDef(name=w, model="scripted", tools=["read_file"], context_window=1_000_000,
                                 request_budget=400_000) for w in workers])
    store = await Store.open(tmp_path / "room.db")
    try:
        async with Room.create(store, team, lambda m: (provider, "scripted"), workspace=tmp_path) as room:
            await room.post("Have everyone read the book.")
            await room.idle()
            statuses = [t.status for t in room.ledger.tasks.values()]
    finally:
        await store.close()
    assert statuses == ["done"] * 8
    worker_requests = [r for r in provider.requests if r.agent in workers]
    assert len(worker_requests) == 8 * 41
    over = [r for r in worker_requests
            if estimate(r.system) + cost(r.messages) + sum(estimate(str(t.input_schema)) for t in r.tools) > 400_000]
    assert over == []
    biggest = max(sum(len(b.content) for m in r.messages for b in m.blocks if isinstance(b, ToolResultBlock))
                  for r in worker_requests)
    assert biggest > 1_000_000  # the budget was reached, so fitting did the work
