"""The small things a newcomer meets at the command line: a command group without its action, `mcp list`'s exit
code, `memory edit` with no terminal, counts in words, and the scripted model meeting lines it was not written for."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli.words import count

MCP_SERVER = Path(__file__).parent / "mcpdata" / "server.py"


def cli(tmp_path: Path, *args: str, env: dict | None = None, stdin: str | None = "") -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ORCHESTRATOR_", "OPENAI_", "ANTHROPIC_"))}
    environ.pop("EDITOR", None)
    environ.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "cfg"),
                   XDG_STATE_HOME=str(tmp_path / "state"), **(env or {}))
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=environ, input=stdin, stdin=subprocess.DEVNULL if stdin is None else None)


@pytest.mark.parametrize("group, actions", [
    ("memory", "show, edit or export"), ("kb", "add, search, list or remove"),
    ("skills", "list, show, check or review"), ("mcp", "list or serve"),
])
def test_a_group_without_its_action_names_the_actions(tmp_path, group, actions):
    out = cli(tmp_path, group)
    assert out.returncode == 2
    assert out.stderr == f"error: `orchestrator {group}` needs an action: {actions} (`orchestrator {group} --help` " \
                         "says what each does)\n"
    assert "_command" not in out.stderr


def test_mcp_list_fails_when_a_server_does_not_start(tmp_path):
    (tmp_path / "ok.yaml").write_text(f"mcp_servers:\n  files: {{command: ['{sys.executable}', '{MCP_SERVER}']}}\n")
    (tmp_path / "broken.yaml").write_text(
        f"mcp_servers:\n  files: {{command: ['{sys.executable}', '{MCP_SERVER}']}}\n"
        f"  broken: {{command: ['{sys.executable}', '{MCP_SERVER}', crash]}}\n")
    ok = cli(tmp_path, "mcp", "list", "--team", "ok.yaml")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = cli(tmp_path, "mcp", "list", "--team", "broken.yaml")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "  does not start: MCP server 'broken' exited" in broken.stdout and "mcp__files__lookup" in broken.stdout


def test_memory_edit_without_a_terminal_does_not_start_vi(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "vi").write_text(f"#!/bin/sh\ntouch {tmp_path / 'vi-ran'}\n")
    (bin_ / "vi").chmod(0o755)
    out = cli(tmp_path, "memory", "edit", env={"PATH": f"{bin_}:{os.environ['PATH']}"}, stdin=None)
    assert out.returncode == 2
    assert out.stderr.startswith("error: `memory edit` opens vi in a terminal and this is none")
    assert "set EDITOR" in out.stderr and len(out.stderr.splitlines()) == 1
    assert not (tmp_path / "vi-ran").exists()
    assert not (tmp_path / "data" / "orchestrator" / "orchestrator.db").exists()  # nothing was opened either


def test_counts_take_the_number_of_their_noun():
    assert [count(n, "message") for n in (0, 1, 2, 1200)] == ["0 messages", "1 message", "2 messages",
                                                                "1,200 messages"]
    assert count(1, "entry", "entries") == "1 entry" and count(3, "entry", "entries") == "3 entries"


async def test_one_room_of_one_message_and_one_document_are_singular(tmp_path):
    from orchestrator.cli.paths import open_db
    from orchestrator.core.types import Draft, TextBlock

    db = tmp_path / "rooms.db"
    store = await open_db(db)
    room = await store.create_room("alone")
    await store.append(room.id, Draft(author="user", kind="user", blocks=[TextBlock("hello")], visible_to=["user"]))
    await store.close()
    rooms = cli(tmp_path, "rooms", "--db", str(db))
    assert rooms.returncode == 0 and rooms.stdout.rstrip().endswith(" 1 message"), rooms.stdout
    (tmp_path / "note.txt").write_text("One short note about fractions.\n")
    added = cli(tmp_path, "kb", "add", "note.txt", "--db", str(db), "--embed", "none")
    assert added.returncode == 0 and "(1 chunk)" in added.stdout, added.stdout + added.stderr
    listed = cli(tmp_path, "kb", "list", "--db", str(db)).stdout.splitlines()
    assert listed[-1] == "1 document" and " 1 chunk, no vectors, 32 bytes" in listed[0], listed


def test_lines_off_the_script_say_the_scripted_model_plays_a_fixed_script(tmp_path):
    out = cli(tmp_path, "chat", "--scripted", "tutor-handoff", "--db", str(tmp_path / "c.db"),
              stdin="I need help with fractions\nhello there\n")
    assert out.returncode == 0, out.stdout + out.stderr
    said = [ln for ln in out.stdout.splitlines() if ln.startswith("!")]
    assert said == ["! the scripted model plays tutor-handoff's fixed script, whatever you type: tutor's reply #2 "
                    "was written for a line with '7/4?' (`orchestrator run tutor-handoff` shows the lines it "
                    "expects)"]
