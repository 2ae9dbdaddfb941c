"""The store (S1) on SQLite and PostgreSQL alike: seqs that never repeat, atomic batches, concurrency, rooms,
floor and tasks; leases, fencing, the inbox and following a room by seq.

Every test runs on both backends (the `backend` fixture, tests/conftest.py); reopening is a new connection.
"""
from __future__ import annotations

import sqlite3
from types import SimpleNamespace

import msgspec
import pytest
import trio

from orchestrator.core.types import (Draft, ImageBlock, TextBlock, ThinkingBlock, ToolCallBlock,
                                     ToolResultBlock)
from orchestrator.store import records
from orchestrator.store.db import Store, TaskRecord
from orchestrator.store.lease import Fenced


@pytest.fixture
async def store(backend):
    s = await backend.open()
    yield s
    await s.close()


def say(text: str, author: str = "user") -> Draft:
    return Draft(author=author, kind="user", blocks=[TextBlock(text)], visible_to=["*"])


def increasing(values: list) -> bool:
    return all(a < b for a, b in zip(values, values[1:]))


async def test_seq_and_ts_increase_across_reopen(backend):
    store = await backend.open()
    room = await store.create_room("r")
    first = [await store.append(room.id, say(str(i))) for i in range(3)]
    await store.close()

    store = await backend.open()
    second = await store.append_many(room.id, [say("3"), say("4")])
    loaded = await store.load(room.id)
    await store.close()
    assert [m.seq for m in loaded] == [1, 2, 3, 4, 5]
    assert loaded == first + second
    assert increasing([m.ts for m in loaded])
    assert len({m.id for m in loaded}) == 5


async def test_seq_is_not_reused_after_healing_deletes_the_newest(backend):
    store = await backend.open()
    room = await store.create_room("r")
    await store.append(room.id, say("hello"))
    orphan = Draft(author="a", kind="tool_result", visible_to=["a"],
                   blocks=[ToolResultBlock(call_id="nope", name="x", content="?")])
    newest = await store.append(room.id, orphan)
    assert [m.seq for m in await store.load(room.id)] == [1]
    await store.close()

    store = await backend.open()
    after = await store.append(room.id, say("again"))
    await store.close()
    assert after.seq == newest.seq + 1 and after.ts > newest.ts


async def test_ts_increases_when_the_clock_stalls_or_steps_back(store, monkeypatch):
    room = await store.create_room("r")
    clock = iter([1000.0, 1000.0, 999.0, 1000.5])
    monkeypatch.setattr(records, "time", SimpleNamespace(time=lambda: next(clock)))  # both stores stamp there
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


async def test_every_field_round_trips(backend):
    draft = Draft(author="coder", kind="tool_call", visible_to=["coder", "commander"],
                  provider="anthropic", model="claude-x", replaces=["m1", "m2"], blocks=[
                      ThinkingBlock("hmm", signature="sig"), TextBlock("Let me look."),
                      ImageBlock(media_type="image/png", data="aGk="),
                      ToolCallBlock(id="c1", name="read", input={"path": "a.txt", "n": [1, 2]})])
    answer = Draft(author="coder", kind="tool_result", visible_to=["coder"], blocks=[
        ToolResultBlock(call_id="c1", name="read", content="text", images=[ImageBlock("image/png", "eA==")])])
    store = await backend.open()
    room = await store.create_room("r")
    written = await store.append_many(room.id, [draft, answer])
    await store.close()
    store = await backend.open()
    assert await store.load(room.id) == written
    await store.close()
    assert msgspec.structs.asdict(written[0]).items() >= msgspec.structs.asdict(draft).items()


async def test_floor_and_meta_persist(backend):
    store = await backend.open()
    room = await store.create_room("r", meta={"members": ["coder"]})
    assert room.floor == "commander"
    await store.set_floor(room.id, "coder")
    await store.set_meta(room.id, {"members": ["coder", "tutor"]})
    with pytest.raises(KeyError):
        await store.set_floor("missing", "coder")
    await store.close()
    store = await backend.open()
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


# --- following a room by seq -------------------------------------------------------------------------

async def test_a_follower_reads_what_came_after_its_last_seq(backend):
    writer, follower = await backend.open(), await backend.open()
    try:
        room = await writer.create_room("r")
        await writer.append_many(room.id, [say("1"), say("2")])
        seen = await follower.read(room.id)
        await writer.append(room.id, say("3"))
        more = await follower.read(room.id, after=seen[-1].seq)
        assert [m.text for m in seen] == ["1", "2"] and [(m.seq, m.text) for m in more] == [(3, "3")]
        assert await follower.read(room.id, after=3) == []
    finally:
        await writer.close()
        await follower.close()


# --- leases and fencing ----------------------------------------------------------------------------

async def test_one_host_holds_a_room_until_its_lease_runs_out(backend):
    a, b = await backend.open(), await backend.open()
    try:
        room = await a.create_room("r")
        first = await a.acquire(room.id, "host-a", 30)
        assert first is not None and first.epoch == 1 and first.host == "host-a"
        assert await b.acquire(room.id, "host-b", 30) is None
        renewed = await a.renew(first, 0.3)  # shortened: it runs out soon
        assert renewed is not None and renewed.epoch == 1 and renewed.expires < first.expires
        await trio.sleep(0.5)
        taken = await b.acquire(room.id, "host-b", 30)
        assert taken is not None and taken.epoch == 2
        assert await a.renew(first, 0.5) is None  # the old owner learns it lost the room
        assert [(x.room, x.host, x.epoch) for x in await a.leases()] == [(room.id, "host-b", 2)]
        assert await a.leases(room.id) == await a.leases() and await a.leases("no-such-room") == []
        with pytest.raises(KeyError):
            await a.acquire("missing", "host-a", 1)
    finally:
        await a.close()
        await b.close()


async def test_a_released_room_can_be_taken_at_once(backend):
    a, b = await backend.open(), await backend.open()
    try:
        room = await a.create_room("r")
        lease = await a.acquire(room.id, "host-a", 60)
        await a.release(lease)
        assert (await b.acquire(room.id, "host-b", 60)).epoch == 2
    finally:
        await a.close()
        await b.close()


async def test_every_write_by_an_old_epoch_is_refused_after_a_takeover(backend):
    old, new = await backend.open(), await backend.open()
    try:
        room = await old.create_room("r")
        await old.acquire(room.id, "old", 0.2)
        await old.append(room.id, say("before"))
        await trio.sleep(0.3)
        await new.acquire(room.id, "new", 30)
        for write in (lambda: old.append(room.id, say("late")),
                      lambda: old.append_many(room.id, [say("a"), say("b")]),
                      lambda: old.set_floor(room.id, "coder"),
                      lambda: old.set_meta(room.id, {"x": 1}),
                      lambda: old.put_task(TaskRecord(id="t", room=room.id, agent="a", kind="worker",
                                                      status="running", task="?")),
                      lambda: old.load(room.id)):
            with pytest.raises(Fenced) as refused:
                await write()
            assert (refused.value.epoch, refused.value.current) == (1, 2)
        await new.append(room.id, say("after"))
        assert [m.text for m in await new.load(room.id)] == ["before", "after"]
        assert (await new.room(room.id)).floor == "commander" and await new.tasks(room.id) == []
    finally:
        await old.close()
        await new.close()


async def test_a_lapsed_lease_nobody_took_still_writes(backend):
    store = await backend.open()
    try:
        room = await store.create_room("r")
        await store.acquire(room.id, "h", 0.01)
        await trio.sleep(0.05)
        assert (await store.append(room.id, say("still mine"))).seq == 1
    finally:
        await store.close()


async def test_racing_hosts_get_one_owner_per_room(backend):
    stores = [await backend.open() for _ in range(3)]
    try:
        rooms = [await stores[0].create_room(f"r{i}") for i in range(10)]
        won: list[tuple[str, str]] = []

        async def grab(store, host: str) -> None:
            for room in rooms:
                if await store.acquire(room.id, host, 30):
                    won.append((room.id, host))

        async with trio.open_nursery() as nursery:
            for i, s in enumerate(stores):
                nursery.start_soon(grab, s, f"h{i}")
        assert sorted(r for r, _ in won) == sorted(r.id for r in rooms)
    finally:
        for s in stores:
            await s.close()


# --- the inbox --------------------------------------------------------------------------------------

async def test_a_delivered_line_leaves_the_inbox_in_the_appends_transaction(backend):
    poster, owner = await backend.open(), await backend.open()
    try:
        room, other = await owner.create_room("r"), await owner.create_room("o")
        sent = [await poster.send(room.id, f"line {i}") for i in range(3)]
        await poster.send(other.id, "elsewhere")
        waiting = await owner.inbox([room.id])
        assert [(x.id, x.text) for x in waiting] == [(x.id, x.text) for x in sent]
        owner.deliver(waiting[0])
        await owner.append(room.id, Draft(author="a", kind="text", blocks=[TextBlock("not it")], visible_to=["*"]))
        assert len(await owner.inbox([room.id])) == 3  # only a user line delivers
        await owner.append(room.id, say(waiting[0].text))
        assert [x.text for x in await owner.inbox([room.id])] == ["line 1", "line 2"]
        assert len(await owner.inbox()) == 3
    finally:
        await poster.close()
        await owner.close()


async def test_a_fenced_delivery_leaves_the_line_in_the_inbox(backend):
    old, new = await backend.open(), await backend.open()
    try:
        room = await old.create_room("r")
        await old.acquire(room.id, "old", 0.1)
        line = await new.send(room.id, "hello")
        await trio.sleep(0.2)
        await new.acquire(room.id, "new", 30)
        old.deliver(line)
        with pytest.raises(Fenced):
            await old.append(room.id, say(line.text))
        assert [x.id for x in await new.inbox([room.id])] == [line.id]
    finally:
        await old.close()
        await new.close()


async def test_waiting_for_the_inbox_returns_when_a_line_arrives(backend):
    owner, poster = await backend.open(), await backend.open()
    try:
        room = await owner.create_room("r")
        await owner.wait_inbox(0.01)  # the PostgreSQL store starts listening here
        async with trio.open_nursery() as nursery:
            async def post_later() -> None:
                await trio.sleep(0.2)
                await poster.send(room.id, "wake up")
            nursery.start_soon(post_later)
            with trio.fail_after(5):  # a host's loop: wait, look, wait again
                while not await owner.inbox([room.id]):
                    await owner.wait_inbox(10)
        assert [x.text for x in await owner.inbox([room.id])] == ["wake up"]
    finally:
        await owner.close()
        await poster.close()


async def test_memory_lives_in_either_store(backend):
    from orchestrator.memory.notes import Memory
    store = await backend.open()
    try:
        memory = Memory(store)
        await memory.add("notes", "The build uses make.")
        await memory.add("profile", "Prefers short answers.")
        await memory.replace("notes", "make", "make test")
        assert await memory.entries("notes") == ["The build uses make test."]
        assert "Prefers short answers." in await memory.snapshot()
        await memory.remove("profile", 1)
        assert await Memory(store).entries("profile") == []
    finally:
        await store.close()


async def test_a_host_renews_all_its_leases_at_once(backend):
    a, b = await backend.open(), await backend.open()
    try:
        rooms = [await a.create_room(f"r{i}") for i in range(3)]
        leases = [await a.acquire(r.id, "a", 0.2) for r in rooms]
        await trio.sleep(0.3)
        await b.acquire(rooms[1].id, "b", 30)
        renewed = await a.renew_all(leases, 30)
        assert [x is not None for x in renewed] == [True, False, True]
        assert renewed[0].expires > leases[0].expires and await a.renew_all([], 1) == []
        assert await b.acquire(rooms[0].id, "b", 30) is None
    finally:
        await a.close()
        await b.close()


async def test_a_reply_records_what_it_answers_in_its_own_row(backend):
    store = await backend.open()
    try:
        room = await store.create_room("r")
        line = await store.append(room.id, say("first"))
        reply = Draft(author="commander", kind="text", blocks=[TextBlock("ok")], visible_to=["*"])
        await store.append(room.id, say("second"))
        await store.append(room.id, reply, answers=line.seq)  # written after the second line, answering the first
        await store.append(room.id, msgspec.structs.replace(reply, author="coder"), answers=2)
        await store.append(room.id, msgspec.structs.replace(reply, kind="notice"))  # answers nothing
        assert await store.answered(room.id) == {"commander": line.seq, "coder": 2}
        assert await store.answered((await store.create_room("empty")).id) == {}
    finally:
        await store.close()
    again = await backend.open()  # it is stored, not kept by this connection
    try:
        assert await again.answered(room.id) == {"commander": 1, "coder": 2}
    finally:
        await again.close()


async def test_a_request_leaves_the_inbox_when_dropped(backend):
    store = await backend.open()
    try:
        room = await store.create_room("r")
        asked = await store.send(room.id, "stopped from the web page", author="control:stop")
        kept = await store.send(room.id, "a line")
        await store.drop(asked.id)
        assert [x.id for x in await store.inbox()] == [kept.id]
        await store.append(room.id, say("after"))  # the store still writes: the drop's transaction ended
    finally:
        await store.close()
