"""What `orchestrator serve` shows of the rooms, over the leased host (room/leased.py): a room open in this
process carries a feed that numbers its events for browsers. A request for a room another worker of this
server runs is answered by that worker (web/peers.py); only when none can be asked (it died and its lease has
not run out, or it is a host on another machine) is the room read from the store, its stream following the
store by seq.

Opening, idle closing and leases are the RoomHost's and LeasedRooms'; this layer only adds the feeds.
"""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import msgspec
from orchestrator.core.errors import RoomNotFound
from orchestrator.room.leased import LeasedRooms
from orchestrator.room.room import Resolve, Room
from orchestrator.store.records import RoomRecord
from orchestrator.store.lease import HeldElsewhere
from orchestrator.team.schema import Team
from orchestrator.web.feed import Feed


@dataclass
class Hosted:
    room: Room
    feed: Feed


@dataclass
class Elsewhere:
    """A room another worker process runs now: what a page shows of it, read from the store."""

    id: str
    record: RoomRecord

    @property
    def floor(self) -> str:
        return self.record.floor


class RoomSummary(msgspec.Struct, kw_only=True):
    """One line of the room list."""

    id: str
    name: str
    floor: str
    messages: int
    last_activity: float  # seconds since the epoch; when the room was created if it has no message yet
    running_tasks: int
    busy: bool
    open: bool  # run now by this process, or by the worker of this server that this one asked (web/peers.py)


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
    config: Any = None  # config.toml as the process read it once (None: read when the host opens)
    prices: Any = None  # (provider, model) -> prices, for the usage panel (None: the catalog's)


class Host:
    """Use inside `async with Host.open(store, models, name=...)`."""

    def __init__(self, models: Models):
        self.models = models
        self._leased: LeasedRooms | None = None  # while open()'s block runs
        self.store: Any = None
        self._feeds: dict[str, Feed] = {}

    @property
    def leased(self) -> LeasedRooms:
        if self._leased is None:
            raise RuntimeError("a Host has rooms only inside `async with Host.open(...)`")
        return self._leased

    @classmethod
    @asynccontextmanager
    async def open(cls, store, models: Models, *, name: str, **options) -> AsyncIterator[Host]:
        """`name` is this process's name in the leases; `options` are LeasedRooms' and RoomHost's."""
        host = cls(models)
        host.store = store
        async with LeasedRooms.open(store, name, None, resolver=models.resolver, team=models.team,
                                    models=models.catalog, mcp=models.mcp, config=models.config,
                                    can_confirm=True,
                                    on_open=host._opened, on_close=host._closed, **options) as host._leased:
            yield host

    async def _opened(self, room: Room) -> None:
        record = await self.store.room(room.id)  # seq as it is after healing on open
        feed = Feed(record.last_seq if record else 0)
        room.subscribe(feed.publish)
        self._feeds[room.id] = feed

    def _closed(self, room: Room) -> None:
        # Its subscribers' streams end; browsers resume by Last-Event-ID, from the store or the room's next owner.
        if (feed := self._feeds.pop(room.id, None)) is not None:
            feed.close()

    async def rooms(self) -> list[RoomSummary]:
        here = self.leased.rooms.rooms
        out = []
        for r in await self.store.rooms():
            room = here.get(r.id)
            out.append(RoomSummary(
                id=r.id, name=r.name, floor=room.floor if room else r.floor, messages=r.messages,
                last_activity=r.last_ts or r.created, running_tasks=len(room.ledger.running()) if room else 0,
                busy=room.busy if room else False, open=room is not None))
        return out

    async def holder(self, room_id: str) -> str | None:
        """Who runs the room now, as its lease says (a host's name, perhaps one that died and whose lease has not
        run out yet); None when nobody does."""
        for lease in await self.store.leases(room_id):  # one row at most: a forwarded request asks this each time
            return lease.host if lease.expires > 0 else None
        return None

    @asynccontextmanager
    async def room(self, ref: str | None, *, name: str = "room") -> AsyncIterator[Hosted | Elsewhere]:
        """The room `ref` (an id, a unique prefix or a name), open here for the block (taken if no other
        process runs it), or, while another process runs it, what the store says of it. `ref=None`: a new
        room named `name`."""
        async with AsyncExitStack() as stack:
            try:
                room: Room | Elsewhere = await stack.enter_async_context(self.leased.rooms.room(
                    ref, name=name, team=self.models.new_team, workspace=self.models.workspace))
            except HeldElsewhere as exc:
                record = await self.store.room(exc.room)
                if record is None:
                    raise RoomNotFound(f"no room {ref!r} in this database") from None
                room = Elsewhere(record.id, record)
            if isinstance(room, Elsewhere):
                yield room
            else:
                yield Hosted(room, self._feeds[room.id])

