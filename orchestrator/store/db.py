"""The crash-safe session store: rooms, their messages and tasks in one SQLite file (WAL).

Small reads and writes (one room's row, tasks, an append) run on the event loop: with WAL and
synchronous=NORMAL a commit takes tens of microseconds, less than a hop to a thread. Loading, healing,
listing and other owners' calls run in a worker thread. Both share one connection behind a one-slot
limiter. The store assigns ids, seqs and timestamps.
A read-only store opens the file read-only and heals a room in memory for display (schema.py checks the file).
"""
from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import trio

from orchestrator.core.types import Draft, Message
from orchestrator.store import batch, heal, records, schema
from orchestrator.store.base import BaseStore, read_messages, require_room
from orchestrator.store.checkpoint import Checkpointer
from orchestrator.store.lease import Lease
from orchestrator.store.records import RoomRecord, TaskRecord
from orchestrator.store.schema import UnusableDatabase
from orchestrator.store.sqlite import sqlite_utils

# RoomRecord and TaskRecord (store/records.py) are still imported from here by callers of old.
__all__ = ["RoomRecord", "SqliteStore", "Store", "TaskRecord", "immediate"]

T = TypeVar("T")
BUSY_WAIT_MS = 5000
WAL_RETRY = 0.005  # seconds between tries to switch a file that another connection holds a lock on to WAL
WAL_PAGES = 10_000  # SQLite's own checkpoint, and the WAL's size cap (a few tens of MB): store/checkpoint.py does most
# Scheduler passes a group waits for other writes: with many rooms, 4 gather about twice as many per transaction
# as 1 (bench/README.md); on a loop with little to do a pass takes microseconds.
GATHER = 4
INBOX_POLL = 0.05  # seconds between looks at the inbox on SQLite, so a line reaches its owner this fast

# The room's last seq and ts: its newest message's (the end of the (room, seq) index, a read), or the mark healing
# leaves in the room's row when it deletes the newest ones, so that a seq seen once is never handed out again.
# An append writes no row but its message's: the room's row stays one page that commits do not rewrite.
# Two scalar lookups at the end of the index: a LEFT JOIN on the newest row made SQLite materialize it.
_LAST = ("SELECT max(last_seq, coalesce((SELECT seq FROM messages WHERE room = ?1 ORDER BY seq DESC LIMIT 1), 0)), "
         "max(last_ts, coalesce((SELECT ts FROM messages WHERE room = ?1 ORDER BY seq DESC LIMIT 1), 0)) "
         "FROM rooms WHERE id = ?1")
_MARK = f"UPDATE rooms SET (last_seq, last_ts) = ({_LAST}) WHERE id = ?1"


class SqliteStore(BaseStore):
    """The contract (store/contract.py) over one SQLite file, or an in-memory database (":memory:")."""

    # last_seq and last_ts as `_insert` reads them (the newest message's, or healing's mark in the row).
    _ROOMS = ("SELECT r.id, r.name, r.floor, r.created, r.meta, "
              "max(r.last_seq, coalesce((SELECT max(seq) FROM messages m WHERE m.room = r.id), 0)) AS last_seq, "
              "max(r.last_ts, coalesce((SELECT ts FROM messages m WHERE m.room = r.id ORDER BY seq DESC LIMIT 1), 0)) "
              "AS last_ts, (SELECT count(*) FROM messages m WHERE m.room = r.id) AS messages "
              "FROM rooms r {where} ORDER BY r.created, r.rowid")
    _FENCE = "SELECT epoch FROM leases WHERE room = ?"
    _TASKS = f"SELECT {records.TASK_COLUMNS} FROM tasks WHERE room = ? ORDER BY created, rowid"

    def __init__(self, db: sqlite_utils.Database, *, name: str = ":memory:", readonly: bool = False):
        super().__init__(name, readonly=readonly)
        self._db = db
        # One connection shared by the event loop and worker threads: the limiter keeps them from overlapping.
        self._limiter = trio.CapacityLimiter(1)
        self._group: batch.Group | None = None  # small calls being gathered, to run in one transaction
        self._checkpoints = None if readonly or name == ":memory:" else Checkpointer(_uri(Path(name)))

    @classmethod
    async def open(cls, path: str | PathLike[str], *, readonly: bool = False) -> SqliteStore:
        name = str(path)
        return cls(await trio.to_thread.run_sync(_connect, name, readonly), name=name, readonly=readonly)

    async def close(self) -> None:
        # Shielded so that `finally: await store.close()` still closes inside a cancelled scope.
        with trio.CancelScope(shield=True):
            if self._checkpoints is not None:
                await self._checkpoints.wait()
            await trio.to_thread.run_sync(self._db.close, limiter=self._limiter)

    async def call(self, fn: Callable[..., T], *args: Any, small: bool = False) -> T:
        """`db` is the sqlite_utils Database; a call runs in the worker thread, a `small` one on the event loop.

        For the other owners of tables in this file (memory, knowledge base): one connection,
        one writer, so their commits are ordered with the room's.
        """
        return await (self._now if small else self._run)(fn, self._db, *args)

    async def _write(self, fn: Callable[..., T], *args: Any, small: bool = True) -> T:
        return await self.call(_transacted, fn, *args, small=small)

    async def clock(self) -> float:
        return time.time()

    async def wait_inbox(self, seconds: float) -> None:
        """On one machine there is no wake-up channel, so this is one poll interval (an indexed read of a small
        table)."""
        await trio.sleep(min(seconds, INBOX_POLL))

    # --- inside a call ------------------------------------------------------------------------

    def _insert(self, db: sqlite_utils.Database, room_id: str, drafts: list[Draft], epoch: int | None,
                answers: Sequence[int | None] = (), ids: Sequence[str] = ()) -> list[Message]:
        conn = db.conn
        messages, rows = records.stamp(room_id, conn.execute(_LAST, [room_id]).fetchone(), drafts, epoch, answers,
                                       ids)
        conn.executemany(records.INSERT_MESSAGE, rows)
        return messages

    def _mark(self, db: sqlite_utils.Database, room_id: str) -> None:
        db.execute(_MARK, [room_id])

    def _take(self, db: sqlite_utils.Database, room_id: str, host: str, seconds: float) -> Lease | None:
        now = time.time()
        row = db.execute("SELECT epoch, expires FROM leases WHERE room = ?", [room_id]).fetchone()
        if row is not None and row[1] > now:
            return None
        require_room(db, room_id)
        lease = Lease(room=room_id, host=host, epoch=(row[0] if row else 0) + 1, expires=now + seconds)
        db.execute("INSERT INTO leases (room, host, epoch, expires) VALUES (?, ?, ?, ?) ON CONFLICT (room) DO "
                   "UPDATE SET host = excluded.host, epoch = excluded.epoch, expires = excluded.expires",
                   [lease.room, lease.host, lease.epoch, lease.expires])
        return lease

    def _extend(self, db: sqlite_utils.Database, leases: list[Lease], seconds: float) -> dict[str, float]:
        expires = time.time() + seconds
        return {x.room: expires for x in leases if db.execute(
            "UPDATE leases SET expires = ? WHERE room = ? AND epoch = ?", [expires, x.room, x.epoch]).rowcount}

    def _waiting(self, db: sqlite_utils.Database, rooms: list[str] | None) -> list[Sequence]:
        rows = db.execute("SELECT id, room, author, text, posted FROM inbox ORDER BY posted, id").fetchall()
        wanted = None if rooms is None else set(rooms)
        return [row for row in rows if wanted is None or row[1] in wanted]

    def _healed_copy(self, db: sqlite_utils.Database, room_id: str) -> list[Message]:
        """Healed in a scratch database: the file is only read."""
        messages = read_messages(db, room_id)
        if heal.plan(messages).empty():
            return messages
        scratch = _scratch()
        try:
            for table in ("rooms", "messages"):
                column = "id" if table == "rooms" else "room"
                rows = list(db.query(f"SELECT * FROM {table} WHERE {column} = ?", [room_id]))
                scratch.table(table).insert_all(rows)
            with immediate(scratch):
                return self._heal(scratch, room_id)
        finally:
            scratch.close()

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


Store = SqliteStore  # the name callers of this module have always imported


def _transacted(db: sqlite_utils.Database, fn: Callable[..., T], *args: Any) -> T:
    with immediate(db):
        return fn(db, *args)


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
        _enable_wal(db)
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


def _enable_wal(db: sqlite_utils.Database) -> None:
    """Switch the file to WAL, waiting for other connections as busy_timeout would. The switch opens a read
    transaction and upgrades it to a write one, and SQLite never calls the busy handler for that upgrade (two
    readers waiting on each other would deadlock): while another connection holds a lock on the file (one
    opening the same new file at once), it fails at once with SQLITE_BUSY. It is tried again, reading the mode
    each time: once another connection switched the file, there is nothing left to do."""
    deadline = time.monotonic() + BUSY_WAIT_MS / 1000
    while True:
        try:
            db.enable_wal()
            return
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(WAL_RETRY)  # in the opening thread: the connection it opens is nobody else's yet


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
