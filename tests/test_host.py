"""RoomHost: many rooms over one store in one process, opened on use and closed once idle."""
from __future__ import annotations

import itertools

import pytest
import trio

from orchestrator.core.errors import InputError
from orchestrator.core.types import StreamEnd, TextDelta, ToolCallDone, ToolResultBlock, Usage
from orchestrator.room.host import RoomHost
from orchestrator.room.room import COMMANDER
from orchestrator.store.db import Store
from orchestrator.team.schema import AgentDef, Team


class Relay:
    """Commander dispatches every user line to `a`, then answers; each call waits `latency` s."""

    id = "relay"

    def __init__(self, latency: float = 0.0):
        self.latency, self.calls, self._ids = latency, 0, itertools.count()

    async def validate_auth(self) -> None:
        return None

    async def stream(self, request):
        self.calls += 1
        await trio.sleep(self.latency)
        last = request.messages[-1].blocks if request.messages else []
        if request.agent == COMMANDER and not any(isinstance(b, ToolResultBlock) for b in last):
            yield ToolCallDone(f"call_{next(self._ids)}", "dispatch_to", {"agent": "a", "task": "do it"})
            yield StreamEnd("tool_use", Usage())
            return
        yield TextDelta(f"{request.agent} done")
        yield StreamEnd("end_turn", Usage())


def _team() -> Team:
    return Team(commander=AgentDef(name=COMMANDER, model="relay"),
                agents=[AgentDef(name="a", description="worker a", model="relay")])


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "host.db")
    yield s
    await s.close()


async def test_a_room_closes_when_idle_and_reopens_with_its_history(store, tmp_path):
    model = Relay()
    async with RoomHost.open(store, lambda _m: (model, "relay"), team=_team(), idle_close=0.2) as host:
        room, _ = await host.ask(None, "first line", workspace=tmp_path)
        rid = room.id
        assert rid in host.rooms
        with trio.fail_after(5):
            while rid in host.rooms:
                await trio.sleep(0.05)
        room2, _ = await host.ask(rid, "second line")
        assert room2 is not room and room2.id == rid
        seen = [m.text for m in room2.members[COMMANDER].partition.messages]
        assert "first line" in seen and "second line" in seen
        assert len(await store.load(rid)) == 12  # two lines, six messages each


async def test_a_user_keeps_the_room_open(store, tmp_path):
    model = Relay()
    async with RoomHost.open(store, lambda _m: (model, "relay"), team=_team(), idle_close=0.05) as host:
        async with host.room(None, workspace=tmp_path) as room:
            await trio.sleep(0.3)
            assert room.id in host.rooms
            await room.post("still here")
            await room.idle()
        with trio.fail_after(5):
            while room.id in host.rooms:
                await trio.sleep(0.02)


async def test_users_coming_and_going_count_the_idle_time_again_and_a_lowered_idle_close_applies(store, tmp_path):
    model = Relay()
    async with RoomHost.open(store, lambda _m: (model, "relay"), team=_team(), idle_close=1.0) as host:
        room, _ = await host.ask(None, "first line", workspace=tmp_path)
        for _ in range(6):  # 1.2 s in all, never 1 s without a user
            await trio.sleep(0.2)
            async with host.room(room.id):
                pass
        assert room.id in host.rooms
        host.idle_close = 0
        async with host.room(room.id):
            pass
        with trio.fail_after(0.5):  # at once, not when the count it had started would have ended
            while room.id in host.rooms:
                await trio.sleep(0.01)


async def test_users_of_a_closed_room_share_one_reopened_room(store, tmp_path):
    model = Relay()
    async with RoomHost.open(store, lambda _m: (model, "relay"), team=_team(), idle_close=0) as host:
        room, _ = await host.ask(None, "hello", workspace=tmp_path)
        with trio.fail_after(5):
            while host.rooms:
                await trio.sleep(0.01)
        got: list = []

        async def use() -> None:
            async with host.room(room.id) as r:
                got.append(r)
                await trio.sleep(0.1)

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(use)
        assert len({id(r) for r in got}) == 1 and got[0] is not room


async def test_rooms_work_side_by_side(store, tmp_path):
    """Twenty rooms, three model calls of 0.2 s per line: together in about one line's time."""
    model = Relay(latency=0.2)
    async with RoomHost.open(store, lambda _m: (model, "relay"), team=_team()) as host:
        ids = []
        for i in range(20):
            async with host.room(None, name=f"r{i}", workspace=tmp_path) as room:
                ids.append(room.id)
        t0 = trio.current_time()
        async with trio.open_nursery() as nursery:
            for rid in ids:
                nursery.start_soon(host.ask, rid, "go")
        assert trio.current_time() - t0 < 0.6 * 20 / 4  # a quarter of the serial time, at most
        assert model.calls == 60


async def test_unknown_room_and_no_team_are_input_errors(store, tmp_path):
    async with RoomHost.open(store, lambda _m: (Relay(), "relay")) as host:
        with pytest.raises(InputError, match="no room"):
            await host.ask("nope", "hi")
        with pytest.raises(InputError, match="needs a team"):
            await host.ask(None, "hi")


async def test_hooks_and_a_resolver_per_room(store, tmp_path):
    models: list[Relay] = []
    opened, closed = [], []

    def resolver():
        models.append(Relay())
        return lambda _m: (models[-1], "relay")

    async with RoomHost.open(store, None, team=_team(), resolver=resolver, idle_close=None,
                             on_open=opened.append, on_close=closed.append) as host:
        first, _ = await host.ask(None, "one", workspace=tmp_path)
        second, _ = await host.ask(None, "two", workspace=tmp_path)
        await trio.sleep(0.1)
        assert set(host.rooms) == {first.id, second.id}  # idle_close=None: kept open
        assert [m.calls for m in models] == [3, 3] and opened == [first, second] and not closed
    assert set(closed) == {first, second}


async def test_a_shell_job_keeps_an_idle_room_open_until_it_ends(store, tmp_path):
    async with RoomHost.open(store, lambda _m: (Relay(), "relay"), team=_team(), idle_close=0.05) as host:
        ended = trio.Event()

        async def job() -> None:
            await trio.sleep(0.5)
            ended.set()

        async with host.room(None, workspace=tmp_path) as room:
            room.spawn_job(job)
        await trio.sleep(0.3)
        assert room.id in host.rooms and not ended.is_set()
        with trio.fail_after(5):
            while room.id in host.rooms:
                await trio.sleep(0.05)
        assert ended.is_set()  # it ran to its end: the room was not closed under it
