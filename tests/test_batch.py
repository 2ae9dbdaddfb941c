"""Group commit (store/batch.py): the SQLite store's small writes that arrive while the loop has other work go to its
thread together, in one transaction; each write still ends on its own (a fenced room fails alone), a cancel
never loses one that is in a group, and a lone write on a quiet loop stays on the loop."""
from __future__ import annotations

import time

import pytest
import trio

from orchestrator.core.types import Draft, TextBlock
from orchestrator.store import batch
from orchestrator.store.db import Store
from orchestrator.store.lease import Fenced


def say(text: str) -> Draft:
    return Draft(author="user", kind="user", blocks=[TextBlock(text)], visible_to=["*"])


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "chat.db")
    yield s
    await s.close()


@pytest.fixture
def groups(monkeypatch) -> list[int]:
    """The size of every group the thread ran."""
    sizes: list[int] = []
    run = batch.run

    def counted(conn, writes):
        sizes.append(len(writes))
        return run(conn, writes)

    monkeypatch.setattr(batch, "run", counted)
    return sizes


async def thread_busy(store: Store, seconds: float = 0.2) -> None:
    """A long call in the store's thread: the writes made meanwhile wait for it, in one group."""
    await store.call(lambda _db: time.sleep(seconds))


def commits(store: Store) -> list[str]:
    seen: list[str] = []
    store._db.conn.set_trace_callback(lambda sql: seen.append(sql) if sql == "COMMIT" else None)
    return seen


async def test_writes_of_many_rooms_at_once_commit_together_in_seq_order(store, groups):
    rooms = [(await store.create_room(f"r{i}")).id for i in range(20)]
    done = commits(store)
    got: dict[str, list[int]] = {r: [] for r in rooms}

    async def talk(room: str) -> None:
        for i in range(5):
            got[room].append((await store.append(room, say(f"{room} {i}"))).seq)
            await trio.sleep(0)  # as a room does between its messages (a model call)

    async with trio.open_nursery() as nursery:
        for room in rooms:
            nursery.start_soon(talk, room)
    assert all(seqs == [1, 2, 3, 4, 5] for seqs in got.values())
    assert sum(groups) >= 90 and max(groups) >= 10  # nearly all went in groups...
    assert len(done) <= 50  # ...and so in few commits, not 100
    for room in rooms:
        assert [m.text for m in await store.load(room)] == [f"{room} {i}" for i in range(5)]


async def test_a_lone_write_on_a_quiet_loop_commits_on_the_loop(store, groups):
    room = await store.create_room("r")
    for i in range(3):
        await store.append(room.id, say(str(i)))
    assert groups == []


async def test_a_fenced_room_fails_alone_in_its_group(tmp_path, groups):
    old, new = await Store.open(tmp_path / "chat.db"), await Store.open(tmp_path / "chat.db")
    try:
        taken, mine = await old.create_room("taken"), await old.create_room("mine")
        await old.acquire(taken.id, "old", 0.1)
        await trio.sleep(0.2)
        await new.acquire(taken.id, "new", 30)
        outcome: dict[str, object] = {}

        async def write(room: str) -> None:
            try:
                outcome[room] = (await old.append(room, say("late"))).seq
            except Fenced as exc:
                outcome[room] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(thread_busy, old)
            await trio.sleep(0.05)
            for room in (taken.id, mine.id, mine.id):
                nursery.start_soon(write, room)
        assert groups == [3]
        assert isinstance(outcome[taken.id], Fenced) and outcome[mine.id] in (1, 2)
        assert [m.text for m in await old.load(mine.id)] == ["late", "late"]
        assert await new.load(taken.id) == []
    finally:
        await old.close()
        await new.close()


async def test_a_cancel_does_not_take_back_a_write_already_in_a_group(store, groups):
    """The canceller learns of the cancel after the commit: a published message is never one that was not stored."""
    room = await store.create_room("r")
    stored: list[int] = []

    async def write(i: int) -> None:
        stored.append((await store.append(room.id, say(str(i)))).seq)

    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(thread_busy, store)
            await trio.sleep(0.05)
            for i in range(5):
                nursery.start_soon(write, i)
            await trio.sleep(0.01)  # every write has joined the group, which waits for the thread
            scope.cancel()
    assert groups == [5]
    assert sorted(stored) == [m.seq for m in await store.load(room.id)] == [1, 2, 3, 4, 5]


async def test_a_group_whose_commit_fails_fails_every_write_in_it(store, groups, monkeypatch):
    room = await store.create_room("r")
    run = batch.run

    def full_disk(conn, writes):
        run(conn, [])  # a transaction that begins and commits nothing
        raise OSError("disk full")

    monkeypatch.setattr(batch, "run", full_disk)
    failed: list[BaseException] = []

    async def write(i: int) -> None:
        try:
            await store.append(room.id, say(str(i)))
        except OSError as exc:
            failed.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(thread_busy, store)
        await trio.sleep(0.05)
        for i in range(4):
            nursery.start_soon(write, i)
    assert len(failed) == 4 and await store.load(room.id) == []
    monkeypatch.setattr(batch, "run", run)
    assert (await store.append(room.id, say("after"))).seq == 1  # the store goes on


async def test_immediate_adds_nothing_only_inside_its_own_connections_group(tmp_path):
    """Inside a running group `immediate` is part of the group's transaction; anywhere else a transaction left open
    is an error SQLite reports, and another store's writes meanwhile commit on their own."""
    import sqlite3

    from orchestrator.store.db import immediate

    one, two = await Store.open(tmp_path / "one.db"), await Store.open(tmp_path / "two.db")
    try:
        room = await two.create_room("r")
        inner: list[int] = []

        def write_two_meanwhile() -> None:  # runs inside one's group: two's transaction is its own
            with immediate(two._db):
                two._db.conn.execute("UPDATE rooms SET floor = 'a' WHERE id = ?", [room.id])
            inner.append(two._db.conn.in_transaction)

        assert batch.run(one._db.conn, [(write_two_meanwhile, ())]) == [None] and inner == [False]
        assert (await two.room(room.id)).floor == "a"
        one._db.conn.execute("BEGIN")
        with pytest.raises(sqlite3.OperationalError, match="within a transaction"):
            with immediate(one._db):
                pass
        one._db.conn.rollback()
    finally:
        await one.close()
        await two.close()
