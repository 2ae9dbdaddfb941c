"""The crash-safe session store (S1): rooms, their messages and tasks in one SQLite file (WAL).

Small reads and writes (one room's row, tasks, an append) run on the event loop: with WAL and
synchronous=NORMAL a commit takes tens of microseconds, less than a hop to a thread. Loading, healing,
listing and other owners' calls run in a worker thread. Both share one connection behind a one-slot
limiter. The store assigns ids, seqs and timestamps.
A read-only store opens the file read-only and heals a room in memory for display (schema.py checks the file).
"""
from __future__ import annotations

import itertools
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from os import PathLike
from pathlib import Path
from time import time_ns
from typing import Any, TypeVar
from urllib.parse import quote
from uuid import uuid4

import msgspec
import trio

from orchestrator.core.types import BLOCK_DECODER, ENCODER, Draft, Message
from orchestrator.store import batch, heal, schema
from orchestrator.store.checkpoint import Checkpointer
from orchestrator.store.lease import Fenced, InboxLine, Lease
from orchestrator.store.schema import UnusableDatabase
from orchestrator.store.sqlite import sqlite_utils

T = TypeVar("T")
Side = Callable[[Any], None]  # writes of another owner of tables, run inside a message's transaction
BUSY_WAIT_MS = 5000
WAL_PAGES = 10_000  # SQLite's own checkpoint, and the WAL's size cap (about 40 MB): store/checkpoint.py does most
# Scheduler passes a group waits for other writes: at 200 rooms 4 gather about twice as many per transaction as 1
# (46 against 20); on a loop with little to do a pass takes microseconds.
GATHER = 4
INBOX_POLL = 0.05  # seconds between looks at the inbox on SQLite, so a line reaches its owner this fast

_STRINGS = msgspec.json.Decoder(list[str])
_OBJECT = msgspec.json.Decoder(dict)
# last_seq and last_ts as `_insert` reads them (the newest message's, or healing's mark in the row).
_ROOMS = ("SELECT r.id, r.name, r.floor, r.created, r.meta, "
          "max(r.last_seq, coalesce((SELECT max(seq) FROM messages m WHERE m.room = r.id), 0)) AS last_seq, "
          "max(r.last_ts, coalesce((SELECT ts FROM messages m WHERE m.room = r.id ORDER BY seq DESC LIMIT 1), 0)) "
          "AS last_ts, (SELECT count(*) FROM messages m WHERE m.room = r.id) AS messages "
          "FROM rooms r {where} ORDER BY r.created, r.rowid")


SMALL_ROOM = 200  # messages: loading (and healing) that many holds the event loop about as long as a few appends


class RoomRecord(msgspec.Struct, kw_only=True):
    id: str
    name: str
    floor: str
    created: float
    meta: dict = msgspec.field(default_factory=dict)
    messages: int = 0  # message count, filled by rooms()/room()
    last_seq: int = 0  # the highest seq ever handed out (healing never reuses one)
    last_ts: float = 0.0  # when the last message was stored: the room's last activity


class TaskRecord(msgspec.Struct, kw_only=True):
    id: str
    room: str
    agent: str
    kind: str  # "dispatch" | "worker"
    status: str  # "running" | "done" | "failed" | "cancelled"
    task: str
    result: str = ""
    background: bool = False
    read: bool = False  # whether the commander has read the report
    created: float = 0.0
    updated: float = 0.0


_INSERT_MESSAGE = "INSERT INTO messages ({}, epoch, answers) VALUES ({}, :epoch, :answers)".format(
    ", ".join(Message.__struct_fields__), ", ".join(":" + c for c in Message.__struct_fields__))
# The same, by position (`_row`): sqlite3 binds a tuple without looking each name up in a dict.
_INSERT_ROW = "INSERT INTO messages ({}, epoch, answers) VALUES ({})".format(
    ", ".join(Message.__struct_fields__), ", ".join("?" * (len(Message.__struct_fields__) + 2)))
# Shared with the PostgreSQL store (its placeholder differs): an author's replies answer up to their highest mark.
_ANSWERED = "SELECT author, max(answers) FROM messages WHERE room = ? AND answers IS NOT NULL GROUP BY author"
_SELECT_MESSAGES = f"SELECT {', '.join(Message.__struct_fields__)} FROM messages WHERE room = ? AND seq > ? ORDER BY seq"
_UPSERT_TASK = "INSERT INTO tasks ({}) VALUES ({}) ON CONFLICT (id) DO UPDATE SET {}".format(
    ", ".join(TaskRecord.__struct_fields__), ", ".join(":" + c for c in TaskRecord.__struct_fields__),
    ", ".join(f"{c} = excluded.{c}" for c in TaskRecord.__struct_fields__ if c not in ("id", "created")))


class Store:
    def __init__(self, db: sqlite_utils.Database, *, name: str = ":memory:", readonly: bool = False):
        self._db = db
        self.name = name  # the path, in every error about the file
        self.readonly = readonly
        # One connection shared by the event loop and worker threads: the limiter keeps them from overlapping.
        self._limiter = trio.CapacityLimiter(1)
        # The epoch of each room this store's host leased: every write to that room carries it (fencing).
        self._epochs: dict[str, int] = {}
        # The inbox line that the room's next user message delivers (deleted in the append's transaction).
        self._deliveries: dict[str, str] = {}
        self._prepared: set[Callable] = set()  # other owners' table set-ups already run on this file
        self._group: batch.Group | None = None  # small calls being gathered, to run in one transaction
        self._checkpoints = None if readonly or name == ":memory:" else Checkpointer(_uri(Path(name)))

    @classmethod
    async def open(cls, path: str | PathLike[str], *, readonly: bool = False) -> Store:
        """Open (creating or migrating it) the store at `path`; raises UnusableDatabase for a path that is
        not a usable store. `readonly` never writes: not even a migration or a healing."""
        name = str(path)
        return cls(await trio.to_thread.run_sync(_connect, name, readonly), name=name, readonly=readonly)

    async def close(self) -> None:
        # Shielded so that `finally: await store.close()` still closes inside a cancelled scope.
        with trio.CancelScope(shield=True):
            if self._checkpoints is not None:
                await self._checkpoints.wait()
            await trio.to_thread.run_sync(self._db.close, limiter=self._limiter)

    async def create_room(self, name: str, *, floor: str = "commander",
                          meta: dict | None = None) -> RoomRecord:
        room = RoomRecord(id=uuid4().hex[:12], name=name, floor=floor, created=time.time(),
                          meta=meta or {})
        await self._now(self._db.execute,
                        "INSERT INTO rooms (id, name, floor, created, meta, last_seq, last_ts) "
                        "VALUES (?, ?, ?, ?, ?, 0, 0)",
                        [room.id, room.name, room.floor, room.created, _json(room.meta)])
        return room

    async def room(self, ref: str) -> RoomRecord | None:
        """By exact id, else by an id prefix that only one room has, else the newest room named `ref`."""
        def find() -> RoomRecord | None:
            if found := _rooms(self._db, "WHERE r.id = :ref", ref):
                return found[0]
            if len(found := _rooms(self._db, "WHERE :ref != '' AND instr(r.id, :ref) = 1", ref)) == 1:
                return found[0]
            named = _rooms(self._db, "WHERE r.name = :ref", ref)
            return named[-1] if named else None

        return await self._now(find)

    async def rooms(self) -> list[RoomRecord]:
        return await self._run(_rooms, self._db, "")

    async def set_meta(self, room_id: str, meta: dict) -> None:
        await self._now(self._set_room, room_id, "meta", _json(meta))

    async def set_floor(self, room_id: str, owner: str) -> None:
        await self._now(self._set_room, room_id, "floor", owner)

    async def append(self, room_id: str, draft: Draft, *, side: Side | None = None,
                     answers: int | None = None) -> Message:
        """Commit one message; with `side`, other rows in the same transaction (an assignment's ledger row, a
        turn's usage), so that they cost no commit of their own.
        `answers`: an agent's reply records the newest seq its author had read (see `answered`)."""
        return (await self.append_many(room_id, [draft], side=side, answers=(answers,)))[0]

    async def append_many(self, room_id: str, drafts: list[Draft], *, side: Side | None = None,
                          answers: Sequence[int | None] = ()) -> list[Message]:
        """`append` for several messages in one transaction; `answers[i]` is what `drafts[i]` answers (None, or
        missing at the end: nothing)."""
        epoch = self._epochs.get(room_id)
        delivery = (self._deliveries.pop(room_id, None)
                    if self._deliveries and any(d.kind == "user" for d in drafts) else None)

        def insert() -> list[Message]:
            with immediate(self._db):
                _fence(self._db, room_id, epoch)
                if delivery is not None:
                    self._db.conn.execute("DELETE FROM inbox WHERE id = ?", [delivery])
                if side is not None:
                    side(self._db)
                return _insert(self._db, room_id, drafts, epoch, answers)

        return await self._now(insert)

    async def put_task(self, task: TaskRecord) -> None:
        """Insert or update by id; the first `created` is kept, `updated` is now."""
        row = _task_row(task)
        epoch = self._epochs.get(task.room)

        def upsert() -> None:
            with immediate(self._db):
                _fence(self._db, task.room, epoch)
                self._db.conn.execute(_UPSERT_TASK, row)

        await self._now(upsert)

    async def read(self, room_id: str, after: int = 0) -> list[Message]:
        """The room's messages with seq > `after`, as stored (no healing): how a follower tails a room."""
        return await self._now(_messages, self._db, room_id, after)

    async def answered(self, room_id: str) -> dict[str, int]:
        """By author, the newest seq that author's replies answer: a user line it was sent with a higher seq
        is still unanswered (a host died before the reply was stored)."""
        return dict(await self._run(lambda: self._db.conn.execute(_ANSWERED, [room_id]).fetchall()))

    # --- leases: one host runs a room at a time ------------------------------------------------

    async def acquire(self, room_id: str, host: str, seconds: float) -> Lease | None:
        """Take the room if nobody holds it or its lease ran out: the epoch goes up by one, and from now on
        every write of this store to the room carries it. None while another host's lease is live."""
        def take() -> Lease | None:
            with immediate(self._db):
                now = time.time()
                row = self._db.conn.execute("SELECT host, epoch, expires FROM leases WHERE room = ?",
                                            [room_id]).fetchone()
                if row is not None and row[2] > now:
                    return None
                if self._db.conn.execute("SELECT 1 FROM rooms WHERE id = ?", [room_id]).fetchone() is None:
                    raise KeyError(f"no room {room_id!r}")
                lease = Lease(room=room_id, host=host, epoch=(row[1] if row else 0) + 1, expires=now + seconds)
                self._db.conn.execute("INSERT INTO leases (room, host, epoch, expires) VALUES (?, ?, ?, ?) "
                                      "ON CONFLICT (room) DO UPDATE SET host = excluded.host, "
                                      "epoch = excluded.epoch, expires = excluded.expires",
                                      [lease.room, lease.host, lease.epoch, lease.expires])
                return lease

        lease = await self._now(take)
        if lease is not None:
            self._epochs[room_id] = lease.epoch
        return lease

    async def renew(self, lease: Lease, seconds: float) -> Lease | None:
        """Extend a lease still held (its epoch unchanged); None once another host has taken the room."""
        def extend() -> Lease | None:
            with immediate(self._db):
                expires = time.time() + seconds
                done = self._db.conn.execute("UPDATE leases SET expires = ? WHERE room = ? AND epoch = ?",
                                             [expires, lease.room, lease.epoch]).rowcount
                return msgspec.structs.replace(lease, expires=expires) if done else None

        return await self._now(extend)

    async def renew_all(self, leases: list[Lease], seconds: float) -> list[Lease | None]:
        """`renew` for every lease a host holds, in one transaction."""
        def extend() -> list[Lease | None]:
            with immediate(self._db):
                expires = time.time() + seconds
                return [msgspec.structs.replace(lease, expires=expires) if self._db.conn.execute(
                    "UPDATE leases SET expires = ? WHERE room = ? AND epoch = ?",
                    [expires, lease.room, lease.epoch]).rowcount else None for lease in leases]

        return await self._now(extend) if leases else []

    async def release(self, lease: Lease) -> None:
        """Let another host take the room at once. The epoch stays: writes by this store are refused only
        once another host has taken it."""
        def end() -> None:
            with immediate(self._db):
                self._db.conn.execute("UPDATE leases SET expires = 0 WHERE room = ? AND epoch = ?",
                                      [lease.room, lease.epoch])

        await self._now(end)

    async def leases(self) -> list[Lease]:
        rows = await self._now(lambda: self._db.conn.execute(
            "SELECT room, host, epoch, expires FROM leases ORDER BY room").fetchall())
        return [Lease(room=r, host=h, epoch=e, expires=x) for r, h, e, x in rows]

    async def clock(self) -> float:
        """Now, on the clock that lease expiries are written in."""
        return time.time()

    # --- the inbox: lines for a room another host runs ------------------------------------------

    async def send(self, room_id: str, text: str, *, author: str = "user") -> InboxLine:
        """Queue a line for the room's owner; once this returns the line is stored (acknowledged)."""
        line = InboxLine(id=uuid4().hex, room=room_id, author=author, text=text, posted=time.time())

        def insert() -> None:
            with immediate(self._db):
                self._db.conn.execute("INSERT INTO inbox (id, room, author, text, posted) VALUES (?, ?, ?, ?, ?)",
                                      [line.id, line.room, line.author, line.text, line.posted])

        await self._now(insert)
        return line

    async def inbox(self, rooms: list[str] | None = None) -> list[InboxLine]:
        """Waiting lines, oldest first: for `rooms`, or all."""
        def select() -> list[InboxLine]:
            rows = self._db.conn.execute("SELECT id, room, author, text, posted FROM inbox ORDER BY posted, id")
            wanted = None if rooms is None else set(rooms)
            return [InboxLine(id=i, room=r, author=a, text=t, posted=p) for i, r, a, t, p in rows
                    if wanted is None or r in wanted]

        return await self._now(select)

    async def drop(self, line_id: str) -> None:
        """Delete a line from the inbox that no user append delivers (a request to stop or to answer)."""
        def delete() -> None:
            with immediate(self._db):
                self._db.conn.execute("DELETE FROM inbox WHERE id = ?", [line_id])

        await self._now(delete)

    def deliver(self, line: InboxLine) -> None:
        """The room's next user message is `line`: its append deletes the line from the inbox in the same
        transaction, so a line is in the inbox or in the room, never both and never neither."""
        self._deliveries[line.room] = line.id

    def undeliver(self, room_id: str) -> None:
        """Forget a delivery whose append did not happen (refused or failed): the line stays in the inbox."""
        self._deliveries.pop(room_id, None)

    async def wait_inbox(self, seconds: float) -> None:
        """Until a line may have arrived, at most `seconds`: on one machine there is no wake-up channel, so
        this is one poll interval (an indexed read of a small table)."""
        await trio.sleep(min(seconds, INBOX_POLL))

    async def tasks(self, room_id: str) -> list[TaskRecord]:
        def select() -> list[TaskRecord]:
            rows = self._db.query("SELECT * FROM tasks WHERE room = ? ORDER BY created, rowid", [room_id])
            return [msgspec.convert(row, TaskRecord, strict=False) for row in rows]

        return await self._now(select)

    async def load(self, room_id: str, *, size: int | None = None) -> list[Message]:
        """Heal the room's history (S2) in one transaction, then return it in seq order.

        A read-only store heals a copy of the room in memory: the file is only read. A room of `size`
        messages at most SMALL_ROOM (its record says how many) is loaded on the event loop, like an append.
        """
        if self.readonly:
            return await self._run(_healed_copy, self._db, room_id)
        epoch = self._epochs.get(room_id)
        if size is not None and size <= SMALL_ROOM:
            return await self._now(_heal, self._db, room_id, epoch)
        return await self._run(_heal, self._db, room_id, epoch)

    async def messages(self, room_id: str, after: int = 0) -> list[Message]:
        """The stored history after `seq` as it is, without healing: for readers of a room that is
        running (healing a live room would answer tool calls that are still at work)."""
        return await self._run(_messages, self._db, room_id, after)

    async def call(self, fn: Callable[..., T], *args: Any, small: bool = False) -> T:
        """Run `fn(db, *args)` on the store's connection, in its thread, one at a time; `small` (a read or
        write bounded by a cap, such as the memory) runs on the event loop instead, like an append.

        For the other owners of tables in this file (memory, knowledge base): one connection,
        one writer, so their commits are ordered with the room's.
        """
        return await (self._now if small else self._run)(fn, self._db, *args)

    async def prepare(self, fn: Callable[[sqlite_utils.Database], None]) -> None:
        """Run another owner's set-up (`CREATE TABLE IF NOT EXISTS`) once per open store, not once per room."""
        if fn not in self._prepared:
            await self._run(fn, self._db)
            self._prepared.add(fn)

    # --- under the limiter: on the event loop, or in the worker thread ------------------------

    async def _now(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a small call on the event loop: at once when the loop has nothing else to do, else in a group
        (store/batch.py). The loop never waits for another process's write lock (busy_timeout is 0 here): a busy
        file sends the call to the thread, which waits as long as it must."""
        if self.readonly:
            return await self._run(fn, *args)
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            if (group := self._group) is not None:  # a group is being gathered: join it
                return await group.result(group.add(fn, args))
            if self._limiter.borrowed_tokens or trio.lowlevel.current_statistics().tasks_runnable:
                return await self._lead(fn, args)
            # Alone: the limiter is free, so it has no waiters (a release hands the token straight to the next
            # one), and `fn` does not yield, so nothing can take the token meanwhile.
            try:
                result = fn(*args)
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
                return await self._run(fn, *args)
            if self._checkpoints is not None:
                self._checkpoints.wrote()
            return result
        except sqlite3.Error as exc:
            self._check(exc)
            raise

    async def _lead(self, fn: Callable[..., T], args: tuple) -> T:
        """Gather a group around this call: what the rest of the loop writes meanwhile (other rooms' messages)
        joins it, for GATHER scheduler passes or as long as a call in the thread lasts; then it runs on the loop in
        one transaction. Shielded: the calls that joined wait for it."""
        group = self._group = batch.Group()
        at = group.add(fn, args)
        with trio.CancelScope(shield=True):
            for _ in range(GATHER):
                await trio.lowlevel.cancel_shielded_checkpoint()
            try:
                self._limiter.acquire_nowait()
            except trio.WouldBlock:
                await self._limiter.acquire()
            self._group = None
            try:
                try:
                    group.results = batch.run(self._db.conn, group.writes)
                except sqlite3.OperationalError as exc:
                    if not _busy(exc):
                        raise
                    group.results = await trio.to_thread.run_sync(_patiently, self._db, batch.run,
                                                                  self._db.conn, group.writes)
            except BaseException as exc:
                group.failed = exc
            finally:
                self._limiter.release()
                group.land()
            if self._checkpoints is not None:
                self._checkpoints.wrote(len(group.writes))
        return await group.result(at)

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await trio.to_thread.run_sync(_patiently, self._db, fn, *args, limiter=self._limiter)
        except sqlite3.Error as exc:
            self._check(exc)
            raise

    def _check(self, exc: sqlite3.Error) -> None:
        """An error that says the file is damaged is raised as such, naming the file; the caller re-raises the rest."""
        if (unusable := schema.damage(exc, self.name)) is not None:
            raise unusable from exc

    def _set_room(self, room_id: str, column: str, value: str) -> None:
        with immediate(self._db):
            _fence(self._db, room_id, self._epochs.get(room_id))
            if not self._db.conn.execute(f"UPDATE rooms SET {column} = ? WHERE id = ?", [value, room_id]).rowcount:
                raise KeyError(f"no room {room_id!r}")


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Another process holds the file's write lock (or a table lock): the thread waits for it, the loop does not."""
    return exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _patiently(db: sqlite_utils.Database, fn: Callable[..., T], *args: Any) -> T:
    """In the worker thread a busy file is waited for (5 s, sqlite3's default); on the loop it is not."""
    db.conn.execute(f"PRAGMA busy_timeout = {BUSY_WAIT_MS}")
    try:
        return fn(*args)
    finally:
        db.conn.execute("PRAGMA busy_timeout = 0")


def _rooms(db: sqlite_utils.Database, where: str, ref: str | None = None) -> list[RoomRecord]:
    rows = db.query(_ROOMS.format(where=where), {"ref": ref})
    return [msgspec.convert(r | {"meta": _OBJECT.decode(r["meta"])}, RoomRecord) for r in rows]


def _fence(db: sqlite_utils.Database, room_id: str, epoch: int | None) -> None:
    """Inside the write's transaction: refuse it if another host took the room after `epoch`."""
    if epoch is None:
        return
    row = db.conn.execute("SELECT epoch FROM leases WHERE room = ?", [room_id]).fetchone()
    if row is not None and row[0] > epoch:
        raise Fenced(room_id, epoch, row[0])


def _insert(db: sqlite_utils.Database, room_id: str, drafts: list[Draft], epoch: int | None,
            answers: Sequence[int | None] = ()) -> list[Message]:
    conn = db.conn
    found = conn.execute(_LAST, [room_id]).fetchone()
    if found is None:
        raise KeyError(f"no room {room_id!r}")
    seq, ts = found
    messages = []
    for draft, answer in zip(drafts, answering(answers, len(drafts))):
        now = time.time()
        seq, ts = seq + 1, now if now > ts else ts + 1e-6
        m = _message(room_id, seq, ts, draft)
        conn.execute(_INSERT_ROW, _row(m, epoch, answer))
        messages.append(m)
    return messages


def answering(answers: Sequence[int | None], n: int) -> Sequence[int | None]:
    """What each of `n` drafts answers (`append_many`'s `answers`, of both stores): missing ones answer nothing."""
    return answers if len(answers) >= n else [*answers, *[None] * (n - len(answers))]


# The room's last seq and ts: its newest message's (the end of the (room, seq) index, a read), or the mark healing
# leaves in the room's row when it deletes the newest ones, so that a seq seen once is never handed out again.
# An append writes no row but its message's: the room's row stays one page that commits do not rewrite.
# Two scalar lookups at the end of the index: a LEFT JOIN on the newest row made SQLite materialize it (3.6 against
# 4.8 us).
_LAST = ("SELECT max(last_seq, coalesce((SELECT seq FROM messages WHERE room = ?1 ORDER BY seq DESC LIMIT 1), 0)), "
         "max(last_ts, coalesce((SELECT ts FROM messages WHERE room = ?1 ORDER BY seq DESC LIMIT 1), 0)) "
         "FROM rooms WHERE id = ?1")
_MARK = f"UPDATE rooms SET (last_seq, last_ts) = ({_LAST}) WHERE id = ?1"


def task_side(task: TaskRecord) -> Side:
    """The task's row as a write inside another transaction (a message's: `append`'s `side`)."""
    row = _task_row(task)
    return lambda db: db.execute(_UPSERT_TASK, row)  # SQLite's placeholders: the PostgreSQL store's session takes them


def _task_row(task: TaskRecord) -> dict:
    now = time.time()
    return msgspec.structs.asdict(task) | {"created": task.created or now, "updated": now}


def _message(room_id: str, seq: int, ts: float, draft: Draft) -> Message:
    return Message(id=message_id(), room=room_id, seq=seq, ts=ts, **msgspec.structs.asdict(draft))


_PROCESS = os.urandom(5).hex()  # 40 random bits per process: with the counter, ids of two hosts never meet
_COUNT = itertools.count()


def _new_process() -> None:
    global _PROCESS, _COUNT
    _PROCESS, _COUNT = os.urandom(5).hex(), itertools.count()


os.register_at_fork(after_in_child=_new_process)  # a forked child must not repeat its parent's ids


def message_id() -> str:
    """32 hex digits that grow with time (milliseconds, then this process's mark and count): a new row goes at the
    end of the id index instead of a random page, and no id costs a call for random bytes."""
    return f"{time_ns() // 1_000_000:012x}{_PROCESS}{next(_COUNT) & 0xFFFFFFFFFF:010x}"


def _row(m: Message, epoch: int | None, answers: int | None = None) -> tuple:
    """The message's row in `_INSERT_ROW`'s order: Message's fields (the lists as JSON), then epoch and answers."""
    id_, room, seq, ts, author, kind, blocks, visible_to, provider, model, replaces = msgspec.structs.astuple(m)
    return (id_, room, seq, ts, author, kind, _json(blocks), _json(visible_to), provider, model, _json(replaces),
            epoch, answers)


assert Message.__struct_fields__ == ("id", "room", "seq", "ts", "author", "kind", "blocks", "visible_to", "provider",
                                     "model", "replaces"), "_row lists Message's fields in order"


def _messages(db: sqlite_utils.Database, room_id: str, after: int = 0) -> list[Message]:
    rows = db.query(_SELECT_MESSAGES, [room_id, after])
    return [Message(**r | {"blocks": BLOCK_DECODER.decode(r["blocks"]),
                           "visible_to": _STRINGS.decode(r["visible_to"]),
                           "replaces": _STRINGS.decode(r["replaces"])}) for r in rows]


def _heal(db: sqlite_utils.Database, room_id: str, epoch: int | None = None) -> list[Message]:
    with immediate(db):
        _fence(db, room_id, epoch)
        messages = _messages(db, room_id)
        # Synthesized results are appended last and may sit before a sibling's result;
        # the second round only reorders those.
        for _ in range(2):
            fix = heal.plan(messages)
            if fix.empty():
                break
            _apply(db, room_id, fix, epoch)
            messages = _messages(db, room_id)
        return messages


def _healed_copy(db: sqlite_utils.Database, room_id: str) -> list[Message]:
    """The room as `_heal` would leave it, healed in a scratch database: the file is only read."""
    messages = _messages(db, room_id)
    if heal.plan(messages).empty():
        return messages
    scratch = _scratch()
    try:
        for table in ("rooms", "messages"):
            column = "id" if table == "rooms" else "room"
            rows = list(db.query(f"SELECT * FROM {table} WHERE {column} = ?", [room_id]))
            scratch[table].insert_all(rows)
        return _heal(scratch, room_id)
    finally:
        scratch.close()


def _apply(db: sqlite_utils.Database, room_id: str, fix: heal.HealPlan, epoch: int | None) -> None:
    if fix.delete:  # the room's row keeps the newest seq and ts, which the deletions may take away
        db.execute(_MARK, [room_id])
    for message_id in fix.delete:
        db.execute("DELETE FROM messages WHERE id = ?", [message_id])
    # Through negative seqs, so that no intermediate state breaks UNIQUE (room, seq).
    for message_id, seq in fix.reseq:
        db.execute("UPDATE messages SET seq = ? WHERE id = ?", [-seq, message_id])
    db.execute("UPDATE messages SET seq = -seq WHERE room = ? AND seq < 0", [room_id])
    _insert(db, room_id, [draft for _, draft in fix.add], epoch)


class immediate:
    """One write transaction, for every owner of tables in the store's file: `with immediate(db): ...`.

    IMMEDIATE takes the write lock before our first read, so another process cannot commit
    between that read and our write (a deferred BEGIN fails there with "database is locked").
    Inside a group's transaction (store/batch.py) it adds nothing; any other transaction still open is a bug,
    which BEGIN reports.
    On the PostgreSQL store `db` is its session, and this is a transaction (a savepoint) there.
    A class, not a generator: it runs for every message."""

    __slots__ = ("_conn", "_outer")

    def __init__(self, db: sqlite_utils.Database):
        if isinstance(db, sqlite_utils.Database):
            conn = db.conn
            self._conn, self._outer = (None if id(conn) in batch.RUNNING else conn), None
        else:
            self._conn, self._outer = None, db.transaction()

    def __enter__(self) -> None:
        if self._outer is not None:
            self._outer.__enter__()
        elif self._conn is not None:
            self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, exc, tb) -> bool | None:
        if self._outer is not None:
            return self._outer.__exit__(kind, exc, tb)
        if self._conn is None:
            return None
        if kind is None:
            try:
                self._conn.commit()
                return None
            except BaseException:
                self._conn.rollback()
                raise
        self._conn.rollback()
        return None


def _json(value: Any) -> str:
    return ENCODER.encode(value).decode()


def _scratch() -> sqlite_utils.Database:
    db = sqlite_utils.Database(sqlite3.connect(":memory:", check_same_thread=False))
    with immediate(db):
        schema.upgrade(db.conn, None)
    return db


def _connect(name: str, readonly: bool) -> sqlite_utils.Database:
    if name == ":memory:":
        if readonly:
            raise ValueError("an in-memory store cannot be read-only")
        return _scratch()
    path = Path(name)
    uri = _uri(path)
    found = None
    try:
        if schema.check_path(path):
            # Read through a read-only connection before anything can write: a file that is not ours stays
            # byte for byte as it was (a read-write connection would check a leftover WAL into it on close).
            peek = _read_only(path, uri, peek=True)
            try:
                found = schema.inspect(peek, name)
            finally:
                peek.close()
        elif readonly:
            raise UnusableDatabase(f"{path}: no such database; pass --db PATH or set ORCHESTRATOR_DB"
                                   if not path.exists() else f"{path}: an empty file, not an orchestrator database")
        if readonly:
            if found is None:
                raise UnusableDatabase(f"{path}: an SQLite file with no tables, not an orchestrator database")
            if found not in schema.READABLE:
                raise UnusableDatabase(f"{path}: store version {found} needs a migration first; open it once with "
                                       "a command that writes (run, chat)")
            return sqlite_utils.Database(_read_only(path, uri))
        db = sqlite_utils.Database(sqlite3.connect(uri, uri=True, check_same_thread=False))
    except sqlite3.Error as exc:
        raise schema.damage(exc, name) or exc from None
    try:
        if found != schema.VERSION:
            with immediate(db):
                # Inspected again under the lock: another process may have created or migrated it meanwhile.
                schema.upgrade(db.conn, schema.inspect(db.conn, name))
        db.enable_wal()
        db.execute("PRAGMA synchronous=NORMAL")  # per connection; FULL by default
        db.execute("PRAGMA busy_timeout = 0")  # the event loop's default; Store._run waits in its thread
        # SQLite checkpoints inside the commit that crosses this many WAL pages, on the event loop, and waits for
        # two fsyncs: with 1,000 (the default) a busy host stood still about a tenth of the time. The passive
        # checkpoints in the thread (store/checkpoint.py) copy most pages first; this one resets the WAL.
        db.execute(f"PRAGMA wal_autocheckpoint = {WAL_PAGES}")
        db.execute(f"PRAGMA journal_size_limit = {WAL_PAGES * 4096}")  # and the WAL file shrinks back to that
    except sqlite3.Error as exc:
        db.close()
        raise schema.damage(exc, name) or exc from None
    except BaseException:
        db.close()
        raise
    return db


def _uri(path: Path) -> str:
    return f"file:{quote(str(path.absolute()))}"


def _read_only(path: Path, uri: str, *, peek: bool = False) -> sqlite3.Connection:
    """A connection that cannot write. `peek`: only to look at a file that may not be ours, leaving no
    -shm or -wal beside it when its WAL holds nothing (an immutable open takes no locks and makes no files)."""
    wal = Path(f"{path}-wal")
    pending = wal.exists() and wal.stat().st_size > 0
    if peek and not pending:
        return sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, check_same_thread=False)
    conn = sqlite3.connect(uri + "?mode=ro", uri=True, check_same_thread=False)
    try:
        conn.execute("PRAGMA user_version")  # the first read is when a WAL file's reader needs its -shm
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        if pending or not exc.sqlite_errorname.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")):
            raise
    # A WAL-mode file in a folder we may not write, with no -shm to share: nobody is writing it (a writer
    # needs a -wal beside it), so it is read as the immutable file it is.
    return sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, check_same_thread=False)
