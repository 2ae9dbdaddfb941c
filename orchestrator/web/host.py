"""Every room of one store, hosted in one trio nursery: a room opens on first use and keeps running,
with the feed that numbers its events for browsers, until the host shuts down.

Rooms share the store's one connection and the process; each keeps its own nursery and group stop.
"""
from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import msgspec
import trio

from orchestrator.core.errors import InputError
from orchestrator.core.log import logger
from orchestrator.room.room import Resolve, Room
from orchestrator.store.db import Store
from orchestrator.team.schema import Team
from orchestrator.web.feed import Feed

log = logger(__name__)


@dataclass
class Hosted:
    room: Room
    feed: Feed


class RoomSummary(msgspec.Struct, kw_only=True):
    """One line of the room list."""

    id: str
    name: str
    floor: str
    messages: int
    last_activity: float  # seconds since the epoch; when the room was created if it has no message yet
    running_tasks: int
    busy: bool
    open: bool  # hosted in this process now


@dataclass
class Models:
    """What a room runs on: its team (None: each stored room keeps its own), and a resolver per room
    (a scripted play restarts its script in every room)."""

    team: Team | None
    new_team: Team
    resolver: Callable[[], Resolve]
    catalog: Any = None
    workspace: Path | None = None
    mcp: Any = None  # the process's MCP hub, shared by every room


class Host:
    def __init__(self, store: Store, models: Models, nursery: trio.Nursery):
        self.store, self.models, self._nursery = store, models, nursery
        self._hosted: dict[str, Hosted] = {}
        self._opening: dict[str, trio.Event] = {}

    async def rooms(self) -> list[RoomSummary]:
        out = []
        for r in await self.store.rooms():
            h = self._hosted.get(r.id)
            out.append(RoomSummary(
                id=r.id, name=r.name, floor=h.room.floor if h else r.floor, messages=r.messages,
                last_activity=r.last_ts or r.created, running_tasks=len(h.room.ledger.running()) if h else 0,
                busy=h.room.busy if h else False, open=h is not None))
        return out

    async def create(self, name: str) -> Hosted:
        def enter() -> AbstractAsyncContextManager[Room]:
            return Room.create(self.store, self.models.new_team, self.models.resolver(), name=name,
                               workspace=self.models.workspace, can_confirm=True, models=self.models.catalog,
                               mcp=self.models.mcp)

        hosted = await self._nursery.start(self._keep, enter)
        return hosted

    async def get(self, ref: str) -> Hosted:
        """The running room `ref` (an id, a unique prefix or a name), opened now if need be."""
        if (hosted := self._hosted.get(ref)) is not None:  # what pages ask for: no trip to the store
            return hosted
        record = await self.store.room(ref)
        if record is None:
            raise InputError(f"no room {ref!r} in this database")
        while record.id not in self._hosted:
            if (opening := self._opening.get(record.id)) is not None:
                await opening.wait()  # someone else is opening it: share theirs
                continue
            self._opening[record.id] = done = trio.Event()
            try:
                await self._nursery.start(self._keep, lambda: Room.open(
                    self.store, record.id, self.models.resolver(), team=self.models.team, can_confirm=True,
                    models=self.models.catalog, mcp=self.models.mcp))
            finally:
                del self._opening[record.id]
                done.set()
        return self._hosted[record.id]

    async def _keep(self, enter: Callable[[], AbstractAsyncContextManager[Room]],
                    task_status=trio.TASK_STATUS_IGNORED) -> None:
        """One room's life in the host: open, publish into its feed, run until the host ends."""
        room_id = None
        try:
            async with enter() as room:
                room_id = room.id
                record = await self.store.room(room.id)  # seq as it is after healing on open
                feed = Feed(record.last_seq if record else 0)
                room.subscribe(feed.publish)
                self._hosted[room.id] = hosted = Hosted(room, feed)
                task_status.started(hosted)
                await trio.sleep_forever()
        except Exception as exc:
            # One room failing (its store row, its team) must not take the other rooms down.
            log.exception("room closed by an error", room=room_id)
            if room_id is None:
                raise InputError(f"the room could not be opened: {exc}") from None
        finally:
            if room_id is not None:
                self._hosted.pop(room_id, None)
