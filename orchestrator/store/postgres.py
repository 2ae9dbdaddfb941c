"""The PostgreSQL store: the SQLite store's rooms, messages, tasks, memory, leases and inbox, shared by hosts
on many machines. Sync psycopg 3 in a worker thread (its async API needs asyncio), one connection per store.

Every call is one transaction. Lines for a room run elsewhere are woken with LISTEN/NOTIFY on their own
connection; appends never NOTIFY (a pending NOTIFY serialises commits server-wide).
"""
from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, TypeVar
from uuid import uuid4

import trio

from orchestrator.core.errors import InputError
from orchestrator.core.types import Draft, Message
from orchestrator.store import pg_schema, records
from orchestrator.store.base import BaseStore, require_room
from orchestrator.store.lease import Lease
from orchestrator.store.schema import UnusableDatabase
from orchestrator.core.extras import install_hint

T = TypeVar("T")
CHANNEL = "orchestrator_inbox"
_NOW = "extract(epoch from clock_timestamp())::double precision"
_PLACEHOLDER = re.compile(r"\?|(?<!:):(\w+)")


def _psycopg():  # noqa: ANN202 (the module)
    try:
        import psycopg
    except ImportError:
        raise InputError(f"a PostgreSQL --db needs the `postgres` extra: {install_hint('postgres')}") from None
    return psycopg


def shown(url: str) -> str:
    """The URL without its password, for every message that names the database."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)


class PgStore(BaseStore):
    """The contract (store/contract.py) over one PostgreSQL database. Every function `call` runs gets a session
    whose `execute` takes SQLite's placeholders, in one transaction."""

    # The room's row keeps its last seq and ts, written by every append.
    _ROOMS = ("SELECT r.id, r.name, r.floor, r.created, r.meta, r.last_seq, r.last_ts, "
              "(SELECT count(*) FROM messages m WHERE m.room = r.id) AS messages FROM rooms r {where} "
              "ORDER BY r.created, r.id")
    # Held shared to the end of the write: a takeover (FOR UPDATE in `_take`) waits for an append in flight.
    _FENCE = "SELECT epoch FROM leases WHERE room = ? FOR SHARE"
    _TASKS = f"SELECT {records.TASK_COLUMNS} FROM tasks WHERE room = ? ORDER BY created, id"

    def __init__(self, conn: Any, url: str):
        super().__init__(shown(url))
        self._conn = conn
        self._url = url
        self._limiter = trio.CapacityLimiter(1)  # one connection: its calls must not overlap
        self._listener: Any = None

    @classmethod
    async def open(cls, url: str, *, readonly: bool = False) -> PgStore:
        """Connect and migrate (explicitly, once, under a lock)."""
        conn = await trio.to_thread.run_sync(_connect, url)
        store = cls(conn, url)
        try:
            if not readonly:
                await store._run(_migrate, store.name)
            else:
                await store._run(_check, store.name)
        except BaseException:
            await store.close()
            raise
        store.readonly = readonly
        return store

    async def close(self) -> None:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(self._conn.close, limiter=self._limiter)
            if self._listener is not None:
                await trio.to_thread.run_sync(self._listener.close)

    async def call(self, fn: Callable[..., T], *args: Any, small: bool = False) -> T:
        """Every call is one transaction in the worker thread (`small` changes nothing here)."""
        return await self._run(lambda c: fn(_Session(c), *args))

    async def clock(self) -> float:
        return (await self._run(lambda c: c.execute(f"SELECT {_NOW}").fetchone()))[0]

    async def wait_inbox(self, seconds: float) -> None:
        """Until a NOTIFY arrives on this host's listening connection, or `seconds` pass."""
        if self._listener is None:
            self._listener = await trio.to_thread.run_sync(_listen, self._url)
        # The thread returns within `seconds` whatever happens, so a cancel waits at most that long.
        await trio.to_thread.run_sync(_next_notify, self._listener, seconds)

    # --- inside a call ------------------------------------------------------------------------

    def _insert(self, db: _Session, room_id: str, drafts: list[Draft], epoch: int | None,
                answers: Sequence[int | None] = (), ids: Sequence[str] = ()) -> list[Message]:
        last = db.execute("SELECT last_seq, last_ts FROM rooms WHERE id = ? FOR UPDATE", [room_id]).fetchone()
        messages, rows = records.stamp(room_id, last, drafts, epoch, answers, ids)
        if messages:
            db.executemany(records.INSERT_MESSAGE, rows)
            # Kept in the room row, so a seq freed by healing is never handed out again.
            db.execute("UPDATE rooms SET last_seq = ?, last_ts = ? WHERE id = ?",
                       [messages[-1].seq, messages[-1].ts, room_id])
        return messages

    def _hold(self, db: _Session, room_id: str) -> None:
        db.execute("SELECT 1 FROM rooms WHERE id = ? FOR UPDATE", [room_id])  # no append interleaves the healing

    def _take(self, db: _Session, room_id: str, host: str, seconds: float) -> Lease | None:
        require_room(db, room_id)
        # The row lock makes hosts racing for one room queue; a fenced append holds it shared, so a takeover
        # waits for an append in flight and every later append by the old epoch sees the new one.
        row = db.execute(f"SELECT epoch, expires, {_NOW} FROM leases WHERE room = ? FOR UPDATE", [room_id]).fetchone()
        if row is None:
            got = db.execute(f"INSERT INTO leases (room, host, epoch, expires) VALUES (?, ?, 1, {_NOW} + ?) "
                             "ON CONFLICT (room) DO NOTHING RETURNING epoch, expires",
                             [room_id, host, seconds]).fetchone()
        elif row[1] > row[2]:
            return None
        else:
            got = db.execute(f"UPDATE leases SET host = ?, epoch = epoch + 1, expires = {_NOW} + ? WHERE room = ? "
                             "RETURNING epoch, expires", [host, seconds, room_id]).fetchone()
        return None if got is None else Lease(room=room_id, host=host, epoch=got[0], expires=got[1])

    def _extend(self, db: _Session, leases: list[Lease], seconds: float) -> dict[str, float]:
        """In one statement, on the server's clock."""
        return dict(db.execute(
            f"UPDATE leases l SET expires = {_NOW} + ? FROM unnest(?::text[], ?::bigint[]) AS h(room, epoch) "
            "WHERE l.room = h.room AND l.epoch = h.epoch RETURNING l.room, l.expires",
            [seconds, [x.room for x in leases], [x.epoch for x in leases]]).fetchall())

    def _waiting(self, db: _Session, rooms: list[str] | None) -> list[Sequence]:
        if rooms is None:
            return db.execute("SELECT id, room, author, text, posted FROM inbox ORDER BY posted, id").fetchall()
        return db.execute("SELECT id, room, author, text, posted FROM inbox WHERE room = ANY(?) ORDER BY posted, id",
                          [list(rooms)]).fetchall()

    def _notify(self, db: _Session, room_id: str) -> None:
        db.execute("SELECT pg_notify(?, ?)", [CHANNEL, room_id])  # sent at commit, so the owner finds the row

    def _healed_copy(self, db: _Session, room_id: str) -> list[Message]:
        """Computed in a savepoint that is rolled back."""
        try:
            with db.transaction():
                raise _Rollback(self._heal(db, room_id))
        except _Rollback as done:
            return done.messages

    # --- in the worker thread -----------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(self._transaction, fn, args, limiter=self._limiter)

    def _transaction(self, fn: Callable[..., T], args: tuple) -> T:
        with self._errors(), self._conn.transaction():
            return fn(self._conn, *args)

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        psycopg = _psycopg()
        try:
            yield
        except psycopg.OperationalError as exc:
            raise UnusableDatabase(f"{self.name}: {_first_line(exc)}; check that the server is running") from exc


class _Session:
    """What memory's and the knowledge base's queries need of a connection, with SQLite's placeholders turned
    into psycopg's."""

    def __init__(self, conn: Any):
        self._conn = conn

    def execute(self, sql: str, params: Any = ()) -> Any:
        # Binary results: bytea arrives as it is stored, not as hex to decode (the knowledge base's vectors
        # load much faster); every other type reads back the same.
        return self._conn.execute(_placeholders(sql), params, binary=True)

    def executemany(self, sql: str, rows: list[Any]) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(_placeholders(sql), rows)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with self._conn.transaction():
            yield


@functools.lru_cache(maxsize=1024)
def _placeholders(sql: str) -> str:
    return _PLACEHOLDER.sub(lambda m: f"%({m[1]})s" if m[1] else "%s", sql)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _connect(url: str) -> Any:
    psycopg = _psycopg()
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise UnusableDatabase(f"{shown(url)}: cannot connect ({_first_line(exc)}); check the URL and that the "
                               "server is running") from None


def _listen(url: str) -> Any:
    conn = _connect(url)
    conn.execute(f"LISTEN {CHANNEL}")
    return conn


def _next_notify(conn: Any, seconds: float) -> None:
    for _ in conn.notifies(timeout=seconds, stop_after=1):
        pass


def _version(c: Any) -> int:
    c.execute("CREATE TABLE IF NOT EXISTS orchestrator_schema (version integer NOT NULL)")
    row = c.execute("SELECT version FROM orchestrator_schema").fetchone()
    return 0 if row is None else row[0]


def _migrate(c: Any, name: str) -> None:
    c.execute("SELECT pg_advisory_xact_lock(%s)", [pg_schema.MIGRATION_LOCK])
    found = _version(c)
    _refuse_newer(found, name)
    for version in range(found, pg_schema.VERSION):
        for sql in pg_schema.MIGRATIONS[version]:
            c.execute(sql)
    if found != pg_schema.VERSION:
        c.execute("DELETE FROM orchestrator_schema")
        c.execute("INSERT INTO orchestrator_schema (version) VALUES (%s)", [pg_schema.VERSION])


def _check(c: Any, name: str) -> None:
    row = c.execute("SELECT to_regclass('orchestrator_schema') IS NOT NULL").fetchone()
    found = c.execute("SELECT version FROM orchestrator_schema").fetchone()[0] if row[0] else 0
    if found == 0:
        raise UnusableDatabase(f"{name}: holds no orchestrator rooms yet; open it once with a command that writes")
    _refuse_newer(found, name)


def _refuse_newer(found: int, name: str) -> None:
    if found > pg_schema.VERSION:
        raise UnusableDatabase(f"{name}: written by a newer release of orchestrator (store version {found}, this "
                               f"one knows up to {pg_schema.VERSION}); upgrade orchestrator")


class _Rollback(Exception):
    def __init__(self, messages: list[Message]):
        self.messages = messages


@contextlib.asynccontextmanager
async def scratch(url: str, label: str) -> AsyncIterator[str]:
    """A URL whose tables live in a new schema of that database, dropped on exit: `check --db` runs each
    scenario on its own, as it does with a temporary SQLite file."""
    schema = f"scratch_{re.sub(r'[^a-z0-9]+', '_', label.lower())[:40]}_{uuid4().hex[:8]}"

    def run(sql: str) -> None:
        with _connect(url) as conn:
            conn.execute(sql)

    await trio.to_thread.run_sync(run, f'CREATE SCHEMA "{schema}"')
    try:
        joiner = "&" if "?" in url else "?"
        yield f"{url}{joiner}options=-csearch_path%3D{schema}"
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(run, f'DROP SCHEMA "{schema}" CASCADE')
