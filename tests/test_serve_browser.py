"""The room page in a real browser: Debian's chromium driven by Playwright (never a downloaded browser),
against `orchestrator serve` playing flagship.yaml's team with scripted models on 127.0.0.1.

Playwright's API is sync/asyncio, so it runs here in the test process; the server is a subprocess.
Screenshots go to build/screenshots/ (or $ORCHESTRATOR_SCREENSHOTS).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from tests.serving import ROOT, start_server

CHROMIUM = os.environ.get("ORCHESTRATOR_CHROMIUM", "/usr/bin/chromium")
SHOTS = Path(os.environ.get("ORCHESTRATOR_SCREENSHOTS", ROOT / "build" / "screenshots"))
WORK = 2.5  # seconds each worker's first reply takes: the parallel dispatch stays on screen

pytestmark = pytest.mark.browser

if not shutil.which(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is missing, so the browser tests of `serve` are skipped "
                "(apt-get install -y chromium)", allow_module_level=True)
pytest.importorskip("playwright", reason="pip install -e '.[dev]' installs playwright (no browser download)")
pytest.importorskip("starlette", reason="the serve extra is not installed: pip install -e '.[serve]'")


def slow_flagship(tmp: Path) -> Path:
    """flagship.yaml as it is, except that its three workers take a moment before their first reply."""
    scn = yaml.safe_load((ROOT / "scenarios" / "flagship.yaml").read_text())
    for worker in ("researcher", "reviewer", "worker"):
        scn["models"][worker][0]["delay"] = WORK
    path = tmp / "flagship-slow.yaml"
    path.write_text(yaml.safe_dump(scn, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    s = start_server(tmp, "--scripted", str(slow_flagship(tmp)))
    yield s
    assert s.stop() == 0, (tmp / "serve.err").read_text()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    refused = watch_csp(page)
    page.goto(server.url)  # the printed address: the page keeps the token from its fragment, for this tab
    yield page
    context.close()
    assert refused == [], "the room's own pages broke their Content-Security-Policy"


def watch_csp(page) -> list[str]:
    """What the Content-Security-Policy refused on `page`, as the browser said it (the pages' own scripts and
    styles must never need an exception)."""
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda e: refused.append(str(e)) if "Content Security Policy" in str(e) else None)
    return refused


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def open_new_room(page, name: str) -> None:
    page.fill("#room-name", name)
    page.click("#new-room button")
    page.wait_for_url("**/rooms/*")
    page.wait_for_selector("#link:text('live')")


def open_task_bars(page) -> list[dict]:
    # Found and measured in one evaluation: the timeline redraws every 200 ms while a bar is open, replacing its
    # elements, and eval_on_selector_all queries first and measures in a second call: a redraw in between left it
    # measuring detached elements (every rect 0).
    return page.evaluate("""() => Array.from(document.querySelectorAll('#lanes .bar.task.open'), b => {
        const r = b.getBoundingClientRect();
        return {agent: b.closest('.lane').dataset.agent, left: r.left, right: r.right};
    })""")


def wait_count(page, selector: str, n: int) -> None:
    """Until `selector` matches `n` elements. Not wait_for_function: that compiles its expression in the page,
    which the page's Content-Security-Policy (no eval) refuses, as it should."""
    from playwright.sync_api import expect

    expect(page.locator(selector)).to_have_count(n, timeout=20_000)


def transcript(page) -> str:
    return page.inner_text("#transcript")


def test_a_room_at_work_in_the_browser(page, server):
    assert "token" not in page.url and page.context.cookies() == []  # out of the address bar, and no cookie
    assert page.evaluate("sessionStorage.getItem('orchestrator-token')") == server.token
    open_new_room(page, "browser flagship")

    page.evaluate("""() => {  // who streamed text into the transcript, as it happened
        window.streamed = [];
        new MutationObserver((changes) => changes.forEach((c) => c.addedNodes.forEach((n) => {
            if (n.classList && n.classList.contains('streaming')) window.streamed.push(n.dataset.author);
        }))).observe(document.getElementById('transcript'), {childList: true});
    }""")
    page.fill("#line", "Can you check app/config.py? The port test fails and I don't know why.")
    page.press("#line", "Enter")
    page.wait_for_selector(".msg[data-author='commander'] .text:has-text('in parallel')")
    assert "commander" in page.evaluate("window.streamed")

    # The parallel dispatch: three lanes, three task bars open at the same time.
    wait_count(page, "#lanes .bar.task.open", 3)
    bars = open_task_bars(page)
    assert sorted(b["agent"] for b in bars) == ["researcher", "reviewer", "worker"]
    assert max(b["left"] for b in bars) < min(b["right"] for b in bars), f"the bars do not overlap: {bars}"
    wait_count(page, "#ledger tbody tr.status-running", 3)
    assert page.locator("#lanes .lane[data-agent='researcher'] .tick").count() == 0  # it has not read yet
    page.wait_for_selector("#agent-view[data-agent='commander'] .block.call:has-text('dispatch_to')")
    shot(page, "1-parallel-dispatch")

    # The streamed answer, then the floor going to the tutor, who explains.
    page.wait_for_selector(".msg[data-author='commander'] .text:has-text('Here is what the team found')")
    page.wait_for_selector(".msg[data-author='tutor'] .text:has-text('both names point at one dict')")
    page.wait_for_selector("#floor:text('tutor')")
    assert page.locator(".msg.streaming").count() == 0  # every stream ended in its message
    assert page.locator("#lanes .lane[data-agent='researcher'] .tick").count() == 1  # read_file
    assert page.locator("#lanes .lane[data-agent='reviewer'] .tick").count() == 2
    wait_count(page, "#ledger tbody tr.status-done", 3)
    # What the room spent, per agent and model as `show --usage` prints it, with the total last.
    page.wait_for_selector("#usage tbody tr:has-text('tutor')")
    rows = page.eval_on_selector_all("#usage tbody tr", "rs => rs.map((r) => [...r.cells].map((c) => c.textContent))")
    assert [r[0] for r in rows][-1] == "all" and {"commander", "researcher", "reviewer", "tutor"} <= {r[0] for r in rows}
    assert sum(int(r[2]) for r in rows[:-1]) == int(rows[-1][2]) > 0  # calls
    assert all(r[5].endswith("%") or r[5] == "-" for r in rows)
    shot(page, "2-answered")

    # The researcher's view: its own task and reads, never the reviewer's task.
    page.select_option("#agent", "researcher")
    page.wait_for_selector("#agent-view[data-agent='researcher']")
    view = page.inner_text("#agent-view")
    assert "Explain what app/config.py does" in view and "read_file" in view
    assert "Find bugs" not in view and "reviewer" not in view.split("You are researcher")[-1].split("tools:")[0]
    page.select_option("#agent", "reviewer")
    page.wait_for_selector("#agent-view[data-agent='reviewer']")
    assert "Find bugs" in page.inner_text("#agent-view")
    page.select_option("#agent", "researcher")
    page.wait_for_selector("#agent-view[data-agent='researcher']")
    shot(page, "3-researcher-view")

    # A reload replays the room: the transcript and, from this process's journal, the timeline.
    page.reload()
    page.wait_for_selector(".msg[data-author='tutor'] .text:has-text('both names point at one dict')")
    wait_count(page, "#lanes .bar.task.done", 3)
    # commander, researcher, reviewer, worker, tutor: one turn each, all ended
    assert page.locator("#lanes .bar.turn").count() == page.locator("#lanes .bar.turn.done").count() == 5

    # Interjecting while the tutor holds the floor goes to the tutor.
    page.fill("#line", "So I should copy it first?")
    page.press("#line", "Enter")
    page.wait_for_selector(".msg[data-author='tutor'] .text:has-text('config = dict(DEFAULTS)')")
    page.wait_for_selector("#floor:text('commander')")
    assert "<handback" not in transcript(page)


def test_stop_during_slow_work(page, server):
    open_new_room(page, "browser stop")
    page.fill("#line", "Can you check app/config.py?")
    page.press("#line", "Enter")
    wait_count(page, "#lanes .bar.task.open", 3)
    page.click("#stop")
    page.wait_for_selector(".note.stopped:has-text('stopped from the web page')")
    wait_count(page, "#ledger tbody tr.status-cancelled", 3)
    wait_count(page, "#lanes .bar.open", 0)  # drawn next frame
    assert page.locator("#lanes .bar.task.cancelled").count() == 3
    assert "Here is what the team found" not in transcript(page)
    page.wait_for_selector("#busy:text('idle')")
    shot(page, "4-stopped")

    # The room takes the next line (the commander's script goes on with its next reply).
    page.fill("#line", "Fine, just summarize what you have.")
    page.press("#line", "Enter")
    page.wait_for_selector(".msg[data-author='user'] .text:has-text('just summarize')")
    page.wait_for_selector(".msg[data-author='commander'] .text:has-text('Here is what the team found')")


def test_a_question_is_answered_from_the_page(browser, tmp_path):
    server = start_server(tmp_path, "--scripted", str(ROOT / "scenarios" / "risky-confirmed.yaml"),
                          "--workspace", str(tmp_path / "ws"))
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(20_000)
        refused = watch_csp(page)
        page.goto(server.url)
        open_new_room(page, "browser question")
        page.fill("#line", "Clean up the data folder.")
        page.press("#line", "Enter")
        question = page.wait_for_selector(".question")
        assert "commander asks" in question.inner_text() and "rm -rf data" in question.inner_text()
        assert (tmp_path / "ws" / "data" / "old.csv").exists()  # nothing runs before the answer
        page.wait_for_selector("#busy:text('working')")
        page.wait_for_selector("#agent-view[data-agent='commander'] .block.call:has-text('rm -rf data')")
        shot(page, "5-question")
        page.click(".question .answer-once")
        page.wait_for_selector(".msg.kind-notice:has-text(\"answered 'once'\")")
        page.wait_for_selector(".msg[data-author='commander'] .text:has-text('Deleted the data folder')")
        assert page.locator(".question").count() == 0
        assert not (tmp_path / "ws" / "data").exists()
        assert refused == []
    finally:
        context.close()
        assert server.stop() == 0
