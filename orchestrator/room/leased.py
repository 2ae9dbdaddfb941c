"""The rooms one host process runs under leases: it takes a room when a line arrives for it or when its
owner's lease ran out (healing it on open), renews what it holds, and hands a line for a room held
elsewhere to that room's inbox. A room whose lease is lost is stopped at once; its writes are fenced anyway.
"""
from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

import trio

from orchestrator.core.log import logger
from orchestrator.core.types import Message
from orchestrator.room.room import COMMANDER, USER, Room
from orchestrator.store.lease import LEASE_SECONDS, Fenced, InboxLine, Lease

log = logger()

OpenRoom = Callable[[str], AbstractAsyncContextManager[Room]]  # a room id -> Room.open(store, id, ...)


@dataclass
class Posted:
    via: str  # "here": appended by this host (seq); "inbox": stored for the room's owner (inbox id)
    seq: int = 0
    inbox: str = ""


@dataclass
class _Held:
    lease: Lease
    room: Room
    scope: trio.CancelScope
    # User lines go in one at a time: the store's delivery mark belongs to the next user append in the room.
    lock: trio.Lock = field(default_factory=trio.Lock)


class LeasedRooms:
    """`post` from any task; `run` (in a nursery) keeps the leases, the inbox and the takeovers going."""

    def __init__(self, store, host: str, open_room: OpenRoom, *, seconds: float = LEASE_SECONDS):
        self.store, self.host, self.seconds = store, host, seconds
        self._open = open_room
        self._held: dict[str, _Held] = {}
        self._opening: dict[str, trio.Event] = {}
        self._nursery: trio.Nursery | None = None

    @property
    def rooms(self) -> dict[str, Room]:
        return {room_id: held.room for room_id, held in self._held.items()}

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._renewing)
            nursery.start_soon(self._taking_over)
            nursery.start_soon(self._reading_inbox)
            task_status.started()

    async def post(self, room_id: str, text: str) -> Posted:
        """A user line for the room: posted here if this host holds the room or can take it, else stored in
        the room's inbox for its owner. Either way the line is stored when this returns."""
        held = await self._hold(room_id)
        if held is not None:
            try:
                async with held.lock:
                    return Posted("here", seq=(await held.room.post(text)).seq)
            except Fenced:  # taken over meanwhile: nothing was written, the new owner gets the line
                self._lost(room_id)
        return Posted("inbox", inbox=(await self.store.send(room_id, text)).id)

    # --- taking and keeping rooms -----------------------------------------------------------------

    async def _hold(self, room_id: str) -> _Held | None:
        while room_id in self._opening:
            await self._opening[room_id].wait()
        if room_id in self._held:
            return self._held[room_id]
        self._opening[room_id] = opened = trio.Event()
        try:
            lease = await self.store.acquire(room_id, self.host, self.seconds)
            if lease is None:
                return None
            assert self._nursery is not None, "LeasedRooms.run is not running"
            try:
                return await self._nursery.start(self._keep, lease)
            except Exception:  # noqa: BLE001 (it did not open: logged and released by _keep)
                return None
        finally:
            del self._opening[room_id]
            opened.set()

    async def _keep(self, lease: Lease, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Run one room for as long as its lease holds; a failure ends this room, never the host."""
        room_id = lease.room
        held = None
        try:
            with trio.CancelScope() as scope:
                async with self._open(room_id) as room:  # healed on open (S2)
                    held = _Held(lease, room, scope)
                    self._held[room_id] = held
                    task_status.started(held)
                    log.info("room taken", room=room_id, host=self.host, epoch=lease.epoch)
                    await self._carry_on(room)
                    await trio.sleep_forever()
        except Exception as exc:  # noqa: BLE001 (one room's failure, Fenced included, is that room's alone)
            log.warning("room dropped", room=room_id, host=self.host, epoch=lease.epoch, error=repr(exc))
            if held is None:
                raise
        finally:
            if self._held.get(room_id) is held:
                del self._held[room_id]
            with trio.CancelScope(shield=True):  # handed over at once, not after the lease runs out
                with contextlib.suppress(Exception):
                    await self.store.release(held.lease if held else lease)

    async def _carry_on(self, room: Room) -> None:
        """Lines the last owner stored but never answered (it died mid-turn, perhaps after part of the reply:
        a tool call, a worker's task) are answered now by the member each went to. Every reply records the
        newest seq its author had read, in the reply's own row, so "answered" is exact: a reply to an earlier
        line stored after a later one does not count for the later one."""
        answered = await self.store.answered(room.id)
        for line in await self.store.read(room.id):
            if line.kind == "user" and (target := _addressee(line, room)) and line.seq > answered.get(target, 0):
                room.wake(target)  # once per member: a turn answers every line it reads

    def _lost(self, room_id: str) -> None:
        if held := self._held.pop(room_id, None):
            log.warning("lease lost", room=room_id, host=self.host, epoch=held.lease.epoch)
            held.scope.cancel()

    async def _renewing(self) -> None:
        while True:
            await trio.sleep(self.seconds / 3)
            held = list(self._held.values())
            for h, renewed in zip(held, await self.store.renew_all([h.lease for h in held], self.seconds)):
                if renewed is None:
                    self._lost(h.lease.room)
                else:
                    h.lease = renewed

    async def _taking_over(self) -> None:
        """Rooms whose owner stopped renewing are taken (healed, carried on) by whichever host comes first."""
        while True:
            await trio.sleep(self.seconds / 4 * (0.5 + random.random()))
            now = await self.store.clock()
            for lease in await self.store.leases():
                if lease.expires <= now and lease.room not in self._held:
                    await self._hold(lease.room)

    async def _reading_inbox(self) -> None:
        while True:
            await self.store.wait_inbox(self.seconds / 4)
            lines = await self.store.inbox()
            if not lines:
                continue
            now = await self.store.clock()
            free = {lease.room for lease in await self.store.leases() if lease.expires <= now}
            for line in lines:
                if line.room in self._held or line.room in free:
                    await self._deliver(line)

    async def _deliver(self, line: InboxLine) -> None:
        held = await self._hold(line.room)
        if held is None:
            return  # another host took it first; the line is that host's now
        async with held.lock:
            self.store.deliver(line)
            try:
                await held.room.post(line.text)
            except Fenced:  # the line stays in the inbox, for the host that took the room
                self._lost(line.room)
            finally:
                self.store.undeliver(line.room)


def _addressee(line: Message, room: Room) -> str | None:
    """The member a user line went to (room.post: the mentioned member or the floor's owner, else the
    commander); None for a line that went to nobody (an unknown @name)."""
    went = [n for n in line.visible_to if n != USER and n in room.members]
    return next((n for n in went if n != COMMANDER), COMMANDER if went else None)
