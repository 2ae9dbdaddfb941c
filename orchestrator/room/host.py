"""Many rooms in one process over one store (the core of `orchestrator serve` and `mcp serve`): a room
is opened when something uses it and closed again once it has sat idle, so an idle room costs nothing.

A closed room is its rows in the store; the next use reopens it (history healed and loaded, partitions
rebuilt), so the process keeps only the histories of rooms that were used lately. With a `Keeper` (several
hosts over one database, room/leased.py) a room is open here only while this host holds its lease.
"""
from __future__ import annotations

import math
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable, Protocol, TypedDict

import trio

from orchestrator.core import startup
from orchestrator.core.errors import InputError, RoomNotFound
from orchestrator.core.log import logger
from orchestrator.core.retry import RetryPolicy
from orchestrator.core.types import Message
from orchestrator.mcplink.servers import Hub
from orchestrator.memory.knowledge import KnowledgeBase, for_store
from orchestrator.providers.config import Config, load_config
from orchestrator.room.heap import Heap
from orchestrator.room.room import Catalog, Resolve, Room
from orchestrator.room.schedule import Schedule
from orchestrator.store.contract import Store
from orchestrator.store.lease import HeldElsewhere
from orchestrator.team.schema import Team

log = logger(__name__)

# Called as each room opens; what it returns, when not None, is awaited before the room's first user has it.
OnOpen = Callable[[Room], Awaitable[object] | None]

IDLE_CLOSE = 60.0  # seconds a room stays open with nobody using it and no agent running
JOB_POLL = 1.0  # seconds between looks at an idle room's shell jobs (their end wakes nobody here)


class Keeper(Protocol):
    """Who may run which room (room/leased.py): `take` before a room opens (it raises HeldElsewhere while
    another host runs it) and cancels `scope` should the room be lost; `give_up` once it has closed."""

    async def take(self, room_id: str, scope: trio.CancelScope) -> None: ...

    async def give_up(self, room_id: str) -> None: ...


class _Common(TypedDict):
    """What every room this host opens or creates is given (Room.open's and Room.create's options)."""

    retry: RetryPolicy
    knowledge: KnowledgeBase
    models: Catalog | None
    mcp: Hub | None
    can_confirm: bool
    config: Config | None


@dataclass(eq=False)
class _Open:
    room: Room
    users: int = 0  # callers inside `RoomHost.room()` for it
    last: float = field(default_factory=trio.current_time)  # when the last user left
    wake: trio.Event = field(default_factory=trio.Event)  # the holder has something to read again
    waiting: bool = False  # the holder waits for the last user to leave
    due: float = math.inf  # when the holder looks again whether the room has been idle long enough


class RoomHost:
    """The rooms of one store that this process has open. Use it inside `async with RoomHost.open(...)`.

    `team` (when given) is the team every room runs, as `Room.open(team=...)`; else each room's stored
    team. `resolver()`, when given, makes each room its own `resolve` (a scripted play restarts its script
    in every room). `on_open(room)` runs for each room as it opens (subscribe to its events there),
    `on_close(room)` once it has closed (`on_open` may be a coroutine function: the room is handed to its
    first user after it). `idle_close=None` keeps rooms open until the host closes. `keeper`: a room opens
    only under its lease.
    """

    def __init__(self, store: Store, resolve: Resolve | None, nursery: trio.Nursery, knowledge: KnowledgeBase, *,
                 team: Team | None = None, models: Catalog | None = None, mcp: Hub | None = None,
                 retry: RetryPolicy = RetryPolicy(), can_confirm: bool = False,
                 idle_close: float | None = IDLE_CLOSE, resolver: Callable[[], Resolve] | None = None,
                 on_open: OnOpen | None = None, on_close: Callable[[Room], None] | None = None,
                 keeper: Keeper | None = None, workspace: Path | None = None, config: Config | None = None):
        self.store, self.team, self.idle_close = store, team, idle_close
        self._workspace = workspace  # of a new room that names none
        if resolver is None:
            if resolve is None:
                raise TypeError("RoomHost needs `resolve` or `resolver`")
            fixed = resolve
            resolver = lambda: fixed
        self._resolver: Callable[[], Resolve] = resolver
        self._nursery, self._knowledge = nursery, knowledge
        self._common = _Common(retry=retry, knowledge=knowledge, models=models, mcp=mcp, can_confirm=can_confirm,
                               config=config)
        self._on_open, self._on_close, self._keeper = on_open, on_close, keeper
        self._open: dict[str, _Open] = {}
        self._opening: dict[str, trio.Event] = {}  # room id -> set once it is open (or failed to open)
        self._closing = False  # the host is closing: shell jobs no longer keep rooms open
        # the collector policy of a process holding many rooms, when its program chose it (core/startup.py)
        self._heap = Heap() if startup.tuned() else None
        self.schedule = Schedule(store, self.room)  # the self-improvement passes of its agent-bound rooms

    @classmethod
    @asynccontextmanager
    async def open(cls, store: Store, resolve: Resolve | None, **options) -> AsyncIterator[RoomHost]:
        """A host over `store`; on exit every room is left to finish its work, then closed. config.toml is read
        once here unless `config` gives it."""
        knowledge = options.pop("knowledge", None) or await for_store(store)
        if options.get("config") is None:
            options["config"] = await trio.to_thread.run_sync(load_config)
        async with trio.open_nursery() as nursery:
            host = cls(store, resolve, nursery, knowledge, **options)
            settling, scheduling = trio.CancelScope(), trio.CancelScope()
            if host._heap is not None:
                nursery.start_soon(host._settle, settling)
            nursery.start_soon(host.schedule.run, scheduling)
            try:
                yield host
            finally:
                host.idle_close, host._closing = 0, True
                scheduling.cancel()  # a pass it started ends with it (the room's stop path, as on any close)
                for held in list(host._open.values()):
                    held.wake.set()
                settling.cancel()
                if host._heap is not None:
                    host._heap.release()

    async def _settle(self, scope: trio.CancelScope) -> None:
        assert self._heap is not None
        with scope:
            await self._heap.run()

    @property
    def rooms(self) -> dict[str, Room]:
        """The rooms open now, by id."""
        return {rid: held.room for rid, held in self._open.items()}

    @asynccontextmanager
    async def room(self, ref: str | None = None, *, name: str = "room", team: Team | None = None,
                   workspace: Path | None = None) -> AsyncIterator[Room]:
        """The room `ref` (an id, a unique id prefix or a name; opened if it is not), or a new room
        (`name`, `team`, `workspace`) when `ref` is None. It stays open at least while the block runs."""
        held = await (self._create(name, team, workspace or self._workspace) if ref is None else self._get(ref))
        try:
            yield held.room
        finally:
            held.users -= 1
            held.last = trio.current_time()
            # A holder counting down looks at `last` again when its count ends: a user leaving wakes it only if it
            # waits for that, or if the room should close sooner than it counts (idle_close was lowered).
            if (held.waiting and not held.users) or (self.idle_close is not None
                                                     and held.last + self.idle_close < held.due):
                held.wake.set()

    async def ask(self, ref: str | None, line: str, **new) -> tuple[Room, Message]:
        """Post a line to a room and wait until the room is idle; the room and the posted message."""
        async with self.room(ref, **new) as room:
            msg = await room.post(line)
            await room.idle()
            return room, msg

    async def _get(self, ref: str) -> _Open:
        if (held := self._open.get(ref)) is not None:
            held.users += 1
            return held
        record = await self.store.room(ref)
        if record is None:
            raise RoomNotFound(f"no room {ref!r} in this database; `orchestrator rooms` lists them")
        while (opening := self._opening.get(record.id)) is not None:
            await opening.wait()  # another caller is opening it, or it is closing: wait, then look again
        if (held := self._open.get(record.id)) is not None:
            held.users += 1
            return held
        self._opening[record.id] = opening = trio.Event()
        try:
            opened = Room.open(self.store, record.id, self._resolver(), team=self.team, **self._common)
            return await self._nursery.start(self._hold, opened, record.id)
        finally:
            del self._opening[record.id]
            opening.set()

    async def _create(self, name: str, team: Team | None, workspace: Path | None) -> _Open:
        team = team or self.team
        if team is None:
            raise InputError("a new room needs a team: this host has none of its own")
        return await self._nursery.start(self._hold, Room.create(self.store, team, self._resolver(), name=name,
                                                                 workspace=workspace, **self._common), None)

    async def _hold(self, opened, room_id: str | None, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Keep one room open (for the user who opened it) until nobody has used it for `idle_close`
        seconds, no agent is running and no shell job is alive; or, under a keeper, until its lease is lost.
        A stored room is leased before it opens (healing is fenced); a new one right after its row exists."""
        held = closing = None
        leased = None
        scope = trio.CancelScope()
        try:
            with scope:
                if self._keeper and room_id is not None:
                    await self._keeper.take(leased := room_id, scope)
                async with opened as room:
                    if self._keeper and leased is None:
                        await self._keeper.take(leased := room.id, scope)
                    if self._on_open and (started := self._on_open(room)) is not None:
                        await started
                    held = _Open(room, users=1)
                    self._open[room.id] = held
                    self.schedule.opened(room)
                    task_status.started(held)
                    try:
                        await self._until_idle(held)
                    finally:
                        # Out of the map before the room closes: a new user waits for the close, then reopens
                        # from the store, which by then holds everything this room wrote.
                        del self._open[room.id]
                        self._opening[room.id] = closing = trio.Event()
        except Exception:
            if held is None:
                raise  # it did not open: the caller hears why
            log.exception("room closed by an error", room=held.room.id)  # the other rooms go on
        finally:
            if leased is not None and self._keeper is not None:  # leased: only under a keeper
                with trio.CancelScope(shield=True):
                    await self._keeper.give_up(leased)
            if closing is not None and held is not None:  # closing: set once the room was held
                del self._opening[held.room.id]
                closing.set()
                if self._heap is not None:
                    self._heap.closed(len(self._open))
                self.schedule.closed(held.room)
                if self._on_close:
                    self._on_close(held.room)
        if held is None:  # its lease was lost while it opened
            raise HeldElsewhere(leased or "", "another host")

    async def _until_idle(self, held: _Open) -> None:
        room = held.room
        while True:
            held.wake = trio.Event()
            if held.users:
                held.waiting = True
                try:
                    await held.wake.wait()
                finally:
                    held.waiting = False
                continue
            await room.idle()  # work that no user waits for (a background report) keeps it open too
            if held.users:
                continue
            held.due = math.inf if self.idle_close is None else held.last + self.idle_close
            with trio.move_on_at(held.due):
                await held.wake.wait()  # the host is closing, or idle_close was lowered
                continue
            if self.idle_close is None:  # set to None meanwhile: kept open until the host closes
                continue
            if held.users or trio.current_time() < held.last + self.idle_close:
                continue  # users came and went meanwhile (none woke this): count again from the last one
            if not (held.users or room.busy or (room.jobs and not self._closing)):
                return
            if room.jobs and not (held.users or room.busy):
                await trio.sleep(JOB_POLL)  # a shell job is still alive: the room stays until it ends
