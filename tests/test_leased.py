"""A host taking a room over (room/leased.py) answers exactly the lines the dead owner left unanswered: each
reply records the newest seq its author had read, so a reply to an earlier line that was stored after a later
line does not make the later one look answered. On SQLite and PostgreSQL.

The dead owner's rows are written straight to the store, as a host killed at that point would have left them.
"""
from __future__ import annotations

import sqlite3
from collections import Counter

import pytest
import trio

from orchestrator.core.types import Draft, TextBlock
from orchestrator.room.leased import LeasedRooms
from orchestrator.room.room import Room
from orchestrator.team.schema import AgentDef, Team
from tests.hostproc import TOKEN, Echo

TEAM = Team(commander=AgentDef(name="commander", model="echo", instructions="Answer every line."),
            agents=[AgentDef(name="coder", model="echo", description="writes code")])


def line(text: str, *to: str) -> Draft:
    return Draft(author="user", kind="user", blocks=[TextBlock(text)], visible_to=["user", *to])


def reply(author: str, text: str, *to: str) -> Draft:
    return Draft(author=author, kind="text", blocks=[TextBlock(text)], visible_to=[author, "user", *to])


async def left_by_a_dead_host(backend, tmp_path, rows: list[tuple[Draft, int | None]]) -> str:
    """A room whose owner stored `rows` (each with the seq it answers) and died: its lease has run out."""
    dead = await backend.open()
    try:
        room = await dead.create_room("r", meta={"workspace": str(tmp_path)})
        await dead.acquire(room.id, "dead", 0.05)
        stored = []
        for draft, answers in rows:
            stored.append(await dead.append(room.id, draft, answers=None if answers is None else stored[answers].seq))
        return room.id
    finally:
        await dead.close()


async def taken_over(backend, room_id: str) -> tuple[Counter, list[str]]:
    """Another host takes the room (its takeover scan), carries on and goes idle; then a new line is posted
    and answered. Each token's answers by any member, and the texts the room got after the takeover."""
    store = await backend.open()
    echo = Echo(0.01)
    try:
        before = len(await store.read(room_id))
        async with LeasedRooms.open(store, "alive", lambda _: (echo, "echo"), team=TEAM, seconds=0.4) as leased:
            with trio.fail_after(20):
                while room_id not in leased.rooms.rooms:
                    await trio.sleep(0.02)
                async with leased.rooms.room(room_id) as room:
                    await room.idle()
                    assert (await leased.post(room_id, "and L:new")).via == "here"
                    await room.idle()
        answered: Counter = Counter()
        messages = await store.read(room_id)
        for m in messages:
            if m.kind == "text":
                answered.update(TOKEN.findall(m.text))
        return answered, [f"{m.author}: {m.text}" for m in messages[before:] if m.kind == "text"]
    finally:
        await store.close()


async def test_a_reply_stored_after_a_later_line_does_not_answer_it(backend, tmp_path):
    """The race of the multi-host test: L:b arrived while the reply to L:a was being written, the reply was
    stored after L:b, and the host died before its next model call. Only L:b is answered again."""
    room = await left_by_a_dead_host(backend, tmp_path, [
        (line("look at L:a", "commander"), None), (line("and L:b", "commander"), None),
        (reply("commander", "answered L:a"), 0)])
    answered, after = await taken_over(backend, room)
    assert answered == Counter({"L:a": 1, "L:b": 1, "L:new": 1}), after
    assert after == ["commander: answered L:b", "commander: answered L:new"]


async def test_lines_already_answered_are_not_answered_again(backend, tmp_path):
    room = await left_by_a_dead_host(backend, tmp_path, [
        (line("look at L:a", "commander"), None), (line("and L:b", "commander"), None),
        (reply("commander", "answered L:a"), 0), (reply("commander", "answered L:b"), 1)])
    answered, after = await taken_over(backend, room)
    assert answered == Counter({"L:a": 1, "L:b": 1, "L:new": 1})
    assert after == ["commander: answered L:new"]  # no turn at the takeover


async def test_each_member_answers_the_lines_that_went_to_it(backend, tmp_path):
    """A line to @coder is the coder's to answer, whatever the commander said after it; a line to an unknown
    @name went to nobody and wakes nobody."""
    room = await left_by_a_dead_host(backend, tmp_path, [
        (line("@coder see L:c", "coder", "commander"), None), (line("hi L:a", "commander"), None),
        (line("@nobody L:x"), None), (reply("commander", "answered L:c L:a"), 1)])
    answered, after = await taken_over(backend, room)
    assert answered == Counter({"L:c": 2, "L:a": 1, "L:new": 1}), after  # the commander saw L:c too
    assert after == ["coder: answered L:c", "commander: answered L:new"]


@pytest.mark.parametrize("cut", ["before the reply", "after a tool call"])
async def test_a_turn_cut_by_the_death_is_answered_once(backend, tmp_path, cut):
    """The host died with the line stored and no reply, or after the model's tool call (healed on open)."""
    from orchestrator.core.types import ToolCallBlock
    rows: list[tuple[Draft, int | None]] = [(line("look at L:a", "commander"), None)]
    if cut == "after a tool call":
        rows.append((Draft(author="commander", kind="tool_call", visible_to=["commander"],
                           blocks=[ToolCallBlock("c1", "read_file", {"path": "x"})]), None))
    room = await left_by_a_dead_host(backend, tmp_path, rows)
    answered, after = await taken_over(backend, room)
    assert answered == Counter({"L:a": 1, "L:new": 1})
    assert after == ["commander: answered L:a", "commander: answered L:new"]


async def test_each_reply_records_the_newest_seq_its_model_call_held(backend, tmp_path):
    """The live side of it: L:b arrives while the model answers L:a; the first reply records L:a's seq (it
    was stored after L:b but never saw it), the reply the same turn then gives records everything before it."""
    store = await backend.open()
    echo = Echo(0.3)
    try:
        record = await store.create_room("r", meta={"workspace": str(tmp_path)})
        async with Room.open(store, record.id, lambda _: (echo, "echo"), team=TEAM) as room:
            a = await room.post("look at L:a")
            await trio.sleep(0.1)  # the model is thinking about L:a
            b = await room.post("and L:b")
            await room.idle()
        replies = [m for m in await store.read(record.id) if m.kind == "text"]
        assert [m.text for m in replies] == ["answered L:a", "answered L:b"]
        assert replies[0].seq > b.seq
        assert _answers(backend, record.id) == {replies[0].seq: a.seq, replies[1].seq: replies[0].seq}
        assert await store.answered(record.id) == {"commander": replies[0].seq}
    finally:
        await store.close()


def _answers(backend, room_id: str) -> dict[int, int]:
    query = "SELECT seq, answers FROM messages WHERE room = '{}' AND answers IS NOT NULL".format(room_id)
    if backend.kind == "postgres":
        import psycopg
        with psycopg.connect(backend.target) as conn:
            return dict(conn.execute(query).fetchall())
    conn = sqlite3.connect(backend.target)
    try:
        return dict(conn.execute(query).fetchall())
    finally:
        conn.close()


class HandsOff:
    """The commander's model: it hands the floor to the coder, whatever it is asked."""

    id = "handoff"

    async def validate_auth(self) -> None:
        return None

    async def stream(self, request):
        from orchestrator.core.types import StreamEnd, ToolCallDone, Usage
        yield ToolCallDone("h1", "hand_off_to", {"agent": "coder", "note": "the user wants code"})
        yield StreamEnd("tool_use", Usage())


class Gated(Echo):
    """The echo model, answering only once `open` is set: a floor owner that is still thinking when its host
    dies, however slowly the machine runs."""

    def __init__(self) -> None:
        super().__init__(0.01)
        self.open = trio.Event()

    async def stream(self, request):
        await self.open.wait()
        async for event in super().stream(request):
            yield event


HANDING = Team(commander=AgentDef(name="commander", model="handoff", instructions="Hand off."),
               agents=[AgentDef(name="coder", model="echo", description="writes code", interactive=True)])


async def test_a_handoff_answers_the_line_and_the_floor_owner_owes_the_note(backend, tmp_path):
    """The commander's turn ends with the handoff's result, which records the line it answered; a host that
    dies before the floor owner replied leaves the note unanswered, and the next owner wakes the floor owner
    (not the commander) for it."""
    store = await backend.open()
    echo, hands = Gated(), HandsOff()  # the coder thinks until the first host is gone
    try:
        record = await store.create_room("r", meta={"workspace": str(tmp_path)})
        await store.acquire(record.id, "dead", 0.05)
        resolve = {"echo": (echo, "echo"), "handoff": (hands, "handoff")}.get
        async with Room.open(store, record.id, resolve, team=HANDING) as room:
            line = await room.post("build L:h")
            # The floor moves inside the handoff tool, before its note and result are stored: the death comes
            # once the commander's turn has ended, with the coder's turn under way.
            with trio.fail_after(20):
                await room._tasks.until(lambda: not room.members["commander"].active)
            assert room.floor == "coder" and room.members["coder"].active
            room._tasks.cancel_all()  # the host dies: the coder never answers
        assert (await store.answered(record.id))["commander"] >= line.seq
        assert not any(m.author == "coder" and m.kind == "text" for m in await store.read(record.id))
    finally:
        await store.close()
    store = await backend.open()
    try:
        echo.open.set()
        async with LeasedRooms.open(store, "alive", resolve, team=HANDING, seconds=0.4) as leased:
            with trio.fail_after(20):
                while record.id not in leased.rooms.rooms:
                    await trio.sleep(0.02)
                async with leased.rooms.room(record.id) as room:
                    await room.idle()
        texts = [(m.author, m.text) for m in await store.read(record.id) if m.kind == "text"]
        assert texts == [("coder", "answered L:h")]
    finally:
        await store.close()


async def test_an_idle_room_closes_and_gives_its_lease_up(backend, tmp_path):
    """A room that sat idle closes and releases its lease (expires 0): no host takes it over for nothing, and
    the next line, through any host, takes it at once."""
    a, b = await backend.open(), await backend.open()
    echo = Echo(0.01)
    closed = trio.Event()
    scans = _counting_scans(b)
    try:
        record = await a.create_room("r", meta={"workspace": str(tmp_path)})
        # A room leaves `rooms` as it starts closing; its lease is given up after it has closed (on_close).
        async with LeasedRooms.open(a, "a", lambda _: (echo, "echo"), team=TEAM, seconds=0.4, idle_close=0.2,
                                    on_close=lambda room: closed.set()) as first, \
                LeasedRooms.open(b, "b", lambda _: (echo, "echo"), team=TEAM, seconds=0.4) as second:
            assert (await first.post(record.id, "hello L:1")).via == "here"
            with trio.fail_after(20):
                await closed.wait()
            assert record.id not in first.rooms.rooms
            [lease] = await a.leases()
            assert (lease.host, lease.expires) == ("a", 0)
            with trio.fail_after(20):
                await scans(3)  # several takeover scans of b since the lease was given up
            assert record.id not in second.rooms.rooms and not second._taking
            assert [(x.host, x.expires) for x in await a.leases()] == [("a", 0)]
            posted = await second.post(record.id, "again L:2")
            assert posted.via == "here" and [(x.host, x.epoch) for x in await b.leases()] == [("b", 2)]
            async with second.rooms.room(record.id) as room:
                await room.idle()
        texts = [m.text for m in await b.read(record.id) if m.kind == "text"]
        assert texts == ["answered L:1", "answered L:2"]
    finally:
        await a.close()
        await b.close()


def _counting_scans(store):  # noqa: ANN202 (an awaitable function)
    """Counts the reads of `store.leases()`: each takeover scan of a LeasedRooms over it makes one. The function
    it returns waits until `n` more reads have returned."""
    read, done, lot = store.leases, [0], trio.lowlevel.ParkingLot()

    async def leases():  # noqa: ANN202 (the store's)
        try:
            return await read()
        finally:
            done[0] += 1
            lot.unpark_all()

    async def scans(n: int) -> None:
        until = done[0] + n
        while done[0] < until:
            await lot.park()

    store.leases = leases
    return scans


async def test_each_message_of_a_transaction_records_what_it_answers(backend, tmp_path):
    """Messages the bus commits first in another's transaction (room/bus.py, Bus.hold) keep their own answers: a
    held report answers the line its author read, the call held before it answers nothing, and the message that
    carried them answers what it answers."""
    store = await backend.open()
    try:
        room = await store.create_room("r", meta={"workspace": str(tmp_path)})
        first = await store.append(room.id, line("look at L:a", "commander", "coder"))
        second = await store.append(room.id, line("and L:b", "commander", "coder"))
        await store.append_many(room.id, [reply("commander", "a call"), reply("coder", "answered L:a"),
                                          reply("commander", "answered L:b")], answers=[None, first.seq, second.seq])
        assert await store.answered(room.id) == {"coder": first.seq, "commander": second.seq}
        await store.append_many(room.id, [reply("coder", "no answer"), reply("commander", "none either")])
        assert await store.answered(room.id) == {"coder": first.seq, "commander": second.seq}
    finally:
        await store.close()
