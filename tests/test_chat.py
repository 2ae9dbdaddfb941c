"""`orchestrator chat` driven as a person would: a real pseudo-terminal (pexpect), its screen read back
through a terminal emulator (pyte), scripted models from small scenario files (their turns are
ignored: the test types). Plus the View's line handling and the confirmation answers, in process.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pexpect
import pyte
import pytest

from orchestrator.core.events import CallRef, Confirm, MessageEvent, State, TaskEvent, TextDeltaEvent
from orchestrator.cli.chat.shell import Shell
from orchestrator.cli.chat.view import View

ENTRY = [sys.executable, "-m", "orchestrator"]
COLS, ROWS = 120, 50
_ENDPOINTS = ("OLLAMA_HOST", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ORCHESTRATOR_MODEL", "ORCHESTRATOR_CONFIG",
              "ORCHESTRATOR_DB")


class Term:
    """The shell in a pty; `screen()` is what a person would see (answering cursor-position queries,
    as a real terminal does, so that prompt_toolkit draws its bottom toolbar)."""

    def __init__(self, tmp: Path, *args: str, then_stty: bool = False, cols: int = COLS,
                 env: dict[str, str] | None = None):
        home = tmp / "home"
        home.mkdir(exist_ok=True)
        environ = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in _ENDPOINTS}
        environ.update(TERM="xterm", HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                       XDG_DATA_HOME=str(home / ".data"), LANG="C.UTF-8", COLUMNS=str(cols), LINES=str(ROWS))
        environ.pop("NO_COLOR", None)
        environ.update(env or {})
        command, argv = ENTRY[0], [*ENTRY[1:], *args]
        if then_stty:  # show the exit code and the terminal's mode once the shell is gone
            command, argv = "sh", ["-c", '"$0" "$@"; echo "exit=$?"; stty -a', *ENTRY, *args]
        self.cols = cols
        self.child = pexpect.spawn(command, argv, cwd=str(tmp), env=environ, dimensions=(ROWS, cols),
                                   encoding="utf-8", codec_errors="replace")
        self.term = pyte.HistoryScreen(cols, ROWS, history=2000)
        self.term.write_process_input = lambda data: self.child.send(data)
        self.stream = pyte.Stream(self.term)

    def pump(self, seconds: float = 0.05) -> None:
        end = time.monotonic() + seconds
        while True:
            try:
                self.stream.feed(self.child.read_nonblocking(65536, timeout=0.02))
            except pexpect.TIMEOUT:
                pass
            except pexpect.EOF:
                return
            if time.monotonic() >= end:
                return

    def screen(self) -> str:
        scrolled = ["".join(line[x].data for x in range(self.cols)).rstrip() for line in self.term.history.top]
        return "\n".join(scrolled + [line.rstrip() for line in self.term.display])

    def wait(self, pattern: str, timeout: float = 15.0) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            self.pump(0.05)
            if m := re.search(pattern, self.screen()):
                return m
            if time.monotonic() > deadline or not self.child.isalive() and not self._unread():
                raise AssertionError(f"{pattern!r} not on screen after {timeout}s:\n{self.screen()}")

    def _unread(self) -> bool:
        try:
            self.stream.feed(self.child.read_nonblocking(65536, timeout=0.05))
            return True
        except (pexpect.TIMEOUT, pexpect.EOF):
            return False

    def prompt_row(self) -> str:
        return next((ln.rstrip() for ln in reversed(self.term.display) if ln.startswith("you")), "")

    def type(self, text: str, gap: float = 0.0) -> None:
        for ch in text if gap else [text]:
            self.child.send(ch)
            self.pump(gap)

    def line(self, text: str) -> None:
        self.child.send(text)
        self.pump(0.05)
        self.child.send("\r")

    def exit_status(self, timeout: float = 10.0) -> int | None:
        deadline = time.monotonic() + timeout
        while self.child.isalive() and time.monotonic() < deadline:
            self.pump(0.05)
        self.pump(0.05)
        self.child.close()
        return self.child.exitstatus

    def close(self) -> None:
        if self.child.isalive():
            self.child.kill(signal.SIGKILL)
        self.child.close()


@pytest.fixture
def term(tmp_path):
    opened: list[Term] = []

    def start(*args: str, then_stty: bool = False, db: bool = True, **kw) -> Term:
        t = Term(tmp_path, "chat", *(("--db", str(tmp_path / "rooms.db")) if db else ()), *args,
                 then_stty=then_stty, **kw)
        opened.append(t)
        return t

    yield start
    for t in opened:
        t.close()


def scenario(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\n" + textwrap.dedent(body))
    return str(path)


# --- the shell in a terminal --------------------------------------------------------------------------

def test_mention_handoff_and_handback(tmp_path, term):
    scn = scenario(tmp_path, "tutoring", """
        team:
          agents:
            - {name: tutor, description: Patient maths tutor, interactive: true}
            - {name: coder, description: Writes code}
        models:
          commander:
            - call: {hand_off_to: {agent: tutor, note: wants help with fractions}}
            - say: Welcome back. Anything else?
              sees: thanks
          tutor:
            - say: "Let's start: what is 1/2 + 1/4?"
              sees: fractions
            - say: "Right, 3/4! <handback />"
              sees: "3/4?"
          coder:
            - say: "Use a dict comprehension:\\n{k: v for k, v in pairs}"
              sees: build a dict
        """)
    t = term("--scripted", scn)
    t.wait(r"(?m)^you>")
    t.type("@co")
    t.wait(r"@commander\s+hosts the room\s+@coder\s+Writes code")  # the completion menu
    t.type("\t\t")  # the second of the two
    t.wait(r"you> @coder")
    t.line(" how do I build a dict?")
    t.wait(r"user: @coder how do I build a dict\?")
    t.wait(r"coder: Use a dict comprehension:\n\s+\{k: v for k, v in pairs\}")

    t.line("I need help with fractions")
    t.wait(r"\* tutor has the floor")
    t.wait(r"tutor: Let's start: what is 1/2 \+ 1/4\?")
    t.wait(r"(?m)^you → tutor>")
    t.line("3/4?")
    t.wait(r"tutor: Right, 3/4!")
    t.wait(r"(?m)\* commander has the floor[\s\S]*^you>")
    t.line("thanks")
    t.wait(r"commander: Welcome back. Anything else\?")
    t.line("/floor")
    t.wait(r"floor: commander")
    screen = t.screen()
    assert "<handback" not in screen
    assert not re.search(r"(?m)^! ", screen)  # no error, no failed `sees` check of the script
    t.child.kill(signal.SIGINT)  # a SIGINT from outside is a Ctrl-C too: idle, so twice leaves
    t.wait(r"Ctrl-C again")
    t.child.kill(signal.SIGINT)
    assert t.exit_status() == 0
    assert "Press ENTER" not in t.screen() and "Traceback" not in t.screen()


def test_interjection_typed_while_text_streams(tmp_path, term):
    scn = scenario(tmp_path, "steering", """
        team:
          agents:
            - {name: alpha, description: First}
            - {name: beta, description: Second}
            - {name: gamma, description: Third}
        models:
          commander:
            - say: Starting three surveys.
              calls:
                - dispatch_to: {agent: alpha, task: Survey A.}
                - dispatch_to: {agent: beta, task: Survey B.}
                - dispatch_to: {agent: gamma, task: Survey C.}
            - say: Noted, the tests are included.
              sees: also check the tests
          alpha:
            - {say: "alpha line one\\nalpha line two", delay: 0.3}
          beta:
            - {say: "beta reporting", delay: 0.7}
          gamma:
            - {say: "gamma reporting", delay: 4}
        """)
    t = term("--scripted", scn)
    t.wait(r"(?m)^you>")
    t.line("Survey everything.")
    t.wait(r"commander: Starting three surveys.")
    typed = "please also check the tests"
    t.type(typed, gap=0.03)  # about 1.5 s, while alpha and beta print above the prompt
    t.pump(0.2)
    screen = t.screen()
    assert "alpha: alpha line one" in screen and "alpha line two" in screen
    assert "beta: beta reporting" in screen
    assert "gamma: gamma reporting" not in screen  # still working: this is an interjection
    assert t.prompt_row() == f"you> {typed}"  # the typed line is intact below the printed lines
    t.child.send("\r")
    t.wait(rf"user: {typed}")
    t.wait(r"gamma: gamma reporting")
    t.wait(r"commander: Noted, the tests are included.")
    after = t.screen()
    # the interjection landed while the group was working, before gamma's report
    assert after.index(f"user: {typed}") < after.index("gamma: gamma reporting")
    assert not re.search(r"(?m)^! ", after)  # the commander's next call saw the line (`sees`)
    t.child.sendeof()
    assert t.exit_status() == 0


def test_ctrl_c_stops_parallel_work_then_a_normal_turn(tmp_path, term):
    scn = scenario(tmp_path, "stopping", """
        team:
          agents:
            - {name: researcher, description: Slow and thorough}
            - {name: reviewer, description: Also slow}
        models:
          commander:
            - say: Starting both.
              calls:
                - dispatch_to: {agent: researcher, task: Read every paper on caching.}
                - dispatch_to: {agent: reviewer, task: Review every paper on caching.}
                - run_worker: {task: Count the papers.}
            - say: Stopped. Let's do something smaller.
              sees: Something small
          researcher:
            - {say: This report never arrives., delay: 30}
          reviewer:
            - {say: Neither does this one., delay: 30}
          worker:
            - {say: Nor this count., delay: 30}
        """)
    t = term("--scripted", scn, then_stty=True)
    t.wait(r"(?m)^you>")
    t.line("Survey all caching papers.")
    t.wait(r"⇢ commander → researcher: Read every paper")
    t.wait(r"⇢ commander → reviewer: Review every paper")
    t.wait(r"└ ⇢ commander → worker: Count the papers")  # the anonymous worker, folded
    t.type("Something sm")  # half typed when the user stops the agents: it stays in the input line
    t.wait(r"(?m)^you> Something sm")
    t.child.send("\x03")
    t.wait(r"■ stopped: stopped by the user")
    t.wait(r"▸ researcher: task \w+ \(dispatch\) cancelled")
    t.wait(r"(?m)^you> Something sm")
    assert t.prompt_row() == "you> Something sm"
    t.line("all instead.")
    t.wait(r"commander: Stopped. Let's do something smaller.")
    assert "never arrives" not in t.screen()
    t.line("/ledger")
    t.wait(r"(?s)(cancelled.*){3}")
    t.type("a draft")
    t.wait(r"(?m)^you> a draft")
    t.child.send("\x03")  # idle, a line typed: Ctrl-C clears it, and ↑ brings it back
    deadline = time.monotonic() + 10
    while t.prompt_row() != "you>" and time.monotonic() < deadline:
        t.pump(0.05)
    assert t.prompt_row() == "you>" and "Ctrl-C again" not in t.screen()
    t.child.send("\x1b[A")
    t.wait(r"(?m)^you> a draft")
    t.child.send("\x15")  # clear the line
    t.child.send("\x03")  # idle now, nothing typed: the first Ctrl-C warns, the second leaves
    t.wait(r"Ctrl-C again")
    t.child.send("\x03")
    mode = t.wait(r"(?s)exit=0.*\bicanon\b.*\becho\w*\b").group(0)  # `stty -a` after the shell ended
    assert "-icanon" not in mode and re.search(r"(?<![-\w])echo\b", mode)  # line mode and echo are back


def test_resume_after_the_shell_was_killed(tmp_path, term):
    first = scenario(tmp_path, "lesson", """
        team:
          agents:
            - {name: tutor, description: Patient maths tutor, interactive: true}
        models:
          commander:
            - call: {hand_off_to: {agent: tutor}}
          tutor:
            - say: "Let's start: what is 1/2 + 1/4?"
        """)
    t = term("--scripted", first)
    room = t.wait(r"room lesson \((\w+)\)").group(1)
    t.line("I need help with fractions")
    t.wait(r"tutor: Let's start")
    t.child.kill(signal.SIGKILL)  # a crash: no clean exit, no goodbye
    t.close()

    second = scenario(tmp_path, "lesson-2", """
        team:
          agents:
            - {name: tutor, description: Patient maths tutor, interactive: true}
        models:
          tutor:
            - say: "Right, 3/4! <handback />"
              sees: "1/2 + 1/4"
        """)
    t = term("--scripted", second)
    t.wait(r"(?m)^you>")
    t.line("/rooms")
    t.wait(rf"{room}\s+lesson\s+floor=tutor")
    t.line(f"/resume {room[:6]}")
    t.wait(rf"resumed room lesson \({room}\) · floor: tutor")
    screen = t.screen()
    tail = screen[screen.index("/resume"):]
    assert "user: I need help with fractions" in tail and "tutor: Let's start: what is 1/2 + 1/4?" in tail
    t.wait(r"(?m)^you → tutor>")
    t.line("3/4?")
    t.wait(r"tutor: Right, 3/4!")
    t.wait(r"\* commander has the floor")
    t.line("/export lesson.md")
    t.wait(r"wrote \d+ messages to lesson.md")
    t.child.sendeof()
    assert t.exit_status() == 0
    assert "Right, 3/4!" in (tmp_path / "lesson.md").read_text()
    assert "3/4?" in (tmp_path / "chat_history").read_text()  # input history, next to the db

    t = term("--scripted", second, "--resume", room)
    t.wait(rf"resumed room lesson \({room}\) · floor: commander")
    assert "tutor: Right, 3/4!" in t.screen()
    t.child.send("\x1b[A")  # up arrow: the history of the previous run
    t.wait(r"you> /export lesson.md")
    t.child.send("\x15")  # clear the line
    t.line("/exit")
    assert t.exit_status() == 0


# --- a new user's first runs (issue 13) ------------------------------------------------------------------

def test_a_room_open_in_one_shell_is_refused_in_a_second(tmp_path, term):
    """Two shells on one room would each see half of it and interleave both in the store: the second is refused
    in one line while the first holds the room, and gets it once the first has left."""
    scn = scenario(tmp_path, "twice", """
        models:
          commander:
            - say: First answer.
            - say: Second answer.
        """)
    t = term("--scripted", scn)
    room = t.wait(r"room twice \((\w+)\)").group(1)
    t.line("hello")
    t.wait(r"commander: First answer.")
    out = _run(tmp_path, "--scripted", scn, "--resume", room, stdin="again\n")
    assert out.returncode == 2, out.stdout
    assert f"room twice ({room}) is open in another chat or server" in out.stderr
    assert "Traceback" not in out.stderr and "Second answer" not in out.stdout
    t.line("/exit")
    assert t.exit_status() == 0
    out = _run(tmp_path, "--scripted", scn, "--resume", room, stdin="again\n")
    assert out.returncode == 0, out.stderr
    assert "commander: Second answer." in out.stdout


def test_a_reply_ending_in_a_newline_is_printed_once(tmp_path, term):
    scn = scenario(tmp_path, "newline", """
        models:
          commander:
            - say: "First line of the answer.\\nLast line of the answer.\\n"
        """)
    t = term("--scripted", scn)
    t.wait(r"(?m)^you>")
    t.line("hello")
    t.wait(r"Last line of the answer\.")
    t.wait(r"(?m)^you>")
    t.pump(0.5)
    screen = t.screen()
    assert screen.count("First line of the answer.") == 1 and screen.count("Last line of the answer.") == 1, screen


def _lesson(tmp_path: Path) -> str:
    return scenario(tmp_path, "lesson", """
        team:
          agents:
            - {name: tutor, description: Patient maths tutor, interactive: true}
        models:
          commander:
            - say: "Hello, shall we start?"
        """)


def test_leaving_names_the_room_to_resume_and_resume_goes_on_with_its_script(tmp_path, term):
    scn = scenario(tmp_path, "lesson", """
        team:
          agents:
            - {name: tutor, description: Patient maths tutor, interactive: true}
        models:
          commander:
            - say: "Hello, shall we start?"
            - say: "Welcome back: where were we?"
        """)
    t = term("--scripted", scn)
    room = t.wait(r"room lesson \((\w+)\)").group(1)
    t.line("hi")
    t.wait(r"commander: Hello, shall we start\?")
    t.line("/exit")
    t.wait(rf"resume with: orchestrator chat --resume {room} --db\s+\S*rooms\.db")
    assert t.exit_status() == 0

    t = term("--resume", room)  # no --scripted: the room remembers the scenario it plays
    t.wait(rf"resumed room lesson \({room}\)")
    t.line("again")
    # the script goes on where the room left it, not from its first reply
    t.wait(r"(?s)user: again.*commander: Welcome back: where were we\?")
    assert "Hello, shall we start?" not in t.screen().split("user: again")[-1]
    t.line("/exit")
    assert t.exit_status() == 0
    assert "Traceback" not in t.screen()


def test_resuming_a_scripted_room_without_its_script_is_one_clear_line(tmp_path, term):
    scn = _lesson(tmp_path)
    t = term("--scripted", scn)
    room = t.wait(r"room lesson \((\w+)\)").group(1)
    t.line("/exit")
    assert t.exit_status() == 0
    Path(scn).unlink()
    t = term("--resume", room, then_stty=True)
    t.wait(r"exit=2")
    screen = t.screen()
    assert "Traceback" not in screen
    assert re.search(r"error: this room's agents play a scenario's script: resume it with --scripted", screen)


def test_a_model_the_server_does_not_list_is_said_at_start_and_the_shell_stays(tmp_path, term):
    from tests.fakeserver import FakeServer, json_body

    with FakeServer() as server:
        listing = {"object": "list", "data": [{"id": "qwen3"}, {"id": "llama3.2"}]}
        server.replies.append(json_body(200, listing))
        # At the first line the window is looked up (the listing again, llama.cpp's /props), then the call.
        server.replies.extend([json_body(200, listing), json_body(404, {"error": "no such page"})])
        body = {"error": {"message": "The model `qwen-3` does not exist.", "code": "model_not_found"}}
        server.replies.append(json_body(404, body))
        env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.url + "/v1"}
        (tmp_path / "ws").mkdir()
        t = term("--model", "openai/qwen-3", "--workspace", str(tmp_path / "ws"), env=env)
        t.wait(r"! openai/qwen-3: the server does not list a model 'qwen-3'; did you mean qwen3\?")
        assert server.requests[0]["path"] == "/v1/models"  # before any line was typed
        t.line("hello")
        t.wait(r"model_not_found")
        t.wait(r"every line will fail alike until the model or the address is fixed")
        t.line("/who")  # the shell stays
        t.wait(r"commander \[floor\]")
        assert t.child.isalive()
        assert [r["path"] for r in server.requests].count("/v1/chat/completions") == 1  # not retried
        t.line("/exit")
        assert t.exit_status() == 3  # the session saw a line fail that no retry could fix


def test_resume_remembers_the_rooms_model(tmp_path, term):
    real = {"OPENAI_API_KEY": "sk-test-not-a-real-key", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    (tmp_path / "ws").mkdir()
    t = term("--model", "openai/gpt-4.1", "--workspace", str(tmp_path / "ws"), env=real)
    room = t.wait(r"room chat \((\w+)\)").group(1)
    t.line("/exit")
    assert t.exit_status() == 0
    t = term("--resume", room, env=real)  # no --model, no ORCHESTRATOR_MODEL: the room's own
    t.wait(rf"resumed room chat \({room}\)")
    assert "which model" not in t.screen()
    t.line("/exit")
    assert t.exit_status() == 0


def test_the_agents_folder_of_the_current_folder_is_the_default_team(tmp_path, term):
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "gardener.md").write_text(
        "---\nname: gardener\ndescription: Knows every plant in the garden\n---\nYou tend the garden.\n")
    (tmp_path / "ws").mkdir()
    t = term("--model", "openai/gpt-4.1", "--workspace", str(tmp_path / "ws"), "--trust",
             env={"OPENAI_API_KEY": "sk-test-not-a-real-key"})
    t.wait(r"(?m)^you>")
    t.line("/who")
    t.wait(r"gardener — Knows every plant in the garden")
    t.line("/exit")
    assert t.exit_status() == 0


def test_at_60_columns_lines_wrap_between_words(tmp_path, term):
    scn = scenario(tmp_path, "narrow", """
        models:
          commander:
            - say: "This answer is deliberately long enough to need two rows on a narrow terminal, and then some more words."
        """)
    t = term("--scripted", scn, cols=60)
    t.wait(r"(?m)^you>")
    t.line("/help")
    t.wait(r"/exit")
    t.line("hello")
    t.wait(r"some more\s+words\.")
    t.wait(r"(?m)^you>")
    rows = t.screen().splitlines()
    from orchestrator.cli.chat.shell import HELP
    words = set(" ".join([HELP, "This answer is deliberately long enough to need two rows on a narrow "
                                "terminal, and then some more words."]).split())
    on_screen = {w for row in rows for w in row.split()}
    assert words <= on_screen, sorted(words - on_screen)  # no word was cut across two rows
    assert any(re.match(r"^\s{10,}\S", row) for row in rows)  # continuation rows indented under the text


def test_help_names_the_keys_too(tmp_path, term):
    t = term("--scripted", "greeting")
    t.wait(r"(?m)^you>")
    t.line("/help")
    t.wait(r"/exit")
    screen = t.screen()
    assert re.search(r"(?m)^  Tab +complete an @name or a /command$", screen), screen
    assert re.search(r"(?m)^  ↑ / ↓ +your earlier lines \(kept between sessions\)$", screen), screen
    assert re.search(r"(?m)^  Ctrl-D +at an empty prompt, leave$", screen), screen


def test_an_error_at_60_columns_wraps_between_words(tmp_path, term):
    t = term(cols=60, then_stty=True)  # nothing configured: the long "what to set" message
    t.wait(r"exit=2")
    rows = t.screen().splitlines()
    text = " ".join(rows[:rows.index(next(r for r in rows if r.startswith("exit=")))])
    for word in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "~/.config/orchestrator/config.toml", "localhost:11434",
                 "tutor-handoff`"):
        assert any(word in row.split() or word in row for row in rows), (word, rows)
    assert "orchestrator chat --scripted tutor-handoff" in text


def test_a_joined_emoji_in_the_input_line_takes_its_place_only(tmp_path, term):
    t = term("--scripted", _lesson(tmp_path))
    t.wait(r"(?m)^you>")
    t.type("I \U0001F469\u200d\U0001F4BB code")
    t.wait(r"you> I \U0001F469\U0001F4BB code")  # the parts, drawn where the cursor logic expects them
    t.child.send("\r")
    t.wait(r"commander: Hello")
    t.line("/exit")
    assert t.exit_status() == 0
    out = subprocess.run([*ENTRY, "export", "lesson", "--db", str(tmp_path / "rooms.db")], capture_output=True,
                         text=True, timeout=30, cwd=tmp_path)
    assert "I \U0001F469\u200d\U0001F4BB code" in out.stdout  # what was typed is kept whole


# --- without a terminal -------------------------------------------------------------------------------

def _run(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in
           ("OLLAMA_HOST", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ORCHESTRATOR_MODEL", "ORCHESTRATOR_CONFIG")}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"))
    return subprocess.run([*ENTRY, "chat", "--db", str(tmp_path / "rooms.db"), *args], input=stdin,
                          capture_output=True, text=True, timeout=30, env=env, cwd=tmp_path)


def test_no_provider_says_what_to_set(tmp_path):
    out = _run(tmp_path)
    assert out.returncode == 2
    assert "OPENAI_API_KEY" in out.stderr and "ANTHROPIC_API_KEY" in out.stderr
    assert "ollama" in out.stderr and "OLLAMA_HOST" in out.stderr and "--scripted" in out.stderr
    assert "Traceback" not in out.stderr
    out = _run(tmp_path, "--model", "openai/gpt-4o")
    assert out.returncode == 2 and "OPENAI_API_KEY" in out.stderr and "Traceback" not in out.stderr


def test_piped_lines_play_through_and_unknown_rooms_are_bad_input(tmp_path):
    scn = scenario(tmp_path, "hello", """
        models:
          commander:
            - say: Hello there.
        """)
    out = _run(tmp_path, "--scripted", scn, stdin="hi\n/who\n/bogus\n")
    assert out.returncode == 0, out.stderr
    assert "user: hi" in out.stdout and "commander: Hello there." in out.stdout
    assert "commander [floor] — hosts the room" in out.stdout and "unknown command /bogus" in out.stdout
    out = _run(tmp_path, "--scripted", scn, "--resume", "nope")
    assert out.returncode == 2 and "no room 'nope'" in out.stderr


def test_piped_lines_take_turns(tmp_path):
    scn = scenario(tmp_path, "turns", """
        models:
          commander:
            - say: Answer to the first line.
            - say: Answer to the second line.
        """)
    out = _run(tmp_path, "--scripted", scn, stdin="first line\nsecond line\n")
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(("user:", "commander:"))]
    assert lines == ["user: first line", "commander: Answer to the first line.",
                     "user: second line", "commander: Answer to the second line."], out.stdout


def test_shipped_scenarios_by_name_from_any_folder(tmp_path):
    out = _run(tmp_path)  # no provider: the hint names a scenario that works from here
    hint = re.search(r"orchestrator chat --scripted (\S+?)`", out.stderr).group(1)
    out = _run(tmp_path, "--scripted", hint, stdin="I need help with fractions\n")
    assert out.returncode == 0, out.stderr
    assert "tutor: Let's start" in out.stdout
    out = _run(tmp_path, "--team", str(Path(__file__).parent.parent / "scenarios" / "greeting.yaml"))
    assert out.returncode == 2 and "this is a scenario, not a team file: play it with `--scripted" in out.stderr


# --- the View and the answers, in process ---------------------------------------------------------------

def _view() -> tuple[View, list[str]]:
    lines: list[str] = []
    return View(lines.append, color=False), lines


def _message(author: str, text: str, kind: str = "text", visible_to=("user", "commander"), **kw) -> MessageEvent:
    return MessageEvent(id="m", seq=1, author=author, kind=kind, text=text, visible_to=list(visible_to), **kw)


def test_view_prints_whole_lines_and_keeps_the_partial_one_for_the_toolbar():
    view, lines = _view()
    view(TextDeltaEvent(agent="tutor", text="First line\nsecond li"))
    assert lines == ["tutor: First line"]
    assert view.partial == (("tutor", "second li"),)
    view(TextDeltaEvent(agent="tutor", text="ne, done. <hand"))
    assert view.partial == (("tutor", "second line, done. "),)  # the marker's start is held back
    view(TextDeltaEvent(agent="tutor", text="back />"))
    view(_message("tutor", "First line\nsecond line, done."))
    assert lines == ["tutor: First line", "       second line, done."]
    assert view.partial == ()


def test_view_folds_anonymous_workers_and_shows_tools_compactly():
    view, lines = _view()
    view(_message("commander", "Count the papers.", kind="task", visible_to=["worker-2"]))
    view(_message("worker-2", "There are 12.", visible_to=["worker-2"]))
    view(_message("coder", "", kind="tool_call", calls=[CallRef("c1", "read_file", {"path": "a.txt"})]))
    view(_message("coder", "x" * 1234, kind="tool_result", call_id="c1", name="read_file", is_error=False))
    view(_message("coder", "no such file", kind="tool_result", call_id="c2", name="read_file", is_error=True))
    view(TaskEvent(task_id="t1", agent="worker-2", kind="worker", status="done"))
    view(_message("commander", "", kind="tool_call", calls=[CallRef("c3", "hand_off_to", {"agent": "tutor",
                                                                                          "note": "fractions"})]))
    view(State(floor="tutor"))
    view(_message("commander", "The commander handed you the floor...", kind="task", visible_to=["tutor", "user"]))
    assert lines == [
        "  └ ⇢ commander → worker-2: Count the papers.",
        "  └ worker-2: There are 12.",
        "  coder → read_file(path=a.txt)",
        "  coder ← read_file: 1,234 chars",
        "  coder ← read_file failed: no such file",
        "  └ ▸ worker-2: task t1 (worker) done",
        "* tutor has the floor",
        "  ⇢ commander hands the floor to tutor: fractions",
    ]


async def test_confirmation_answers_go_to_the_oldest_request(tmp_path):
    answered: list[tuple[str, str]] = []
    posted: list[str] = []

    class FakeRoom:
        asking = ["q1", "q2"]
        busy = True

        def answer(self, reply, request_id=None):
            answered.append((reply, request_id))

        async def post(self, line, skill=None):
            posted.append(line)

    shell = Shell(SimpleNamespace(db=tmp_path / "x.db"), store=None, interactive=False,
                  setup=SimpleNamespace(scripted=None))
    printed: list[str] = []
    shell._print = printed.append
    shell.view.emit = printed.append
    shell.on_event(Confirm(agent="coder", request_id="q1", category="destructive", summary="rm -rf build"))
    assert any("coder asks" in p and "rm -rf build" in p for p in printed)
    room = FakeRoom()
    for typed, reply in (("o", "once"), ("this run", "run"), ("D", "deny")):
        await shell.handle(room, typed)
        assert answered[-1] == (reply, "q1")
    await shell.handle(room, "carry on")  # not an answer: an ordinary line, with a reminder
    assert posted == ["carry on"] and any("still open" in p for p in printed)


async def test_a_confirmation_request_is_asked_inline_and_answered_for_the_run(tmp_path, monkeypatch):
    """A real room, a tool that asks (as the shell tool does for a risky command), the shell answering."""
    import msgspec
    import trio

    from orchestrator.providers.scripted import Reply, ScriptedProvider
    from orchestrator.tools.builtin import BUILTIN
    from orchestrator.team.schema import AgentDef, Team
    from orchestrator.cli.chat.command import Setup
    from orchestrator.store.db import Store
    from orchestrator.tools.base import Tool

    class NoArgs(msgspec.Struct):
        pass

    async def risky(args, ctx):
        allowed = await ctx.session.confirm(ctx.agent, "destructive", "rm -rf build")
        return "removed" if allowed else "denied by the user"

    monkeypatch.setitem(BUILTIN, "risky", Tool("risky", "deletes things", NoArgs, risky))
    model = ScriptedProvider({"commander": [Reply(calls=[("risky", {})]), Reply(calls=[("risky", {})]),
                                            Reply(say="All clean.")]})
    team = Team(commander=AgentDef(name="commander", model="scripted", tools=["risky"]))
    store = await Store.open(tmp_path / "rooms.db")
    args = SimpleNamespace(db=tmp_path / "rooms.db", resume=None, team=None, scripted=None, model=None)
    setup = Setup(team=team, resolve=lambda _m: (model, "scripted"), models=None, name="chat", workspace=tmp_path)
    shell = Shell(args, store, setup, interactive=False)
    printed: list[str] = []
    shell._print = shell.view.emit = printed.append
    send, receive = trio.open_memory_channel(10)

    async def read_line() -> str:
        try:
            return await receive.receive()
        except trio.EndOfChannel:
            raise EOFError from None

    async def seen(text: str) -> None:
        with trio.fail_after(10):
            while not any(text in p for p in printed):
                await trio.sleep(0.01)

    shell.prompt.read_line = read_line
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(shell.run)
            await send.send("clean the build folder")
            await seen("commander asks to run something risky (destructive): rm -rf build")
            await send.send("r")  # this run: the second call is not asked again
            await seen("commander: All clean.")
            await send.aclose()
    finally:
        await store.close()
    assert sum("asks to run something risky" in p for p in printed) == 1
    assert sum("commander ← risky: 7 chars" in p for p in printed) == 2  # "removed", twice
    assert any("answered 'run'" in p for p in printed)


def test_usage_in_the_shell_and_a_trace_file(tmp_path, term):
    scn = scenario(tmp_path, "spend", """
        models:
          commander:
            - say: Hello there.
              usage: {input: 1234, output: 56, cached: 1000}
            - say: Again.
        """)
    t = term("--scripted", scn, "--trace", str(tmp_path / "t.jsonl"))
    t.wait(r"(?m)^you>")
    t.line("hi")
    t.wait(r"commander: Hello there\.")
    t.line("more")
    t.wait(r"commander: Again\.")
    t.line("/usage")
    t.wait(r"token counts of some calls are estimates")
    row = next(line for line in t.screen().splitlines() if line.startswith("commander  scripted/scripted"))
    cells = row.split()
    assert cells[2] == "2" and cells[5] == "1,000" and cells[-1] == "?"  # two calls, no price for the script
    assert cells[3].startswith("~") and int(cells[3][1:].replace(",", "")) > 1234  # the second call is estimated
    t.line("/exit")
    assert t.exit_status() == 0
    names = [json.loads(line)["name"] for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert names.count("invoke_workflow spend") == 2 and names.count("chat scripted") == 2
