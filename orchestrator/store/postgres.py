"""The PostgreSQL store: the SQLite store's rooms, messages, tasks, memory, leases and inbox, shared by hosts
on many machines. Sync psycopg 3 in a worker thread (its async API needs asyncio), one connection per store.

Every call is one transaction. Lines for a room run elsewhere are woken with LISTEN/NOTIFY on their own
connection; appends never NOTIFY (a pending NOTIFY serialises commits server-wide).
"""
from __future__ import annotations

import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, TypeVar
from uuid import uuid4

import msgspec
import trio

from orchestrator.core.errors import InputError
from orchestrator.core.types import BLOCK_DECODER, Draft, Message
from orchestrator.store import heal, pg_schema
from orchestrator.store.db import (
    _ANSWERED, _INSERT_MESSAGE, _OBJECT, _STRINGS, RoomRecord, Side, TaskRecord, _json, _task_row, answering,
    message_id,
)
from orchestrator.store.lease import Fenced, InboxLine, Lease
from orchestrator.store.schema import UnusableDatabase

T = TypeVar("T")
CHANNEL = "orchestrator_inbox"
_NOW = "extract(epoch from clock_timestamp())::double precision"
_ROOMS = ("SELECT r.id, r.name, r.floor, r.created, r.meta, "
          "(SELECT count(*) FROM messages m WHERE m.room = r.id) AS messages FROM rooms r {where} "
          "ORDER BY r.created, r.id")
_PLACEHOLDER = re.compile(r"\?|(?<!:):(\w+)")
_UPSERT_TASK = "INSERT INTO tasks ({}) VALUES ({}) ON CONFLICT (id) DO UPDATE SET {}".format(
    ", ".join(TaskRecord.__struct_fields__), ", ".join(f"%({c})s" for c in TaskRecord.__struct_fields__),
    ", ".join(f"{c} = excluded.{c}" for c in TaskRecord.__struct_fields__ if c not in ("id", "created")))


def _psycopg():  # noqa: ANN202 (the module)
    try:
        import psycopg
    except ImportError:
        raise InputError("a PostgreSQL --db needs the postgres extra: pip install "
                         "'groupchat-orchestrator[postgres]'") from None
    return psycopg


def shown(url: str) -> str:
    """The URL without its password, for every message that names the database."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)


class PgStore:
    """Same methods and meaning as `Store` (db.py), over one PostgreSQL database."""

    def __init__(self, conn: Any, url: str):
        self._conn = conn
        self._url = url
        self.name = shown(url)
        self.readonly = False
        self._limiter = trio.CapacityLimiter(1)  # one connection: its calls must not overlap
        self._epochs: dict[str, int] = {}
        self._deliveries: dict[str, str] = {}
        self._listener: Any = None
        self._prepared: set[Callable] = set()

    @classmethod
    async def open(cls, url: str, *, readonly: bool = False) -> PgStore:
        """Connect and migrate (explicitly, once, under a lock); raises UnusableDatabase when the server cannot
        be reached or the database is newer than this release."""
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

    # --- rooms and messages -------------------------------------------------------------------

    async def create_room(self, name: str, *, floor: str = "commander", meta: dict | None = None) -> RoomRecord:
        room = RoomRecord(id=uuid4().hex[:12], name=name, floor=floor, created=time.time(), meta=meta or {})
        await self._run(lambda c: c.execute(
            "INSERT INTO rooms (id, name, floor, created, meta, last_seq, last_ts) VALUES (%s, %s, %s, %s, %s, 0, 0)",
            [room.id, room.name, room.floor, room.created, _json(room.meta)]))
        return room

    async def room(self, ref: str) -> RoomRecord | None:
        def find(c: Any) -> RoomRecord | None:
            if found := _rooms(c, "WHERE r.id = %(ref)s", ref):
                return found[0]
            if len(found := _rooms(c, "WHERE %(ref)s != '' AND left(r.id, length(%(ref)s)) = %(ref)s", ref)) == 1:
                return found[0]
            named = _rooms(c, "WHERE r.name = %(ref)s", ref)
            return named[-1] if named else None

        return await self._run(find)

    async def rooms(self) -> list[RoomRecord]:
        return await self._run(_rooms, "", None)

    async def set_meta(self, room_id: str, meta: dict) -> None:
        await self._run(self._set_room, room_id, "meta", _json(meta))

    async def set_floor(self, room_id: str, owner: str) -> None:
        await self._run(self._set_room, room_id, "floor", owner)

    async def append(self, room_id: str, draft: Draft, *, side: Side | None = None,
                     answers: int | None = None) -> Message:
        """Commit one message; with `side`, other rows in the same transaction (an assignment's ledger row, a
        turn's usage)."""
        return (await self.append_many(room_id, [draft], side=side, answers=(answers,)))[0]

    async def append_many(self, room_id: str, drafts: list[Draft], *, side: Side | None = None,
                          answers: Sequence[int | None] = ()) -> list[Message]:
        epoch = self._epochs.get(room_id)
        delivery = self._deliveries.pop(room_id, None) if any(d.kind == "user" for d in drafts) else None

        def insert(c: Any) -> list[Message]:
            _fence(c, room_id, epoch)
            if delivery is not None:
                c.execute("DELETE FROM inbox WHERE id = %s", [delivery])
            if side is not None:
                side(_Session(c))
            return _insert(c, room_id, drafts, epoch, answers)

        return await self._run(insert)

    async def put_task(self, task: TaskRecord) -> None:
        row = _task_row(task)
        epoch = self._epochs.get(task.room)

        def upsert(c: Any) -> None:
            _fence(c, task.room, epoch)
            c.execute(_UPSERT_TASK, row)

        await self._run(upsert)

    async def tasks(self, room_id: str) -> list[TaskRecord]:
        def select(c: Any) -> list[TaskRecord]:
            cur = c.execute("SELECT * FROM tasks WHERE room = %s ORDER BY created, id", [room_id])
            names = [d.name for d in cur.description]
            return [msgspec.convert(dict(zip(names, row)), TaskRecord) for row in cur.fetchall()]

        return await self._run(select)

    async def load(self, room_id: str, *, size: int | None = None) -> list[Message]:
        """Heal the room's history (S2) in one transaction, then return it in seq order. Read-only: healed in
        a transaction that is rolled back, so the database is only read. (`size` picks SQLite's event-loop path;
        here every call is one thread hop.)"""
        if self.readonly:
            return await self._run(_healed_copy, room_id)
        return await self._run(_heal, room_id, self._epochs.get(room_id))

    async def read(self, room_id: str, after: int = 0) -> list[Message]:
        return await self._run(_messages, room_id, after)

    async def answered(self, room_id: str) -> dict[str, int]:
        return dict(await self._run(lambda c: c.execute(_ANSWERED.replace("?", "%s"), [room_id]).fetchall()))

    async def call(self, fn: Callable[..., T], *args: Any, small: bool = False) -> T:
        """Run `fn(db, *args)` for another owner of tables here (memory): `db.execute(sql, params)` takes the
        SQLite store's `?` and `:name` placeholders, so one implementation of each query serves both stores."""
        return await self._run(lambda c: fn(_Session(c), *args))

    async def prepare(self, fn: Callable[[Any], None]) -> None:
        """Another owner's set-up, once per open store (here its tables come from the migrations)."""
        if fn not in self._prepared:
            await self.call(fn)
            self._prepared.add(fn)

    # --- leases -------------------------------------------------------------------------------

    async def acquire(self, room_id: str, host: str, seconds: float) -> Lease | None:
        def take(c: Any) -> Lease | None:
            if c.execute("SELECT 1 FROM rooms WHERE id = %s", [room_id]).fetchone() is None:
                raise KeyError(f"no room {room_id!r}")
            # The row lock makes hosts racing for one room queue; a fenced append holds it shared, so a takeover
            # waits for an append in flight and every later append by the old epoch sees the new one.
            row = c.execute(f"SELECT epoch, expires, {_NOW} FROM leases WHERE room = %s FOR UPDATE",
                            [room_id]).fetchone()
            if row is None:
                got = c.execute(f"INSERT INTO leases (room, host, epoch, expires) VALUES (%s, %s, 1, {_NOW} + %s) "
                                "ON CONFLICT (room) DO NOTHING RETURNING epoch, expires",
                                [room_id, host, seconds]).fetchone()
            elif row[1] > row[2]:
                return None
            else:
                got = c.execute("UPDATE leases SET host = %s, epoch = epoch + 1, expires = "
                                f"{_NOW} + %s WHERE room = %s RETURNING epoch, expires",
                                [host, seconds, room_id]).fetchone()
            return None if got is None else Lease(room=room_id, host=host, epoch=got[0], expires=got[1])

        lease = await self._run(take)
        if lease is not None:
            self._epochs[room_id] = lease.epoch
        return lease

    async def renew(self, lease: Lease, seconds: float) -> Lease | None:
        row = await self._run(lambda c: c.execute(
            f"UPDATE leases SET expires = {_NOW} + %s WHERE room = %s AND epoch = %s RETURNING expires",
            [seconds, lease.room, lease.epoch]).fetchone())
        return None if row is None else msgspec.structs.replace(lease, expires=row[0])

    async def renew_all(self, leases: list[Lease], seconds: float) -> list[Lease | None]:
        """`renew` for every lease a host holds, in one statement."""
        if not leases:
            return []
        rows = await self._run(lambda c: c.execute(
            f"UPDATE leases l SET expires = {_NOW} + %s FROM unnest(%s::text[], %s::bigint[]) AS h(room, epoch) "
            "WHERE l.room = h.room AND l.epoch = h.epoch RETURNING l.room, l.expires",
            [seconds, [x.room for x in leases], [x.epoch for x in leases]]).fetchall())
        expires = dict(rows)
        return [msgspec.structs.replace(x, expires=expires[x.room]) if x.room in expires else None for x in leases]

    async def release(self, lease: Lease) -> None:
        await self._run(lambda c: c.execute("UPDATE leases SET expires = 0 WHERE room = %s AND epoch = %s",
                                            [lease.room, lease.epoch]))

    async def leases(self) -> list[Lease]:
        rows = await self._run(lambda c: c.execute(
            "SELECT room, host, epoch, expires FROM leases ORDER BY room").fetchall())
        return [Lease(room=r, host=h, epoch=e, expires=x) for r, h, e, x in rows]

    async def clock(self) -> float:
        return (await self._run(lambda c: c.execute(f"SELECT {_NOW}").fetchone()))[0]

    # --- the inbox ------------------------------------------------------------------------------

    async def send(self, room_id: str, text: str, *, author: str = "user") -> InboxLine:
        """Queue a line for the room's owner and wake it (NOTIFY is sent at commit, so the owner finds the row)."""
        line = InboxLine(id=uuid4().hex, room=room_id, author=author, text=text, posted=time.time())

        def insert(c: Any) -> None:
            c.execute("INSERT INTO inbox (id, room, author, text, posted) VALUES (%s, %s, %s, %s, %s)",
                      [line.id, line.room, line.author, line.text, line.posted])
            c.execute("SELECT pg_notify(%s, %s)", [CHANNEL, room_id])

        await self._run(insert)
        return line

    async def inbox(self, rooms: list[str] | None = None) -> list[InboxLine]:
        def select(c: Any) -> list[InboxLine]:
            if rooms is None:
                cur = c.execute("SELECT id, room, author, text, posted FROM inbox ORDER BY posted, id")
            else:
                cur = c.execute("SELECT id, room, author, text, posted FROM inbox WHERE room = ANY(%s) "
                                "ORDER BY posted, id", [list(rooms)])
            return [InboxLine(id=i, room=r, author=a, text=t, posted=p) for i, r, a, t, p in cur.fetchall()]

        return await self._run(select)

    async def drop(self, line_id: str) -> None:
        await self._run(lambda c: c.execute("DELETE FROM inbox WHERE id = %s", [line_id]))

    def deliver(self, line: InboxLine) -> None:
        self._deliveries[line.room] = line.id

    def undeliver(self, room_id: str) -> None:
        """Forget a delivery whose append did not happen (refused or failed): the line stays in the inbox."""
        self._deliveries.pop(room_id, None)

    async def wait_inbox(self, seconds: float) -> None:
        """Until a NOTIFY arrives on this host's listening connection, or `seconds` pass."""
        if self._listener is None:
            self._listener = await trio.to_thread.run_sync(_listen, self._url)
        # The thread returns within `seconds` whatever happens, so a cancel waits at most that long.
        await trio.to_thread.run_sync(_next_notify, self._listener, seconds)

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

    def _set_room(self, c: Any, room_id: str, column: str, value: str) -> None:
        _fence(c, room_id, self._epochs.get(room_id))
        if not c.execute(f"UPDATE rooms SET {column} = %s WHERE id = %s", [value, room_id]).rowcount:
            raise KeyError(f"no room {room_id!r}")


class _Session:
    """What memory's and the knowledge base's queries need of a connection, with SQLite's placeholders turned
    into psycopg's."""

    def __init__(self, conn: Any):
        self._conn = conn

    def execute(self, sql: str, params: Any = ()) -> Any:
        # Binary results: bytea arrives as it is stored, not as hex to decode (the knowledge base's vectors
        # load 3x faster); every other type reads back the same.
        return self._conn.execute(_placeholders(sql), params, binary=True)

    def executemany(self, sql: str, rows: list[Any]) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(_placeholders(sql), rows)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with self._conn.transaction():
            yield


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


def _rooms(c: Any, where: str, ref: str | None) -> list[RoomRecord]:
    cur = c.execute(_ROOMS.format(where=where), {"ref": ref})
    return [RoomRecord(id=i, name=n, floor=f, created=cr, meta=_OBJECT.decode(m), messages=count)
            for i, n, f, cr, m, count in cur.fetchall()]


def _fence(c: Any, room_id: str, epoch: int | None) -> None:
    if epoch is None:
        return
    row = c.execute("SELECT epoch FROM leases WHERE room = %s FOR SHARE", [room_id]).fetchone()
    if row is not None and row[0] > epoch:
        raise Fenced(room_id, epoch, row[0])


_INSERT = _PLACEHOLDER.sub(lambda m: f"%({m[1]})s", _INSERT_MESSAGE)


def _insert(c: Any, room_id: str, drafts: list[Draft], epoch: int | None,
            answers: Sequence[int | None] = ()) -> list[Message]:
    found = c.execute("SELECT last_seq, last_ts FROM rooms WHERE id = %s FOR UPDATE", [room_id]).fetchone()
    if found is None:
        raise KeyError(f"no room {room_id!r}")
    seq, ts = found
    messages, rows = [], []
    for draft, answer in zip(drafts, answering(answers, len(drafts))):
        now = time.time()
        seq, ts = seq + 1, now if now > ts else ts + 1e-6
        m = Message(id=message_id(), room=room_id, seq=seq, ts=ts, **msgspec.structs.asdict(draft))
        rows.append(msgspec.structs.asdict(m) | {
            "blocks": _json(m.blocks), "visible_to": _json(m.visible_to), "replaces": _json(m.replaces),
            "epoch": epoch, "answers": answer})
        messages.append(m)
    with c.cursor() as cur:
        cur.executemany(_INSERT, rows)
    # Kept in the room row, so a seq freed by healing is never handed out again.
    c.execute("UPDATE rooms SET last_seq = %s, last_ts = %s WHERE id = %s", [seq, ts, room_id])
    return messages


def _messages(c: Any, room_id: str, after: int = 0) -> list[Message]:
    cur = c.execute("SELECT id, room, seq, ts, author, kind, visible_to, provider, model, blocks, replaces "
                    "FROM messages WHERE room = %s AND seq > %s ORDER BY seq", [room_id, after])
    return [Message(id=i, room=r, seq=s, ts=t, author=a, kind=k, visible_to=_STRINGS.decode(v), provider=p,
                    model=mo, blocks=BLOCK_DECODER.decode(b), replaces=_STRINGS.decode(rp))
            for i, r, s, t, a, k, v, p, mo, b, rp in cur.fetchall()]


def _heal(c: Any, room_id: str, epoch: int | None = None) -> list[Message]:
    _fence(c, room_id, epoch)
    c.execute("SELECT 1 FROM rooms WHERE id = %s FOR UPDATE", [room_id])  # no append interleaves the healing
    messages = _messages(c, room_id)
    for _ in range(2):  # as in db._heal: the second round only reorders synthesized results
        fix = heal.plan(messages)
        if fix.empty():
            break
        for gone in fix.delete:
            c.execute("DELETE FROM messages WHERE id = %s", [gone])
        for moved, seq in fix.reseq:
            c.execute("UPDATE messages SET seq = %s WHERE id = %s", [-seq, moved])
        c.execute("UPDATE messages SET seq = -seq WHERE room = %s AND seq < 0", [room_id])
        _insert(c, room_id, [draft for _, draft in fix.add], epoch)
        messages = _messages(c, room_id)
    return messages


class _Rollback(Exception):
    def __init__(self, messages: list[Message]):
        self.messages = messages


def _healed_copy(c: Any, room_id: str) -> list[Message]:
    """The room as `_heal` would leave it, computed in a savepoint that is rolled back."""
    try:
        with c.transaction():
            raise _Rollback(_heal(c, room_id))
    except _Rollback as done:
        return done.messages


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
