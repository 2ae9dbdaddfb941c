"""The SQLite store (S1): seqs that never repeat, atomic batches, concurrency, rooms, floor and tasks.

File databases live in tmp_path so reopening is real; the rest use ":memory:".
"""
from __future__ import annotations

import sqlite3
from types import SimpleNamespace

import msgspec
import pytest
import trio

from orchestrator.core.types import (Draft, ImageBlock, TextBlock, ThinkingBlock, ToolCallBlock,
                                     ToolResultBlock)
from orchestrator.store import db
from orchestrator.store.db import Store, TaskRecord


@pytest.fixture
async def store():
    s = await Store.open(":memory:")
    yield s
    await s.close()


def say(text: str, author: str = "user") -> Draft:
    return Draft(author=author, kind="user", blocks=[TextBlock(text)], visible_to=["*"])


def increasing(values: list) -> bool:
    return all(a < b for a, b in zip(values, values[1:]))


async def test_seq_and_ts_increase_across_reopen(tmp_path):
    path = tmp_path / "chat.db"
    store = await Store.open(path)
    room = await store.create_room("r")
    first = [await store.append(room.id, say(str(i))) for i in range(3)]
    await store.close()

    store = await Store.open(path)
    second = await store.append_many(room.id, [say("3"), say("4")])
    loaded = await store.load(room.id)
    await store.close()
    assert [m.seq for m in loaded] == [1, 2, 3, 4, 5]
    assert loaded == first + second
    assert increasing([m.ts for m in loaded])
    assert len({m.id for m in loaded}) == 5


async def test_seq_is_not_reused_after_healing_deletes_the_newest(tmp_path):
    path = tmp_path / "chat.db"
    store = await Store.open(path)
    room = await store.create_room("r")
    await store.append(room.id, say("hello"))
    orphan = Draft(author="a", kind="tool_result", visible_to=["a"],
                   blocks=[ToolResultBlock(call_id="nope", name="x", content="?")])
    newest = await store.append(room.id, orphan)
    assert [m.seq for m in await store.load(room.id)] == [1]
    await store.close()

    store = await Store.open(path)
    after = await store.append(room.id, say("again"))
    await store.close()
    assert after.seq == newest.seq + 1 and after.ts > newest.ts


async def test_ts_increases_when_the_clock_stalls_or_steps_back(store, monkeypatch):
    room = await store.create_room("r")
    clock = iter([1000.0, 1000.0, 999.0, 1000.5])
    monkeypatch.setattr(db, "time", SimpleNamespace(time=lambda: next(clock)))
    stamps = [m.ts for m in await store.append_many(room.id, [say(str(i)) for i in range(4)])]
    assert stamps[0] == 1000.0 and increasing(stamps) and stamps[3] == 1000.5


async def test_concurrent_appends_get_distinct_increasing_seqs(store):
    room = await store.create_room("r")
    appended = []

    async def one(i: int) -> None:
        appended.append(await store.append(room.id, say(str(i))))

    async with trio.open_nursery() as nursery:
        for i in range(50):
            nursery.start_soon(one, i)
    loaded = await store.load(room.id)
    assert sorted(m.seq for m in appended) == list(range(1, 51))
    assert [m.seq for m in loaded] == list(range(1, 51))
    assert increasing([m.ts for m in loaded])
    assert sorted(m.text for m in loaded) == sorted(str(i) for i in range(50))


async def test_cancelled_appends_leave_the_store_consistent(store):
    room = await store.create_room("r")
    with trio.move_on_after(0.005):
        async with trio.open_nursery() as nursery:
            for i in range(200):
                nursery.start_soon(store.append, room.id, say(str(i)))
    loaded = await store.load(room.id)
    assert [m.seq for m in loaded] == list(range(1, len(loaded) + 1))
    assert (await store.append(room.id, say("next"))).seq == len(loaded) + 1


async def test_append_many_is_all_or_nothing(store):
    room = await store.create_room("r")
    await store.append(room.id, say("before"))
    unencodable = Draft(author="a", kind="tool_call", visible_to=["a"],
                        blocks=[ToolCallBlock(id="c1", name="x", input={"bad": object()})])
    with pytest.raises(TypeError):  # fails on the third insert, after two rows were written
        await store.append_many(room.id, [say("one"), say("two"), unencodable, say("four")])
    loaded = await store.load(room.id)
    assert [m.text for m in loaded] == ["before"]
    assert (await store.append(room.id, say("after"))).seq == 2
    assert (await store.room(room.id)).messages == 2


async def test_every_field_round_trips(tmp_path):
    draft = Draft(author="coder", kind="tool_call", visible_to=["coder", "commander"],
                  provider="anthropic", model="claude-x", replaces=["m1", "m2"], blocks=[
                      ThinkingBlock("hmm", signature="sig"), TextBlock("Let me look."),
                      ImageBlock(media_type="image/png", data="aGk="),
                      ToolCallBlock(id="c1", name="read", input={"path": "a.txt", "n": [1, 2]})])
    answer = Draft(author="coder", kind="tool_result", visible_to=["coder"], blocks=[
        ToolResultBlock(call_id="c1", name="read", content="text", images=[ImageBlock("image/png", "eA==")])])
    store = await Store.open(tmp_path / "chat.db")
    room = await store.create_room("r")
    written = await store.append_many(room.id, [draft, answer])
    await store.close()
    store = await Store.open(tmp_path / "chat.db")
    assert await store.load(room.id) == written
    await store.close()
    assert msgspec.structs.asdict(written[0]).items() >= msgspec.structs.asdict(draft).items()


async def test_floor_and_meta_persist(tmp_path):
    store = await Store.open(tmp_path / "chat.db")
    room = await store.create_room("r", meta={"members": ["coder"]})
    assert room.floor == "commander"
    await store.set_floor(room.id, "coder")
    await store.set_meta(room.id, {"members": ["coder", "tutor"]})
    with pytest.raises(KeyError):
        await store.set_floor("missing", "coder")
    await store.close()
    store = await Store.open(tmp_path / "chat.db")
    again = await store.room(room.id)
    await store.close()
    assert again.floor == "coder" and again.meta == {"members": ["coder", "tutor"]}


async def test_append_to_a_missing_room_fails(store):
    with pytest.raises(KeyError):
        await store.append("missing", say("hi"))


async def test_tasks_upsert_in_creation_order(store):
    room, other = await store.create_room("r"), await store.create_room("other")
    for i in range(3):
        await store.put_task(TaskRecord(id=f"t{i}", room=room.id, agent="coder", kind="worker",
                                        status="running", task=f"job {i}", background=i == 1))
    await store.put_task(TaskRecord(id="elsewhere", room=other.id, agent="x", kind="dispatch",
                                    status="running", task="?"))
    before = await store.tasks(room.id)
    await store.put_task(msgspec.structs.replace(before[0], status="done", result="built", read=True))
    after = await store.tasks(room.id)
    assert [t.id for t in after] == ["t0", "t1", "t2"]
    assert (after[0].status, after[0].result, after[0].read) == ("done", "built", True)
    assert after[0].created == before[0].created and after[0].updated >= before[0].updated
    assert [t.background for t in after] == [False, True, False]
    assert after[0].created > 0 and increasing([t.created for t in after])
    assert [t.id for t in await store.tasks(other.id)] == ["elsewhere"]


async def test_rooms_oldest_first_with_counts(store):
    a = await store.create_room("a")
    b = await store.create_room("b", floor="tutor")
    await store.append_many(b.id, [say("1"), say("2")])
    await store.append(a.id, say("1"))
    rooms = await store.rooms()
    assert [(r.id, r.name, r.floor, r.messages) for r in rooms] == [
        (a.id, "a", "commander", 1), (b.id, "b", "tutor", 2)]


async def test_room_lookup_by_id_prefix_and_name(store):
    old = await store.create_room("same")
    new = await store.create_room("same")
    assert (await store.room(old.id)).id == old.id
    prefix = next(old.id[:n] for n in range(1, 13) if not new.id.startswith(old.id[:n]))
    assert (await store.room(prefix)).id == old.id
    assert (await store.room("same")).id == new.id
    assert await store.room("nothing") is None
    assert await store.room("") is None


async def test_wal_mode(tmp_path):
    store = await Store.open(tmp_path / "chat.db")
    await store.close()
    conn = sqlite3.connect(tmp_path / "chat.db")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()
