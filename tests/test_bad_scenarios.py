"""Hostile and malformed scenario files (tests/data/bad-scenarios): duplicate keys, anchors and aliases
(an alias bomb among them), scripted calls to tools the agent lacks or with arguments its schema refuses.

Each file's first line says what must be reported: `# expect: LINE | KEY.PATH | WORDS`. Every one is
bad input (exit 2) named by file:line and key path, read in under 2 s and 200 MB; the alias bomb costs
no more memory than a plain file of its size.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.core.errors import InputError
from orchestrator.scenario.loader import load_scenario

BAD = Path(__file__).parent / "data" / "bad-scenarios"
FILES = sorted(BAD.glob("*.yaml"))
ORCHESTRATOR = str(Path(sys.executable).parent / "orchestrator")

# Loads each file named on the command line in this one process; prints {file, error, seconds} per file.
# The modules the loader imports on first use (the tools and the commander's, for their argument types)
# are imported first: they are the program starting, not the file being read.
_DRIVER = """
import json, sys, time
import orchestrator.room.commander, orchestrator.tools.builtin
from orchestrator.core.errors import InputError
from orchestrator.scenario.loader import load_scenario
for path in sys.argv[1:]:
    start = time.perf_counter()
    try:
        load_scenario(path)
        error = None
    except InputError as exc:
        error = str(exc)
    print(json.dumps({"file": path, "error": error, "seconds": time.perf_counter() - start}), flush=True)
# The peak of this program's own memory (VmHWM): the rusage figure also counts what a forked child shared with
# its parent before exec, which is the test runner's size, not this program's.
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
print(json.dumps({"peak": peak}), flush=True)
"""


def expected(path: Path) -> tuple[int, str, str]:
    m = re.fullmatch(r"# expect: (\d+) \| (.+?) \| (.+)", path.read_text().splitlines()[0])
    assert m, f"{path.name}: the first line must be `# expect: LINE | KEY.PATH | WORDS`"
    return int(m[1]), m[2], m[3]


def load_in_child(*paths: Path) -> tuple[list[dict], int]:
    """What a fresh process reports for these files, and its peak memory in bytes."""
    proc = subprocess.Popen([sys.executable, "-c", _DRIVER, *map(str, paths)], stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    proc.stdout.close()
    proc.wait()
    assert proc.returncode == 0
    *reports, last = [json.loads(line) for line in out.splitlines()]
    return reports, last["peak"]


def test_there_are_at_least_thirty():
    assert len(FILES) >= 30


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_each_names_the_file_line_and_key_path(path):
    line, keypath, words = expected(path)
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:{line}: "), message
    assert message.endswith(f"(at {keypath})"), message
    assert words in message, message


def test_every_file_is_refused_fast_and_small():
    reports, peak = load_in_child(*FILES)
    assert [r["file"] for r in reports] == [str(p) for p in FILES]
    for r in reports:
        assert r["error"] and r["seconds"] < 2.0, r
    assert peak < 200 * 2**20, f"peak memory {peak / 2**20:.0f} MB"


def test_the_alias_bomb_costs_no_more_than_a_plain_file_of_its_size(tmp_path):
    bomb = BAD / "alias-bomb.yaml"
    text = bomb.read_text()
    assert text.count("*l") >= 72  # nine levels of nine: 9**9 strings if it were ever expanded
    plain = tmp_path / "plain.yaml"
    filler = "x" * (len(text.encode()) - len("name: plain\ndescription: \"\"\n"))
    plain.write_text(f'name: plain\ndescription: "{filler}"\n')
    assert plain.stat().st_size == bomb.stat().st_size
    [refused], bomb_peak = load_in_child(bomb)
    [loaded], plain_peak = load_in_child(plain)
    assert "anchors and aliases" in refused["error"] and loaded["error"] is None
    assert bomb_peak <= plain_peak + 2 * 2**20, (bomb_peak / 2**20, plain_peak / 2**20)


def test_check_says_bad_for_each_and_exits_2():
    done = subprocess.run([ORCHESTRATOR, "check", str(BAD)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    bad = [line for line in done.stdout.splitlines() if line.startswith("BAD")]
    assert len(bad) == len(FILES)
    for path in FILES:
        line, keypath, _ = expected(path)
        assert any(f"{path}:{line}: " in b and b.endswith(f"(at {keypath})") for b in bad), path.name
    assert "Traceback" not in done.stdout + done.stderr
