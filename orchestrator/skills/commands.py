"""The commands a skill would have run: its shell scripts and the shell blocks of its Markdown, each read by
the risk classifier (tools/risk.py) when the skill loads, so the user sees what they would do before any runs.

Refused outright, or fetching code from the network to run, blocks the skill: the command never runs, or
what would run is not in the skill and nothing checked it. Any other risk is a note in `skills list` and
`skills show`; when the command runs, the classifier asks first as it does for every command.
"""
from __future__ import annotations

import re
from pathlib import Path

from orchestrator.skills import passed
from orchestrator.skills.problems import Problem

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh"})
SHELL_SUFFIXES = frozenset({".sh", ".bash", ".zsh", ".ksh"})
# Info strings of fenced blocks that hold commands to run; an unlabelled block may too.
SHELL_BLOCKS = frozenset({"", "bash", "sh", "shell", "zsh", "console", "shell-session", "terminal", "shellsession"})
REMOTE_CODE = "remote-code"  # tools/risk.py's category
MAX_LINES_SEARCHED = 400  # lines looked at one by one for the line a finding is on; beyond, its first line
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)")
_PROMPT = re.compile(r"^\s*[$%] ")


def is_shell_script(rel: str, text: str) -> bool:
    """A shell script: its #! line names a shell, or its name ends in .sh (or the like), or it sits under
    scripts/ with neither a suffix nor a #! line (which a shell would run)."""
    first = text.split("\n", 1)[0]
    if first.startswith("#!"):
        words = first[2:].split()
        prog = Path(words[0]).name if words else ""
        if prog == "env" and len(words) > 1:
            prog = next((w for w in words[1:] if not w.startswith("-")), "")
        return prog in SHELLS
    path = Path(rel)
    return path.suffix.lower() in SHELL_SUFFIXES or (path.parts[:1] == ("scripts",) and not path.suffix)


def shell_blocks(text: str) -> list[tuple[int, str]]:
    """The fenced shell blocks of Markdown, as (line of the block's first line, its commands). In a console
    block with prompts, only the prompted lines are commands; the rest is output."""
    out: list[tuple[int, str]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2).lower()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(fence)), len(lines))
        body = lines[i + 1:end]
        if info in SHELL_BLOCKS and any(ln.strip() for ln in body):
            if any(_PROMPT.match(ln) for ln in body):
                body = [_PROMPT.sub("", ln, count=1) if _PROMPT.match(ln) else "" for ln in body]
            out.append((i + 2, "\n".join(body)))
        i = end + 1
    return out


def check(path: Path, text: str, *, script: bool) -> list[Problem]:
    """What the classifier says of `text` (a whole shell script, else Markdown whose shell blocks are read)."""
    units = [(1, text)] if script else shell_blocks(text)
    out: list[Problem] = []
    for first, unit in units:
        verdict = passed.verdict(unit)
        if verdict.blocked:
            line = _line(unit, first, lambda v: v.blocked is not None)
            out.append(Problem(path, line, "blocked", f"would be refused outright ({verdict.blocked})"))
            continue
        for risk in verdict.risks:
            line = _line(unit, first, lambda v, c=risk.category: any(r.category == c for r in v.risks))
            if risk.category == REMOTE_CODE:
                out.append(Problem(path, line, "blocked", f"{risk.label} ({risk.reason}): what would run is not "
                                                          "in the skill, so nothing checked it"))
            else:
                out.append(Problem(path, line, "asks", f"{risk.label} ({risk.reason})"))
    return out


def _line(unit: str, first: int, hit) -> int:
    """The line of `unit` (its first at `first`) whose own verdict shows the finding, else its first.
    Not through the cache: only a finding leads here, and a file per clean line would fill it."""
    from orchestrator.tools import risk

    for n, line in enumerate(unit.split("\n")[:MAX_LINES_SEARCHED], first):
        if line.strip() and not line.lstrip().startswith("#") and hit(risk.assess(line)):
            return n
    return first
