"""`run` and `show` print what the user sees (README, "What it is"): not the anonymous workers, the commander's
hidden hands, nor the note a handoff gives its agent; `--all` prints those too."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from orchestrator.cli.transcript import Printer
from orchestrator.core.events import CallRef, MessageEvent, State, TextDeltaEvent


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ORCHESTRATOR_", "OPENAI_", "ANTHROPIC_"))}
    environ.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=environ)


def transcript(out: str) -> list[str]:
    """The transcript's lines: without run's closing lines and show's floor line."""
    return [ln for ln in out.splitlines() if not ln.startswith(("✓", "(the room is kept", "usage:", "* floor:"))]


def test_a_handoff_shows_its_call_and_the_floor_not_the_note_it_gives_the_agent(tmp_path):
    db = tmp_path / "room.db"
    run = cli(tmp_path, "run", "tutor-handoff", "--db", str(db))
    assert run.returncode == 0, run.stdout + run.stderr
    lines = transcript(run.stdout)
    assert lines[:5] == [
        "* commander has the floor",
        "user: I need help with fractions",
        "  → commander calls hand_off_to(agent=tutor, note=wants help with fractions)",
        "* tutor has the floor",
        "tutor: Let's start: what is 1/2 + 1/4?",
    ]
    assert lines.count("* tutor has the floor") == 1  # a state that repeats the floor prints nothing
    assert not [ln for ln in lines if "handed you the floor" in ln or "← hand_off_to" in ln]
    shown = transcript(cli(tmp_path, "show", "tutor-handoff", "--db", str(db)).stdout)
    assert shown == [ln for ln in lines if not ln.startswith("* ")]  # show prints the run's transcript again


def test_anonymous_workers_are_the_commanders_hidden_hands(tmp_path):
    db = tmp_path / "room.db"
    run = cli(tmp_path, "run", "anonymous-worker", "--db", str(db))
    assert run.returncode == 0, run.stdout + run.stderr
    for out in (run.stdout, cli(tmp_path, "show", "anonymous-worker", "--db", str(db)).stdout):
        lines = transcript(out)
        assert not [ln for ln in lines if "worker" in ln.replace("run_worker", "")], out
        assert "  → commander calls run_worker(task=Find the hottest city in data.csv.)" in lines
        assert "commander: Bangkok is the hottest (34) and Jakarta the coolest (30)." in lines


def test_all_shows_what_the_user_does_not_see(tmp_path):
    db = tmp_path / "room.db"
    assert cli(tmp_path, "run", "anonymous-worker", "--db", str(db), "--all").stdout.count("worker-2") >= 3
    shown = cli(tmp_path, "show", "anonymous-worker", "--db", str(db), "--all").stdout
    lines = shown.splitlines()
    # which worker takes which task depends on who asks the scripted model first: both are there
    assert {ln.split(": ", 1)[1] for ln in lines if ln.startswith(("worker: ", "worker-2: "))} == {
        "Bangkok, 34 degrees", "Jakarta, 30 degrees"}
    assert {ln.split(":")[0] for ln in lines if ln.startswith("commander → worker")} == {
        "commander → worker", "commander → worker-2"}
    assert "  ← run_worker: 19 chars" in shown
    run = cli(tmp_path, "run", "tutor-handoff", "--db", str(tmp_path / "handoff.db"), "--all").stdout
    assert "commander → tutor: The commander handed you the floor" in run


def _call(author: str, name: str, call_id: str, **input: str) -> MessageEvent:
    return MessageEvent(id=call_id, seq=1, author=author, kind="tool_call", text="", visible_to=[author, "user"],
                        calls=[CallRef(call_id, name, dict(input))])


def _result(author: str, name: str, call_id: str, text: str, error: bool = False) -> MessageEvent:
    return MessageEvent(id=call_id + "r", seq=2, author=author, kind="tool_result", text=text, visible_to=[author],
                        call_id=call_id, name=name, is_error=error)


def test_results_follow_the_calls_the_user_saw():
    out = io.StringIO()
    printer = Printer(out, color=False)
    for ev in (State(floor="commander"), State(floor="commander"),
               _call("researcher", "read_file", "c1", path="a.py"), _result("researcher", "read_file", "c1", "x" * 12),
               _call("commander", "dispatch_to", "c2", agent="researcher", task="t"),
               _result("commander", "dispatch_to", "c2", "the report"),
               _call("commander", "dispatch_to", "c3", agent="nobody", task="t"),
               _result("commander", "dispatch_to", "c3", "no member named nobody", error=True),
               TextDeltaEvent(agent="worker-2", text="hidden hands"),
               _result("worker-2", "read_file", "c9", "never seen")):
        printer(ev)
    assert out.getvalue().splitlines() == [
        "* commander has the floor",
        "  → researcher calls read_file(path=a.py)",
        "  ← read_file: 12 chars",
        "  → commander calls dispatch_to(agent=researcher, task=t)",
        "  → commander calls dispatch_to(agent=nobody, task=t)",
        "  ← dispatch_to: error no member named nobody",
    ]
