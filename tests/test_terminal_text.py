"""What agents write never drives the terminal: escape sequences, other controls and bidi overrides in a
model's text, a tool call and a risky command's question are shown as visible signs, in a real pseudo-
terminal read back through a terminal emulator (pyte), and the screen holds the stored text made visible."""
from __future__ import annotations

import json
import subprocess
import sys

from orchestrator.core.visible import exact, visible
from tests.test_chat import Term, scenario

# what the model says: a clipboard write (OSC 52 of "rm -rf ~"), a screen clear, a cursor move with a line
# erase, a bell, a carriage return that would overprint, and a right-to-left override
HOSTILE = "before \x1b]52;c;cm0gLXJmIH4=\x07 clear\x1b[2J up\x1b[1A\x1b[2K back\rover \u202eevil"
COMMAND = "rm -rf ~/work\x1b[2K\x1b[1Als -la"  # shown as `ls -la` by a terminal that obeys it


def test_visible_and_exact_show_every_control_as_a_sign():
    assert visible("a\x1b[2Jb") == "a␛[2Jb" and visible("bell\x07") == "bell␇"
    assert visible("x\u202ey\u2066z") == "x⟨U+202E⟩y⟨U+2066⟩z" and visible("\x9b2J") == "⟨U+009B⟩2J"
    assert visible("lines\n\tand tabs") == "lines\n\tand tabs"
    assert visible("👨\u200d👩\u200d👧 café") == "👨\u200d👩\u200d👧 café"  # joiners stay in ordinary text
    assert exact("rm\u200b -rf\u00ad x\U000e0041") == "rm⟨U+200B⟩ -rf⟨U+00AD⟩ x⟨U+E0041⟩"  # not in a command
    assert all(ch not in visible("".join(map(chr, range(0x20)))) for ch in "\x1b\x07\r\x08\x00")


def test_the_chat_screen_shows_what_the_agent_wrote_and_asks_about_the_exact_command(tmp_path):
    scn = scenario(tmp_path, "hostile-text", f"""
        team:
          commander:
            tools: [bash]
        models:
          commander:
            - say: {json.dumps(HOSTILE)}
            - call: {{bash: {{command: {json.dumps(COMMAND)}}}}}
            - say: "done"
        """)
    t = Term(tmp_path, "chat", "--scripted", scn, "--db", str(tmp_path / "rooms.db"))
    try:
        t.wait(r"(?m)^you>")
        t.line("hello")
        t.wait(r"commander: before")
        t.line("go on")
        t.wait(r"asks to run something risky")
        screen = t.screen()
        assert "␛]52;c;cm0gLXJmIH4=␇" in screen and "clear␛[2J up␛[1A␛[2K back␍over ⟨U+202E⟩evil" in screen
        assert "rm -rf ~/work␛[2K␛[1Als -la" in screen  # the command as it would run
        assert "room hostile-text" in screen  # nothing cleared the screen above
        t.line("d")
        t.wait(r"commander: done")
        t.line("/exit")
        assert t.exit_status() == 0
    finally:
        t.close()


def test_run_and_show_print_it_visible_and_export_jsonl_keeps_it(tmp_path):
    scn = scenario(tmp_path, "hostile-run", f"""
        models:
          commander:
            - say: {json.dumps(HOSTILE)}
        turns:
          - user: hi
        """)
    env_db = str(tmp_path / "r.db")
    run = subprocess.run([sys.executable, "-m", "orchestrator", "run", scn, "--db", env_db], capture_output=True,
                         text=True, timeout=60, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stdout[-1500:]
    assert "\x1b" not in run.stdout and "\x07" not in run.stdout and "\u202e" not in run.stdout
    assert visible(HOSTILE) in run.stdout
    shown = subprocess.run([sys.executable, "-m", "orchestrator", "export", "hostile-run", "--db", env_db,
                            "--format", "jsonl"], capture_output=True, text=True, timeout=60,
                           env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert shown.returncode == 0, shown.stderr
    assert HOSTILE in [json.loads(x).get("text") for x in shown.stdout.splitlines()]  # for programs: as is
    md = subprocess.run([sys.executable, "-m", "orchestrator", "export", "hostile-run", "--db", env_db],
                        capture_output=True, text=True, timeout=60, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert "\x1b" not in md.stdout and visible("clear\x1b[2J") in md.stdout


def test_every_other_command_prints_what_it_read_visibly(tmp_path):
    """A file's name, a note or a tool's description can carry escape sequences too: every command a person
    reads prints through the one sanitizer, errors included; --json keeps the text for programs."""
    folder = tmp_path / "src"
    folder.mkdir()
    hostile = "a\x1b[2Jb\x1b]52;c;cm0gLXJmIH4=\x07\u202e.txt"
    (folder / hostile).write_text("print('hi')\n")
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    listed = subprocess.run([sys.executable, "-m", "orchestrator", "tokens", str(folder / hostile)], capture_output=True,
                            text=True, timeout=60, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout and "\u202e" not in listed.stdout
    assert visible(hostile) in listed.stdout
    as_json = subprocess.run([sys.executable, "-m", "orchestrator", "tokens", "--json", str(folder / hostile)],
                             capture_output=True, text=True, timeout=60, env=env)
    assert as_json.returncode == 0, as_json.stderr
    assert [json.loads(x)["path"] for x in as_json.stdout.splitlines()] == [str(folder / hostile)]

    missing = subprocess.run([sys.executable, "-m", "orchestrator", "run", str(tmp_path / hostile)],
                             capture_output=True, text=True, timeout=60, env=env)
    assert missing.returncode == 2 and "error:" in missing.stderr
    assert "\x1b" not in missing.stderr and visible("a\x1b[2Jb") in missing.stderr
