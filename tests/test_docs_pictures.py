"""The documentation's pictures, taken by the browser: the room page and its timeline from `serve --scripted`, and
the built site's own pages. `ORCHESTRATOR_DOCS_PICTURES=1` writes the room's PNGs into docs/images/ (commit them);
without it they go to a temporary folder and the test checks only that the page renders what they show."""
from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.serving import ROOT, start_server
from tests.test_serve_browser import (CHROMIUM, open_new_room, wait_count,  # noqa: F401 (skips without chromium)
                                      watch_csp)

pytestmark = pytest.mark.browser
pytest.importorskip("playwright", reason="pip install -e '.[dev]' installs playwright (no browser download)")
pytest.importorskip("starlette", reason="the serve extra is not installed: pip install -e '.[serve]'")

PNG = b"\x89PNG\r\n\x1a\n"


def pictures_folder(tmp_path: Path) -> Path:
    return ROOT / "docs" / "images" if os.environ.get("ORCHESTRATOR_DOCS_PICTURES") else tmp_path


def test_the_room_page_and_its_timeline(browser, tmp_path):
    server = start_server(tmp_path, "--scripted", "flagship")
    context = browser.new_context(viewport={"width": 1400, "height": 900}, device_scale_factor=1)
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        refused = watch_csp(page)
        page.goto(server.url)
        open_new_room(page, "flagship")
        page.fill("#line", "Can you check app/config.py? The port test fails and I don't know why.")
        page.press("#line", "Enter")
        page.wait_for_selector(".msg[data-author='tutor'] .text:has-text('both names point at one dict')")
        page.wait_for_selector("#floor:text('tutor')")
        wait_count(page, "#ledger tbody tr.status-done", 3)
        page.wait_for_selector("#usage tbody tr:has-text('tutor')")
        wait_count(page, "#lanes .bar.turn.done", 5)  # commander, researcher, reviewer, worker, tutor
        wait_count(page, ".msg.streaming", 0)
        folder = pictures_folder(tmp_path)
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / "room.png"))
        page.locator("#timeline").screenshot(path=str(folder / "timeline.png"))
        assert refused == []
    finally:
        context.close()
        assert server.stop() == 0, (tmp_path / "serve.err").read_text()
    for name in ("room.png", "timeline.png"):
        data = (folder / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 10_000, name


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the name http.server gives it)
        pass


@pytest.fixture
def site(tmp_path):
    pytest.importorskip("mkdocs", reason="the site extra is not installed: pip install -e '.[site]'")
    out = tmp_path / "site"
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--quiet", "-d", str(out)], cwd=ROOT,
                           capture_output=True, text=True, timeout=300, env=os.environ | {"NO_MKDOCS_2_WARNING": "1"})
    assert build.returncode == 0, build.stderr[-3000:]
    handler = functools.partial(Quiet, directory=str(out))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_the_sites_quickstart_and_concepts_pages(browser, site, tmp_path):
    folder = Path(os.environ.get("ORCHESTRATOR_DOCS_SHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    try:
        page = context.new_page()
        for path, heading, name in (("/quickstart/", "Quickstart", "site-quickstart.png"),
                                    ("/concepts/", "Concepts", "site-concepts.png")):
            answer = page.goto(site + path)
            assert answer.status == 200, path
            assert page.locator("article h1").inner_text().startswith(heading)  # then the theme's permalink
            assert page.locator("nav.md-nav").count() > 0  # the theme's navigation, not a bare page
            page.screenshot(path=str(folder / name), full_page=True)
            assert (folder / name).read_bytes().startswith(PNG)
        assert page.locator("article img[src$='.svg']").count() == 1  # the concepts diagram
    finally:
        context.close()
