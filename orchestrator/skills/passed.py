"""Which skill texts the injection scanner already passed, so a library of many skills opens quickly.

Keyed by the SHA-256 of the text and of the scanner's own source: any edit to either scans again.
Only passes are kept (an empty file per key in the user's cache folder); a finding is never cached.
"""
from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path

from orchestrator.memory import scan

_seen: set[str] = set()


@cache
def _scanner() -> str:
    return hashlib.sha256(Path(scan.__file__).read_bytes()).hexdigest()[:16]


def _folder() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "orchestrator" / "skills-scanned" / _scanner()


def findings(text: str) -> list[scan.Finding]:
    """scan.scan(text), answered from the cache when this text passed before."""
    key = hashlib.sha256(text.encode()).hexdigest()
    if key in _seen or (_folder() / key).is_file():
        _seen.add(key)
        return []
    found = scan.scan(text)
    if not found:
        _seen.add(key)
        try:
            _folder().mkdir(parents=True, exist_ok=True)
            (_folder() / key).touch()
        except OSError:
            pass  # a read-only home only costs the next start a rescan
    return found
