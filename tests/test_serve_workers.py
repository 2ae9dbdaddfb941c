"""`orchestrator serve --workers 2` on 127.0.0.1 over one database (SQLite, then PostgreSQL): both workers
serve the one port; a line posted to either reaches the room's owner; a room's event stream and state show
it from either worker as the worker running it has it (test_serve_any_worker.py has the rest); a SIGKILLed
worker's rooms keep working once their lease runs out, and the supervisor replaces it; SIGTERM stops every
worker."""
from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed: pip install -e '.[serve]'")
pytest.importorskip("hypercorn", reason="the serve extra is not installed: pip install -e '.[serve]'")

import httpx  # noqa: E402
import trio  # noqa: E402

from tests.serving import ROOT, Server, Stream, said, start_server  # noqa: E402

FLAGSHIP = str(ROOT / "scenarios" / "flagship.yaml")
LEASE = 2.0
FIRST, FIRST_ANSWER = "Can you check app/config.py? The port test fails.", "both names point at one dict"
SECOND, SECOND_ANSWER = "So I should copy it first?", "copy"


def fresh() -> httpx.AsyncClient:
    """A client that opens a new connection for every request: each may land on either worker."""
    return httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0), timeout=30)


async def on_worker(server: Server, room: str, worker: str, last: str | None = None):
    """An event stream of `room` served by `worker` (new connections until that worker takes one)."""
    for _ in range(200):
        client = fresh()
        headers = server.auth | ({"Last-Event-ID": last} if last else {})
        response = await client.send(client.build_request("GET", f"{server.base}/rooms/{room}/events",
                                                          headers=headers), stream=True)
        assert response.status_code == 200, await response.aread()
        if response.headers["x-orchestrator-worker"] == worker:
            return client, response
        await response.aclose()
        await client.aclose()
    raise AssertionError(f"worker {worker} never took a connection")


async def post_via(server: Server, worker: str, room: str, text: str) -> dict:
    return await send_via(server, worker, f"/rooms/{room}/lines", {"text": text})


async def send_via(server: Server, worker: str, path: str, body: dict | None = None) -> dict:
    """POST through `worker`: one kept-alive connection, tried until that worker takes it."""
    for _ in range(200):
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=1), timeout=30) as client:
            probe = await client.get(f"{server.base}/rooms", headers=server.auth)
            if probe.headers["x-orchestrator-worker"] != worker:
                continue
            r = await client.post(f"{server.base}{path}", json=body or {}, headers=server.auth)
            assert r.status_code == 202 and r.headers["x-orchestrator-worker"] == worker, r.text
            return r.json()
    raise AssertionError(f"worker {worker} never took a connection")


async def answered(server: Server, room: str, worker: str, text: str) -> None:
    client, response = await on_worker(server, room, worker)
    try:
        await Stream(response).until(said("tutor", text), timeout=60)
    finally:
        await response.aclose()
        await client.aclose()


async def post(server: Server, room: str, text: str) -> tuple[dict, str]:
    async with fresh() as client:
        r = await client.post(f"{server.base}/rooms/{room}/lines", json={"text": text}, headers=server.auth)
        assert r.status_code == 202, r.text
        return r.json(), r.headers["x-orchestrator-worker"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def leases(server: Server) -> dict[str, str]:
    """Room -> the pid of the worker holding it, as the store says (through the room list's owner)."""
    return {x.room: x.host.rsplit(":", 1)[1] for x in await server.store.leases() if x.expires > 0}


@pytest.fixture(params=["sqlite", "postgres"])
def database(request, tmp_path):
    if request.param == "sqlite":
        return tmp_path / "serve.db"
    return request.getfixturevalue("pg_server").fresh(f"serve_{request.node.name[-30:].lower().strip('[]')}")


@asynccontextmanager
async def serving(db, tmp_path, scenario: str = FLAGSHIP) -> AsyncIterator[Server]:
    from orchestrator.store.backends import open_store
    server = start_server(tmp_path, "--workers", "2", "--lease", str(LEASE), "--scripted", scenario, db=db)
    server.store = await open_store(db)
    try:
        yield server
    finally:
        await server.store.close()
        server.stop()


@pytest.fixture
async def served(database, tmp_path):
    async with serving(database, tmp_path) as server:
        yield server


async def test_two_workers_share_the_port_and_the_rooms(served, tmp_path):
    server = served
    rooms = []
    workers: set[str] = set()
    async with fresh() as client:
        with trio.fail_after(60):
            while len(workers) < 2 or len(rooms) < 4:  # rooms made through both workers
                r = await client.post(f"{server.base}/rooms", json={"name": f"w{len(rooms)}"}, headers=server.auth)
                assert r.status_code == 201, r.text
                rooms.append(r.json()["id"])
                workers.add(r.headers["x-orchestrator-worker"])
    owners = await leases(server)
    assert {owners[r] for r in rooms} == workers  # each room runs where it was made, and both workers run some

    # Each room's stream from the worker that does NOT run it (it follows the store by seq) and from its owner;
    # the line is posted through whichever worker the connection lands on.
    async with trio.open_nursery() as nursery:
        for room in rooms:
            async def watch(room: str = room) -> None:
                other = next(w for w in workers if w != owners[room])
                clients = [await on_worker(server, room, w) for w in (other, owners[room])]
                try:
                    await post(server, room, FIRST)
                    for _, response in clients:
                        await Stream(response).until(said("tutor", FIRST_ANSWER), timeout=60)
                finally:
                    for client, response in clients:
                        await response.aclose()
                        await client.aclose()
            nursery.start_soon(watch)

    # A room's state from the worker that does not run it: asked of the worker that does (the page is a shell
    # with none).
    for room in rooms[:2]:
        other = next(w for w in workers if w != owners[room])
        for _ in range(200):  # a new connection each time, until the other worker takes one
            async with httpx.AsyncClient(limits=httpx.Limits(max_connections=1), timeout=30) as client:
                page = await client.get(f"{server.base}/rooms/{room}", headers=server.auth)
                if page.headers["x-orchestrator-worker"] == other:
                    state = await client.get(f"{server.base}/rooms/{room}/state", headers=server.auth)
                    break
        assert page.status_code == 200 and page.headers["x-orchestrator-worker"] == other
        assert room not in page.text and 'id="room-name"></h1>' in page.text
        assert state.headers["x-orchestrator-worker"] == other, "one kept-alive connection, one worker"
        assert state.headers["x-orchestrator-room-worker"] == owners[room]
        assert "elsewhere" not in state.json() and state.json()["floor"] == "tutor" and not state.json()["busy"]
        assert state.json()["id"] == room and state.json()["name"] == f"w{rooms.index(room)}"
        assert {m["name"] for m in state.json()["members"]} >= {"commander", "tutor"}

    # A line posted to the worker that does not run the room goes through the inbox and is answered.
    victim_rooms = [r for r in rooms if owners[r] == owners[rooms[0]]]
    victim = owners[rooms[0]]
    survivor = next(w for w in workers if w != victim)
    other_room = next(r for r in rooms if owners[r] == survivor)
    reply = await post_via(server, victim, other_room, SECOND)
    assert "inbox" in reply, reply
    await answered(server, other_room, survivor, SECOND_ANSWER)

    # SIGKILL a worker: after the lease runs out, the other answers a line posted (via the inbox) to its room,
    # and every room it ran moves.
    os.kill(int(victim), signal.SIGKILL)
    reply = await post_via(server, survivor, rooms[0], SECOND)
    await answered(server, rooms[0], survivor, SECOND_ANSWER)
    with trio.fail_after(3 * LEASE + 10):
        while True:
            owners = await leases(server)
            if all(owners.get(r) not in (None, victim) for r in victim_rooms):
                break
            await trio.sleep(0.1)

    # The supervisor replaced the dead worker; SIGTERM stops them all.
    with trio.fail_after(30):
        while "was killed by signal 9" not in (tmp_path / "serve.err").read_text():
            await trio.sleep(0.1)
    pids = {int(p) for p in (await leases(server)).values()}
    assert server.stop() == 0, (tmp_path / "serve.err").read_text()
    assert not any(alive(p) for p in pids)
    assert not alive(int(victim))


async def test_a_stop_sent_to_the_other_worker_stops_the_room(database, tmp_path):
    """Stop reaches the worker that runs the room through its inbox: every worker and task is cancelled."""
    async with serving(database, tmp_path, str(ROOT / "scenarios" / "stop-parallel.yaml")) as server:
        async with fresh() as client:
            r = await client.post(f"{server.base}/rooms", json={"name": "stopped"}, headers=server.auth)
            room, owner = r.json()["id"], r.headers["x-orchestrator-worker"]
        client, response = await on_worker(server, room, owner)
        try:
            s = Stream(response)
            await post_via(server, owner, room, "Survey all caching papers.")
            await s.running(3)
            other = await a_worker_other_than(server, owner)
            assert await send_via(server, other, f"/rooms/{room}/stop") == {"stopped": "sent"}
            cancelled = await s.until(lambda ev: ev["type"] == "cancelled")
        finally:
            await response.aclose()
            await client.aclose()
        assert cancelled.event["reason"] == "stopped from the web page"
        assert sorted((t.agent, t.status) for t in await server.store.tasks(room)) == [
            ("researcher", "cancelled"), ("reviewer", "cancelled"), ("worker", "cancelled")]
        with trio.fail_after(10):  # the request leaves the inbox once the stop has run
            while await server.store.inbox():
                await trio.sleep(0.05)


async def a_worker_other_than(server: Server, worker: str) -> str:
    async with fresh() as client:
        for _ in range(200):
            r = await client.get(f"{server.base}/rooms", headers=server.auth)
            if r.headers["x-orchestrator-worker"] != worker:
                return r.headers["x-orchestrator-worker"]
    raise AssertionError("only one worker answers")


def test_a_missing_scenario_is_said_once_before_the_address(tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "orchestrator", "serve", "--db", str(tmp_path / "o.db"), "--port", "0",
                        "--workers", "2", "--scripted", "no-such-scenario"], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert p.returncode == 2
    assert "http://" not in p.stdout + p.stderr  # nothing was served
    assert p.stderr.strip().splitlines() == [
        "error: no-such-scenario: no such file, and no shipped scenario of that name "
        "(`orchestrator scenarios` lists them)"]
