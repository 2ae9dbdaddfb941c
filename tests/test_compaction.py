"""Compaction (E5): when it fires (only once clearing old results cannot help), where it cuts, what it
stores, what its request reuses of the agent's own, and when it declines."""
from __future__ import annotations

import time
import uuid

import msgspec
import pytest

from orchestrator.core.events import Compaction
from orchestrator.core.types import Draft, Message, TextBlock, ToolCallDone, ToolResultBlock
from orchestrator.engine import budget
from orchestrator.engine.compaction import cut_point
from orchestrator.engine.partition import Partition, tokens_of
from orchestrator.engine.runner import Agent, run_turn
from orchestrator.providers.scripted import Reply, ScriptedProvider
from orchestrator.store.db import Store
from orchestrator.store.heal import pairing_problems
from orchestrator.tools.base import Registry, Tool
from orchestrator.tools.files import READ_FILE, WRITE_FILE


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


def writes(n=6, chars=2400) -> list[Reply]:
    """A turn that is mostly the agent's own writing: the calls carry it, the results are one line each, so
    clearing old results cannot shrink it and only compaction can."""
    return [Reply(calls=[("write_file", {"path": f"n{i}.md", "content": (f"NOTE{i} " + "text " * chars)[:chars]})])
            for i in range(n)]


async def drive(agent, log):
    return [ev async for ev in run_turn(agent, log.partition, log.commit)]


async def test_compaction_fires_at_80_percent_and_keeps_a_clean_tail(tmp_path):
    log = Log("a")
    await log.commit(Draft(author="user", kind="user", blocks=[TextBlock("write them all")], visible_to=["a"]))
    provider = ScriptedProvider({"a": writes() + [Reply(say="done")]})
    agent = Agent("a", provider, "scripted", "sys", Registry([WRITE_FILE]), tmp_path, window=4000)
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
    store = await Store.open(tmp_path / "db.sqlite")
    try:
        room = await store.create_room("r")
        log = Log("a", store, room.id)
        await log.commit(Draft(author="user", kind="user", blocks=[TextBlock("write them all")], visible_to=["a"]))
        provider = ScriptedProvider({"a": writes() + [Reply(say="done")]})
        await drive(Agent("a", provider, "scripted", "sys", Registry([WRITE_FILE]), tmp_path, window=4000), log)
        assert [m for m in log.messages if m.kind == "summary"]
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


class Pages(msgspec.Struct):
    n: int


def pages(chars: int) -> Tool:
    async def read_page(args: Pages, ctx) -> str:
        return (f"PAGE{args.n} " + "words of a long source. " * (chars // 24))[:chars]

    return Tool("read_page", "Read page n.", Pages, read_page, read_only=True)


@pytest.mark.parametrize("window", [32_768, 200_000])
async def test_old_results_are_cleared_before_compaction_is_considered(tmp_path, window):
    """A read loop that passes 80% of the window at any size: clearing keeps it under, no summary is made."""
    rounds = 14
    chars = 4 * int(window * 0.8) // 10  # ten results would pass the threshold by themselves
    log = Log("a")
    await log.commit(Draft(author="user", kind="user", blocks=[TextBlock("read every page")], visible_to=["a"]))
    provider = ScriptedProvider({"a": [Reply(calls=[("read_page", {"n": i})]) for i in range(rounds)]
                                 + [Reply(say="done")]})
    agent = Agent("a", provider, "scripted", "sys", Registry([pages(chars)]), tmp_path, window=window)
    events = await drive(agent, log)
    assert not [e for e in events if isinstance(e, Compaction)]
    assert not [r for r in provider.requests if r.auxiliary] and events[-1].stop_reason == "end_turn"
    assert log.partition.tokens > window  # what was read passed the window; what was sent did not
    last = provider.requests[-1]
    cleared = [b for m in last.messages for b in m.blocks
               if isinstance(b, ToolResultBlock) and b.content == budget.cleared_note()]
    assert len(cleared) % budget.BATCH == 0 and cleared  # in whole batches
    assert last.messages[-1].blocks[0].content.startswith(f"PAGE{rounds - 1}")  # the newest stays
    fixed = agent.system_tokens + agent.tools.spec_tokens()
    assert all(fixed + sum(tokens_of(m) for m in r.messages) < agent.compact_at * window for r in provider.requests)


async def test_the_summary_request_is_the_agents_own_request_and_an_instruction(tmp_path):
    log = Log("a")
    await log.commit(Draft(author="user", kind="user", blocks=[TextBlock("write them all")], visible_to=["a"]))
    provider = ScriptedProvider({"a": writes(16, 8000) + [Reply(say="done")]})
    agent = Agent("a", provider, "scripted", "You write notes.", Registry([WRITE_FILE, READ_FILE]), tmp_path,
                  window=32_768, cache_key="room-1:a")
    events = await drive(agent, log)
    assert [e for e in events if isinstance(e, Compaction)]
    at = next(i for i, r in enumerate(provider.requests) if r.auxiliary)
    summary, last = provider.requests[at], provider.requests[at - 1]
    assert not last.auxiliary
    assert summary.system == last.system == "You write notes."
    assert summary.tools == last.tools and [t.name for t in summary.tools] == ["write_file", "read_file"]
    assert summary.cache_key == last.cache_key and summary.model == last.model
    # all the agent's last request sent, then the round that came back since, then the instruction alone
    assert summary.messages[:len(last.messages)] == last.messages
    assert len(summary.messages) == len(last.messages) + 3
    assert [m.role for m in summary.messages[-3:]] == ["assistant", "user", "user"]
    instruction = summary.messages[-1]
    assert len(instruction.blocks) == 1 and "do not call any tool" in instruction.blocks[0].text
    kept = log.partition.view[1]  # after the summary: where the kept tail starts, named in the instruction
    assert kept.blocks[0].name == "write_file" and "from your call to write_file on" in instruction.blocks[0].text
    assert 1024 < summary.max_output_tokens <= 2048  # its cap, less what our estimate may be short by


class CallingSummarizer(ScriptedProvider):
    """Answers the summary call with a tool call, as a model may when it is sent tools."""

    async def stream(self, request):
        if request.auxiliary:
            self.requests.append(request)
            yield ToolCallDone("s1", "write_file", {"path": "x", "content": "y"})
            from orchestrator.core.types import StreamEnd
            yield StreamEnd("tool_use")
            return
        async for ev in super().stream(request):
            yield ev


async def test_a_summary_answer_that_calls_a_tool_is_no_summary(tmp_path):
    log = Log("a")
    await log.commit(Draft(author="user", kind="user", blocks=[TextBlock("write them all")], visible_to=["a"]))
    provider = CallingSummarizer({"a": writes() + [Reply(say="done")]})
    agent = Agent("a", provider, "scripted", "sys", Registry([WRITE_FILE]), tmp_path, window=4000)
    events = await drive(agent, log)
    assert [r for r in provider.requests if r.auxiliary]
    assert not [e for e in events if isinstance(e, Compaction)]
    assert not [m for m in log.messages if m.kind == "summary"]
    assert not (tmp_path / "x").exists()  # the call was never run
    assert events[-1].stop_reason == "end_turn"


async def test_after_an_overflow_the_summary_carries_only_what_it_replaces(tmp_path):
    log = Log("a")
    await log.commit(Draft(author="user", kind="user", blocks=[TextBlock("write two")], visible_to=["a"]))
    provider = ScriptedProvider({"a": writes(2, 800) + [Reply(error="context_overflow"), Reply(say="done")]})
    agent = Agent("a", provider, "scripted", "You write notes.", Registry([WRITE_FILE]), tmp_path)
    events = await drive(agent, log)
    assert [e for e in events if isinstance(e, Compaction)] and events[-1].stop_reason == "end_turn"
    at = next(i for i, r in enumerate(provider.requests) if r.auxiliary)
    summary, refused = provider.requests[at], provider.requests[at - 1]
    assert summary.system == refused.system and summary.tools == refused.tools
    assert summary.messages[:-1] == refused.messages[:len(summary.messages) - 1]
    assert len(summary.messages) < len(refused.messages) + 1  # the kept tail is not sent again
    assert "do not call any tool" in summary.messages[-1].blocks[0].text
