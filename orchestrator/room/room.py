"""The room: composes the bus, the floor, the ledger, the questions and the limits around its
members, runs their turns, and owns the group stop.

Every message enters through the bus (bus.py); every agent turn runs under a cancel scope that `stop` owns.
"""
from __future__ import annotations

import re
import sys
import time
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Final

import msgspec
import trio

from orchestrator.core.errors import InputError, OrchestratorError, ProviderError, RoomNotFound
from orchestrator.core.events import CallUsage, Cancelled, Done, ErrorEvent, Event, ToolEnd, TurnStart
from orchestrator.core.passes import held
from orchestrator.core.retry import RetryPolicy
from orchestrator.core.types import Draft, Message, Request, TextBlock, ToolCallBlock, ToolResultBlock
from orchestrator.engine.partition import Partition
from orchestrator.engine.runner import Agent, next_request, run_turn
from orchestrator.memory.knowledge import KnowledgeBase, for_store
from orchestrator.memory.notes import Memory
from orchestrator.mcplink.servers import Hub, default_log_dir, open_hub
from orchestrator.providers.config import Config
from orchestrator.acp import member as acp_member
from orchestrator.room import assembly, commits, improvement, toolbox
from orchestrator.room.opening import Catalog, Opening, Resolve, opening
from orchestrator.room.sandboxes import store_paths
from orchestrator.room.bus import Bus
from orchestrator.room.commander import commander_tools
from orchestrator.room.floor import Floor
from orchestrator.room.heap import freeze_startup
from orchestrator.room.ledger import Ledger
from orchestrator.room.limits import Meter, deadline
from orchestrator.room.lines import MAX_LINE, Lines, checked_line
from orchestrator.room.members import COMMANDER, USER, Hidden, Member, Mode, TurnFailed, deliver, explain
from orchestrator.room.questions import Questions
from orchestrator.room.toolbox import check_team
from orchestrator.room.signals import Signals
from orchestrator.room.skills import RoomSkills
from orchestrator.room.tasks import Tasks
from orchestrator.skills.activation import NAME as ACTIVATE
from orchestrator.skills.library import Root, discover
from orchestrator.store.contract import Store
from orchestrator.store.records import RoomRecord
from orchestrator.store.usage import PriceOf, UsageLog, UsageReport, UsageRow, spent as spent_row
from orchestrator.team.schema import AgentDef, Team
from orchestrator.tools.kb_tool import kb_tool
from orchestrator.tools.memory_tool import memory_tool
from orchestrator.tools.session import Answer, ToolSession
from orchestrator.trace.spans import OFF, Span, active, current, root

__all__ = ["COMMANDER", "MAX_LINE", "USER", "Member", "Room", "TurnFailed", "check_team", "checked_line"]

_MENTION = re.compile(r"@([a-z][a-z0-9_-]{0,31})\b")

class Room:
    """A group chat. Open one with `Room.create` or `Room.open` inside `async with`. What it promises: these
    read-only attributes, its properties and its methods without a leading underscore."""

    id: Final[str]
    record: Final[RoomRecord]  # its stored row as it was opened
    team: Final[Team]
    workspace: Final[Path]
    members: Final[dict[str, Member]]  # by name: the commander and the anonymous workers too
    ledger: Final[Ledger]  # its tasks
    skills: Final[RoomSkills]

    def __init__(self, given: Opening, record: RoomRecord, nursery: trio.Nursery, mcp: Hub | None):
        store, team, workspace = self._store, self.team, self.workspace = given.store, given.team, given.workspace
        self.record, self.id = record, record.id
        self._resolve, self._retry = given.resolve, given.retry
        commander = msgspec.structs.replace(team.commander, name=COMMANDER, interactive=True)
        self.members = {COMMANDER: Member(commander, Partition(COMMANDER))}
        for spec in team.agents:
            self.members[spec.name] = Member(spec, Partition(spec.name))
        self._bus = Bus(store, self.id, self.members)
        self._floor = Floor(store, self.id, record.floor, self._bus.publish)
        self.ledger = Ledger(store, self.id, self._bus.publish, nursery.start_soon, self._bus.carry)
        self._bus.landed = self.ledger.opened
        self._questions = Questions(self._bus.publish, self._bus.notice, lambda: self._tasks.wake(),
                                    given.can_confirm)
        self._lines = Lines(record.name, self.id)  # each user line's trace
        self._usage = UsageLog(store)  # what each model call and tool run spent
        self._tasks = Tasks(nursery, self._lines, self._bus.publish, self._task_ended)
        self._hidden = Hidden()
        self._halting: str | None = None
        self._after_halt: list[str] = []  # members woken while a limit stop unwinds
        self._deferred_writer: trio.CancelScope | None = None  # waiting to write the bus's deferred rows
        self._closing = False  # its close has begun: no writer is started, the close writes what waits
        self._meter = self._new_meter()
        self._tool_session = ToolSession(workspace, ask=self._questions.ask, spawn=self.spawn_job,
                                         sandbox=given.sandbox, agent_sandbox=given.agent_sandboxes,
                                         private=store_paths(store))
        self._memory = Memory(store)
        self._acp = acp_member.Seats(  # external agents' sessions, and the bridge they reach the room through
            self.id, nursery, workspace, self._tool_session, self._bus.post, lambda: acp_member.open_bridge(
                self.skills, self._mcp, self._mcp_servers, self._knowledge, self._tool_session))
        self._knowledge: KnowledgeBase | None = None  # opened with the room
        self._models = given.models  # real windows and compaction points by model string
        self._room_tools = {"memory": memory_tool(self._memory)}
        self._workers = trio.CapacityLimiter(team.limits.max_workers or 1_000_000)  # queues extra workers
        self._commander_tools = commander_tools(self)
        self._mcp = mcp  # the process's MCP connections; the team's servers override the config file's
        self._mcp_servers = {**(mcp.servers if mcp else {}), **team.mcp_servers}
        self._mcp_told: set[str] = set()  # MCP problems already reported in this room
        self.skills = RoomSkills(team, given.library)
        self._skill_roots = given.skill_roots  # read again by reload_skills
        self._evolve = given.evolve  # the self-improvement pass's settings (None: off), started by signals
        self._line_seq: int | None = None  # the first user line the pass will review, until it runs
        self._signals = Signals(weights=given.evolve.weights, long_task_calls=given.evolve.long_task_calls,
                                topics=given.weaknesses) if given.evolve else None
        if self._signals is not None:
            self._bus.subscribe(self._signals.observe)
            saved = record.meta.get("signals")
            self._signals.restore(saved)
            if isinstance(saved, dict) and isinstance(line := saved.get("line"), int) and line >= 0:
                self._line_seq = line  # the pass, when it comes, reviews from the line the sum began at
        self._signals_kept = self._signals_now()

    # --- opening and closing -------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def create(cls, store: Store, team: Team, resolve: Resolve, *, name: str = "room",
                     workspace: Path | None = None, retry: RetryPolicy = RetryPolicy(),
                     on_event: Callable[[Event], None] | None = None, can_confirm: bool = False,
                     knowledge: KnowledgeBase | None = None, models: Catalog | None = None,
                     mcp: Hub | None = None, skill_roots: list[Root] | None = None,
                     evolve: bool = False, config: Config | None = None) -> AsyncIterator[Room]:
        """`skill_roots`: where skills are found, highest priority first (default: the roots config.toml's
        [skills] names for this workspace, else the workspace's, the user's and the package's);
        `evolve`: the self-improvement pass (by signals), on top of the team's `evolve`; `config`: config.toml
        as the program read it (a Runtime reads it once; default: read now, off the event loop)."""
        workspace = Path(workspace or Path.cwd()).resolve()
        check_team(team)
        given = await opening(store, team, resolve, workspace, skill_roots, retry=retry, on_event=on_event,
                              can_confirm=can_confirm, knowledge=knowledge, models=models, mcp=mcp, evolve=evolve,
                              config=config)
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
                   evolve: bool = False, config: Config | None = None) -> AsyncIterator[Room]:
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
                              can_confirm=can_confirm, knowledge=knowledge, models=models, mcp=mcp, evolve=evolve,
                              config=config)
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
                room._knowledge = given.knowledge or await for_store(given.store)
                room._room_tools["search_knowledge"] = kb_tool(room._knowledge)
                await room._usage.ready()
                await room._restore(messages)
                room._floor.announce()
                try:
                    yield room
                    await room.idle()
                finally:
                    room._closing = True
                    room._tasks.cancel_all()
                    room._acp.close()
        finally:
            if room is not None:  # every task has ended: what they left waiting is written now
                await room._bus.flush_closing(failing=sys.exc_info()[1] is not None)

    async def _restore(self, messages: list[Message]) -> None:
        deliver(messages, self.members, self._hidden)
        await self.ledger.restore(await self._store.tasks(self.id))
        if self.floor not in self.members:
            await self.set_floor(COMMANDER)

    # --- the bus, the floor and the questions -------------------------------------------------

    def subscribe(self, fn: Callable[[Event], None]) -> None:
        """Call `fn` with every event the room publishes from now on."""
        self._bus.subscribe(fn)

    async def notice(self, text: str, visible_to: list[str], notify: tuple[str, ...] = ()) -> Message:
        """Post a room notice (authored `room`) seen by `visible_to`; `notify` names who should answer it."""
        return await self._bus.notice(text, visible_to, notify)

    @property
    def floor(self) -> str:
        """Who answers a user line that names nobody: the commander, or the member it handed the floor to."""
        return self._floor.owner

    async def set_floor(self, owner: str) -> None:
        """Give the floor to `owner` and persist it."""
        await self._floor.give(owner)

    @property
    def can_confirm(self) -> bool:
        """Whether someone is there to answer confirmation questions (else every question is denied)."""
        return self._questions.can_confirm

    @property
    def asking(self) -> list[str]:
        """Open confirmation requests, oldest first."""
        return self._questions.asking

    def answer(self, reply: Answer, request_id: str | None = None) -> None:
        """Answer a confirmation request (the oldest open one unless `request_id` says which)."""
        self._questions.answer(reply, request_id)

    async def question_or_idle(self) -> bool:
        """Wait until a confirmation request is open (True) or the room is idle (False)."""
        await self._tasks.until(lambda: bool(self._questions.asking))
        return bool(self._questions.asking)

    # --- the user's side --------------------------------------------------------------------

    async def post(self, text: str, *, skill: str | None = None) -> Message:
        """A user line: routed to the @mentioned member, else the floor owner. `skill`: the
        user invokes that skill for this line (`/skill NAME`): the target gets it as if it had activated it."""
        m = _MENTION.match(checked_line(text).strip())
        target = self.floor
        if m:
            target = m.group(1)
            if target not in self.members or self.members[target].anonymous:
                msg = await self._bus.post(Draft(author=USER, kind="user", blocks=[TextBlock(text)], visible_to=[USER]))
                names = ", ".join(n for n, mb in self.members.items() if not mb.anonymous)
                await self.notice(f"There is no member named @{target} here; the line was kept but not sent. "
                                  f"Members: {names}.", [USER])
                return msg
            if target == COMMANDER:
                await self.set_floor(COMMANDER)
        invoked = await trio.to_thread.run_sync(  # it lists the skill's files
            self.skills.invoke, skill, self.members[target].spec, target == COMMANDER, self._tool_session) \
            if skill else None
        self._meter = self._new_meter()
        visible = [USER, target] if target == COMMANDER else [USER, target, COMMANDER]
        msg = await self._bus.post(Draft(author=USER, kind="user", blocks=[TextBlock(text)], visible_to=visible),
                                notify=(target,))
        if invoked is not None:  # a call and its result, as the agent's own activation would leave them
            call = ToolCallBlock(f"user_skill_{msg.seq}", ACTIVATE, {"name": skill})
            await self._bus.post(Draft(author=target, kind="tool_call", blocks=[call], visible_to=[target]))
            await self._bus.post(Draft(author=target, kind="tool_result", visible_to=[target],
                                       blocks=[ToolResultBlock(call.id, ACTIVATE, invoked)]))
        if self._evolve and self._line_seq is None:
            self._line_seq = msg.seq
        line = self._lines.open()
        with active(line):  # the tasks this line starts inherit it
            self.wake(target)
        self._lines.settle(line)
        if self.team.limits.max_turn_seconds and self._tasks.running:
            self._tasks.start_soon(deadline, self.team.limits.max_turn_seconds, self.idle,
                                     lambda: self._meter, self._meter, self.halt)
        return msg

    def _new_meter(self) -> Meter:
        return Meter(self.team.limits, self.ledger, self.halt)

    async def idle(self) -> None:
        """Wait until no agent is running, background tasks included."""
        await self._tasks.settled(0)

    def _task_ended(self) -> None:
        """A counted task ended: an idle room reviews its line, writes a task's row that rode no message before
        it counts as idle, and has its deferred usage rows written once due (not counted: it is idle meanwhile)."""
        if self._tasks.running:
            return
        if self._line_seq is not None and not self._halting and improvement.due(self):
            improvement.start(self, self._line_seq, "signals")  # counted: idle() waits for the pass too
        elif self._bus.carrying:
            self.spawn(self._bus.flush)
        elif self._signals_kept != self._signals_now() and not self._closing:
            self.spawn(self._keep_signals)
        elif self._bus.deferring and self._deferred_writer is None and not self._closing:
            self._deferred_writer = self._tasks.scoped(self._write_deferred)  # the room's close writes them if stopped

    def _signals_now(self) -> dict[str, Any] | None:
        if self._signals is None:
            return None
        return {**self._signals.saved(), "line": self._line_seq}

    async def _keep_signals(self) -> None:
        """The signals' sum in the room's metadata, so that a room reopened later goes on counting."""
        now = self._signals_kept = self._signals_now()
        await self.update_meta(signals=now)

    async def update_meta(self, **changes: Any) -> None:
        """Set keys of the room's stored metadata (None removes one), keeping the rest as it is."""
        meta = {**self.record.meta, **changes}
        self.record.meta = {k: v for k, v in meta.items() if v is not None}
        await self._store.set_meta(self.id, self.record.meta)

    async def _write_deferred(self) -> None:
        try:
            await self._bus.flush_when_due()
        finally:
            self._deferred_writer = None

    async def usage_report(self, price_of: PriceOf) -> UsageReport:
        """What the room spent so far: the rows still waiting to be written (Bus.DEFER) are written first."""
        await self._bus.flush()
        return await self._usage.report([self.id], price_of)

    async def reload_skills(self) -> None:
        """Read the skill roots again (after a proposal was accepted, say); the next turn sees the change."""
        self.skills.library = await trio.to_thread.run_sync(discover, self._skill_roots)

    async def review(self, accept: bool, ident: str = "all") -> list[str]:
        """Accept or reject staged proposals (`ident`: an id prefix, or all); one line per proposal."""
        return await improvement.review(self, accept, ident)

    @property
    def busy(self) -> bool:
        """Whether any agent of the room is working now."""
        return self._tasks.running > 0

    @property
    def jobs(self) -> int:
        """Shell jobs alive (the room is idle meanwhile, but closing it would end them)."""
        return self._tasks.jobs

    async def stop(self, reason: str = "stopped by the user") -> None:
        """Group cancellation, the only stop path: every agent, worker and tool in the room."""
        self._line_seq = None  # stopped work is not reviewed
        self._lines.stop(reason)
        self._tasks.cancel_all()
        await self._tasks.quiet(0)
        await self._stopped(reason)

    async def _stopped(self, reason: str) -> None:
        for t in self.ledger.running():
            await self.ledger.close(t.id, "cancelled", reason)
        self._bus.publish(Cancelled(ts=time.time(), room=self.id, reason=reason))

    def halt(self, reason: str) -> None:
        """Stop from inside a turn (a limit): cancel now, report once everything has stopped."""
        if self._halting:
            return
        self._halting = reason
        self._line_seq = None
        self._lines.stop(reason)
        self._tasks.cancel_all()
        self._tasks.running += 1  # counted, so idle() waits for the report too; not scoped, so it survives the stop
        self._tasks.start_soon(self._finish_halt, reason)

    async def _finish_halt(self, reason: str) -> None:
        try:
            await self._tasks.quiet(1)
            await self._stopped(reason)
            await self.notice(reason, [USER, COMMANDER])
        finally:
            self._halting = None
            woken, self._after_halt = self._after_halt, []
            for name in dict.fromkeys(woken):
                self.wake(name)
            self._tasks.count_ended()

    # --- running agents ---------------------------------------------------------------------

    def wake(self, name: str) -> None:
        """Start a turn for `name` unless it already has one (a running turn reads new lines itself)."""
        member = self.members[name]
        if self._halting:
            self._after_halt.append(name)
        elif member.active == 0:
            self.spawn(self._respond, member, current())

    def spawn(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """Run fn in the room's nursery under its own cancel scope, counted for idle and stop."""
        self._tasks.spawn(fn, *args)

    def spawn_job(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """Like spawn, for work that outlives turns (shell jobs): a stop ends it, but the room
        counts as idle while it runs."""
        self._tasks.spawn_job(fn, *args)

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
        member = self._hidden.member(call_id, batch, self.members[COMMANDER].spec)
        self.members[member.name] = member
        return member

    async def turn(self, member: Member, mode: Mode, links: tuple[Span, ...] = (), *, at_once: bool = False) -> Done:
        """Run one engine turn for `member`; `mode` decides who sees its words (commits.py). `at_once`: its report
        is the next message the room commits, so its last words commit in that transaction."""
        async with held(member.lock):
            # An external agent (acp:) runs its own model: its turn is a prompt to its session, through the same commit.
            agent = None if member.spec.acp else await self._agent(member)
            self._bus.publish(TurnStart(ts=time.time(), agent=member.name))
            done: Done | None = None
            spent: list[UsageRow] = []
            try:
                commit = commits.committer(self, member, mode, at_once)
                turn = acp_member.run_turn(self._acp, member.spec, member.partition, commit, self._bus.post) \
                    if agent is None else run_turn(agent, member.partition, commit, self._meter, links)
                async with aclosing(turn) as events:
                    async for ev in events:
                        self._bus.publish(ev)
                        if isinstance(ev, Done):
                            done = ev
                        elif isinstance(ev, (CallUsage, ToolEnd)) and agent is not None:
                            spent.append(spent_row(self.id, ev, agent.provider.id, agent.model))
            except ProviderError as exc:
                raise self._failed(member, explain(exc), exc.kind) from None
            except OrchestratorError as exc:
                raise self._failed(member, str(exc), type(exc).__name__) from None
            finally:
                if spent:  # also when it was stopped or failed: when the room settles, or within Bus.DEFER
                    self._bus.carry(self._usage.writer(spent), defer=True)
            assert done is not None
            if done.stop_reason == "max_tokens" and agent is not None:
                await commits.cut_off(self, member, agent, done)
            if self._tool_session.guard is not None and (said := self._tool_session.guard.report(member.name)):
                await self.notice(said, [USER])
            return done

    async def next_request(self, name: str) -> Request:
        """What `name`'s model would be sent if it spoke now: its system prompt and the messages its
        partition holds, fitted to its budget, in the form the provider gets them (the agent view)."""
        member = self.members.get(name)
        if member is None:
            raise InputError(f"no member named {name!r} in this room")
        return next_request(await self._agent(member), member.partition)

    def _failed(self, member: Member, message: str, error_class: str) -> TurnFailed:
        self._bus.publish(ErrorEvent(ts=time.time(), message=message, error_class=error_class, agent=member.name))
        return TurnFailed(message)

    def report_ready(self) -> None:
        """A background task ended: the commander reads it now, or at handback if it lacks the floor."""
        if self.floor == COMMANDER:
            self.wake(COMMANDER)

    async def _agent(self, member: Member) -> Agent:
        return await assembly.agent(self, member, self._commander_tools, self._room_tools)

    def roster(self) -> list[AgentDef]:
        """The team's named members (not the commander, not anonymous workers)."""
        return [m.spec for n, m in self.members.items() if n != COMMANDER and not m.anonymous]
