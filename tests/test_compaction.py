"""Compaction (E5): when it fires, where it cuts, what it stores, and when it declines."""
from __future__ import annotations

import time
import uuid

from orchestrator.core.events import Compaction
from orchestrator.core.types import Draft, Message, TextBlock, ToolResultBlock
from orchestrator.engine.compaction import cut_point
from orchestrator.engine.partition import Partition
from orchestrator.engine.runner import Agent, run_turn
from orchestrator.providers.scripted import Reply, ScriptedProvider
from orchestrator.store.db import Store
from orchestrator.store.heal import pairing_problems
from orchestrator.tools.base import Registry
from orchestrator.tools.files import READ_FILE


class Log:
    def __init__(self, viewer: str, store: Store | None = None, room: str = ""):
        self.partition, self.store, self.room = Partition(viewer), store, room
        self.messages: list[Message] = []
        self._seq = 0

    async def commit(self, d: Draft) -> Message:
        if self.store:
            m = await self.store.append(self.room, d)
        else:
            self._seq += 1
            m = Message(id=uuid.uuid4().hex, room="r", seq=self._seq, ts=time.time(), author=d.author, kind=d.kind,
                        blocks=d.blocks, visible_to=d.visible_to, replaces=d.replaces)
        self.messages.append(m)
        self.partition.append(m)
        return m


def workspace(tmp_path, n=6, chars=2400):
    for i in range(n):
        (tmp_path / f"f{i}.txt").write_text((f"FILE{i} " + "data " * chars)[:chars])
    return tmp_path


async def drive(agent, log):
    return [ev async for ev in run_turn(agent, log.partition, log.commit)]


async def test_compaction_fires_at_80_percent_and_keeps_a_clean_tail(tmp_path):
    ws = workspace(tmp_path)
    log = Log("a")
    await log.commit(Draft(author="user", kind="user", blocks=[TextBlock("read them all")], visible_to=["a"]))
    provider = ScriptedProvider({"a": [Reply(calls=[("read_file", {"path": f"f{i}.txt"})]) for i in range(6)]
                                 + [Reply(say="done")]})
    agent = Agent("a", provider, "scripted", "sys", Registry([READ_FILE]), ws, window=4000)
    events = await drive(agent, log)
    compactions = [e for e in events if isinstance(e, Compaction)]
    assert compactions and all(e.tokens_after < e.tokens_before for e in compactions)
    summaries = [m for m in log.messages if m.kind == "summary"]
    assert len(summaries) == len(compactions) and summaries[0].replaces
    assert [r for r in provider.requests if r.auxiliary]  # the summary came from an auxiliary call
    assert all(r.max_output_tokens and r.max_output_tokens <= 4096 for r in provider.requests if r.auxiliary)
    view = log.partition.view
    assert view[0].blocks[0].text.startswith("[Summary of the earlier conversation")
    assert log.partition.tokens == sum(log.partition.sizes)  # kept as the summaries replaced messages
    assert not isinstance(view[1].blocks[0], ToolResultBlock)  # the tail never starts with an orphan result
    assert pairing_problems(log.messages) == []
    assert events[-1].stop_reason == "end_turn"


async def test_no_benefit_guard_skips_the_summarizer(tmp_path):
    (tmp_path / "big.txt").write_text("row " * 6000)
    log = Log("a")
    await log.commit(Draft(author="user", kind="user", blocks=[TextBlock("read big")], visible_to=["a"]))
    provider = ScriptedProvider({"a": [Reply(calls=[("read_file", {"path": "big.txt"})]), Reply(say="ok")]})
    agent = Agent("a", provider, "scripted", "sys", Registry([READ_FILE]), tmp_path, window=4000)
    events = await drive(agent, log)
    assert not [e for e in events if isinstance(e, Compaction)]
    assert not [r for r in provider.requests if r.auxiliary]


def test_cut_point_never_splits_a_round():
    log = Log("a")
    part = log.partition
    from orchestrator.core.types import ToolCallBlock

    def add(author, kind, *blocks):
        log._seq += 1
        part.append(Message(id=str(log._seq), room="r", seq=log._seq, ts=0.0, author=author, kind=kind,
                            blocks=list(blocks), visible_to=["a"]))

    add("user", "user", TextBlock("go"))
    for i in range(5):
        add("a", "tool_call", ToolCallBlock(f"c{i}", "read_file", {}))
        add("a", "tool_result", ToolResultBlock(f"c{i}", "read_file", "x" * 400))
    for keep in range(0, 2000, 50):
        cut = cut_point(part, keep)
        assert cut is not None and not isinstance(part.view[cut].blocks[0], ToolResultBlock)


async def test_summary_survives_a_reload_in_its_place(tmp_path):
    ws = workspace(tmp_path)
    store = await Store.open(tmp_path / "db.sqlite")
    try:
        room = await store.create_room("r")
        log = Log("a", store, room.id)
        await log.commit(Draft(author="user", kind="user", blocks=[TextBlock("read them all")], visible_to=["a"]))
        provider = ScriptedProvider({"a": [Reply(calls=[("read_file", {"path": f"f{i}.txt"})]) for i in range(6)]
                                     + [Reply(say="done")]})
        await drive(Agent("a", provider, "scripted", "sys", Registry([READ_FILE]), ws, window=4000), log)
        reloaded = Partition("a")
        for m in await store.load(room.id):
            reloaded.append(m)
        assert reloaded.view == log.partition.view
        assert reloaded.tokens == log.partition.tokens
    finally:
        await store.close()


async def test_an_agent_that_only_talks_compacts_too(tmp_path):
    log = Log("a")
    for i in range(12):
        await log.commit(Draft(author="user", kind="user", blocks=[TextBlock(f"question {i}: " + "words " * 150)],
                               visible_to=["a"]))
        await log.commit(Draft(author="a", kind="text", blocks=[TextBlock(f"answer {i}: " + "reply " * 150)],
                               visible_to=["a"]))
    await log.commit(Draft(author="user", kind="user", blocks=[TextBlock("and now?")], visible_to=["a"]))
    provider = ScriptedProvider({"a": [Reply(say="here")]})
    events = await drive(Agent("a", provider, "scripted", "sys", Registry(), tmp_path, window=3000), log)
    assert [e for e in events if isinstance(e, Compaction)]
    assert log.partition.view[0].blocks[0].text.startswith("[Summary of the earlier conversation")
