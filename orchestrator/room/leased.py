"""The rooms one host process runs under leases, open in a RoomHost (room/host.py): a room opens here when a
line arrives for it or its owner's lease ran out (healed on open, its unanswered lines answered), its lease is
renewed while it is open and given up when it closes idle, and a line for a room held elsewhere goes to that
room's inbox. A room whose lease is lost is stopped at once; its writes are fenced anyway.
"""
from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio

from orchestrator.core.errors import RoomNotFound
from orchestrator.core.log import logger
from orchestrator.core.types import Message
from orchestrator.room.host import OnOpen, RoomHost
from orchestrator.room.room import COMMANDER, USER, Resolve, Room
from orchestrator.store.lease import CONTROL, LEASE_SECONDS, Fenced, HeldElsewhere, InboxLine, Lease

log = logger()

TAKING = 8  # rooms one host opens at once when their owner died (each opening reads and heals its history)


@dataclass
class Posted:
    room: str  # the room's id
    via: str  # "here": appended by this host (seq); "inbox": stored for the room's owner (inbox id)
    seq: int = 0
    id: str = ""  # the message's, when posted here
    inbox: str = ""


@dataclass
class _Held:
    lease: Lease
    scope: trio.CancelScope  # the room's life in the RoomHost: cancelled when the lease is lost
    # User lines go in one at a time: the store's delivery mark belongs to the next user append in the room.
    lock: trio.Lock = field(default_factory=trio.Lock)


class LeasedRooms:
    """Open with `async with LeasedRooms.open(store, host, resolve, ...)`; `post` from any task. `rooms` is
    the RoomHost; it asks this object (its keeper) before a room opens and after it closes."""

    def __init__(self, store, host: str, seconds: float = LEASE_SECONDS):
        self.store, self.host, self.seconds = store, host, seconds
        self._rooms: RoomHost | None = None  # while open()'s block runs
        self._held: dict[str, _Held] = {}
        self._taking: set[str] = set()
        # Leases the takeover scan took for rooms that wait for their turn to open: taken all at once, so rooms
        # move as soon as their owner's lease runs out even when opening them (healing) takes a while.
        self._claimed: dict[str, Lease] = {}

    @property
    def rooms(self) -> RoomHost:
        """The rooms this host holds now, by id."""
        if self._rooms is None:
            raise RuntimeError("LeasedRooms has rooms only inside `async with LeasedRooms.open(...)`")
        return self._rooms

    @classmethod
    @asynccontextmanager
    async def open(cls, store, host: str, resolve: Resolve | None, *, seconds: float = LEASE_SECONDS,
                   on_open: OnOpen | None = None, **options) -> AsyncIterator[LeasedRooms]:
        """`options` are RoomHost's. Leases are renewed until every room has closed; no room is taken once the
        block ends."""
        leased = cls(store, host, seconds)

        async def opened(room: Room) -> None:
            if on_open and (started := on_open(room)) is not None:
                await started
            await leased._carry_on(room)

        async with trio.open_nursery() as renewing:
            renewing.start_soon(leased._renewing)
            async with RoomHost.open(store, resolve, keeper=leased, on_open=opened, **options) as leased._rooms:
                async with trio.open_nursery() as taking:
                    taking.start_soon(leased._taking_over, taking)
                    taking.start_soon(leased._reading_inbox)
                    try:
                        yield leased
                    finally:
                        taking.cancel_scope.cancel()
            renewing.cancel_scope.cancel()

    async def post(self, ref: str, text: str) -> Posted:
        """A user line for the room: posted here if this host holds the room or can take it, else stored in
        the room's inbox for its owner. Either way the line is stored when this returns."""
        room_id = await self._resolve(ref)
        try:
            async with self.rooms.room(room_id) as room:
                async with self._lock(room_id):
                    msg = await room.post(text)
                    return Posted(room_id, "here", seq=msg.seq, id=msg.id)
        except HeldElsewhere:
            pass
        except Fenced:  # taken over meanwhile: nothing was written, the new owner gets the line
            self._lost(room_id)
        return Posted(room_id, "inbox", inbox=(await self.store.send(room_id, text)).id)

    async def send_stop(self, room_id: str, reason: str) -> None:
        """Ask the host that runs the room to stop it (group stop); it acts on its next look at the inbox."""
        await self.store.send(room_id, reason, author=CONTROL + "stop")

    async def send_answer(self, room_id: str, answer: str, request_id: str | None) -> None:
        """Answer a confirmation request in a room another host runs; a request gone by then is left alone."""
        await self.store.send(room_id, answer, author=f"{CONTROL}answer:{request_id or ''}")

    async def _resolve(self, ref: str) -> str:
        if ref in self._held:
            return ref
        record = await self.store.room(ref)
        if record is None:
            raise RoomNotFound(f"no room {ref!r} in this database; `orchestrator rooms` lists them")
        return record.id

    def _lock(self, room_id: str) -> trio.Lock:
        held = self._held.get(room_id)
        if held is None:  # lost between opening and posting
            raise HeldElsewhere(room_id, "another host")
        return held.lock

    # --- the keeper of the RoomHost -----------------------------------------------------------------

    async def take(self, room_id: str, scope: trio.CancelScope) -> None:
        """Claim `room_id`'s lease for this host (raises HeldElsewhere when another host holds it)."""
        lease = self._claimed.pop(room_id, None) or await self.store.acquire(room_id, self.host, self.seconds)
        if lease is None:
            raise HeldElsewhere(room_id, "another host")
        self._held[room_id] = _Held(lease, scope)
        log.info("room taken", room=room_id, host=self.host, epoch=lease.epoch)

    async def give_up(self, room_id: str) -> None:
        """The room closed here (idle, or failed): another host may take it at once."""
        if (held := self._held.pop(room_id, None)) is not None:
            try:
                await self.store.release(held.lease)
            except Exception as exc:  # noqa: BLE001 (the lease then runs out by itself)
                log.warning("lease not released", room=room_id, host=self.host, error=repr(exc))

    async def _carry_on(self, room: Room) -> None:
        """Lines the last owner stored but never answered (it died mid-turn, perhaps after part of the reply:
        a tool call, a worker's task) are answered now by the member each went to; so is the commander's
        handoff note to the member holding the floor. Every turn's last words record the newest seq its model
        call held, in their own row, so "answered" is exact: a reply to an earlier line stored after a later
        one does not count for the later one."""
        answered = await self.store.answered(room.id)
        for line in await self.store.read(room.id):
            target = _addressee(line, room) if line.kind == "user" else _handed_to(line, room)
            if target and line.seq > answered.get(target, 0):
                room.wake(target)  # once per member: a turn answers every line it reads

    def _lost(self, room_id: str) -> None:
        if held := self._held.pop(room_id, None):
            log.warning("lease lost", room=room_id, host=self.host, epoch=held.lease.epoch)
            held.scope.cancel()

    async def _renewing(self) -> None:
        while True:
            await trio.sleep(self.seconds / 3)
            held, claimed = list(self._held.values()), list(self._claimed.values())
            renewed = await self.store.renew_all([h.lease for h in held] + claimed, self.seconds)
            for h, lease in zip(held, renewed):
                if lease is None:
                    self._lost(h.lease.room)
                elif self._held.get(h.lease.room) is h:
                    h.lease = lease
            for claim, lease in zip(claimed, renewed[len(held):]):
                if self._claimed.get(claim.room) is claim:
                    if lease is None:
                        del self._claimed[claim.room]
                    else:
                        self._claimed[claim.room] = lease

    async def _taking_over(self, nursery: trio.Nursery) -> None:
        """Rooms whose owner stopped renewing are taken (healed, carried on) by whichever host comes first:
        their leases at once, then several rooms open at a time. A lease given up (expires 0: closed idle) is
        not taken: its room waits for a line."""
        limiter = trio.CapacityLimiter(TAKING)
        while True:
            await trio.sleep(self.seconds / 4 * (0.5 + random.random()))
            now = await self.store.clock()
            for lease in await self.store.leases():
                room_id = lease.room
                if 0 < lease.expires <= now and room_id not in self._held and room_id not in self._taking:
                    claim = await self.store.acquire(room_id, self.host, self.seconds)
                    if claim is None or room_id in self._held:  # another host came first, or a line opened it
                        continue
                    self._claimed[room_id] = claim
                    self._taking.add(room_id)
                    nursery.start_soon(self._take_over, room_id, limiter)

    async def _take_over(self, room_id: str, limiter: trio.CapacityLimiter) -> None:
        try:
            async with limiter, self.rooms.room(room_id):
                pass  # open now (carried on); it stays open until idle
        except HeldElsewhere:
            pass  # lost meanwhile: another host runs it
        except Exception as exc:  # noqa: BLE001 (one room's failure is that room's alone)
            log.warning("room not taken", room=room_id, host=self.host, error=repr(exc))
        finally:
            self._taking.discard(room_id)
            if (claim := self._claimed.pop(room_id, None)) is not None:  # it never opened: let another host try
                with trio.CancelScope(shield=True):
                    await self.store.release(claim)

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
        try:
            async with self.rooms.room(line.room) as room:
                if line.author.startswith(CONTROL):
                    await _act(room, line)
                    await self.store.drop(line.id)
                    return
                async with self._lock(line.room):
                    self.store.deliver(line)
                    try:
                        await room.post(line.text)
                    except Fenced:  # the line stays in the inbox, for the host that took the room
                        self._lost(line.room)
                    finally:
                        self.store.undeliver(line.room)
        except HeldElsewhere:
            pass  # another host took it first; the line is that host's now
        except Exception as exc:  # noqa: BLE001 (the line stays in the inbox; the next look tries again)
            log.warning("line not delivered", room=line.room, host=self.host, error=repr(exc))

async def _act(room: Room, line: InboxLine) -> None:
    """A request sent by a host that does not run the room (a web page's Stop button or answer)."""
    what, _, request_id = line.author.removeprefix(CONTROL).partition(":")
    if what == "stop":
        await room.stop(line.text)
    elif what == "answer" and room.asking and (not request_id or request_id in room.asking):
        room.answer(line.text, request_id or None)  # type: ignore[arg-type]
    else:
        log.info("request not acted on", room=room.id, request=line.author)


def _handed_to(note: Message, room: Room) -> str | None:
    """The member holding the floor, for the commander's handoff note to it (a task it shares with the user)."""
    owner = room.floor
    handed = note.kind == "task" and note.author == COMMANDER and owner != COMMANDER
    return owner if handed and owner in note.visible_to and USER in note.visible_to else None


def _addressee(line: Message, room: Room) -> str | None:
    """The member a user line went to (room.post: the mentioned member or the floor's owner, else the
    commander); None for a line that went to nobody (an unknown @name)."""
    went = [n for n in line.visible_to if n != USER and n in room.members]
    return next((n for n in went if n != COMMANDER), COMMANDER if went else None)
