"""`orchestrator serve` over HTTP, against the real server started on 127.0.0.1: the event stream
numbered by seq and resumable, the token (only in a header), stop, questions, the agent view and the room
list."""
from __future__ import annotations

import msgspec
import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed: pip install -e '.[serve]'")
pytest.importorskip("hypercorn", reason="the serve extra is not installed: pip install -e '.[serve]'")

import httpx  # noqa: E402

from orchestrator.core.events import EVENT_DECODER, message_event  # noqa: E402
from orchestrator.store.db import Store  # noqa: E402
from tests.serving import ROOT, Server, Stream, said, start_server  # noqa: E402

FLAGSHIP = str(ROOT / "scenarios" / "flagship.yaml")


@pytest.fixture(scope="module")
def flagship(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    server = start_server(tmp, "--scripted", FLAGSHIP)
    server.db = tmp / "serve.db"
    yield server
    assert server.stop() == 0, (tmp / "serve.err").read_text()


async def new_room(client: httpx.AsyncClient, server: Server, name: str = "web") -> str:
    r = await client.post(f"{server.base}/rooms", json={"name": name}, headers=server.auth)
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def post(client: httpx.AsyncClient, server: Server, room: str, text: str) -> dict:
    r = await client.post(f"{server.base}/rooms/{room}/lines", json={"text": text}, headers=server.auth)
    assert r.status_code == 202, r.text
    return r.json()


def subscribe(client: httpx.AsyncClient, server: Server, room: str, last: str | None = None):
    headers = server.auth | ({"Last-Event-ID": last} if last else {})
    return client.stream("GET", f"{server.base}/rooms/{room}/events", headers=headers, timeout=30)


def check_numbering(frames) -> None:
    """A message's id is its seq; the k-th event after message s is `s.k`."""
    seq, k = None, 0
    for f in frames:
        ev = f.event
        if ev["type"] == "message":
            assert f.id == str(ev["seq"])
            assert seq is None or ev["seq"] == seq + 1, "messages skipped or repeated"
            seq, k = ev["seq"], 0
        else:
            k += 1
            if seq is not None:
                assert f.id == f"{seq}.{k}"
    keys = [f.key for f in frames]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


async def test_every_event_is_streamed_with_its_seq_and_two_subscribers_agree(flagship):
    async with httpx.AsyncClient() as client:
        room = await new_room(client, flagship, "numbered")
        async with subscribe(client, flagship, room) as ra, subscribe(client, flagship, room) as rb:
            assert ra.status_code == 200 and ra.headers["content-type"].startswith("text/event-stream")
            a, b = Stream(ra), Stream(rb)
            line = await post(client, flagship, room, "Can you check app/config.py? The port test fails.")
            end = said("tutor", "both names point at one dict")
            await a.until(end)
            await b.until(end)
        async with subscribe(client, flagship, room) as rc:  # a page opened afterwards replays the same
            c = Stream(rc)
            for _ in a.frames:
                await c.next()
        store = await Store.open(flagship.db)
        try:
            stored = await store.messages(room)
        finally:
            await store.close()

    assert [f.id for f in a.frames] == [f.id for f in b.frames]
    assert [f.event for f in a.frames] == [f.event for f in b.frames]
    assert [(f.id, f.event) for f in c.frames] == [(f.id, f.event) for f in a.frames]
    check_numbering(a.frames)
    messages = [f.event for f in a.frames if f.event["type"] == "message"]
    assert messages[0]["seq"] == line["seq"] == 1 and messages[0]["id"] == line["id"]
    assert messages == [msgspec.to_builtins(message_event(m)) for m in stored]
    for f in a.frames:  # the `run --json` format, event for event
        assert msgspec.json.encode(EVENT_DECODER.decode(msgspec.json.encode(f.event))) == msgspec.json.encode(f.event)
    kinds = {f.event["type"] for f in a.frames}
    assert {"message", "text_delta", "tool_start", "tool_end", "task", "turn", "done", "state"} <= kinds
    assert all(f.event["room"] == room for f in a.frames)


async def test_a_reconnect_with_last_event_id_gets_only_later_events(flagship):
    async with httpx.AsyncClient() as client:
        room = await new_room(client, flagship, "resumed")
        async with subscribe(client, flagship, room) as r:
            full = Stream(r)
            await post(client, flagship, room, "Can you check app/config.py?")
            await full.until(said("tutor", "both names point at one dict"))
            await full.until(lambda ev: ev["type"] == "done" and ev["agent"] == "tutor")
        state = (await client.get(f"{flagship.base}/rooms/{room}/state", headers=flagship.auth)).json()
        assert not state["busy"]  # so the last frame read is the room's newest event
        middle_message = next(f for f in full.frames[len(full.frames) // 3:] if f.event["type"] == "message")
        middle_other = next(f for f in full.frames[len(full.frames) // 2:] if "." in f.id)
        for point in (middle_message, middle_other):
            tail = full.frames[full.frames.index(point) + 1:]
            async with subscribe(client, flagship, room, last=point.id) as r:
                again = Stream(r)
                for _ in tail:
                    await again.next()
            assert [(f.id, f.event) for f in again.frames] == [(f.id, f.event) for f in tail]

        # From the newest id: nothing old, then the next line's events only.
        async with subscribe(client, flagship, room, last=full.frames[-1].id) as r:
            later = Stream(r)
            await post(client, flagship, room, "So I should copy it first?")
            first = await later.next()
            await later.until(said("tutor", "config = dict(DEFAULTS)"))
        assert first.event["type"] == "message" and first.event["text"] == "So I should copy it first?"
        assert first.key > full.frames[-1].key
        check_numbering(full.frames[-1:] + later.frames)


async def test_writes_and_reads_need_the_token(flagship):
    async with httpx.AsyncClient() as client:
        room = await new_room(client, flagship, "guarded")
        base = f"{flagship.base}/rooms/{room}"
        for headers in ({}, {"Authorization": "Bearer not-the-token"}):
            r = await client.post(f"{base}/lines", json={"text": "let me in"}, headers=headers)
            assert r.status_code == 401 and "token" in r.json()["error"]
            assert (await client.post(f"{base}/stop", json={}, headers=headers)).status_code == 401
            assert (await client.post(f"{base}/answers", json={"answer": "run", "request_id": "q1"},
                                      headers=headers)).status_code == 401
            assert (await client.post(f"{flagship.base}/rooms", json={"name": "x"}, headers=headers)).status_code == 401
            assert (await client.get(f"{base}/events", headers=headers)).status_code == 401
            assert (await client.get(f"{base}/state", headers=headers)).status_code == 401
            assert (await client.get(f"{flagship.base}/rooms", headers=headers)).status_code == 401
            assert (await client.get(f"{base}/agents/tutor", headers=headers)).status_code == 401
        state = (await client.get(f"{base}/state", headers=flagship.auth)).json()
        assert not state["busy"] and state["tasks"] == []
        store = await Store.open(flagship.db)
        try:
            assert await store.messages(room) == []  # nothing refused reached the room
        finally:
            await store.close()

        # The token is never taken from a query string (it would land in logs, history and Referers), with
        # or without the header: the printed address carries it in its fragment, which is never sent.
        assert flagship.url == f"{flagship.base}/#token={flagship.token}"
        for path in ("/", f"/rooms/{room}", "/rooms", f"/rooms/{room}/events"):
            for headers in ({}, flagship.auth):
                r = await client.get(f"{flagship.base}{path}?token={flagship.token}", headers=headers)
                assert r.status_code == 400 and "#token=" in r.json()["error"], (path, r.text)
                assert "location" not in r.headers and "set-cookie" not in r.headers
        # The page is a shell anyone may load: no room data in it, the same for any room id, and no cookie.
        r = await client.get(base)
        assert r.status_code == 200 and "guarded" not in r.text and room not in r.text
        assert r.text == (await client.get(f"{flagship.base}/rooms/nosuchroom")).text
        assert "set-cookie" not in r.headers and not client.cookies
        r = await client.post(f"{base}/lines", json={"text": "   "}, headers=flagship.auth)
        assert r.status_code == 400 and r.json()["error"] == "the line is empty"


async def test_the_agent_view_holds_only_that_agents_partition(flagship):
    async with httpx.AsyncClient() as client:
        room = await new_room(client, flagship, "views")
        async with subscribe(client, flagship, room) as r:
            s = Stream(r)
            await post(client, flagship, room, "Can you check app/config.py?")
            await s.until(said("tutor", "both names point at one dict"))
        view = (await client.get(f"{flagship.base}/rooms/{room}/agents/researcher", headers=flagship.auth)).json()
        text = msgspec.json.encode(view["messages"]).decode()
        assert view["agent"] == "researcher" and "You are researcher" in view["system"]
        assert "Explain what app/config.py does" in text and "Find bugs" not in text
        assert [m["role"] for m in view["messages"]][:3] == ["user", "assistant", "user"]
        assert view["messages"][1]["blocks"][0] == {"type": "tool_call", "id": view["messages"][1]["blocks"][0]["id"],
                                                    "name": "read_file", "input": {"path": "app/config.py"}}
        reviewer = msgspec.json.encode(
            (await client.get(f"{flagship.base}/rooms/{room}/agents/reviewer", headers=flagship.auth)).json()).decode()
        assert "Find bugs" in reviewer and "two sentences" not in reviewer
        r = await client.get(f"{flagship.base}/rooms/{room}/agents/nobody", headers=flagship.auth)
        assert r.status_code == 400 and "no member named 'nobody'" in r.json()["error"]


async def test_the_room_list_and_bad_requests(flagship):
    async with httpx.AsyncClient() as client:
        room = await new_room(client, flagship, "listed")
        rooms = (await client.get(f"{flagship.base}/rooms", headers=flagship.auth)).json()
        mine = next(r for r in rooms if r["id"] == room)
        assert mine["name"] == "listed" and mine["floor"] == "commander" and mine["running_tasks"] == 0
        assert mine["open"] and mine["last_activity"] > 0
        r = await client.post(f"{flagship.base}/rooms", json={"name": ""}, headers=flagship.auth)
        assert r.status_code == 400 and "1 to 100 characters" in r.json()["error"]
        r = await client.post(f"{flagship.base}/rooms/{room}/lines", content=b"not json",
                              headers=flagship.auth | {"Content-Type": "application/json"})
        assert r.status_code == 400 and "bad request body" in r.json()["error"]
        r = await client.get(f"{flagship.base}/rooms/nosuchroom/state", headers=flagship.auth)
        assert r.status_code == 404 and "no room 'nosuchroom'" in r.json()["error"]
        r = await client.post(f"{flagship.base}/rooms/{room}/answers", json={"answer": "run"}, headers=flagship.auth)
        assert r.status_code == 400 and "request_id" in r.json()["error"]  # an answer always names its question
        r = await client.post(f"{flagship.base}/rooms/{room}/answers", json={"answer": "run", "request_id": "q1"},
                              headers=flagship.auth)
        assert r.status_code == 409 and r.json()["error"] == f"no open question 'q1' in room {room}; open: none"


async def test_stop_over_http_cancels_every_worker(tmp_path):
    server = start_server(tmp_path, "--scripted", str(ROOT / "scenarios" / "stop-parallel.yaml"))
    try:
        async with httpx.AsyncClient() as client:
            room = await new_room(client, server, "stopped")
            async with subscribe(client, server, room) as r:
                s = Stream(r)
                await post(client, server, room, "Survey all caching papers.")
                await s.running(3)
                r = await client.post(f"{server.base}/rooms/{room}/stop", json={}, headers=server.auth)
                assert r.status_code == 200 and r.json()["seconds"] < 5
                cancelled = await s.until(lambda ev: ev["type"] == "cancelled")
            assert cancelled.event["reason"] == "stopped from the web page"
            state = (await client.get(f"{server.base}/rooms/{room}/state", headers=server.auth)).json()
            assert not state["busy"]
            assert sorted((t["agent"], t["status"]) for t in state["tasks"]) == [
                ("researcher", "cancelled"), ("reviewer", "cancelled"), ("worker", "cancelled")]
            assert not any(f.event["type"] == "message" and "never arrives" in f.event["text"] for f in s.frames)
    finally:
        assert server.stop() == 0


async def test_a_question_is_answered_over_http(tmp_path):
    server = start_server(tmp_path, "--scripted", str(ROOT / "scenarios" / "risky-confirmed.yaml"),
                          "--workspace", str(tmp_path / "ws"))
    try:
        async with httpx.AsyncClient() as client:
            room = await new_room(client, server, "asked")
            async with subscribe(client, server, room) as r:
                s = Stream(r)
                await post(client, server, room, "Clean up the data folder.")
                asked = (await s.until(lambda ev: ev["type"] == "confirm")).event
                assert asked["agent"] == "commander" and "rm -rf data" in asked["summary"]
                state = (await client.get(f"{server.base}/rooms/{room}/state", headers=server.auth)).json()
                assert state["asking"] == [asked["request_id"]]
                r = await client.post(f"{server.base}/rooms/{room}/answers", headers=server.auth,
                                      json={"request_id": "q000000", "answer": "run"})
                assert r.status_code == 409 and asked["request_id"] in r.json()["error"]  # only the one open
                state = (await client.get(f"{server.base}/rooms/{room}/state", headers=server.auth)).json()
                assert state["asking"] == [asked["request_id"]] and (tmp_path / "ws" / "data").exists()
                r = await client.post(f"{server.base}/rooms/{room}/answers", headers=server.auth,
                                      json={"request_id": asked["request_id"], "answer": "once"})
                assert r.status_code == 200
                await s.until(said("room", "answered 'once'"))
                await s.until(said("commander", "Deleted the data folder"))
        assert not (tmp_path / "ws" / "data").exists()
    finally:
        assert server.stop() == 0


async def test_rooms_of_the_store_are_hosted_after_a_restart(tmp_path):
    server = start_server(tmp_path, "--scripted", FLAGSHIP)
    async with httpx.AsyncClient() as client:
        room = await new_room(client, server, "kept")
        async with subscribe(client, server, room) as r:
            before = Stream(r)
            await post(client, server, room, "Can you check app/config.py?")
            await before.until(said("tutor", "both names point at one dict"))
        assert server.stop() == 0

        server = start_server(tmp_path, "--scripted", FLAGSHIP)
        try:
            rooms = (await client.get(f"{server.base}/rooms", headers=server.auth)).json()
            assert [(r["id"], r["floor"], r["open"]) for r in rooms] == [(room, "tutor", False)]
            last = [f for f in before.frames if f.event["type"] == "message"][-1]
            async with subscribe(client, server, room) as r:  # a new page: the whole stored room
                fresh = Stream(r)
                while (await fresh.next()).id != last.id:
                    pass
            assert [f.id for f in fresh.frames] == [str(s) for s in range(1, last.event["seq"] + 1)]
            async with subscribe(client, server, room, last=f"{last.id}.3") as r:  # an id of the old process
                resumed = Stream(r)
                await post(client, server, room, "So I should copy it first?")
                await resumed.until(said("tutor", "copy"))
            assert resumed.frames[0].event["seq"] == last.event["seq"] + 1
            assert all(f.key > last.key for f in resumed.frames)
        finally:
            assert server.stop() == 0


def test_a_busy_port_is_bad_input_in_one_line(tmp_path):
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "orchestrator", "serve", "--db", str(tmp_path / "x.db"),
                              "--port", str(port), "--scripted", FLAGSHIP], cwd=ROOT, capture_output=True,
                             text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == (f"error: cannot listen on 127.0.0.1:{port}: Address already in use (another "
                                  "server is there: pick one with --port, or --port 0 for any)")


def test_an_address_beyond_this_machine_is_warned_about(capsys, tmp_path):
    from argparse import Namespace

    from orchestrator.cli.serve import _announce

    for host, warned in (("127.0.0.1", False), ("::1", False), ("localhost", False), ("0.0.0.0", True),
                         ("192.0.2.7", True)):
        _announce(Namespace(json=True, host=host, db=tmp_path / "x.db"), "http://h/#token=t", "t")
        out, err = capsys.readouterr()
        assert msgspec.json.decode(out) == {"url": "http://h/#token=t", "token": "t"}
        assert ("warning: serving on " in err) == warned, host
    _announce(Namespace(json=False, host="127.0.0.1", db=tmp_path / "x.db"), "http://h/#token=t", "t")
    out, _ = capsys.readouterr()
    assert out.splitlines()[:2] == [f"Rooms of {tmp_path / 'x.db'} at http://h/#token=t", "Token: t"]


def test_without_the_extra_serve_says_what_to_install(tmp_path):
    import subprocess
    import sys

    code = ("import sys; sys.modules['hypercorn'] = None; from orchestrator.cli.main import main; "
            f"sys.exit(main(['serve', '--db', {str(tmp_path / 'x.db')!r}]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip() == ("error: `orchestrator serve` needs the `serve` extra (hypercorn is missing): "
                                  "`pip install -e '.[serve]'` in a checkout, or "
                                  "`pip install 'dist/WHEEL.whl[serve]'` for a wheel built there (README: Install)")
