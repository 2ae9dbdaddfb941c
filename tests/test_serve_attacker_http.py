"""`orchestrator serve` against what a room's own agents (or any page the user opens) could send it, over plain
HTTP: a foreign Host or Origin, a request from another site, a write that is not JSON, a body too large to hold,
more event streams than a process keeps, and the token looked for where an agent could read it."""
from __future__ import annotations

import html.parser
import os
import re
from contextlib import AsyncExitStack
from pathlib import Path

import msgspec
import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed: pip install -e '.[serve]'")
pytest.importorskip("hypercorn", reason="the serve extra is not installed: pip install -e '.[serve]'")

import httpx  # noqa: E402
import trio  # noqa: E402

from orchestrator.web.app import MAX_ROOM_STREAMS, MAX_STREAMS  # noqa: E402
from orchestrator.web.guard import CSP, MAX_BODY, Hosts  # noqa: E402
from tests.serving import ROOT, Server, Stream, said, start_server  # noqa: E402

FLAGSHIP = str(ROOT / "scenarios" / "flagship.yaml")
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def flagship(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attacked")
    server = start_server(tmp, "--scripted", FLAGSHIP)
    yield server
    assert server.stop() == 0, (tmp / "serve.err").read_text()


def netloc(server: Server) -> str:
    return server.base.removeprefix("http://")


async def new_room(client: httpx.AsyncClient, server: Server, name: str) -> str:
    r = await client.post(f"{server.base}/rooms", json={"name": name}, headers=server.auth)
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def messages(client: httpx.AsyncClient, server: Server, room: str) -> int:
    rooms = (await client.get(f"{server.base}/rooms", headers=server.auth)).json()
    return next(r["messages"] for r in rooms if r["id"] == room)


def test_the_names_a_server_answers_to():
    loop = Hosts.bound("127.0.0.1", 8765, "127.0.0.1")
    assert loop.accepts("127.0.0.1:8765") and loop.accepts("localhost:8765") and loop.accepts("LOCALHOST:8765")
    for refused in ("evil.example", "evil.example:8765", "127.0.0.1", "127.0.0.1:8766", "[::1]:8765",
                    "localhost.:8765", "127.0.0.1:8765.evil.example", "127.0.0.1:8765:1", "", "127.0.0.1:",
                    "192.168.1.9:8765", "127.1:8765"):
        assert not loop.accepts(refused), refused
    six = Hosts.bound("::1", 8765, "::1")
    assert six.accepts("[::1]:8765") and six.accepts("localhost:8765")
    assert not six.accepts("127.0.0.1:8765") and not six.accepts("::1:8765")
    named = Hosts.bound("localhost", 8765, "127.0.0.1")
    assert named.accepts("localhost:8765") and named.accepts("127.0.0.1:8765") and not named.accepts("[::1]:8765")
    lan = Hosts.bound("192.0.2.7", 8765, "192.0.2.7")
    assert lan.accepts("192.0.2.7:8765")
    assert not lan.accepts("localhost:8765") and not lan.accepts("127.0.0.1:8765") and not lan.accepts("box:8765")
    box = Hosts.bound("box.lan", 8765, "192.0.2.7")
    assert box.accepts("box.lan:8765") and box.accepts("192.0.2.7:8765") and not box.accepts("other.lan:8765")
    # Every interface: any address typed as a number and this machine's own names, never another name (which
    # is what DNS rebinding needs: a name the attacker controls, resolving to this machine).
    every = Hosts.bound("0.0.0.0", 8765, "0.0.0.0")
    for accepted in ("0.0.0.0:8765", "192.0.2.7:8765", "127.0.0.1:8765", "localhost:8765", "[::1]:8765"):
        assert every.accepts(accepted), accepted
    assert not every.accepts("evil.example:8765") and not every.accepts("192.0.2.7:8766")
    assert not every.accepts("::1:8765")
    import socket
    assert every.accepts(f"{socket.gethostname()}:8765")
    assert Hosts.bound("127.0.0.1", 80, "127.0.0.1").accepts("127.0.0.1")  # browsers leave out port 80


async def test_a_foreign_host_is_refused_before_anything_else(flagship):
    """DNS rebinding: a page on a name the attacker controls, resolved to 127.0.0.1, would be same-origin."""
    async with httpx.AsyncClient() as client:
        room = await new_room(client, flagship, "rebound")
        before = len((await client.get(f"{flagship.base}/rooms", headers=flagship.auth)).json())
        port = flagship.base.rsplit(":", 1)[1]
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1", f"[::1]:{port}", f"localhost.:{port}"):
            for method, path, body in (("GET", "/", None), ("GET", "/rooms", None), ("GET", "/static/room.js", None),
                                       ("GET", f"/rooms/{room}/events", None), ("POST", "/rooms", {"name": "x"}),
                                       ("POST", f"/rooms/{room}/lines", {"text": "from a rebound page"}),
                                       ("GET", f"/?token={flagship.token}", None)):
                r = await client.request(method, f"{flagship.base}{path}", json=body,
                                         headers=flagship.auth | {"Host": host})
                assert r.status_code == 421, (host, path, r.status_code)
                assert "open the address `orchestrator serve` printed" in r.json()["error"]
                assert "location" not in r.headers  # never a redirect, to evil.example or anywhere
        for host in (netloc(flagship), f"localhost:{port}"):
            r = await client.get(f"{flagship.base}/rooms", headers=flagship.auth | {"Host": host})
            assert r.status_code == 200
        assert len((await client.get(f"{flagship.base}/rooms", headers=flagship.auth)).json()) == before
        assert await messages(client, flagship, room) == 0


async def test_another_origin_or_site_is_refused_even_with_the_token(flagship):
    """A page on another port of 127.0.0.1 is another origin but the same site: what the browser says of it
    (Origin, Sec-Fetch-Site) is enough to refuse it, token or not."""
    async with httpx.AsyncClient() as client:
        room = await new_room(client, flagship, "origins")
        port = int(flagship.base.rsplit(":", 1)[1])
        lines = f"{flagship.base}/rooms/{room}/lines"
        for origin in (f"http://127.0.0.1:{port + 1}", "http://evil.example", "null", f"http://localhost:{port}",
                       f"https://{netloc(flagship)}"):
            r = await client.post(lines, json={"text": "cross"}, headers=flagship.auth | {"Origin": origin})
            assert r.status_code == 403 and "another origin" in r.json()["error"], origin
            r = await client.get(f"{flagship.base}/rooms", headers=flagship.auth | {"Origin": origin})
            assert r.status_code == 403, origin
            r = await client.options(lines, headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                                                     "Access-Control-Request-Headers": "authorization"})
            assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
        for site in ("same-site", "cross-site", "SAME-SITE"):
            r = await client.post(lines, json={"text": "cross"}, headers=flagship.auth | {"Sec-Fetch-Site": site})
            assert r.status_code == 403 and "another site" in r.json()["error"], site
            r = await client.get(f"{flagship.base}/rooms", headers=flagship.auth | {
                "Sec-Fetch-Site": site, "Sec-Fetch-Mode": "cors"})
            assert r.status_code == 403
            r = await client.post(lines, json={"text": "cross"}, headers=flagship.auth | {  # a form's navigation
                "Sec-Fetch-Site": site, "Sec-Fetch-Mode": "navigate"})
            assert r.status_code == 403
            # A plain link from elsewhere to a page still opens it: its shell holds nothing of a room.
            r = await client.get(f"{flagship.base}/rooms/{room}", headers={"Sec-Fetch-Site": site,
                                                                           "Sec-Fetch-Mode": "navigate"})
            assert r.status_code == 200 and room not in r.text
        assert await messages(client, flagship, room) == 0
        own = {"Origin": f"http://{netloc(flagship)}", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}
        r = await client.post(lines, json={"text": "Can you check app/config.py?"}, headers=flagship.auth | own)
        assert r.status_code == 202, r.text
        async with client.stream("GET", f"{flagship.base}/rooms/{room}/events", headers=flagship.auth) as s:
            await Stream(s).until(said("tutor", "both names point at one dict"), timeout=60)


async def test_a_write_takes_only_a_json_body(flagship):
    """What a form or a `no-cors` fetch can send (text/plain, a form's encodings) never reaches the app."""
    async with httpx.AsyncClient() as client:
        room = await new_room(client, flagship, "typed")
        body = msgspec.json.encode({"text": "as text/plain"})
        for kind in ("text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                     "multipart/form-data; boundary=x", "application/jsonp", None):
            headers = flagship.auth | ({"Content-Type": kind} if kind else {})
            for path in (f"/rooms/{room}/lines", f"/rooms/{room}/answers", f"/rooms/{room}/stop", "/rooms"):
                r = await client.post(f"{flagship.base}{path}", content=body, headers=headers)
                assert r.status_code == 415 and "application/json" in r.json()["error"], (kind, path)
        r = await client.post(f"{flagship.base}/rooms/{room}/stop", content=b"{}",
                              headers=flagship.auth | {"Content-Type": "Application/JSON; charset=utf-8"})
        assert r.status_code == 200
        assert await messages(client, flagship, room) == 0


class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.inline: list[str] = []

    def handle_starttag(self, tag, attrs):
        names = dict(attrs)
        if tag == "script" and "src" not in names:
            self.inline.append("an inline <script>")
        self.inline += [f"{tag} {name}=" for name in names if name.startswith("on") or name == "style"]
        if tag == "style":
            self.inline.append("a <style> element")


async def test_every_answer_carries_the_security_headers(flagship):
    async with httpx.AsyncClient() as client:
        room = await new_room(client, flagship, "headers")
        port = flagship.base.rsplit(":", 1)[1]
        answers = [
            await client.get(f"{flagship.base}/"),
            await client.get(f"{flagship.base}/rooms/{room}"),
            await client.get(f"{flagship.base}/static/room.js"),
            await client.get(f"{flagship.base}/static/style.css"),
            await client.get(f"{flagship.base}/rooms", headers=flagship.auth),
            await client.get(f"{flagship.base}/rooms"),  # 401
            await client.get(f"{flagship.base}/rooms/nosuchroom/state", headers=flagship.auth),  # 404
            await client.get(f"{flagship.base}/nothing-here"),  # 404 from the router
            await client.get(f"{flagship.base}/", headers={"Host": f"evil.example:{port}"}),  # 421
            await client.get(f"{flagship.base}/?token=x"),  # 400
            await client.post(f"{flagship.base}/rooms", content=b"x", headers=flagship.auth),  # 415
            await client.post(f"{flagship.base}/rooms", content=b"x" * (MAX_BODY + 1),  # 413
                              headers=flagship.auth | {"Content-Type": "application/json"}),
        ]
        async with client.stream("GET", f"{flagship.base}/rooms/{room}/events", headers=flagship.auth) as r:
            answers.append(r)
        assert [a.status_code for a in answers] == [200, 200, 200, 200, 200, 401, 404, 404, 421, 400, 415, 413, 200]
        for a in answers:
            h = a.headers
            assert h["content-security-policy"] == CSP, a.url
            assert "frame-ancestors 'none'" in CSP and "script-src 'self';" in CSP and "unsafe" not in CSP
            assert h["x-frame-options"] == "DENY" and h["x-content-type-options"] == "nosniff"
            assert h["referrer-policy"] == "no-referrer" and h["cache-control"] == "no-store", a.url
            assert "set-cookie" not in h and "access-control-allow-origin" not in h
        for page in answers[:2]:  # the pages hold no inline script or style, which the policy would refuse
            tags = _Tags()
            tags.feed(page.text)
            assert tags.inline == [] and "<script src=\"/static/auth.js\"></script>" in page.text


def vm(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of a process, in bytes."""
    status = Path(f"/proc/{pid}/status").read_text()
    return {k: int(re.search(rf"^{k}:\s+(\d+) kB", status, re.M).group(1)) * 1024 for k in ("VmRSS", "VmHWM")}


async def test_an_oversized_body_is_refused_as_it_streams(flagship):
    """A 200 MiB line is refused at the limit while it is still arriving: the server holds no more than the
    limit of it, and never reads the rest."""
    sent = 0

    async def huge():
        nonlocal sent
        chunk = b'{"text": "' + b"x" * (MiB - 10)
        for _ in range(200):
            sent += len(chunk)
            yield chunk

    async with httpx.AsyncClient(timeout=60) as client:
        room = await new_room(client, flagship, "flooded")
        r = await client.get(f"{flagship.base}/rooms", headers=flagship.auth)
        pid = int(r.headers["x-orchestrator-worker"])
        assert pid == flagship.proc.pid
        headers = flagship.auth | {"Content-Type": "application/json"}
        line = f"{flagship.base}/rooms/{room}/lines"
        # Warmed up: a line just under the limit is taken (in another room), so what follows measures only the
        # refusals.
        warm = await new_room(client, flagship, "warm")
        r = await client.post(f"{flagship.base}/rooms/{warm}/lines", headers=headers,
                              content=msgspec.json.encode({"text": "y" * 99_000}))
        assert r.status_code == 202
        await client.post(f"{flagship.base}/rooms/{warm}/stop", json={}, headers=flagship.auth)
        before = vm(pid)

        for _ in range(3):  # chunked: no length said, so it is counted as it comes
            sent = 0
            r = await client.post(line, headers=headers, content=huge())
            assert r.status_code == 413 and r.json()["error"] == f"the request body is over {MAX_BODY} bytes"
            assert sent < 200 * MiB
        sent = 0  # a Content-Length over the limit is refused before the body is read
        r = await client.post(line, headers=headers | {"Content-Length": str(200 * MiB)}, content=huge())
        assert r.status_code == 413 and sent <= 32 * MiB, sent  # what the sockets' buffers took at most
        after = vm(pid)

        grown = after["VmHWM"] - before["VmHWM"]
        print(f"\nserver VmHWM {before['VmHWM'] / MiB:.1f} -> {after['VmHWM'] / MiB:.1f} MiB, VmRSS "
              f"{before['VmRSS'] / MiB:.1f} -> {after['VmRSS'] / MiB:.1f} MiB after 4 refused 200 MiB bodies")
        assert grown <= MAX_BODY + 8 * MiB, f"the server's peak memory grew by {grown / MiB:.1f} MiB"
        assert after["VmRSS"] - before["VmRSS"] <= MAX_BODY + 8 * MiB
        assert await messages(client, flagship, room) == 0


async def test_event_streams_are_capped_per_room_and_per_process(flagship):
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client, AsyncExitStack() as held:
        async def open_stream(room: str) -> httpx.Response:
            r = await held.enter_async_context(client.stream("GET", f"{flagship.base}/rooms/{room}/events",
                                                             headers=flagship.auth))
            return r

        rooms = [await new_room(client, flagship, f"crowded {i}") for i in range(MAX_STREAMS // MAX_ROOM_STREAMS + 1)]
        first = [await open_stream(rooms[0]) for _ in range(MAX_ROOM_STREAMS)]
        assert {r.status_code for r in first} == {200}
        async with client.stream("GET", f"{flagship.base}/rooms/{rooms[0]}/events", headers=flagship.auth) as r:
            assert r.status_code == 429 and r.headers["retry-after"] == "5"
            assert f"has {MAX_ROOM_STREAMS} event streams open" in msgspec.json.decode(await r.aread())["error"]
        # A page closed gives its place back (once the server sees the connection go).
        await first[0].aclose()
        with trio.fail_after(30):
            while True:
                async with client.stream("GET", f"{flagship.base}/rooms/{rooms[0]}/events",
                                         headers=flagship.auth) as r:
                    if r.status_code == 200:
                        break
                    assert r.status_code == 429
                await trio.sleep(0.05)
        first.append(await open_stream(rooms[0]))
        assert first[-1].status_code == 200

        # Other rooms fill the process's own limit; past it, any room is refused.
        for room in rooms[1:-1]:
            assert {(await open_stream(room)).status_code for _ in range(MAX_ROOM_STREAMS)} == {200}
        async with client.stream("GET", f"{flagship.base}/rooms/{rooms[-1]}/events", headers=flagship.auth) as r:
            assert r.status_code == 429
            assert f"has {MAX_STREAMS} event streams open" in msgspec.json.decode(await r.aread())["error"]
    # All closed: streams open again.
    async with httpx.AsyncClient(timeout=60) as client:
        with trio.fail_after(30):
            while True:
                async with client.stream("GET", f"{flagship.base}/rooms/{rooms[-1]}/events",
                                         headers=flagship.auth) as r:
                    if r.status_code == 200:
                        break
                await trio.sleep(0.05)


def environ(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


async def test_the_token_is_nowhere_a_workers_agents_can_read(tmp_path):
    """With --workers 2 each worker learns the token through a pipe it closes at once: not in any process's
    environment or command line, no descriptor left open, and the agents' commands see none of it."""
    scenario = tmp_path / "env.yaml"
    scenario.write_text(
        "name: env\nteam:\n  commander:\n    tools: [bash]\nmodels:\n  commander:\n"
        "    - call: {bash: {command: \"env; echo; ls -l /proc/self/fd; echo pids: $(ls /proc | grep -c '^[0-9]')\"}}\n"
        "    - say: Done looking.\n"
        "turns:\n  - user: look around\n")
    server = start_server(tmp_path, "--workers", "2", "--scripted", str(scenario), "--workspace", str(tmp_path / "ws"))
    token = server.token.encode()
    try:
        async with httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0), timeout=30) as client:
            workers: set[int] = set()
            with trio.fail_after(60):
                while len(workers) < 2:
                    r = await client.get(f"{server.base}/rooms", headers=server.auth)
                    workers.add(int(r.headers["x-orchestrator-worker"]))
            for pid in (server.proc.pid, *workers):
                assert token not in environ(pid) and b"ORCHESTRATOR_SERVE_TOKEN" not in environ(pid)
                assert token not in Path(f"/proc/{pid}/cmdline").read_bytes()
            for pid in workers:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                fd = int(cmdline[cmdline.index(b"--token-fd") + 1])
                link = os.readlink(f"/proc/{pid}/fd/{fd}") if os.path.lexists(f"/proc/{pid}/fd/{fd}") else ""
                assert not link.startswith("pipe:"), f"worker {pid} still holds the token's pipe"

            room = await new_room(client, server, "env")
            r = await client.post(f"{server.base}/rooms/{room}/lines", json={"text": "look around"},
                                  headers=server.auth)
            assert r.status_code == 202
            async with client.stream("GET", f"{server.base}/rooms/{room}/events", headers=server.auth) as s:
                stream = Stream(s)
                result = (await stream.until(lambda ev: ev["type"] == "message" and ev["kind"] == "tool_result",
                                             timeout=60)).event
        assert not result["is_error"] and "PATH=" in result["text"], result["text"]
        assert server.token not in result["text"] and "TOKEN" not in result["text"]
        assert "ORCHESTRATOR" not in result["text"]  # none of the server's own settings reach a command
        on_disk = [p for p in tmp_path.rglob("*") if p.is_file() and token in p.read_bytes()]
        assert on_disk == []  # the database, the workspace, the server's log
    finally:
        assert server.stop() == 0, (tmp_path / "serve.err").read_text()
