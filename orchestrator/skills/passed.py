"""What the checks (the injection scanner, the risk classifier) already said of skill contents, so a library
of many skills, and the files they bundle, opens quickly.

Keyed by the SHA-256 of the content and of the checker's own source: any edit to either checks again. One
file per key in the user's cache folder: empty for a pass; for the scanner's findings, their fixed phrases
and lines (never the text), so a blocked skill is not scanned again at every start either. A verdict of
the classifier is kept only when it found nothing.
"""
from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.memory import scan

if TYPE_CHECKING:
    from orchestrator.tools import risk

_seen: dict[str, list] = {}  # key -> what the file holds: [] for a pass
# The files each checker's verdict depends on, under the package: a change to any of them checks again.
_SOURCES = {"scan": ("memory/**/*.py", "core/patterns.py"),  # the scanner is spread over memory/'s modules
            "risk": ("tools/risk*.py", "core/patterns.py")}


@cache
def _version(checker: str) -> str:
    package = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for pattern in _SOURCES[checker]:
        for path in sorted(package.glob(pattern)):
            if path.is_file() and path.suffix != ".pyc":
                h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _folder(checker: str) -> Path:
    return _folder_in(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"), checker)


@cache
def _folder_in(base: str, checker: str) -> Path:
    return Path(base) / "orchestrator" / "skills-checked" / f"{checker}-{_version(checker)}"


def _key(checker: str, text: str) -> Path:
    return _folder(checker) / hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _recall(key: Path) -> list | None:
    if str(key) not in _seen:
        try:
            raw = key.read_bytes()
            _seen[str(key)] = json.loads(raw) if raw else []
        except (OSError, ValueError):
            return None  # not checked yet, or a damaged entry: checked again
    return _seen[str(key)]


def _remember(key: Path, said: list) -> None:
    _seen[str(key)] = said
    try:
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_text(json.dumps(said) if said else "")
    except OSError:
        pass  # a read-only home only costs the next start a recheck


def findings(text: str) -> list[tuple[scan.Finding, int]]:
    """scan.scan(text), each finding with the first line that carries it on its own (else line 1),
    answered from the cache when this text was scanned before."""
    key = _key("scan", text)
    if (known := _recall(key)) is not None:
        return [(scan.Finding(kind, reason), line) for kind, reason, line in known]
    found = scan.scan(text)
    lines = text.split("\n")
    located = [(f, next((n for n, ln in enumerate(lines, 1) if any(g.kind == f.kind for g in scan.scan(ln))), 1))
               for f in found]
    _remember(key, [[f.kind, f.reason, line] for f, line in located])
    return located


def verdict(command: str) -> risk.Verdict:
    """risk.assess(command), answered from the cache when it found nothing before."""
    from orchestrator.tools import risk  # with the first skill that runs a command, not with every room

    key = _key("risk", command)
    if _recall(key) == []:
        return risk.Verdict(None, ())
    found = risk.assess(command)
    if found.blocked is None and not found.risks:
        _remember(key, [])
    return found
