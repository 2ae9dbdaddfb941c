"""The command line as a user meets it: the JSON event contract, exit codes, rooms/show/export."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"

# scenario-format.md: the fields every event kind must carry (besides type, room, ts)
CONTRACT = {
    "message": {"id", "seq", "author", "kind", "text", "visible_to"},
    "text_delta": {"agent", "text"},
    "tool_start": {"agent", "call_id", "name", "input"},
    "tool_end": {"agent", "call_id", "name", "result", "is_error", "seconds"},
    "usage": {"agent", "provider", "model", "input_tokens", "output_tokens", "cached_tokens", "estimated", "seconds",
              "auxiliary"},
    "compaction": {"agent", "tokens_before", "tokens_after"},
    "retry": {"agent", "attempt", "reason", "delay"},
    "state": {"floor"},
    "task": {"task_id", "agent", "kind", "status"},
    "cancelled": {"reason"},
    "turn": {"agent"},
    "done": {"agent", "stop_reason"},
    "error": {"message", "error_class"},
    "check": {"ok", "failures"},
}


# `run` keeps every room among the user's scenario runs: the tests keep theirs in a folder of their own.
DATA = tempfile.mkdtemp(prefix="orchestrator-test-data-")


def cli(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**(os.environ if env is None else env), "XDG_DATA_HOME": (env or {}).get("XDG_DATA_HOME", DATA)}
    env.pop("ORCHESTRATOR_DB", None)
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60, env=env)


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_json_stream_carries_every_contract_field():
    seen: set[str] = set()
    for name in ("flagship", "retries", "auth-failure", "stop-parallel", "read-file-loop"):
        out = cli("run", str(SCENARIOS / f"{name}.yaml"), "--json")
        assert out.returncode == 0, out.stderr
        evs = events(out.stdout)
        assert evs[-1]["type"] == "check" and evs[-1]["ok"], evs[-1]
        seqs = [e["seq"] for e in evs if e["type"] == "message"]
        assert seqs == sorted(set(seqs))
        for ev in evs:
            assert {"type", "room", "ts"} <= ev.keys()
            missing = CONTRACT[ev["type"]] - ev.keys()
            assert not missing, f"{name}: {ev['type']} lacks {missing}"
            if ev["type"] == "message" and ev["kind"] == "tool_call":
                assert all({"call_id", "name", "input"} <= c.keys() for c in ev["calls"])
            if ev["type"] == "message" and ev["kind"] == "tool_result":
                assert {"call_id", "name", "is_error"} <= ev.keys()
            seen.add(ev["type"])
    # compaction belongs to the context work; every other kind was produced and checked above
    assert seen >= set(CONTRACT) - {"compaction"}


def test_cancelled_tools_end_with_an_error_event():
    evs = events(cli("run", str(SCENARIOS / "stop-parallel.yaml"), "--json").stdout)
    ends = [e for e in evs if e["type"] == "tool_end" and e["agent"] == "commander"]
    assert len(ends) == 3 and all(e["is_error"] for e in ends)
    starts = {e["call_id"] for e in evs if e["type"] == "tool_start"}
    assert starts == {e["call_id"] for e in evs if e["type"] == "tool_end"}


def test_failed_expectation_exits_1_and_names_it(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("name: s\nmodels:\n  commander:\n    - say: hi\nturns:\n  - user: hello\n"
                 "expect:\n  transcript:\n    - {from: commander, contains: bye}\n")
    out = cli("run", str(f))
    assert out.returncode == 1
    assert "no message from commander containing 'bye'" in out.stdout


def test_bad_scenario_exits_2_with_file_line_and_key(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("name: bad\nteam:\n  agents:\n    - name: tutor\n      modle: scripted\n")
    out = cli("run", str(f))
    assert out.returncode == 2
    assert f"{f}:5:" in out.stderr and "modle" in out.stderr and "team.agents[0]" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) <= 2


def test_run_failure_exits_3(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("name: s\nmodels:\n  commander:\n    - error: auth\nturns:\n  - user: hello\n")
    out = cli("run", str(f))
    assert out.returncode == 3
    assert "auth" in out.stdout


def test_model_without_provider_is_bad_input(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "ANTHROPIC_", "OLLAMA_", "ORCHESTRATOR_CONFIG"))}
    env["XDG_CONFIG_HOME"] = str(tmp_path)  # no config file there
    out = cli("run", str(SCENARIOS / "greeting.yaml"), "--model", "openai/gpt-4.1-mini", env=env)
    assert out.returncode == 2 and "OPENAI_API_KEY" in out.stderr
    assert "Traceback" not in out.stderr


def test_rooms_show_export_on_a_kept_database(tmp_path):
    db = tmp_path / "rooms.db"
    assert cli("run", str(SCENARIOS / "tutor-handoff.yaml"), "--db", str(db)).returncode == 0
    rooms = events(cli("rooms", "--db", str(db), "--json").stdout)
    assert [(r["name"], r["floor"]) for r in rooms] == [("tutor-handoff", "commander")]
    shown = events(cli("show", rooms[0]["id"], "--db", str(db), "--json").stdout)
    assert len(shown) == rooms[0]["messages"] and all(e["type"] == "message" for e in shown)
    exported = events(cli("export", rooms[0]["id"][:6], "--db", str(db), "--format", "jsonl").stdout)
    assert exported == shown
    md = cli("export", "tutor-handoff", "--db", str(db), "--format", "md").stdout
    assert "Right, 3/4!" in md and "<handback />\n" not in md
    text = cli("show", "tutor-handoff", "--db", str(db)).stdout
    assert "tutor: Let's start" in text and "floor: commander" in text


@pytest.mark.parametrize("args, message", [
    (["show", "nope"], "no room 'nope'"),
    (["rooms"], "no such database"),
])
def test_store_commands_explain_bad_input(tmp_path, args, message):
    db = tmp_path / "x.db"
    if args[0] == "show":
        cli("run", str(SCENARIOS / "greeting.yaml"), "--db", str(db))
    else:
        db = tmp_path / "missing.db"
    out = cli(*args, "--db", str(db))
    assert out.returncode == 2 and message in out.stderr


def test_check_reports_each_file(tmp_path):
    good = (SCENARIOS / "greeting.yaml").read_text()
    (tmp_path / "a.yaml").write_text(good)
    (tmp_path / "b.yaml").write_text(good.replace("name: greeting", "name: other").replace(
        "I host this room, to: user", "nothing like this"))
    out = cli("check", str(tmp_path))
    assert out.returncode == 1
    assert "PASS  greeting" in out.stdout and "FAIL  other" in out.stdout
    assert out.stdout.strip().endswith("1 passed, 1 failed")


def test_python_dash_m_and_help():
    out = cli("--help")
    assert out.returncode == 0 and "run" in out.stdout and "export" in out.stdout


def test_help_lists_every_command_from_the_table_and_imports_none():
    """`orchestrator --help` builds no command's parser; each listed line is the command's own help."""
    from orchestrator.cli.main import COMMANDS, parser

    full = parser([], full=True)
    subs = next(a for a in full._actions if a.dest == "command")
    assert list(subs.choices) == list(COMMANDS)
    for pseudo in subs._choices_actions:
        assert pseudo.help == COMMANDS[pseudo.dest][2], pseudo.dest
    code = ("import sys; from orchestrator.cli.main import main\n"
            "try: main(['--help'])\nexcept SystemExit: pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('orchestrator.room', 'orchestrator.scenario', "
            "'orchestrator.memory', 'orchestrator.store', 'orchestrator.cli.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "['orchestrator.cli.main']"


def test_one_command_builds_only_its_module(tmp_path):
    code = ("import sys; from orchestrator.cli.main import parser\n"
            "a = parser(['--debug', 'show', 'abc', '--db', 'x.db'])\n"
            "print(a.parse_args(['--debug', 'show', 'abc', '--db', 'x.db']).room, "
            "'orchestrator.cli.kb' in sys.modules, 'orchestrator.cli.rooms' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["abc", "False", "True"]
