"""An external agent as a room member: its seat (one ACP session per member per room, opened at its first task,
kept across its tasks, reloaded after a restart where the agent can), and its turn as the engine's events.

The room drives an ACP member's turn exactly as a model's: text deltas while it streams, one message committed at
the end through the room's commit, then `done`; what it does meanwhile (its own tool calls, its plan) is noted in
its own partition only, and a stop sends `session/cancel` without waiting for the agent to agree.
"""
from __future__ import annotations

import math
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import trio

from orchestrator.acp import homes
from orchestrator.core.errors import OrchestratorError
from orchestrator.core.events import Done, Event, TextDeltaEvent
from orchestrator.core.log import logger
from orchestrator.core.prompts import render
from orchestrator.core.secrets import redact
from orchestrator.core.types import Draft, Message, TextBlock, block_text
from orchestrator.engine.partition import Partition, to_model
from orchestrator.team.schema import AgentDef
from orchestrator.tools.session import ToolSession

if TYPE_CHECKING:  # the client (and its process and jail modules) is imported with the first external agent
    from orchestrator.acp.client import Connection, Update

log = logger(__name__)

MARKER = "<handback />"  # the room's handback marker (room/handback.py), which the room's commit takes off
# A cancelled prompt the agent has not yet answered: the next task waits this long for it, then starts the agent anew.
BUSY_GRACE = 5.0
_SESSION = re.compile(r"^ACP session (\S+) ")  # the note that records a member's session in its partition

Commit = Callable[[Draft], Awaitable[Message | None]]
Post = Callable[[Draft], Awaitable[Message]]
HandBack = Callable[[str | None], Awaitable[None]]


class AgentFailed(OrchestratorError):
    """An external agent's task ended without an answer: it exited, broke the protocol, or refused the prompt."""


class Grant(Protocol):
    """What the bridge hands one session (acp/bridge.py)."""

    server: dict[str, Any]

    def revoke(self) -> None: ...


class Bridge(Protocol):
    folder: Path  # its socket's: the agent may reach it through the sandbox

    def grant(self, agent: str, *, hand_back: HandBack | None) -> Grant: ...


OpenBridge = Callable[[], AbstractAsyncContextManager[Bridge]]


class MemberHost:
    """What the ACP client asks of the room for one member (acp/client.py's ClientHost): files and commands go
    through the room's tool session; a permission request becomes the room's confirmation question."""

    def __init__(self, agent: str, session: ToolSession):
        self.agent, self.session = agent, session

    async def permission(self, title: str, kind: str, options: list[dict]) -> str | None:
        """The option the user's answer picks: "run" (this run) the agent's allow-always, "once" its allow-once,
        "deny" its reject-once; None (cancelled) when none fits. A stop withdraws the question (the client's
        session/cancel cancels it)."""
        category = f"acp:{kind or 'other'}"
        allowed = await self.session.confirm(self.agent, category, title or f"{self.agent} asks to {kind}")
        always = (self.agent, category) in self.session.allowed
        wanted = (["allow_always", "allow_once"] if always else ["allow_once"]) if allowed else ["reject_once"]
        return next((str(o["optionId"]) for k in wanted for o in options
                     if isinstance(o, dict) and o.get("kind") == k and "optionId" in o), None)


@dataclass
class _End:
    stop_reason: str


@dataclass
class _Failed:
    why: str


@dataclass
class Seat:
    """One member's connection and session in this room."""

    name: str
    conn: Connection
    session_id: str
    host: MemberHost
    nursery: trio.Nursery  # where its prompts run: a stop ends the turn, never the agent's own answer
    scope: trio.CancelScope  # its keeper's: cancelled to end the agent
    fresh: bool  # a new session: its first prompt tells the agent where it is
    idle: trio.Event = field(default_factory=trio.Event)
    handing: list[str | None] = field(default_factory=list)  # hand_back calls of the running prompt

    def __post_init__(self) -> None:
        self.idle.set()


class Seats:
    """The room's ACP members' seats, by member name: started in the room's nursery at a member's first task,
    ended at the room's close (or when the agent dies: the next task starts it again)."""

    def __init__(self, room: str, nursery: trio.Nursery, workspace: Path, session: ToolSession, post: Post,
                 open_bridge: OpenBridge | None = None):
        self._room, self._nursery, self._workspace, self._session, self._post = room, nursery, workspace, session, post
        self._open_bridge = open_bridge
        self._bridge: Bridge | None = None
        self._bridge_scope: trio.CancelScope | None = None
        self._bridge_lock = trio.Lock()
        self._seats: dict[str, Seat] = {}
        self._closed = False

    async def seat(self, name: str, spec: AgentDef, partition: Partition) -> Seat:
        """The member's seat, started (and its session opened or reloaded) if it has none. The caller holds the
        member's turn lock, so one member never starts twice."""
        seat = self._seats.get(name)
        if seat is not None and not seat.idle.is_set():
            with trio.move_on_after(BUSY_GRACE):  # a stopped prompt the agent has not answered yet
                await seat.idle.wait()
            if not seat.idle.is_set():
                log.warning("acp agent ignored a cancel; starting it again", agent=name)
                seat.scope.cancel()
                self._seats.pop(name, None)
                seat = None
        if seat is not None and not seat.conn.closed.is_set():
            return seat
        if self._closed:
            raise AgentFailed(f"{name}: the room is closing")
        bridge = await self._bridge_for()
        seat = await self._nursery.start(self._keep, name, spec, stored_session(partition, name), bridge)
        assert isinstance(seat, Seat)
        return seat

    def close(self) -> None:
        """At the room's close: every agent ends (each connection's exit is shielded), then the bridge."""
        self._closed = True
        for seat in list(self._seats.values()):
            seat.scope.cancel()
        if self._bridge_scope is not None:
            self._bridge_scope.cancel()

    async def _bridge_for(self) -> Bridge | None:
        if self._open_bridge is None:
            return None
        async with self._bridge_lock:
            if self._bridge is None:
                await self._nursery.start(self._keep_bridge)
        return self._bridge

    async def _keep_bridge(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        assert self._open_bridge is not None
        with trio.CancelScope() as scope:
            self._bridge_scope = scope
            try:
                async with self._open_bridge() as bridge:
                    self._bridge = bridge
                    task_status.started()
                    await trio.sleep_forever()
            finally:
                self._bridge, self._bridge_scope = None, None

    async def _keep(self, name: str, spec: AgentDef, stored: str | None, bridge: Bridge | None,
                    task_status: trio.TaskStatus[Seat] = trio.TASK_STATUS_IGNORED) -> None:
        from orchestrator.acp.client import connect

        assert spec.acp is not None
        host = MemberHost(name, self._session)
        seat: Seat | None = None
        with trio.CancelScope() as scope:
            async with connect(spec.acp, host, cwd=self._workspace, sandbox=self._session.sandbox_for(name),
                               home=homes.home(self._room, name),  # kept across restarts: session/load
                               reach=[bridge.folder] if bridge is not None else []) as conn:
                grant = None
                try:
                    async with trio.open_nursery() as nursery:
                        if bridge is not None:
                            async def hand_back(note: str | None) -> None:
                                if seat is not None and not seat.idle.is_set():
                                    seat.handing.append(note)
                            grant = bridge.grant(name, hand_back=hand_back if spec.interactive else None)
                        servers = [grant.server] if grant is not None else []
                        session_id, fresh = await _session(conn, stored, self._workspace, servers)
                        seat = Seat(name, conn, session_id, host, nursery, scope, fresh)
                        self._seats[name] = seat
                        if session_id != stored:
                            info = conn.info
                            await self._post(Draft(author=name, kind="notice", visible_to=[name], blocks=[TextBlock(
                                f"ACP session {session_id} opened with {info.name} {info.version}".rstrip())]))
                        task_status.started(seat)
                        await conn.closed.wait()
                        log.info("acp agent closed", agent=name, why=conn.why)
                finally:
                    if grant is not None:
                        grant.revoke()
                    if seat is not None and self._seats.get(name) is seat:
                        del self._seats[name]


def open_bridge(skills: Any, hub: Any, servers: Any, knowledge: Any, session: ToolSession
                ) -> AbstractAsyncContextManager[Bridge]:
    """The room's bridge (acp/bridge.py) over its parts, imported with the first external agent that needs it."""
    from orchestrator.acp.bridge import Bridge as RoomBridge, RoomBridgeServices

    return RoomBridge.open(RoomBridgeServices(skills, hub, servers, knowledge, session))


async def _session(conn: Connection, stored: str | None, cwd: Path, servers: list[dict]) -> tuple[str, bool]:
    """The stored session reloaded where the agent can, else a new one; and whether it is new."""
    if stored and conn.info.load_session and await conn.load_session(stored, cwd, servers):
        return stored, False
    return await conn.new_session(cwd, servers), True


def stored_session(partition: Partition, name: str) -> str | None:
    """The member's last ACP session in this room, as its own note in its partition recorded it."""
    for msg in reversed(partition.messages):
        if msg.author == name and msg.kind == "notice" and (m := _SESSION.match(msg.text)):
            return m.group(1)
    return None


def session_prompt(spec: AgentDef) -> str:
    """What an external agent is told once, at its session's first prompt, about the room it is in."""
    return render("acp_session.md.j2", name=spec.name, description=spec.description, instructions=spec.instructions,
                  interactive=spec.interactive)


def _prompt_text(seat: Seat, spec: AgentDef, partition: Partition) -> str:
    """What the others said to the member since its last reply, as its model view labels it; the partition marks
    it read, so the reply records what it answers."""
    lines = []
    for msg in partition.messages:
        if msg.seq > partition.read_seq and msg.author != seat.name:
            view = to_model(msg, seat.name)
            if view is not None and (text := block_text(view.blocks)):
                lines.append(text)
    partition.mark_read()
    text = "\n\n".join(lines) or "(nothing new was said to you; carry on)"
    if seat.fresh:
        seat.fresh = False
        text = f"{session_prompt(spec)}\n\n---\n\n{text}"
    return text


async def _run_prompt(seat: Seat, text: str, send: trio.MemorySendChannel[Update | _End | _Failed]) -> None:
    """The prompt, in the seat's nursery: a stopped turn leaves it to the agent to answer its cancel."""
    item: _End | _Failed

    async def on_update(update: Update) -> None:
        try:
            send.send_nowait(update)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the turn was stopped: the rest of what the agent says is not shown

    try:
        item = _End(await seat.conn.prompt(seat.session_id, text, on_update))
    except OrchestratorError as exc:
        item = _Failed(seat.conn.why if seat.conn.closed.is_set() and seat.conn.why else str(exc))
    finally:
        seat.idle.set()
    try:
        send.send_nowait(item)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


async def run_turn(seats: Seats, spec: AgentDef, partition: Partition, commit: Commit,
                   post: Post) -> AsyncGenerator[Event, None]:
    """One task (or one reply while it holds the floor) of an ACP member, as the engine's turn events.

    `commit` is the room's for this turn (who sees the message, the handback); `post` records its tool-call and
    plan notes in its own partition only."""
    name = spec.name
    seat = await seats.seat(name, spec, partition)
    text = _prompt_text(seat, spec, partition)
    send: trio.MemorySendChannel[Update | _End | _Failed]
    receive: trio.MemoryReceiveChannel[Update | _End | _Failed]
    send, receive = trio.open_memory_channel(math.inf)
    seat.idle, seat.handing = trio.Event(), []
    seat.nursery.start_soon(_run_prompt, seat, text, send)
    chunks: list[str] = []
    noted: dict[str, str] = {}  # tool call id -> its last note
    ended: _End | None = None
    try:
        with receive:
            async for item in receive:
                if isinstance(item, _End):
                    ended = item
                    break
                if isinstance(item, _Failed):
                    raise AgentFailed(f"{name} stopped before it answered: {item.why}; it is started again for its "
                                      "next task")
                if item.kind == "text" and item.text:
                    chunks.append(item.text)
                    yield TextDeltaEvent(ts=time.time(), agent=name, text=redact(item.text))
                elif item.kind in ("tool", "plan") and item.text:
                    key = item.tool_call_id or item.kind
                    if noted.get(key) != item.text:
                        noted[key] = item.text
                        await post(Draft(author=name, kind="notice", visible_to=[name],
                                         blocks=[TextBlock(redact(f"[{item.kind}] {item.text}"))]))
    except BaseException:
        if ended is None:  # stopped, or failed: the agent is told to stop, and nobody waits for it to agree
            if not seat.conn.closed.is_set():
                with trio.CancelScope(shield=True), trio.move_on_after(1):
                    try:
                        await seat.conn.cancel(seat.session_id)
                    except OrchestratorError:
                        pass  # it went away meanwhile: the next task starts it again
        raise
    assert ended is not None
    # The agent's process was given its credentials: one it repeats is masked in the whole message, which also
    # catches a value split across chunks.
    said = redact("".join(chunks).strip())
    if seat.handing:
        note = next((n for n in reversed(seat.handing) if n), None)
        if note and note not in said:
            said = f"{said}\n\n{note}".strip()
        said = f"{said or f'{name} hands the floor back.'} {MARKER}"
    if said:
        await commit(Draft(author=name, kind="text", blocks=[TextBlock(said)], visible_to=[name]))
    yield Done(ts=time.time(), agent=name, stop_reason=ended.stop_reason, result=said)
