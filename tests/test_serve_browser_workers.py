"""The room page in a real browser (Debian's chromium under Playwright) against `orchestrator serve --workers 2`:
a page whose event stream and state land on the worker that does not run the room shows it as with one
worker: busy while its tasks run, the timeline's open task bars (on a reload too), the agent view, and the stop
ending them."""
from __future__ import annotations

import time

import pytest

from tests.serving import Server, start_server
from tests.test_serve_browser import CHROMIUM, shot, wait_count, watch_csp  # noqa: F401 (skips without chromium)

pytestmark = pytest.mark.browser
pytest.importorskip("playwright", reason="pip install -e '.[dev]' installs playwright (no browser download)")
pytest.importorskip("starlette", reason="the serve extra is not installed: pip install -e '.[serve]'")

import httpx  # noqa: E402

from tests.test_serve_any_worker import slow_stop  # noqa: E402

TRIES = 60  # fresh browser contexts until one's stream and state both land on the worker without the room


@pytest.fixture
def server(tmp_path):
    s = start_server(tmp_path, "--workers", "2", "--scripted", str(slow_stop(tmp_path)))
    yield s
    assert s.stop() == 0, (tmp_path / "serve.err").read_text()


def busy_room(server: Server) -> tuple[str, str]:
    """A room at work (three tasks running until stopped) and the worker that runs it."""
    with httpx.Client(timeout=30) as client:
        r = client.post(f"{server.base}/rooms", json={"name": "two workers"}, headers=server.auth)
        room, owner = r.json()["id"], r.headers["x-orchestrator-worker"]
        r = client.post(f"{server.base}/rooms/{room}/lines", json={"text": "Survey all caching papers."},
                        headers=server.auth)
        assert r.status_code == 202, r.text
        for _ in range(400):
            tasks = client.get(f"{server.base}/rooms/{room}/state", headers=server.auth).json()["tasks"]
            if sum(t["status"] == "running" for t in tasks) == 3:
                return room, owner
            time.sleep(0.05)
    raise AssertionError("the room's tasks never ran")


class Served:
    """Which worker answered each of a page's calls: the event stream and the state."""

    def __init__(self, page):
        self.events: list[str] = []
        self.state: list[str] = []
        page.on("response", self.seen)

    def seen(self, response) -> None:
        worker = response.headers.get("x-orchestrator-worker", "")
        if response.url.endswith("/events"):
            self.events.append(worker)
        elif response.url.endswith("/state"):
            self.state.append(worker)

    def only(self, worker: str) -> bool:
        return bool(self.events and self.state) and set(self.events) | set(self.state) == {worker}

    def loaded(self, page) -> None:
        """Until the page is live and both of its first state calls (at load, and once the stream is open) were
        answered: later ones come only with the room's events."""
        page.wait_for_selector("#link:text('live')")
        for _ in range(200):
            if len(self.state) >= 2:
                return
            page.wait_for_timeout(25)
        raise AssertionError(f"the page asked for the room's state {len(self.state)} times")


def shows_the_busy_room(page) -> None:
    """What a page of the room at work shows: busy, three open task bars, three running rows, the agent view."""
    page.wait_for_selector("#busy:text('working')")
    wait_count(page, "#lanes .bar.task.open", 3)
    wait_count(page, "#ledger tbody tr.status-running", 3)
    page.wait_for_selector("#agent-view[data-agent='commander'] .block.call:has-text('dispatch_to')")


def page_on_the_other_worker(browser, server: Server, room: str, owner: str):
    """A page that showed the room at work with its stream and every state call answered by the worker without
    the room. The browser picks which of its open connections a call takes, and so which worker answers it: a
    page whose stream, or any state call, went to the owner proves nothing and is tried again in a new context."""
    for _ in range(TRIES):
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        page.set_default_timeout(20_000)
        refused = watch_csp(page)
        served = Served(page)
        try:
            page.goto(server.url)  # the token, kept for the tab
            page.wait_for_selector("#rooms tbody tr")
            page.goto(f"{server.base}/rooms/{room}")
            served.loaded(page)
            other = served.events[0]
            if other != owner and served.only(other):
                shows_the_busy_room(page)
                if served.only(other):
                    return context, page, served, other, refused
        except BaseException:
            context.close()
            raise
        context.close()
    raise AssertionError(f"no page in {TRIES} had its stream and state from the worker without the room")


def test_a_page_served_by_the_worker_without_the_room(browser, server):
    room, owner = busy_room(server)
    context, page, served, other, refused = page_on_the_other_worker(browser, server, room, owner)
    try:
        shot(page, "6-two-workers")

        # A reload (until its stream lands on the same worker again) replays the timeline from the room's owner.
        for _ in range(TRIES):
            served.events.clear()
            served.state.clear()
            page.reload()
            served.loaded(page)
            if served.only(other):
                break
        else:
            raise AssertionError(f"no reload in {TRIES} had its stream and state from worker {other}")
        wait_count(page, "#lanes .bar.task.open", 3)
        page.wait_for_selector("#busy:text('working')")
        assert page.locator(".msg[data-author='commander'] .text:has-text('Starting both')").count() == 1

        page.click("#stop")
        page.wait_for_selector(".note.stopped:has-text('stopped from the web page')")
        wait_count(page, "#lanes .bar.task.cancelled", 3)
        wait_count(page, "#ledger tbody tr.status-cancelled", 3)
        page.wait_for_selector("#busy:text('idle')")
        assert set(served.events) == {other}
        assert refused == []
    finally:
        context.close()
