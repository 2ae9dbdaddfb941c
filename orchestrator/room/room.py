"""The room (G1-G11): composes the bus, the floor, the ledger, the questions and the limits around its
members, runs their turns, and owns the group stop.

Every message enters through the bus (bus.py); every agent turn runs under a cancel scope that `stop` owns.
"""
from __future__ import annotations

import re
import sys
import time
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from pathlib import Path
from typing import AsyncIterator, Callable

import msgspec
import trio

from orchestrator.core.errors import (
    TOO_LONG, InputError, OrchestratorError, ProviderError, RoomNotFound, TruncatedPromptError,
)
from orchestrator.core.events import CallUsage, Cancelled, Done, ErrorEvent, Event, ToolEnd, TurnStart
from orchestrator.core.log import logger
from orchestrator.core.passes import held
from orchestrator.core.retry import RetryPolicy
from orchestrator.core.types import Draft, Message, Request, TextBlock, ToolCallBlock, ToolResultBlock
from orchestrator.engine.partition import Partition
from orchestrator.engine.runner import Agent, next_request, run_turn
from orchestrator.memory.knowledge import KnowledgeBase, for_store
from orchestrator.memory.notes import Memory
from orchestrator.mcplink.servers import Hub, default_log_dir, open_hub
from orchestrator.room import assembly, commits, improvement, toolbox
from orchestrator.room.opening import Catalog, Opening, Resolve, opening
from orchestrator.room.sandboxes import sandboxes, store_paths
from orchestrator.room.bus import Bus
from orchestrator.room.commander import commander_tools
from orchestrator.room.floor import Floor
from orchestrator.room.heap import freeze_startup
from orchestrator.room.ledger import Ledger
from orchestrator.room.limits import Meter, deadline
from orchestrator.room.lines import Lines
from orchestrator.room.members import ANONYMOUS, COMMANDER, USER, Member, Mode, TurnFailed, anonymous_name
from orchestrator.room.questions import Questions
from orchestrator.room.toolbox import check_team
from orchestrator.room.skills import RoomSkills
from orchestrator.skills.activation import NAME as ACTIVATE
from orchestrator.skills.library import Root, discover
from orchestrator.store.contract import Store
from orchestrator.store.records import RoomRecord
from orchestrator.store.usage import PriceOf, UsageLog, UsageReport, UsageRow
from orchestrator.team.schema import AgentDef, Team
from orchestrator.tools.kb_tool import kb_tool
from orchestrator.tools.memory_tool import memory_tool
from orchestrator.tools.session import Answer, ToolSession
from orchestrator.trace.spans import OFF, Span, active, current, root

log = logger(__name__)

__all__ = ["COMMANDER", "USER", "Member", "Room", "TurnFailed", "check_team"]

_MENTION = re.compile(r"@([a-z][a-z0-9_-]{0,31})\b")

MAX_LINE = 100_000  # characters in one user line, from any surface; longer text belongs in a file


def checked_line(text: str) -> str:
    """A user line as a room takes it; one that is too long is refused whole, never cut."""
    if len(text) > MAX_LINE:
        raise InputError(f"the line is {len(text):,} characters; a room takes at most {MAX_LINE:,} in one line: "
                         "put longer text in a file and name it")
    return text


class Room:
    """A group chat. Open one with `Room.create` or `Room.open` inside `async with`."""

    def __init__(self, given: Opening, record: RoomRecord, nursery: trio.Nursery, mcp: Hub | None):
        store, team, workspace = given.store, given.team, given.workspace
        self.store, self.record, self.team, self.workspace = store, record, team, workspace
        self.id = record.id
        self.resolve, self._nursery, self.retry = given.resolve, nursery, given.retry
        self.members: dict[str, Member] = {COMMANDER: Member(_commander_spec(team), Partition(COMMANDER))}
        for spec in team.agents:
            self.members[spec.name] = Member(spec, Partition(spec.name))
        self.bus = Bus(store, self.id, self.members)
        self._floor = Floor(store, self.id, record.floor, self.bus.publish)
        self.ledger = Ledger(store, self.id, self.bus.publish, nursery.start_soon, self.bus.carry)
        self.bus.landed = self.ledger.opened
        self.questions = Questions(self.bus.publish, self.bus.notice, self._wake_waiters, given.can_confirm)
        self.lines = Lines(record.name, self.id)  # each user line's trace
        self.usage = UsageLog(store)  # what each model call and tool run spent
        self._scopes: set[trio.CancelScope] = set()
        self._running = 0  # room tasks alive: turns, background work, a limit's stop
        self._jobs = 0  # shell jobs alive: not "running" for idle, but a stop waits for them
        self._settling = trio.lowlevel.ParkingLot()  # woken whenever a room task ends
        self._anonymous = 0
        self._numbers: dict[str, int] = {}  # reserved anonymous numbers by run_worker call id
        self._halting: str | None = None
        self._after_halt: list[str] = []  # members woken while a limit stop unwinds
        self._deferred_writer: trio.CancelScope | None = None  # waiting to write the bus's deferred rows
        self._closing = False  # its close has begun: no writer is started, the close writes what waits
        self.meter = self._new_meter()
        room_sandbox, agent_sandbox = sandboxes(team, workspace)
        self.tool_session = ToolSession(workspace, ask=self.questions.ask, spawn=self.spawn_job,
                                        sandbox=room_sandbox, agent_sandbox=agent_sandbox,
                                        private=store_paths(store))
        self.memory = Memory(store)
        self.knowledge: KnowledgeBase | None = None  # opened with the room
        self.models = given.models  # real windows and compaction points by model string
        self._room_tools = {"memory": memory_tool(self.memory)}
        self.workers = trio.CapacityLimiter(team.limits.max_workers or 1_000_000)  # queues extra workers
        self._commander_tools = commander_tools(self)
        self.mcp = mcp  # the process's MCP connections; the team's servers override the config file's
        self.mcp_servers = {**(mcp.servers if mcp else {}), **team.mcp_servers}
        self.mcp_told: set[str] = set()  # MCP problems already reported in this room
        self.skills = RoomSkills(team, given.library)
        self.skill_roots = given.skill_roots  # read again by reload_skills
        self.evolve = given.evolve or team.evolve  # M5: a self-improvement pass once each line's work is done
        self._line_seq: int | None = None  # the user line the pass will review, until it runs

    # --- opening and closing -------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def create(cls, store: Store, team: Team, resolve: Resolve, *, name: str = "room",
                     workspace: Path | None = None, retry: RetryPolicy = RetryPolicy(),
                     on_event: Callable[[Event], None] | None = None, can_confirm: bool = False,
                     knowledge: KnowledgeBase | None = None, models: Catalog | None = None,
                     mcp: Hub | None = None, skill_roots: list[Root] | None = None,
                     evolve: bool = False) -> AsyncIterator[Room]:
        """`skill_roots`: where skills are found, highest priority first (default: the roots config.toml's
        [skills] names for this workspace, else the workspace's, the user's and the package's);
        `evolve`: the self-improvement pass after each line, on top of the team's `evolve`."""
        workspace = Path(workspace or Path.cwd()).resolve()
        check_team(team)
        given = await opening(store, team, resolve, workspace, skill_roots, retry=retry, on_event=on_event,
                              can_confirm=can_confirm, knowledge=knowledge, models=models, mcp=mcp, evolve=evolve)
        meta = {"team": msgspec.to_builtins(toolbox.storable(team)), "workspace": str(workspace)}
        record = await store.create_room(name, floor=COMMANDER, meta=meta)
        async with cls._opened(given, record, []) as room:
            if blocked := room.skills.blocked():
                await room.notice(blocked, [USER])
            yield room

    @classmethod
    @asynccontextmanager
    async def open(cls, store: Store, ref: str, resolve: Resolve, *, team: Team | None = None,
                   retry: RetryPolicy = RetryPolicy(),
                   on_event: Callable[[Event], None] | None = None, can_confirm: bool = False,
                   knowledge: KnowledgeBase | None = None, models: Catalog | None = None,
                   mcp: Hub | None = None, skill_roots: list[Root] | None = None,
                   evolve: bool = False) -> AsyncIterator[Room]:
        """Reopen a stored room: history is healed on load, partitions, floor and ledger rebuilt."""
        record = await store.room(ref)
        if record is None:
            raise RoomNotFound(f"no room {ref!r} in this database; `orchestrator rooms` lists them")
        if team is None:
            team = msgspec.convert(record.meta.get("team", {}), Team)
            check_team(team, stored=True)
        else:
            check_team(team)
        workspace = Path(record.meta.get("workspace") or Path.cwd())
        given = await opening(store, team, resolve, workspace, skill_roots, retry=retry, on_event=on_event,
                              can_confirm=can_confirm, knowledge=knowledge, models=models, mcp=mcp, evolve=evolve)
        messages = await store.load(record.id, size=record.messages)
        async with cls._opened(given, record, messages) as room:
            yield room

    @classmethod
    @asynccontextmanager
    async def _opened(cls, given: Opening, record: RoomRecord, messages: list[Message]) -> AsyncIterator[Room]:
        room = None
        freeze_startup()
        try:
            async with AsyncExitStack() as stack:
                mcp = given.mcp
                if mcp is None and given.team.mcp_servers:  # a caller with no hub of its own: the room's
                    mcp = await stack.enter_async_context(open_hub(default_log_dir()))
                nursery = await stack.enter_async_context(trio.open_nursery())
                room = cls(given, record, nursery, mcp)
                if given.on_event:
                    room.subscribe(given.on_event)
                room.knowledge = given.knowledge or await for_store(given.store)
                room._room_tools["search_knowledge"] = kb_tool(room.knowledge)
                await room.usage.ready()
                await room._restore(messages)
                room._floor.announce()
                try:
                    yield room
                    await room.idle()
                finally:
                    room._closing = True
                    room._cancel_all()
        finally:
            if room is not None:  # every task has ended: what they left waiting is written now
                await room._write_deferred_now(failing=sys.exc_info()[1] is not None)

    async def _restore(self, messages: list[Message]) -> None:
        for msg in messages:
            for name in (msg.author, *msg.visible_to):  # a worker stopped before it spoke still had a task
                if m := ANONYMOUS.fullmatch(name):
                    self._anonymous = max(self._anonymous, int(m.group(1) or 1))
            for viewer in msg.visible_to:
                if viewer in self.members:
                    self.members[viewer].partition.append(msg)
        for member in self.members.values():
            member.partition.mark_read()
        tasks = await self.store.tasks(self.id)
        self.ledger.load(tasks)
        for t in self.ledger.running():  # its worker died with the process
            await self.ledger.close(t.id, "cancelled", "interrupted by a restart")
        if self.floor not in self.members:
            await self.set_floor(COMMANDER)

    # --- the bus, the floor and the questions -------------------------------------------------

    def subscribe(self, fn: Callable[[Event], None]) -> None:
        self.bus.subscribe(fn)

    async def notice(self, text: str, visible_to: list[str], notify: tuple[str, ...] = ()) -> Message:
        return await self.bus.notice(text, visible_to, notify)

    @property
    def floor(self) -> str:
        return self._floor.owner

    async def set_floor(self, owner: str) -> None:
        await self._floor.give(owner)

    @property
    def can_confirm(self) -> bool:
        return self.questions.can_confirm

    @property
    def asking(self) -> list[str]:
        """Open confirmation requests, oldest first."""
        return self.questions.asking

    def answer(self, reply: Answer, request_id: str | None = None) -> None:
        """Answer a confirmation request (the oldest open one unless `request_id` says which)."""
        self.questions.answer(reply, request_id)

    async def question_or_idle(self) -> bool:
        """Wait until a confirmation request is open (True) or the room is idle (False)."""
        while self._running and not self.questions.asking:
            await self._settling.park()
        return bool(self.questions.asking)

    def _wake_waiters(self) -> None:
        self._settling.unpark_all()

    # --- the user's side --------------------------------------------------------------------

    async def post(self, text: str, *, skill: str | None = None) -> Message:
        """A user line: routed to the @mentioned member, else the floor owner (G7, G11). `skill`: the
        user invokes that skill for this line (`/skill NAME`): the target gets it as if it had activated it."""
        m = _MENTION.match(checked_line(text).strip())
        target = self.floor
        if m:
            target = m.group(1)
            if target not in self.members or self.members[target].anonymous:
                msg = await self.bus.post(Draft(author=USER, kind="user", blocks=[TextBlock(text)], visible_to=[USER]))
                names = ", ".join(n for n, mb in self.members.items() if not mb.anonymous)
                await self.notice(f"There is no member named @{target} here; the line was kept but not sent. "
                                  f"Members: {names}.", [USER])
                return msg
            if target == COMMANDER:
                await self.set_floor(COMMANDER)
        invoked = await trio.to_thread.run_sync(  # it lists the skill's files
            self.skills.invoke, skill, self.members[target].spec, target == COMMANDER, self.tool_session) \
            if skill else None
        self.meter = self._new_meter()
        visible = [USER, target] if target == COMMANDER else [USER, target, COMMANDER]
        msg = await self.bus.post(Draft(author=USER, kind="user", blocks=[TextBlock(text)], visible_to=visible),
                               notify=(target,))
        if invoked is not None:  # a call and its result, as the agent's own activation would leave them
            call = ToolCallBlock(f"user_skill_{msg.seq}", ACTIVATE, {"name": skill})
            await self.bus.post(Draft(author=target, kind="tool_call", blocks=[call], visible_to=[target]))
            await self.bus.post(Draft(author=target, kind="tool_result", visible_to=[target],
                                      blocks=[ToolResultBlock(call.id, ACTIVATE, invoked)]))
        if self.evolve and self._line_seq is None:
            self._line_seq = msg.seq
        line = self.lines.open()
        with active(line):  # the tasks this line starts inherit it
            self.wake(target)
        self.lines.settle(line)
        if self.team.limits.max_turn_seconds and self._running:
            self._nursery.start_soon(deadline, self.team.limits.max_turn_seconds, self.idle,
                                     lambda: self.meter, self.meter, self.halt)
        return msg

    def _new_meter(self) -> Meter:
        return Meter(self.team.limits, self.ledger, self.halt)

    async def idle(self) -> None:
        """Wait until no agent is running, background tasks included."""
        await self._settled(0)

    async def _settled(self, others: int) -> None:
        while self._running > others:
            await self._settling.park()

    async def _quiet(self, others: int) -> None:
        """After a cancel: every task ended but `others`, and every shell job's process group killed."""
        while self._running > others or self._jobs:
            await self._settling.park()

    def _task_ended(self) -> None:
        self._running -= 1
        if self._running == 0 and self._line_seq is not None and not self._halting:
            self.spawn(improvement.reflect_on, self, self._line_seq)  # counted: idle() waits for the pass too
            self._line_seq = None
        if self._running == 0 and self.bus.carrying:
            self.spawn(self.bus.flush)  # a task's row that rode no message is written before the room counts as idle
        elif self._running == 0 and self.bus.deferring and self._deferred_writer is None and not self._closing:
            self._deferred_writer = scope = trio.CancelScope()
            self._scopes.add(scope)  # a stop ends it; the room's close writes the rows itself
            self._nursery.start_soon(self._write_deferred, scope)
        self._settling.unpark_all()

    async def _write_deferred(self, scope: trio.CancelScope) -> None:
        """Usage rows that no message carried, once they are due: a room that answers one short line after
        another has its next line carry them, so its rows cost a write per second, not a task and a write per
        line. Not counted as running: the room is idle meanwhile."""
        try:
            with scope:
                await trio.sleep_until(self.bus.due)
                await self.bus.flush()
        except Exception as exc:  # the rows wait for the room's next message or its close; the user hears why
            log.exception("usage rows not written")
            self.bus.publish(ErrorEvent(ts=time.time(), message=f"usage rows not written yet: {exc}",
                                        error_class=type(exc).__name__))
        finally:
            self._scopes.discard(scope)
            self._deferred_writer = None

    async def usage_report(self, price_of: PriceOf) -> UsageReport:
        """What the room spent so far: the rows still waiting to be written (Bus.DEFER) are written first."""
        await self.bus.flush()
        return await self.usage.report([self.id], price_of)

    async def _write_deferred_now(self, failing: bool) -> None:
        """The room is closing: its deferred rows are written now. When an error is closing it, that error is the
        one the caller hears about; the rows' write failing too is only logged."""
        try:
            await self.bus.flush()
        except Exception:
            if not failing:
                raise
            log.exception("usage rows not written as the room closed")

    async def reload_skills(self) -> None:
        """Read the skill roots again (after a proposal was accepted, say); the next turn sees the change."""
        self.skills.library = await trio.to_thread.run_sync(discover, self.skill_roots)

    async def review(self, accept: bool, ident: str = "all") -> list[str]:
        """Accept or reject staged proposals (`ident`: an id prefix, or all); one line per proposal."""
        return await improvement.review(self, accept, ident)

    @property
    def busy(self) -> bool:
        return self._running > 0

    @property
    def jobs(self) -> int:
        """Shell jobs alive (the room is idle meanwhile, but closing it would end them)."""
        return self._jobs

    async def stop(self, reason: str = "stopped by the user") -> None:
        """Group cancellation (G9), the only stop path: every agent, worker and tool in the room."""
        self._line_seq = None  # stopped work is not reviewed
        self.lines.stop(reason)
        self._cancel_all()
        await self._quiet(0)
        await self._stopped(reason)

    async def _stopped(self, reason: str) -> None:
        for t in self.ledger.running():
            await self.ledger.close(t.id, "cancelled", reason)
        self.bus.publish(Cancelled(ts=time.time(), room=self.id, reason=reason))

    def halt(self, reason: str) -> None:
        """Stop from inside a turn (a limit): cancel now, report once everything has stopped."""
        if self._halting:
            return
        self._halting = reason
        self._line_seq = None
        self.lines.stop(reason)
        self._cancel_all()
        self._running += 1  # counted, so idle() waits for the report too; not scoped, so it survives the stop
        self._nursery.start_soon(self._finish_halt, reason)

    async def _finish_halt(self, reason: str) -> None:
        try:
            await self._quiet(1)
            await self._stopped(reason)
            await self.notice(reason, [USER, COMMANDER])
        finally:
            self._halting = None
            woken, self._after_halt = self._after_halt, []
            for name in dict.fromkeys(woken):
                self.wake(name)
            self._task_ended()

    def _cancel_all(self) -> None:
        for scope in list(self._scopes):
            scope.cancel()

    # --- running agents ---------------------------------------------------------------------

    def wake(self, name: str) -> None:
        """Start a turn for `name` unless it already has one (a running turn reads new lines itself)."""
        member = self.members[name]
        if self._halting:
            self._after_halt.append(name)
        elif member.active == 0:
            self.spawn(self._respond, member, current())

    def spawn(self, fn, *args) -> None:
        """Run fn in the room's nursery under its own cancel scope, counted for idle and stop."""
        self._start(fn, args, counted=True)

    def spawn_job(self, fn, *args) -> None:
        """Like spawn, for work that outlives turns (shell jobs): a stop ends it, but the room
        counts as idle while it runs."""
        self._start(fn, args, counted=False)

    def _start(self, fn, args, counted: bool) -> None:
        scope = trio.CancelScope()
        self._scopes.add(scope)
        if counted:
            self._running += 1
            if args and isinstance(args[0], Member):
                args[0].active += 1
        else:
            self._jobs += 1
        line = self.lines.hold() if counted else None  # a shell job may outlive its line
        self._nursery.start_soon(self._guarded, scope, fn, args, counted, line)

    async def _guarded(self, scope: trio.CancelScope, fn, args, counted: bool, line: Span | None) -> None:
        try:
            with scope:
                await fn(*args)
        except TurnFailed:
            pass
        except Exception as exc:  # a bug: report it on the bus instead of tearing the room down
            log.exception("room task crashed")
            self.bus.publish(ErrorEvent(ts=time.time(), message=f"internal error: {exc}", error_class="internal"))
        finally:
            self._scopes.discard(scope)
            self.lines.release(line)
            if counted:
                if args and isinstance(args[0], Member):
                    args[0].active -= 1
                self._task_ended()
            else:
                self._jobs -= 1
                self._settling.unpark_all()

    async def _respond(self, member: Member, woken_by: Span | None) -> None:
        """A conversational turn: the commander, the floor owner or a mentioned member answers.

        Its span sits under the user line, linked to what woke it when that was not the line itself
        (a handoff's tool call, a background report)."""
        line = root(woken_by) or OFF
        links = (woken_by,) if woken_by is not None and woken_by is not line else ()
        with active(line):
            await self.turn(member, "commander" if member.name == COMMANDER else "visible", links)
        reports = member.name == COMMANDER and self.floor == COMMANDER and self.ledger.unread()
        if member.partition.unread or reports:
            member.active -= 1  # a line or a report landed after the model's last word: answer it too
            try:
                self.wake(member.name)
            finally:
                member.active += 1

    def anonymous_member(self, call_id: str, batch: list[str]) -> Member:
        """A fresh hidden worker. Numbers are given per response in declared order (`batch` holds
        the call ids of its anonymous run_worker calls), not in whatever order the tasks start."""
        if call_id not in self._numbers:
            for cid in batch or [call_id]:
                self._anonymous += 1
                self._numbers[cid] = self._anonymous
        name = anonymous_name(self._numbers.pop(call_id))
        cmd = self.members[COMMANDER].spec
        spec = AgentDef(name=name, description="an anonymous helper of the commander",
                        model=cmd.model, tools=list(cmd.tools))
        member = Member(spec, Partition(name), anonymous=True)
        self.members[name] = member
        return member

    async def turn(self, member: Member, mode: Mode, links: tuple[Span, ...] = (), *, at_once: bool = False) -> Done:
        """Run one engine turn for `member`; `mode` decides who sees its words (commits.py). `at_once`: its report
        is the next message the room commits, so its last words commit in that transaction."""
        async with held(member.lock):
            agent = await self._agent(member)
            self.bus.publish(TurnStart(ts=time.time(), agent=member.name))
            done: Done | None = None
            spent: list[UsageRow] = []
            try:
                async with aclosing(run_turn(agent, member.partition, commits.committer(self, member, mode, at_once),
                                             self.meter, links)) as events:
                    async for ev in events:
                        self.bus.publish(ev)
                        if isinstance(ev, Done):
                            done = ev
                        elif isinstance(ev, (CallUsage, ToolEnd)):
                            spent.append(self._spent(agent, ev))
            except ProviderError as exc:
                raise self._failed(member, _explain(exc), exc.kind) from None
            except OrchestratorError as exc:
                raise self._failed(member, str(exc), type(exc).__name__) from None
            finally:
                if spent:  # also when it was stopped or failed: when the room settles, or within Bus.DEFER
                    self.bus.carry(self.usage.writer(spent), defer=True)
            assert done is not None
            if done.stop_reason == "max_tokens":
                await commits.cut_off(self, member, agent, done)
            if self.tool_session.guard is not None and (said := self.tool_session.guard.report(member.name)):
                await self.notice(said, [USER])
            return done

    def _spent(self, agent: Agent, ev: CallUsage | ToolEnd) -> UsageRow:
        if isinstance(ev, CallUsage):
            return UsageRow(room=self.id, ts=ev.ts, agent=ev.agent, provider=ev.provider, model=ev.model,
                            kind="model", input_tokens=ev.input_tokens, output_tokens=ev.output_tokens,
                            cached_tokens=ev.cached_tokens, estimated=ev.estimated, seconds=ev.seconds)
        return UsageRow(room=self.id, ts=ev.ts, agent=ev.agent, provider=agent.provider.id, model=agent.model,
                        kind="tool", name=ev.name, seconds=ev.seconds)

    async def next_request(self, name: str) -> Request:
        """What `name`'s model would be sent if it spoke now: its system prompt and the messages its
        partition holds, fitted to its budget, in the form the provider gets them (the agent view)."""
        member = self.members.get(name)
        if member is None:
            raise InputError(f"no member named {name!r} in this room")
        return next_request(await self._agent(member), member.partition)

    def _failed(self, member: Member, message: str, error_class: str) -> TurnFailed:
        self.bus.publish(ErrorEvent(ts=time.time(), message=message, error_class=error_class, agent=member.name))
        return TurnFailed(message)

    def report_ready(self) -> None:
        """A background task ended: the commander reads it now, or at handback if it lacks the floor."""
        if self.floor == COMMANDER:
            self.wake(COMMANDER)

    async def _agent(self, member: Member) -> Agent:
        return await assembly.agent(self, member, self._commander_tools, self._room_tools)

    def roster(self) -> list[AgentDef]:
        return [m.spec for n, m in self.members.items() if n != COMMANDER and not m.anonymous]


def _commander_spec(team: Team) -> AgentDef:
    return msgspec.structs.replace(team.commander, name=COMMANDER, interactive=True)


def _explain(exc: ProviderError) -> str:
    if isinstance(exc, TruncatedPromptError):
        return f"{exc.provider}: {exc}."
    if exc.kind == "context_overflow":
        return TOO_LONG
    where = f"{exc.provider}: " if exc.provider else ""
    retried = "retried until the attempts ran out" if exc.retryable else "not retried"
    hint = " Check the API key and the account." if exc.account else ""
    return f"{where}the model call failed ({exc.kind}, {retried}): {str(exc).rstrip('.')}.{hint}"
