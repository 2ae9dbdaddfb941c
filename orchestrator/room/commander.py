"""The commander's three assignment tools: dispatch_to, run_worker and hand_off_to.

They are ordinary engine tools that close over the room; the engine never learns what a room is, and
these tools know the room only through the `Host` surface below.
"""
from __future__ import annotations

from typing import Protocol

import msgspec
import trio

from orchestrator.core.events import Done
from orchestrator.core.passes import held
from orchestrator.core.prompts import render
from orchestrator.core.types import Draft, TextBlock
from orchestrator.room.bus import Bus
from orchestrator.room.ledger import Ledger
from orchestrator.room.lines import Lines
from orchestrator.room.members import COMMANDER, USER, Member, Mode, TurnFailed
from orchestrator.store.records import TaskRecord
from orchestrator.team.schema import AgentDef
from orchestrator.tools.base import Tool, ToolContext, ToolError, ToolOutput
from orchestrator.trace import semconv as sc
from orchestrator.trace.spans import OFF, Span, active, current, root


class Host(Protocol):
    """What the commander's tools use of their room (room.py's Room)."""

    _bus: Bus
    _lines: Lines
    _workers: trio.CapacityLimiter  # max_workers: extra workers queue here

    @property
    def ledger(self) -> Ledger: ...
    @property
    def members(self) -> dict[str, Member]: ...
    def roster(self) -> list[AgentDef]: ...
    def anonymous_member(self, call_id: str, batch: list[str]) -> Member: ...
    async def turn(self, member: Member, mode: Mode, links: tuple[Span, ...] = (), *,
                   at_once: bool = False) -> Done: ...
    def spawn(self, fn, *args) -> None: ...
    def wake(self, name: str) -> None: ...
    def report_ready(self) -> None: ...
    async def set_floor(self, owner: str) -> None: ...


class DispatchArgs(msgspec.Struct, forbid_unknown_fields=True):
    agent: str
    task: str
    background: bool = False


class WorkerArgs(msgspec.Struct, forbid_unknown_fields=True):
    task: str
    agent: str | None = None


class HandOffArgs(msgspec.Struct, forbid_unknown_fields=True):
    agent: str
    note: str | None = None


# The arguments of each commander tool, by name (the scenario loader checks scripted calls against them).
ARGS: dict[str, type[msgspec.Struct]] = {"dispatch_to": DispatchArgs, "run_worker": WorkerArgs,
                                         "hand_off_to": HandOffArgs}
ASSIGNING = frozenset({"dispatch_to", "run_worker"})  # the tools whose task messages commit together


def _member(room: Host, name: str) -> Member:
    member = room.members.get(name)
    if member is None or member.anonymous or name == COMMANDER:
        names = ", ".join(m.name for m in room.roster()) or "none"
        raise ToolError(f"no member named {name!r}; members: {names}")
    return member


async def _assign(room: Host, member: Member, task: str, kind: str, ctx: ToolContext, *, visible_to: list[str],
                  background: bool = False) -> TaskRecord:
    """The task message and its ledger entry, committed together (and with the response's other assignments)."""
    rec = room.ledger.new(member.name, kind, task, background=background)
    alone = sum(c.name in ASSIGNING for c in ctx.siblings) == 1
    await room._bus.post(Draft(author=COMMANDER, kind="task", blocks=[TextBlock(render("worker_task.md.j2", task=task))],
                            visible_to=visible_to), task=rec, alone=alone)
    return rec  # opened in the ledger by the bus as the commit landed (Bus.landed)


async def _work(room: Host, member: Member, task_id: str, mode: Mode, links: tuple[Span, ...] = (), *,
                at_once: bool = False) -> str:
    """Run the assignment and close its ledger entry, whatever way it ends. `at_once`: the call is its response's
    only one, so its result is committed as soon as this returns (see Room.turn)."""
    status, result = "cancelled", "stopped"
    try:
        async with held(room._workers):
            done = await room.turn(member, mode, links, at_once=at_once)
        status, result = "done", done.result
        return done.result
    except TurnFailed as exc:
        status, result = "failed", str(exc)
        raise ToolError(f"{member.name} failed: {exc}") from None
    finally:
        if mode == "visible":  # in the background: the commander reads the report later
            with trio.CancelScope(shield=True):
                await room.ledger.close(task_id, status, result)
        else:  # a foreground report is the tool result committed next
            room.ledger.close_with_report(task_id, status, result)


def commander_tools(room: Host) -> list[Tool]:
    async def dispatch_to(args: DispatchArgs, ctx: ToolContext) -> str:
        member = _member(room, args.agent)
        background = args.background or any(c.name == "hand_off_to" for c in ctx.siblings)
        rec = await _assign(room, member, args.task, "dispatch", ctx, visible_to=[member.name, USER], background=background)
        if not background:
            report = await _work(room, member, rec.id, "foreground", at_once=len(ctx.siblings) == 1)
            return report or f"{member.name} finished task {rec.id} without a report"

        async def in_background() -> None:
            # It outlives this call: its span sits under the user line, linked to the call that started it.
            dispatch = current()
            with active(root(dispatch) or OFF):
                try:
                    await _work(room, member, rec.id, "visible", (dispatch,) if dispatch else ())
                except ToolError:
                    pass  # the ledger and the error event already tell the commander
            room.report_ready()

        room.spawn(in_background)
        return (f"task {rec.id} dispatched to {member.name} in the background; its report will arrive "
                f"as a message when it is done")

    async def run_worker(args: WorkerArgs, ctx: ToolContext) -> str:
        if args.agent:
            member = _member(room, args.agent)
            rec = await _assign(room, member, args.task, "worker", ctx, visible_to=[member.name, USER])
            mode: Mode = "foreground"
        else:
            anonymous = [c.id for c in ctx.siblings if c.name == "run_worker" and not c.input.get("agent")]
            member = room.anonymous_member(ctx.call_id, anonymous)
            rec = await _assign(room, member, args.task, "worker", ctx, visible_to=[member.name])
            mode = "hidden"
        return (await _work(room, member, rec.id, mode, at_once=len(ctx.siblings) == 1)
                or f"{member.name} finished without a result")

    async def hand_off_to(args: HandOffArgs, ctx: ToolContext) -> ToolOutput:
        member = _member(room, args.agent)
        if not member.spec.interactive:
            raise ToolError(f"{member.name} is not interactive, so it cannot hold the floor; use dispatch_to "
                            f"to give it work instead")
        last = next((m.text for m in reversed(room.members[COMMANDER].partition.messages) if m.author == USER), "")
        await room.set_floor(member.name)
        room._lines.event(sc.HANDOFF, COMMANDER, member.name)
        await room._bus.post(Draft(author=COMMANDER, kind="task", visible_to=[member.name, USER],
                                blocks=[TextBlock(render("handoff.md.j2", note=args.note, last_line=last))]))
        room.wake(member.name)
        return ToolOutput(f"{member.name} has the floor now and talks with the user", end_turn="handoff")

    return [
        Tool("dispatch_to", "Give a member a task. It works until done and its report comes back to you "
             "(as this tool's result, or later as a message with background: true). Several dispatches "
             "in one response run concurrently.", DispatchArgs, dispatch_to, parallel=True),
        Tool("run_worker", "Run a sub-task whose result comes back as this tool's result. Without "
             "`agent`, an anonymous helper (unseen by the user) does it; with `agent`, that member does.",
             WorkerArgs, run_worker, parallel=True),
        Tool("hand_off_to", "Give the floor to an interactive member: it talks with the user directly "
             "until it hands back. Your turn ends here.", HandOffArgs, hand_off_to),
    ]
