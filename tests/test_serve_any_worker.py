"""`orchestrator serve --workers 2`: a room looks the same whichever worker a request lands on. Asked of the
worker that does not run the room, its agents' view, whether it is busy (and its ledger, in the room list
too) and its event stream (every event: turns, tasks, tool calls, text as it streams, and on a new page the
room replayed) are what the worker running it answers, as with --workers 1."""
from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import yaml

pytest.importorskip("starlette", reason="the serve extra is not installed: pip install -e '.[serve]'")
pytest.importorskip("hypercorn", reason="the serve extra is not installed: pip install -e '.[serve]'")

import httpx  # noqa: E402
import trio  # noqa: E402

from orchestrator.store.backends import open_store  # noqa: E402
from tests.serving import ROOT, Server, Stream, said, start_server  # noqa: E402
from tests.test_serve_workers import (FIRST, FIRST_ANSWER, a_worker_other_than, fresh, on_worker,  # noqa: E402
                                      serving)

ASKED = ("commander", "researcher", "reviewer", "tutor")
TAKEOVER = 6.0  # the lease of the test where a worker dies: its room stays untaken while the stream opens


def slowed(tmp: Path, scenario: str, delay: float) -> Path:
    """A shipped scenario as it is, except that its three workers take `delay` seconds before their first reply."""
    scn = yaml.safe_load((ROOT / "scenarios" / f"{scenario}.yaml").read_text())
    for agent in ("researcher", "reviewer", "worker"):
        scn["models"][agent][0]["delay"] = delay
    path = tmp / f"{scenario}-slow.yaml"
    path.write_text(yaml.safe_dump(scn, sort_keys=False))
    return path


def slow_stop(tmp: Path) -> Path:
    """stop-parallel.yaml with work that outlasts the test: the room is busy until it is stopped."""
    return slowed(tmp, "stop-parallel", 300)


@asynccontextmanager
async def pinned(server: Server, worker: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client whose one kept-alive connection `worker` serves (new connections until it takes one)."""
    for _ in range(200):
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=1), timeout=30) as client:
            probe = await client.get(f"{server.base}/rooms", headers=server.auth)
            if probe.headers["x-orchestrator-worker"] == worker:
                yield client
                return
    raise AssertionError(f"worker {worker} never took a connection")


async def get(client: httpx.AsyncClient, server: Server, worker: str, path: str) -> httpx.Response:
    r = await client.get(f"{server.base}{path}", headers=server.auth)
    assert r.headers["x-orchestrator-worker"] == worker, "one kept-alive connection, one worker"
    return r


async def new_room(server: Server, name: str) -> tuple[str, str, str]:
    """A room made through whichever worker took the connection (it runs it), that worker and the other."""
    async with fresh() as client:
        r = await client.post(f"{server.base}/rooms", json={"name": name}, headers=server.auth)
        assert r.status_code == 201, r.text
        room, owner = r.json()["id"], r.headers["x-orchestrator-worker"]
    return room, owner, await a_worker_other_than(server, owner)


async def post(server: Server, worker: str, room: str, text: str) -> None:
    async with pinned(server, worker) as client:
        r = await client.post(f"{server.base}/rooms/{room}/lines", json={"text": text}, headers=server.auth)
        assert r.status_code == 202 and r.headers["x-orchestrator-worker"] == worker, r.text


async def test_the_agent_view_from_the_worker_that_does_not_run_the_room(tmp_path):
    async with serving(tmp_path / "serve.db", tmp_path) as server:
        room, owner, other = await new_room(server, "viewed")
        client, response = await on_worker(server, room, owner)
        try:
            await post(server, owner, room, FIRST)
            await Stream(response).until(said("tutor", FIRST_ANSWER), timeout=60)
        finally:
            await response.aclose()
            await client.aclose()
        async with pinned(server, owner) as mine, pinned(server, other) as theirs:
            for name in ASKED:
                here = await get(mine, server, owner, f"/rooms/{room}/agents/{name}")
                there = await get(theirs, server, other, f"/rooms/{room}/agents/{name}")
                assert here.status_code == 200, here.text
                assert there.status_code == 200, there.text
                assert there.json() == here.json()
            view = there.json()
            assert view["agent"] == "tutor" and "You are tutor" in view["system"]
            r = await get(theirs, server, other, f"/rooms/{room}/agents/nobody")
            assert r.status_code == 400 and "no member named 'nobody'" in r.json()["error"]
            # A request without the token is refused by the worker it reached, as any other: nothing passed on.
            r = await theirs.get(f"{server.base}/rooms/{room}/agents/tutor")
            assert r.status_code == 401 and r.headers["x-orchestrator-worker"] == other
            assert "x-orchestrator-room-worker" not in r.headers


async def test_a_busy_room_from_the_worker_that_does_not_run_it(tmp_path):
    async with serving(tmp_path / "serve.db", tmp_path, str(slow_stop(tmp_path))) as server:
        room, owner, other = await new_room(server, "busy")
        client, response = await on_worker(server, room, owner)
        try:
            stream = Stream(response)
            await post(server, owner, room, "Survey all caching papers.")
            assert await stream.running(3) == {"researcher", "reviewer", "worker"}
            async with pinned(server, owner) as mine, pinned(server, other) as theirs:
                here = (await get(mine, server, owner, f"/rooms/{room}/state")).json()
                there = (await get(theirs, server, other, f"/rooms/{room}/state")).json()
                assert there["busy"] and here["busy"]
                assert sorted((t["agent"], t["status"]) for t in there["tasks"]) == [
                    ("researcher", "running"), ("reviewer", "running"), ("worker", "running")]
                assert there == here  # members (the anonymous worker too), floor, questions: the owner's own
                listed = next(r for r in (await get(theirs, server, other, "/rooms")).json() if r["id"] == room)
                assert listed["busy"] and listed["running_tasks"] == 3 and listed["open"]

            async with pinned(server, other) as theirs:  # a stop's answer ends its connection: its own
                stopped = await theirs.post(f"{server.base}/rooms/{room}/stop", json={}, headers=server.auth)
                assert stopped.status_code in (200, 202) and stopped.headers["x-orchestrator-worker"] == other
            await stream.until(lambda ev: ev["type"] == "cancelled")
            async with pinned(server, other) as theirs:
                with trio.fail_after(20):
                    while (await get(theirs, server, other, f"/rooms/{room}/state")).json()["busy"]:
                        await trio.sleep(0.05)
                there = (await get(theirs, server, other, f"/rooms/{room}/state")).json()
                assert sorted(t["status"] for t in there["tasks"]) == ["cancelled"] * 3
                listed = next(r for r in (await get(theirs, server, other, "/rooms")).json() if r["id"] == room)
                assert not listed["busy"] and listed["running_tasks"] == 0
        finally:
            await response.aclose()
            await client.aclose()


async def test_the_event_stream_from_the_worker_that_does_not_run_the_room(tmp_path):
    async with serving(tmp_path / "serve.db", tmp_path) as server:
        room, owner, other = await new_room(server, "streamed")
        watchers = [await on_worker(server, room, w) for w in (owner, other)]
        try:
            live = [Stream(response) for _, response in watchers]
            await post(server, owner, room, FIRST)
            for s in live:
                await s.until(said("tutor", FIRST_ANSWER), timeout=60)
                await s.until(lambda ev: ev["type"] == "done" and ev["agent"] == "tutor")
        finally:
            for client, response in watchers:
                await response.aclose()
                await client.aclose()
        mine, theirs = live
        assert [(f.id, f.event) for f in theirs.frames] == [(f.id, f.event) for f in mine.frames]
        kinds = {f.event["type"] for f in theirs.frames}
        assert {"message", "text_delta", "tool_start", "tool_end", "task", "turn", "done", "state"} <= kinds

        # A new page (a reload) through the other worker replays the room as its owner does: the timeline's
        # turns, tasks and tool calls too, not only the stored messages.
        for worker in (other, owner, other):
            client, response = await on_worker(server, room, worker)
            try:
                again = Stream(response)
                with trio.fail_after(30):
                    while not again.frames or again.frames[-1].id != mine.frames[-1].id:
                        await again.next()
            finally:
                await response.aclose()
                await client.aclose()
            assert [(f.id, f.event) for f in again.frames] == [(f.id, f.event) for f in mine.frames], worker

        # Resumed from the middle (Last-Event-ID) through the other worker: only what came after.
        point = next(f for f in mine.frames[len(mine.frames) // 2:] if "." in f.id)
        tail = mine.frames[mine.frames.index(point) + 1:]
        client, response = await on_worker(server, room, other, last=point.id)
        try:
            resumed = Stream(response)
            for _ in tail:
                await resumed.next()
        finally:
            await response.aclose()
            await client.aclose()
        assert [(f.id, f.event) for f in resumed.frames] == [(f.id, f.event) for f in tail]


async def test_a_socket_that_is_not_its_workers_gets_nothing(tmp_path):
    """The workers' sockets are in a folder only this user may enter, and a worker sends a request on only to
    the very process a room's lease names: a socket put there for a room "run" by another pid (here, this test
    listening for a sleeping process) is hung up on before a byte is sent, and the room is read from the store."""
    async with serving(tmp_path / "serve.db", tmp_path) as server:
        made, owner, other = await new_room(server, "made")
        cmdline = Path(f"/proc/{owner}/cmdline").read_bytes().split(b"\0")
        folder = Path(cmdline[cmdline.index(b"--peers") + 1].decode())
        assert folder.stat().st_uid == os.getuid() and stat.S_IMODE(folder.stat().st_mode) == 0o700
        for pid in (owner, other):
            assert stat.S_IMODE((folder / f"{pid}.sock").stat().st_mode) == 0o600
            assert stat.S_ISSOCK((folder / f"{pid}.sock").stat().st_mode)

        sleeper = subprocess.Popen(["sleep", "120"])
        impostor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            impostor.bind(str(folder / f"{sleeper.pid}.sock"))
            impostor.listen(64)
            impostor.setblocking(False)
            record = await server.store.room(made)
            room = (await server.store.create_room("squatted", floor="commander", meta=record.meta)).id
            assert await server.store.acquire(room, f"{socket.gethostname()}:{sleeper.pid}", 600)
            answered = set()
            async with fresh() as client:
                with trio.fail_after(60):
                    while len(answered) < 2:
                        r = await client.get(f"{server.base}/rooms/{room}/state", headers=server.auth)
                        assert r.status_code == 200 and r.json()["elsewhere"], r.text
                        assert "x-orchestrator-room-worker" not in r.headers
                        r = await client.get(f"{server.base}/rooms/{room}/agents/commander", headers=server.auth)
                        assert r.status_code == 409 and "cannot be reached" in r.json()["error"]
                        answered.add(r.headers["x-orchestrator-worker"])
            tried = 0
            while True:
                try:
                    conn, _ = impostor.accept()
                except BlockingIOError:
                    break
                tried += 1
                with conn:
                    conn.settimeout(5)
                    assert conn.recv(65536) == b"", "a worker sent a request to a socket that is not its worker's"
            assert tried >= 4  # each worker tried, twice per round, and hung up each time
        finally:
            impostor.close()
            sleeper.kill()
            sleeper.wait()
    assert not folder.exists()  # removed when the server stopped


async def test_a_stream_of_a_dead_workers_room_goes_on_with_its_next_worker(tmp_path):
    """While the worker running a room is dead and its lease has not run out, the other follows the room in the
    store. Once a worker takes the room the page sees every event again, as with one worker: in the same stream
    when the worker serving it took the room, else through the one that did, after the reconnect a browser makes
    (with Last-Event-ID)."""
    server = start_server(tmp_path, "--workers", "2", "--lease", str(TAKEOVER), "--scripted",
                          str(slowed(tmp_path, "flagship", 4.0)), db=tmp_path / "serve.db")
    server.store = await open_store(tmp_path / "serve.db")
    try:
        room, owner, other = await new_room(server, "taken")
        os.kill(int(owner), signal.SIGKILL)
        client, response = await on_worker(server, room, other)
        try:
            assert await holder(server, room) == owner, "taken before the stream began: a longer lease, please"
            stream = Stream(response)
            async with fresh() as poster:
                r = await poster.post(f"{server.base}/rooms/{room}/lines", json={"text": FIRST}, headers=server.auth)
                assert r.status_code == 202, r.text
            frames, streams = await resuming(server, room, stream, said("tutor", FIRST_ANSWER), 60 + TAKEOVER)
        finally:
            await response.aclose()
            await client.aclose()
        assert await holder(server, room) not in (None, owner)
        kinds = [f.event["type"] for f in frames]
        assert {"text_delta", "turn", "task", "tool_start"} <= set(kinds), (kinds, streams)
        keys = [f.key for f in frames]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
    finally:
        await server.store.close()
        server.stop()


async def resuming(server: Server, room: str, stream: Stream, test, timeout: float) -> tuple[list, int]:
    """Read on until `test`, reconnecting (through any worker, with Last-Event-ID) whenever the stream ends, as a
    browser does: every frame read, and how many streams it took."""
    frames, streams = [], 1
    async with fresh() as client:
        with trio.fail_after(timeout):
            try:
                while True:
                    try:
                        frame = await stream.next()
                    except EOFError:
                        await stream.response.aclose()
                        headers = server.auth | ({"Last-Event-ID": frames[-1].id} if frames else {})
                        response = await client.send(client.build_request(
                            "GET", f"{server.base}/rooms/{room}/events", headers=headers), stream=True)
                        stream, streams = Stream(response), streams + 1
                        continue
                    frames.append(frame)
                    if test(frame.event):
                        return frames, streams
            finally:
                await stream.response.aclose()


async def holder(server: Server, room: str) -> str | None:
    return next((x.host.rsplit(":", 1)[1] for x in await server.store.leases() if x.room == room), None)
