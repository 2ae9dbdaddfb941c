"""What both stores do alike, written once over the contract's `call`: the queries they share, fencing, the seq
bookkeeping of appends, healing, and what this store keeps for the rooms its host leased.

A backend supplies `call` (and `_write`, where a call is not a transaction of its own), the statements that
differ by dialect (`_ROOMS`, `_FENCE`, `_TASKS`), and the hooks below `_insert`.
"""
from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from uuid import uuid4

import msgspec

from orchestrator.core.types import Draft, Message
from orchestrator.store import heal, records
from orchestrator.store.contract import Side, Store
from orchestrator.store.lease import Fenced, InboxLine, Lease
from orchestrator.store.records import RoomRecord, TaskRecord

T = TypeVar("T")
SMALL_ROOM = 200  # messages: loading (and healing) that many holds the event loop about as long as a few appends

_BY_ID = "WHERE r.id = :ref"
_BY_PREFIX = "WHERE :ref != '' AND substr(r.id, 1, length(:ref)) = :ref"
_BY_NAME = "WHERE r.name = :ref"
# An author's replies answer up to their highest mark.
_ANSWERED = "SELECT author, max(answers) FROM messages WHERE room = ? AND answers IS NOT NULL GROUP BY author"


class BaseStore(Store):
    """The contract's methods both stores share; a backend subclasses it (its docstrings are the contract's)."""

    _ROOMS: str  # every room's row (records.room_from), with `{where}` for the condition on `r`
    _FENCE: str  # the room's lease epoch, read inside a write's transaction
    _TASKS: str  # a room's rows of records.TASK_COLUMNS in creation order

    def __init__(self, name: str, *, readonly: bool = False):
        self.name = name
        self.readonly = readonly
        # The epoch of each room this store's host leased: every write to that room carries it (fencing).
        self._epochs: dict[str, int] = {}
        # The inbox line that the room's next user message delivers (deleted in the append's transaction).
        self._deliveries: dict[str, str] = {}
        self._prepared: set[Callable] = set()  # other owners' table set-ups already run on this database

    async def _write(self, fn: Callable[..., T], *args: Any, small: bool = True) -> T:
        """`call` as one write transaction (where every call is one already, it is just that)."""
        return await self.call(fn, *args, small=small)

    # --- rooms and messages -------------------------------------------------------------------

    async def create_room(self, name: str, *, floor: str = "commander", meta: dict | None = None) -> RoomRecord:
        room = records.new_room(name, floor, meta)
        await self._write(_execute, records.INSERT_ROOM, records.room_row(room))
        return room

    async def room(self, ref: str) -> RoomRecord | None:
        def find(db: Any) -> RoomRecord | None:
            if found := self._rooms(db, _BY_ID, ref):
                return found[0]
            if len(found := self._rooms(db, _BY_PREFIX, ref)) == 1:
                return found[0]
            named = self._rooms(db, _BY_NAME, ref)
            return named[-1] if named else None

        return await self.call(find, small=True)

    async def rooms(self) -> list[RoomRecord]:
        return await self.call(self._rooms, "", None)

    async def set_meta(self, room_id: str, meta: dict) -> None:
        await self._write(self._set_room, room_id, "meta", records.json_text(meta))

    async def set_floor(self, room_id: str, owner: str) -> None:
        await self._write(self._set_room, room_id, "floor", owner)

    async def append(self, room_id: str, draft: Draft, *, side: Side | None = None,
                     answers: int | None = None) -> Message:
        return (await self.append_many(room_id, [draft], side=side, answers=(answers,)))[0]

    async def append_many(self, room_id: str, drafts: list[Draft], *, side: Side | None = None,
                          answers: Sequence[int | None] = ()) -> list[Message]:
        epoch = self._epochs.get(room_id)
        delivery = (self._deliveries.pop(room_id, None)
                    if self._deliveries and any(d.kind == "user" for d in drafts) else None)

        def insert(db: Any) -> list[Message]:
            self._fence(db, room_id, epoch)
            if delivery is not None:
                db.execute("DELETE FROM inbox WHERE id = ?", [delivery])
            if side is not None:
                side(db)
            return self._insert(db, room_id, drafts, epoch, answers)

        return await self._write(insert)

    async def read(self, room_id: str, after: int = 0) -> list[Message]:
        return await self.call(read_messages, room_id, after, small=True)

    async def messages(self, room_id: str, after: int = 0) -> list[Message]:
        return await self.call(read_messages, room_id, after)

    async def answered(self, room_id: str) -> dict[str, int]:
        return {row[0]: row[1] for row in await self.call(_fetch, _ANSWERED, [room_id])}

    async def load(self, room_id: str, *, size: int | None = None) -> list[Message]:
        if self.readonly:
            return await self.call(self._healed_copy, room_id)
        small = size is not None and size <= SMALL_ROOM
        return await self._write(self._heal, room_id, self._epochs.get(room_id), small=small)

    async def put_task(self, task: TaskRecord) -> None:
        row = records.task_row(task)
        epoch = self._epochs.get(task.room)

        def upsert(db: Any) -> None:
            self._fence(db, task.room, epoch)
            db.execute(records.UPSERT_TASK, row)

        await self._write(upsert)

    async def tasks(self, room_id: str) -> list[TaskRecord]:
        return [records.task_from(row) for row in await self.call(_fetch, self._TASKS, [room_id], small=True)]

    async def prepare(self, fn: Callable[[Any], None]) -> None:
        if fn not in self._prepared:
            await self.call(fn)
            self._prepared.add(fn)

    # --- leases -------------------------------------------------------------------------------

    async def acquire(self, room_id: str, host: str, seconds: float) -> Lease | None:
        lease = await self._write(self._take, room_id, host, seconds)
        if lease is not None:
            self._epochs[room_id] = lease.epoch
        return lease

    async def renew(self, lease: Lease, seconds: float) -> Lease | None:
        return (await self.renew_all([lease], seconds))[0]

    async def renew_all(self, leases: list[Lease], seconds: float) -> list[Lease | None]:
        if not leases:
            return []
        expires = await self._write(self._extend, leases, seconds)
        return [msgspec.structs.replace(x, expires=expires[x.room]) if x.room in expires else None for x in leases]

    async def release(self, lease: Lease) -> None:
        await self._write(_execute, "UPDATE leases SET expires = 0 WHERE room = ? AND epoch = ?",
                          [lease.room, lease.epoch])

    async def leases(self, room: str | None = None) -> list[Lease]:
        if room is None:
            rows = await self.call(_fetch, "SELECT room, host, epoch, expires FROM leases ORDER BY room", [],
                                   small=True)
        else:
            rows = await self.call(_fetch, "SELECT room, host, epoch, expires FROM leases WHERE room = ?", [room],
                                   small=True)
        return [Lease(room=r, host=h, epoch=e, expires=x) for r, h, e, x in rows]

    # --- the inbox ------------------------------------------------------------------------------

    async def send(self, room_id: str, text: str, *, author: str = "user") -> InboxLine:
        line = InboxLine(id=uuid4().hex, room=room_id, author=author, text=text, posted=time.time())

        def insert(db: Any) -> None:
            db.execute("INSERT INTO inbox (id, room, author, text, posted) VALUES (?, ?, ?, ?, ?)",
                       [line.id, line.room, line.author, line.text, line.posted])
            self._notify(db, room_id)

        await self._write(insert)
        return line

    async def inbox(self, rooms: list[str] | None = None) -> list[InboxLine]:
        rows = await self.call(self._waiting, rooms, small=True)
        return [InboxLine(id=i, room=r, author=a, text=t, posted=p) for i, r, a, t, p in rows]

    async def drop(self, line_id: str) -> None:
        await self._write(_execute, "DELETE FROM inbox WHERE id = ?", [line_id])

    def deliver(self, line: InboxLine) -> None:
        self._deliveries[line.room] = line.id

    def undeliver(self, room_id: str) -> None:
        self._deliveries.pop(room_id, None)

    # --- inside a call: `db` is the connection `call` hands its function -----------------------

    def _rooms(self, db: Any, where: str, ref: str | None) -> list[RoomRecord]:
        return [records.room_from(row) for row in db.execute(self._ROOMS.format(where=where), {"ref": ref}).fetchall()]

    def _fence(self, db: Any, room_id: str, epoch: int | None) -> None:
        """Inside the write's transaction: refuse it if another host took the room after `epoch`."""
        if epoch is None:
            return
        row = db.execute(self._FENCE, [room_id]).fetchone()
        if row is not None and row[0] > epoch:
            raise Fenced(room_id, epoch, row[0])

    def _set_room(self, db: Any, room_id: str, column: str, value: str) -> None:
        self._fence(db, room_id, self._epochs.get(room_id))
        if not db.execute(f"UPDATE rooms SET {column} = ? WHERE id = ?", [value, room_id]).rowcount:
            raise records.missing(room_id)

    def _heal(self, db: Any, room_id: str, epoch: int | None = None) -> list[Message]:
        self._fence(db, room_id, epoch)
        self._hold(db, room_id)
        messages = read_messages(db, room_id)
        # Synthesized results are appended last and may sit before a sibling's result;
        # the second round only reorders those.
        for _ in range(2):
            fix = heal.plan(messages)
            if fix.empty():
                break
            if fix.delete:
                self._mark(db, room_id)
            for gone in fix.delete:
                db.execute("DELETE FROM messages WHERE id = ?", [gone])
            # Through negative seqs, so that no intermediate state breaks UNIQUE (room, seq).
            for moved, seq in fix.reseq:
                db.execute("UPDATE messages SET seq = ? WHERE id = ?", [-seq, moved])
            db.execute("UPDATE messages SET seq = -seq WHERE room = ? AND seq < 0", [room_id])
            self._insert(db, room_id, [draft for _, draft in fix.add], epoch, ids=fix.ids)
            messages = read_messages(db, room_id)
        return messages

    # --- what each backend does its own way ------------------------------------------------------

    @abstractmethod
    def _insert(self, db: Any, room_id: str, drafts: list[Draft], epoch: int | None,
                answers: Sequence[int | None] = (), ids: Sequence[str] = ()) -> list[Message]:
        """Store the drafts as the room's next messages (records.stamp) under `epoch`, named by `ids` where given
        (healing's); KeyError for no such room."""

    @abstractmethod
    def _take(self, db: Any, room_id: str, host: str, seconds: float) -> Lease | None:
        """`acquire`'s transaction: the new lease, or None while another host's is live."""

    @abstractmethod
    def _extend(self, db: Any, leases: list[Lease], seconds: float) -> dict[str, float]:
        """`renew_all`'s transaction: the new expiry of each room whose lease was still held."""

    @abstractmethod
    def _waiting(self, db: Any, rooms: list[str] | None) -> list[Sequence]:
        """The inbox rows (id, room, author, text, posted) for `rooms` (None: all), oldest first."""

    @abstractmethod
    def _healed_copy(self, db: Any, room_id: str) -> list[Message]:
        """The room as `_heal` would leave it, without writing to the database."""

    def _hold(self, db: Any, room_id: str) -> None:
        """Before healing reads the room: keep appends of other connections out until it commits."""

    def _mark(self, db: Any, room_id: str) -> None:
        """Before healing deletes messages: keep the room's last seq and ts where the next append finds them."""

    def _notify(self, db: Any, room_id: str) -> None:
        """After a line is queued: wake the room's owner, where something can."""


def require_room(db: Any, room_id: str) -> None:
    """KeyError unless the room exists (inside a write that needs it to)."""
    if db.execute("SELECT 1 FROM rooms WHERE id = ?", [room_id]).fetchone() is None:
        raise records.missing(room_id)


def _execute(db: Any, sql: str, params: Sequence | dict) -> None:
    db.execute(sql, params)


def _fetch(db: Any, sql: str, params: Sequence) -> list[Sequence]:
    return db.execute(sql, params).fetchall()


def read_messages(db: Any, room_id: str, after: int = 0) -> list[Message]:
    return [records.message_from(row) for row in db.execute(records.SELECT_MESSAGES, [room_id, after]).fetchall()]
