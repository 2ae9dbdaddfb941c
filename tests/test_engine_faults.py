"""Faults found against a real model server, at the engine alone: a round of parallel calls repeated over and
over (the loop guard compared each call only with the one before it), and one line longer than the window."""
from __future__ import annotations

import msgspec

from orchestrator.core.prompts import render
from orchestrator.core.types import ToolResultBlock
from orchestrator.core.tokens import estimate
from orchestrator.engine import budget
from orchestrator.engine.loopguard import LoopGuard
from orchestrator.engine.runner import Agent
from orchestrator.providers.scripted import Reply, ScriptedProvider
from orchestrator.tools.base import Registry, Tool, ToolContext
from tests.test_engine import AGENT, Harness, done_of, drive

LOOP_STOP = render("loop_stop.md.j2")


class Dispatch(msgspec.Struct, forbid_unknown_fields=True):
    agent: str
    task: str


def dispatcher(runs: list[tuple[str, str]]) -> Tool:
    async def dispatch_to(args: Dispatch, ctx: ToolContext) -> str:
        runs.append((args.agent, args.task))
        return f"{args.agent} finished {args.task}"

    return Tool("dispatch_to", "give a member a task", Dispatch, dispatch_to)


ROUND = [("dispatch_to", {"agent": "poet", "task": "sea"}), ("dispatch_to", {"agent": "critic", "task": "review"})]


def agent_with(replies: list[Reply], tools: list[Tool], **kw) -> Agent:
    return Agent(name=AGENT, provider=ScriptedProvider({AGENT: replies}), model="scripted", system="You dispatch.",
                 tools=Registry(tools), **kw)


async def test_a_repeated_round_of_parallel_calls_is_nudged_at_the_third_and_stopped_at_the_fifth():
    runs: list[tuple[str, str]] = []
    h = Harness()
    h.user("a sea poem, reviewed")
    replies = [Reply(calls=ROUND) for _ in range(6)]
    replies[3] = Reply(calls=ROUND, sees="same tool call with the same arguments 3 times")  # the nudge arrived
    agent = agent_with(replies, [dispatcher(runs)])
    done = done_of(await drive(agent, h))
    assert done.stop_reason == "loop_detected" and done.result == LOOP_STOP
    assert agent.provider.failures == []
    assert len(agent.provider.requests) == 5 and agent.provider.remaining() == {AGENT: 1}
    assert len(runs) == 8  # four rounds ran; the fifth was answered, not run; the sixth never asked for
    h.check_pairing()
    calls = h.calls()
    assert [r.content for r in h.results()[-2:]] == [LOOP_STOP, LOOP_STOP]
    assert [r.call_id for r in h.results()[-2:]] == [c.id for c in calls[-2:]]
    [notice] = [i for i, m in enumerate(h.messages) if m.kind == "notice"]
    third = max(i for i, m in enumerate(h.messages) if m.kind == "tool_result" and m.result.call_id in
                {c.id for c in calls[4:6]})
    assert notice == third + 1 and "3 times" in h.messages[notice].text


async def test_a_round_in_another_order_is_the_same_round():
    runs: list[tuple[str, str]] = []
    h = Harness()
    h.user("go")
    swapped = list(reversed(ROUND))
    agent = agent_with([Reply(calls=ROUND if i % 2 else swapped) for i in range(5)] + [Reply(say="never")],
                       [dispatcher(runs)])
    assert done_of(await drive(agent, h)).stop_reason == "loop_detected"
    assert len(runs) == 8


async def test_a_round_that_changes_starts_the_count_again():
    runs: list[tuple[str, str]] = []
    h = Harness()
    h.user("go")
    other = [("dispatch_to", {"agent": "poet", "task": "lake"}), ROUND[1]]
    rounds = [ROUND, ROUND, other, ROUND, ROUND, ROUND, ROUND]  # 1 2 1 1 2 3 4: a nudge at the 6th, no stop
    agent = agent_with([Reply(calls=r) for r in rounds] + [Reply(say="done")], [dispatcher(runs)])
    done = done_of(await drive(agent, h))
    assert done.stop_reason == "end_turn" and len(runs) == 14
    assert len([m for m in h.messages if m.kind == "notice"]) == 1


def test_the_guard_keeps_its_single_call_counts():
    guard = LoopGuard()
    same = [("poll", {"x": 1})]
    assert [guard.see(same) for _ in range(5)] == [["ok"], ["ok"], ["nudge"], ["ok"], ["stop"]]
    inside = LoopGuard()
    assert inside.see(same * 5) == ["ok", "ok", "nudge", "ok", "stop"]  # identical calls in one response
    rounds = LoopGuard()
    assert [rounds.see(ROUND) for _ in range(5)] == [["ok"] * 2, ["ok"] * 2, ["nudge"] * 2, ["ok"] * 2, ["stop"] * 2]


# --- one line longer than the window ---------------------------------------------------------------

HUGE = " ".join(f"line{i % 89} of a pasted log" for i in range(3000))  # about 15,000 tokens


async def test_a_line_longer_than_the_window_is_left_out_of_requests_and_kept_in_the_room():
    h = Harness()
    h.user(HUGE)
    agent = agent_with([Reply(say="too long to read"), Reply(say="fine"), Reply(say="yes")], [], window=4_000)
    await drive(agent, h)
    h.user("how are you?")
    await drive(agent, h)
    h.user("still there?")
    await drive(agent, h)
    sent = [r for r in agent.provider.requests if not r.auxiliary]
    assert len(sent) == 3
    for request in sent:
        text = " ".join(b.text for m in request.messages for b in m.blocks if hasattr(b, "text"))
        assert HUGE[:300] not in text
        assert sum(estimate(b.text) for m in request.messages for b in m.blocks if hasattr(b, "text")) < 4_000
    first = " ".join(b.text for m in sent[0].messages for b in m.blocks if hasattr(b, "text"))
    assert "too long for the model's context window" in first  # a note where it stood
    assert h.messages[0].text == HUGE  # the room keeps it as written


def test_fit_leaves_out_only_lines_that_cannot_be_sent_at_all():
    from orchestrator.core.types import ModelMessage, TextBlock, ToolCallBlock
    from orchestrator.engine.partition import tokens_of

    long_result = ModelMessage("user", [ToolResultBlock("c1", "read", HUGE)])
    view = [ModelMessage("user", [TextBlock(HUGE)]), ModelMessage("assistant", [ToolCallBlock("c1", "read", {})]),
            long_result, ModelMessage("user", [TextBlock("and now?")])]
    sizes = [tokens_of(m) for m in view]
    fitted = budget.fit(view, sizes, 2_000, most=3_000)
    assert fitted[0].blocks[0].text.startswith("[A message of about")
    assert fitted[-1].blocks[0].text == "and now?"
    # a line that fits the window, though not the budget, is sent as before
    medium = ModelMessage("user", [TextBlock(HUGE[:8_000])])
    assert budget.fit([medium], [tokens_of(medium)], 1_000, most=10_000) == [medium]
