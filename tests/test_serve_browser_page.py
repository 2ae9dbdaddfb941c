"""What a newcomer sees on the room page, in Debian's chromium under Playwright against `serve --workers 2`:
agents' Markdown rendered (and nothing of it run), what the user does not see kept out of the transcript
until asked for, a timeline the work fills however short, a readable page for an address opened without the
token, and a favicon."""
from __future__ import annotations

import pytest

from tests.serving import ROOT, start_server
from tests.test_serve_browser import CHROMIUM, open_new_room, shot, watch_csp  # noqa: F401 (skips without chromium)

pytestmark = pytest.mark.browser
pytest.importorskip("playwright", reason="pip install -e '.[dev]' installs playwright (no browser download)")
pytest.importorskip("starlette", reason="the serve extra is not installed: pip install -e '.[serve]'")

import httpx  # noqa: E402

SECRET = "SECRET-WORKER-LINE"
SCENARIO = f"""\
name: page-probe
description: Markdown, an anonymous worker and a handoff, as the browser shows them.
team:
  agents:
    - name: tutor
      from: {ROOT / "agents" / "tutor.md"}
      model: scripted
      description: Patient maths tutor
models:
  commander:
    - call: {{run_worker: {{task: Count the fractions.}}}}
    - say: "Found **three** fractions, see `notes.md`:\\n\\n- one half\\n- one quarter\\n\\n\
[the docs](https://example.com/docs) [bad](javascript:window.pwned=1) <img src=x onerror=window.pwned=2> \
<script>window.pwned=3</script> ![pixel](http://127.0.0.1:9/p.png) [api](/rooms)\\n\\n```\\nx = 1/2\\n```"
    - call: {{hand_off_to: {{agent: tutor, note: wants help with fractions}}}}
  worker:
    - say: "{SECRET}: 3 fractions"
  tutor:
    - say: "Let's start: what is 1/2 + 1/4?"
turns:
  - user: count the fractions
  - user: now teach me
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("page")
    path = tmp / "page.yaml"
    path.write_text(SCENARIO)
    s = start_server(tmp, "--workers", "2", "--scripted", str(path))
    yield s
    assert s.stop() == 0, (tmp / "serve.err").read_text()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    refused = watch_csp(page)
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    page.goto(server.url)
    page.wait_for_selector("#rooms")
    yield page
    context.close()
    assert refused == [], "the page broke its Content-Security-Policy"
    assert missing == [], f"the page asked for what the server does not have: {missing}"


def say(page, line: str) -> None:
    page.fill("#line", line)
    page.press("#line", "Enter")


def test_an_agents_markdown_is_rendered_and_nothing_in_it_runs(page):
    open_new_room(page, "markdown")
    say(page, "count the fractions")
    message = page.wait_for_selector(".msg[data-author='commander'] .text strong:text('three')")
    text = page.locator(".msg[data-author='commander'] .text", has=page.locator("strong"))
    assert text.locator("code").first.inner_text() == "notes.md"
    assert text.locator("ul > li").all_inner_texts() == ["one half", "one quarter"]
    assert text.locator("pre code").inner_text() == "x = 1/2"
    docs = text.locator("a", has_text="the docs")
    assert docs.get_attribute("href") == "https://example.com/docs"
    assert "noopener" in docs.get_attribute("rel")
    hrefs = page.eval_on_selector_all("#transcript a", "links => links.map((a) => a.getAttribute('href'))")
    # a javascript: link is no link, one to this server's API has no address, an image is only a link to it
    assert hrefs == ["https://example.com/docs", "http://127.0.0.1:9/p.png", None], hrefs
    # Raw HTML stays text: no element of it, nothing run
    said = message.evaluate("n => n.closest('.text').textContent")
    assert "<script>window.pwned=3</script>" in said and "<img src=x onerror=window.pwned=2>" in said
    assert page.locator("#transcript img, #transcript script, #transcript [onerror]").count() == 0
    assert page.evaluate("window.pwned") is None
    shot(page, "7-markdown")


def test_what_the_user_does_not_see_stays_out_of_the_transcript(page):
    open_new_room(page, "hidden")
    page.evaluate("""() => {  // every line shown in the transcript while it is shown, as it happened
        window.shown = [];
        const look = () => document.querySelectorAll('#transcript .msg').forEach((n) => {
            if (n.offsetParent !== null) window.shown.push(n.innerText);
        });
        new MutationObserver(look).observe(document.getElementById('transcript'),
                                           {childList: true, subtree: true, characterData: true});
    }""")
    say(page, "count the fractions")
    page.wait_for_selector(".msg[data-author='commander'] .text:has-text('three')")
    say(page, "now teach me")
    page.wait_for_selector(".msg[data-author='tutor'] .text:has-text('what is 1/2 + 1/4')")
    page.wait_for_selector("#floor:text('tutor')")
    seen = "\n".join(page.evaluate("window.shown")) + page.inner_text("#transcript")
    assert SECRET not in seen, "an anonymous worker's line was shown"
    assert "handed you the floor" not in seen, "the handoff's note to the tutor was shown"
    assert "hand_off_to" in page.inner_text("#transcript")  # what the user does see of the handoff

    # The page's own view of them: the box under the transcript.
    page.check("#show-hidden")
    page.wait_for_selector(f".msg[data-author='worker'] .text:has-text('{SECRET}')")
    page.wait_for_selector(".msg.hidden .text:has-text('The commander handed you the floor')")
    assert SECRET in page.inner_text("#transcript")
    shot(page, "8-hidden-shown")


def test_the_timeline_is_filled_by_the_work_however_short(page):
    open_new_room(page, "timeline")
    say(page, "count the fractions")
    page.wait_for_selector(".msg[data-author='commander'] .text:has-text('three')")
    page.wait_for_selector("#lanes .bar.turn.done")
    page.wait_for_timeout(300)  # the next frame's drawing

    def extent() -> dict:
        """Where the bars are drawn, and what share of the work the first turn took (its own seconds over the
        seconds anything ran, the idle stretches left out), so its width is judged against its own length."""
        return page.evaluate("""() => {
            const track = document.querySelector('#lanes .track').getBoundingClientRect();
            const nodes = Array.from(document.querySelectorAll('#lanes .bar'));
            const bars = nodes.map((b) => b.getBoundingClientRect());
            const first = document.querySelector("#lanes .lane[data-agent='commander'] .bar.turn");
            const spans = nodes.map((b) => [+b.dataset.start, +b.dataset.end]).sort((a, b) => a[0] - b[0]);
            let worked = 0, reach = -Infinity;
            for (const [s, e] of spans) {
                worked += Math.max(0, e - Math.max(s, reach));
                reach = Math.max(reach, e);
            }
            return {left: Math.min(...bars.map((r) => r.left)) - track.left,
                    right: Math.max(...bars.map((r) => r.right)) - track.left, width: track.width,
                    first: first.getBoundingClientRect().width,
                    share: (+first.dataset.end - +first.dataset.start) / worked,
                    cuts: document.querySelectorAll("#lanes .lane:first-child .gap").length};
        }""")

    short = extent()
    assert short["right"] - short["left"] > 0.9 * short["width"], f"a short run squeezed into a sliver: {short}"
    # A second line after a pause: the idle stretch between the runs is cut, so the first still shows.
    page.wait_for_timeout(3000)
    say(page, "now teach me")
    page.wait_for_selector(".msg[data-author='tutor'] .text:has-text('what is 1/2 + 1/4')")
    page.wait_for_timeout(300)
    both = extent()
    assert both["right"] - both["left"] > 0.9 * both["width"], both
    # Drawn at its share of the work, the cut stretches taking a small fixed part each (the page's GAP_SHARE of
    # the work): had the pause counted, the first turn would be a small part of that share.
    fair = both["width"] * both["share"] / (1 + 0.06 * both["cuts"])
    assert both["first"] >= 0.8 * fair - 1, f"the first run squeezed by the pause after it: {both}"
    assert page.locator("#lanes .gap").count() >= 1
    assert "cut" in page.inner_text("#timeline")
    shot(page, "9-timeline")


def test_an_address_opened_without_the_token_is_a_page_that_says_what_to_do(browser, server):
    context = browser.new_context()
    try:
        page = context.new_page()
        refused = watch_csp(page)
        for path, status in (("/rooms", 401), ("/rooms/abc/state", 401), ("/?token=abc", 400)):
            answer = page.goto(server.base + path)
            assert answer.status == status
            assert answer.headers["content-type"].startswith("text/html"), path
            text = page.inner_text("body")
            assert "orchestrator serve" in text and "#token=" in text, text
            assert "{" not in text, f"{path} answered with JSON: {text}"
        assert page.locator("h1").inner_text() in ("This address needs the server's token",
                                                    "This request was refused")
        assert refused == []
    finally:
        context.close()
    # A script still gets JSON.
    r = httpx.get(server.base + "/rooms", timeout=10)
    assert r.status_code == 401 and r.headers["content-type"] == "application/json" and "error" in r.json()


def test_the_favicon_is_served(browser, server):
    context = browser.new_context()
    try:
        page = context.new_page()
        for path in ("/favicon.ico", "/static/favicon.svg"):
            answer = page.goto(server.base + path)
            assert answer.status == 200 and answer.headers["content-type"].startswith("image/svg+xml"), path
        page.goto(server.url)
        icon = page.locator("link[rel='icon']").get_attribute("href")
        assert page.request.get(server.base + icon).status == 200
    finally:
        context.close()
