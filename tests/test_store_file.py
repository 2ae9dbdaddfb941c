"""The store's file: its marks, files that are not ours or are damaged (refused, left untouched), the
migration from the first release's unmarked schema, and read-only opening (healing in memory).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from orchestrator.core.types import Draft, TextBlock, ToolCallBlock
from orchestrator.memory.knowledge import StoreKnowledgeBase
from orchestrator.memory.notes import Memory
from orchestrator.store import schema
from orchestrator.store.db import Store
from orchestrator.store.heal import INTERRUPTED
from orchestrator.store.schema import UnusableDatabase

V0 = Path(__file__).parent / "data" / "store-v0.db"  # written by the release before the marks (flagship run)


def snapshot(folder: Path) -> dict[str, str]:
    """Every file in the folder by content: a refused file must stay as it was, with no -wal or -shm beside it."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def journal(path: Path) -> str:
    """From the header's read/write versions (2 = WAL), since an immutable open reports "delete"."""
    return "wal" if path.read_bytes()[18:20] == b"\x02\x02" else "rollback"


def pragma(path: Path, name: str):
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)  # makes no -shm of its own
    try:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        conn.close()


def sql(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for s in statements:
            conn.execute(s)
    finally:
        conn.close()


async def refused(path: Path, *words: str, readonly: bool = False) -> str:
    with pytest.raises(UnusableDatabase) as caught:
        store = await Store.open(path, readonly=readonly)
        await store.close()
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    for w in words:
        assert w in message
    return message


def call(author: str, *ids: str) -> Draft:
    return Draft(author=author, kind="tool_call", visible_to=[author],
                 blocks=[TextBlock("looking"), *(ToolCallBlock(id=i, name="read_file", input={"path": i}) for i in ids)])


async def test_a_new_file_is_marked_and_in_wal_mode(tmp_path):
    path = tmp_path / "new.db"
    store = await Store.open(path)
    await store.close()
    assert pragma(path, "application_id") == schema.APPLICATION_ID
    assert pragma(path, "user_version") == schema.VERSION
    assert journal(path) == "wal"


@pytest.mark.parametrize("make", [
    pytest.param(["CREATE TABLE contacts (id INTEGER PRIMARY KEY, name TEXT)",
                  "INSERT INTO contacts (name) VALUES ('Ada')"], id="other-tables"),
    pytest.param(["CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT)",
                  "CREATE TABLE rooms (id INTEGER PRIMARY KEY)", "CREATE TABLE inbox (id INTEGER)"],
                 id="shares-some-names"),
    pytest.param(["CREATE TABLE rooms (x)", "CREATE TABLE messages (y)", "CREATE TABLE tasks (z)"],
                 id="same-names-other-columns"),
    pytest.param(["PRAGMA application_id = 1196444487"], id="other-application-id"),  # GeoPackage, no tables yet
    pytest.param(["PRAGMA user_version = 7", "CREATE TABLE t (a)"], id="other-user-version"),
    pytest.param(["PRAGMA journal_mode = wal", "CREATE TABLE notes (a)"], id="foreign-wal"),
])
@pytest.mark.parametrize("readonly", [False, True], ids=["read-write", "read-only"])
async def test_another_applications_file_is_refused_and_left_byte_for_byte(tmp_path, make, readonly):
    path = tmp_path / "theirs.sqlite"
    sql(path, *make)
    before, mode = snapshot(tmp_path), journal(path)
    message = await refused(path, readonly=readonly)
    assert "not an orchestrator database" in message or "damaged" in message
    assert snapshot(tmp_path) == before
    assert journal(path) == mode


async def test_a_file_that_is_not_sqlite_is_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("just some notes\n" * 100)
    before = snapshot(tmp_path)
    await refused(path, "not an SQLite database")
    await refused(path, "not an SQLite database", readonly=True)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("keep", [0.5, 0.9, 50, 99])
async def test_a_truncated_store_is_refused_as_damaged(tmp_path, keep):
    path = tmp_path / "cut.db"
    shutil.copy(V0, path)
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(int(size * keep) if keep < 1 else int(keep))
    before = snapshot(tmp_path)
    await refused(path, "damaged")
    await refused(path, "damaged", readonly=True)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("table", ["messages", "rooms", "tasks"])
async def test_a_dropped_table_is_reported_not_recreated(tmp_path, table):
    path = tmp_path / "ours.db"
    store = await Store.open(path)
    room = await store.create_room("r")
    await store.append(room.id, Draft(author="user", kind="user", blocks=[TextBlock("hi")], visible_to=["*"]))
    await store.close()
    sql(path, f"DROP TABLE {table}")
    before = snapshot(tmp_path)
    await refused(path, "damaged", f"table {table} is missing")
    await refused(path, "damaged", f"table {table} is missing", readonly=True)
    assert snapshot(tmp_path) == before


async def test_a_dropped_column_or_index_is_damage(tmp_path):
    path = tmp_path / "ours.db"
    store = await Store.open(path)
    await store.close()
    sql(path, "ALTER TABLE messages DROP COLUMN visible_to")
    await refused(path, "lacks column visible_to")
    path.unlink()
    store = await Store.open(path)
    await store.close()
    sql(path, "DROP INDEX idx_messages_room_seq")
    await refused(path, "index idx_messages_room_seq is missing")


async def test_a_table_dropped_while_open_is_reported_with_the_path(tmp_path):
    path = tmp_path / "ours.db"
    store = await Store.open(path)
    try:
        room = await store.create_room("r")
        sql(path, "DROP TABLE messages")
        with pytest.raises(UnusableDatabase, match="damaged"):
            await store.append(room.id, Draft(author="user", kind="user", blocks=[TextBlock("hi")], visible_to=["*"]))
    finally:
        await store.close()


async def test_a_newer_store_is_refused(tmp_path):
    path = tmp_path / "future.db"
    store = await Store.open(path)
    await store.close()
    sql(path, f"PRAGMA user_version = {schema.VERSION + 1}")
    before = snapshot(tmp_path)
    await refused(path, "newer release")
    assert snapshot(tmp_path) == before


async def test_unusable_paths(tmp_path):
    await refused(tmp_path, "is a folder")
    await refused(tmp_path / "nowhere" / "x.db", "does not exist")
    await refused(tmp_path / "absent.db", "no such database", readonly=True)
    (tmp_path / "empty.db").touch()
    await refused(tmp_path / "empty.db", "empty file", readonly=True)
    store = await Store.open(tmp_path / "empty.db")  # an empty file is a new store
    await store.close()
    assert pragma(tmp_path / "empty.db", "application_id") == schema.APPLICATION_ID


async def test_two_opens_of_a_new_file_at_once_both_succeed(tmp_path):
    path = tmp_path / "race.db"
    stores: list[Store] = []

    async def open_one() -> None:
        stores.append(await Store.open(path))

    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(open_one)
    for s in stores:
        await s.close()
    assert pragma(path, "user_version") == schema.VERSION


# --- migration from the first release (version 0: unmarked, the same tables) -----------------------

def raw_rows(path: Path, query: str) -> list[tuple]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


async def test_the_first_releases_database_migrates_with_everything_in_it(tmp_path):
    path = tmp_path / "old.db"
    shutil.copy(V0, path)
    assert pragma(path, "application_id") == 0 and pragma(path, "user_version") == 0
    messages = raw_rows(path, "SELECT id, seq, author, kind, blocks FROM messages ORDER BY room, seq")
    tasks = raw_rows(path, "SELECT * FROM tasks ORDER BY id")
    store = await Store.open(path)
    try:
        [room] = await store.rooms()
        assert (room.name, room.floor, room.messages) == ("flagship", "commander", len(messages))
        loaded = await store.load(room.id)
        assert [(m.id, m.seq, m.author, m.kind) for m in loaded] == [r[:4] for r in messages]
        assert len(await store.tasks(room.id)) == len(tasks) == 3
        assert await Memory(store).entries("profile") == ["Prefers short answers."]
        async with await StoreKnowledgeBase.open(store) as kb:
            assert [d.path for d in await kb.list_documents()] == ["notes/plan.md"]
            assert (await kb.search("tests", mode="fts"))[0].path == "notes/plan.md"
        await store.append(room.id, Draft(author="user", kind="user", blocks=[TextBlock("after")], visible_to=["*"]))
    finally:
        await store.close()
    assert pragma(path, "application_id") == schema.APPLICATION_ID
    assert pragma(path, "user_version") == schema.VERSION
    assert raw_rows(path, "SELECT * FROM tasks ORDER BY id") == tasks
    fresh = tmp_path / "fresh.db"
    await (await Store.open(fresh)).close()
    assert _schema(path, "rooms", "messages", "tasks", "idx_messages_room_seq") == \
        _schema(fresh, "rooms", "messages", "tasks", "idx_messages_room_seq")


def _schema(path: Path, *names: str) -> list[tuple]:
    marks = ",".join("?" * len(names))
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(f"SELECT type, name, sql FROM sqlite_master WHERE name IN ({marks}) ORDER BY name",
                            names).fetchall()
    finally:
        conn.close()


async def test_a_version_2_file_learns_what_each_reply_answers(tmp_path):
    """2 → 3: the answers column; a reply stored before it is taken to answer everything before it."""
    path = tmp_path / "v2.db"
    store = await Store.open(path)
    room = await store.create_room("r")
    for draft in (Draft(author="user", kind="user", blocks=[TextBlock("hi")], visible_to=["*"]),
                  Draft(author="commander", kind="text", blocks=[TextBlock("hello")], visible_to=["*"]),
                  Draft(author="user", kind="user", blocks=[TextBlock("and?")], visible_to=["*"])):
        await store.append(room.id, draft)
    await store.close()
    sql(path, "ALTER TABLE messages DROP COLUMN answers", "PRAGMA user_version = 2")
    store = await Store.open(path, readonly=True)  # read as it is, no migration
    try:
        assert len(await store.load(room.id)) == 3
    finally:
        await store.close()
    assert pragma(path, "user_version") == 2
    store = await Store.open(path)
    try:
        assert await store.answered(room.id) == {"commander": 1}
    finally:
        await store.close()
    assert pragma(path, "user_version") == schema.VERSION
    assert raw_rows(path, "SELECT seq, answers FROM messages ORDER BY seq") == [(1, None), (2, 1), (3, None)]
    fresh = tmp_path / "fresh.db"
    await (await Store.open(fresh)).close()
    assert _schema(path, "messages") == _schema(fresh, "messages")


async def test_a_version_3_file_goes_on_after_the_seq_its_room_row_kept(tmp_path):
    """3 → 4: appends stop moving the room's row; a seq version 3 handed out (kept in the row after healing deleted
    its message) is still never handed out again, and the room's last seq and ts read the same."""
    path = tmp_path / "v3.db"
    store = await Store.open(path)
    room = await store.create_room("r")
    for text in ("one", "two"):
        await store.append(room.id, Draft(author="user", kind="user", blocks=[TextBlock(text)], visible_to=["*"]))
    await store.close()
    sql(path, "UPDATE rooms SET last_seq = 5", "PRAGMA user_version = 3")  # seqs 3-5 were healed away
    store = await Store.open(path)
    try:
        m = await store.append(room.id, Draft(author="user", kind="user", blocks=[TextBlock("six")], visible_to=["*"]))
        [record] = await store.rooms()
    finally:
        await store.close()
    assert pragma(path, "user_version") == schema.VERSION == 4
    assert m.seq == record.last_seq == 6 and record.last_ts == m.ts and record.messages == 3
    assert raw_rows(path, "SELECT last_seq FROM rooms") == [(5,)]  # the row is the mark, not the count


async def test_every_migration_step_exists():
    assert sorted(schema.MIGRATIONS) == list(range(schema.VERSION))
    assert schema.READABLE >= {schema.VERSION}


async def test_the_first_releases_database_reads_without_migrating(tmp_path):
    path = tmp_path / "old.db"
    shutil.copy(V0, path)
    before = snapshot(tmp_path)
    store = await Store.open(path, readonly=True)
    try:
        [room] = await store.rooms()
        assert len(await store.load(room.id)) == room.messages == 27
    finally:
        await store.close()
    assert snapshot(tmp_path)["old.db"] == before["old.db"]
    assert pragma(path, "user_version") == 0


# --- read-only opening -------------------------------------------------------------------------

async def unhealed_room(path: Path) -> str:
    """A room whose last call never got its result: loading it synthesizes one."""
    store = await Store.open(path)
    room = await store.create_room("r")
    await store.append(room.id, Draft(author="user", kind="user", blocks=[TextBlock("go")], visible_to=["*"]))
    await store.append(room.id, call("coder", "c1", "c2"))
    await store.close()
    return room.id


async def test_read_only_heals_in_memory_and_writes_nothing(tmp_path):
    path = tmp_path / "room.db"
    room_id = await unhealed_room(path)
    before = snapshot(tmp_path)["room.db"]
    store = await Store.open(path, readonly=True)
    try:
        shown = await store.load(room_id)
        with pytest.raises(UnusableDatabase, match="cannot write"):
            await store.create_room("x")
    finally:
        await store.close()
    assert snapshot(tmp_path)["room.db"] == before
    assert not (tmp_path / "room.db-wal").exists() or not (tmp_path / "room.db-wal").stat().st_size
    assert [(m.kind, m.result.content if m.result else "") for m in shown] == [
        ("user", ""), ("tool_call", ""), ("tool_result", INTERRUPTED), ("tool_result", INTERRUPTED)]
    store = await Store.open(path)
    try:
        healed = await store.load(room_id)
    finally:
        await store.close()
    assert [(m.seq, m.kind, m.result and m.result.call_id) for m in healed] == \
        [(m.seq, m.kind, m.result and m.result.call_id) for m in shown]


async def test_read_only_does_not_wait_for_a_writer(tmp_path):
    path = tmp_path / "room.db"
    room_id = await unhealed_room(path)
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("DELETE FROM messages")  # uncommitted: a reader sees the committed room
        start = time.perf_counter()
        store = await Store.open(path, readonly=True)
        try:
            shown = await store.load(room_id)
        finally:
            await store.close()
        assert time.perf_counter() - start < 1.0
        assert len(shown) == 4
    finally:
        writer.execute("ROLLBACK")
        writer.close()


_READ_AS_ANOTHER_USER = """
import sys, trio
from orchestrator.store.db import Store
async def main():
    store = await Store.open(sys.argv[1], readonly=True)
    print(len(await store.load(sys.argv[2])))
    await store.close()
trio.run(main)
"""


async def test_a_read_only_copy_in_a_read_only_folder_can_be_read(tmp_path):
    """The file and its folder cannot be written, and no -shm exists beside the WAL-mode file."""
    room_id = await unhealed_room(tmp_path / "room.db")
    folder = tmp_path / "copy"
    folder.mkdir()
    shutil.copy(tmp_path / "room.db", folder / "room.db")
    assert journal(folder / "room.db") == "wal"
    for p in (folder / "room.db", folder):
        p.chmod(0o555)
    command = [sys.executable, "-c", _READ_AS_ANOTHER_USER, str(folder / "room.db"), room_id]
    if os.geteuid() == 0:  # root writes anywhere: drop the capabilities that let it
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv (util-linux): cannot make a folder read-only")
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--", *command]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "4"
        assert sorted(p.name for p in folder.iterdir()) == ["room.db"]
    finally:
        folder.chmod(0o755)
