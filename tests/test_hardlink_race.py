"""The hard-link swap race (issue 14): while another process keeps swapping a workspace file for a hard
link to a file outside and removing that name again, read_file and grep_files never return the outside
content in 10,000 tries each; the link count is checked before opening, not only after."""
import os
import subprocess
import sys
import textwrap

from orchestrator.tools.base import ToolError
from orchestrator.tools.files import _read
from orchestrator.tools.search import GrepArgs, _grep
from orchestrator.tools.session import ToolSession

TRIES = int(os.environ.get("HARDLINK_TRIES", "10000"))

ATTACKER = textwrap.dedent("""
    import os, sys
    ws, outside = sys.argv[1], sys.argv[2]
    f, tmp, plain = os.path.join(ws, "f.txt"), os.path.join(ws, ".swap"), os.path.join(ws, ".plain")
    print("ready", flush=True)
    while True:
        try:
            os.link(outside, tmp)
            os.replace(tmp, f)          # f.txt is now the outside file (two names)
            os.unlink(f)                # one name again: an fstat alone would pass it
            with open(plain, "w") as p:
                p.write("innocent\\n")
            os.replace(plain, f)        # and back to an ordinary workspace file
        except OSError:
            pass
""")


def test_read_file_and_grep_files_never_leak_through_a_hard_link_swap(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside.txt"
    ws.mkdir()
    outside.write_text("OUTSIDE-SECRET\n")
    (ws / "f.txt").write_text("innocent\n")
    session = ToolSession(ws)
    attacker = subprocess.Popen([sys.executable, "-c", ATTACKER, str(ws), str(outside)], stdout=subprocess.PIPE)
    try:
        assert attacker.stdout.readline() == b"ready\n"
        outcomes = {"read": 0, "refused": 0}
        for i in range(TRIES):
            try:
                _, text, _ = _read(session, "f.txt")
                assert "OUTSIDE" not in text
                outcomes["read"] += 1
            except ToolError:
                outcomes["refused"] += 1
            for path in (".", "f.txt") if i % 2 else (".",):
                try:
                    found = _grep(session, GrepArgs(pattern="SECRET|innocent", path=path))
                    assert "OUTSIDE" not in found
                except ToolError:
                    outcomes["refused"] += 1
    finally:
        attacker.kill()
        attacker.wait()
        attacker.stdout.close()
    assert outcomes["read"] > 0 and outcomes["refused"] > 0, outcomes  # the race was live both ways
