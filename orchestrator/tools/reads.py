"""Read before write: the state of each file when an agent last read or wrote it, and the
per-file lock a writer holds from its freshness check to its rename."""
from __future__ import annotations

import hashlib
import os
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio


@dataclass(frozen=True)
class ReadState:
    size: int
    mtime_ns: int
    sha256: str


def read_state(data: bytes, st: os.stat_result) -> ReadState:
    return ReadState(len(data), st.st_mtime_ns, hashlib.sha256(data).hexdigest())


class ReadLedger:
    """Per (agent, physical path): the file's state when that agent last read or wrote it.
    Per path: a lock writers hold from their freshness check to their rename."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, Path], ReadState] = {}
        self._locks: dict[Path, trio.Lock] = {}

    def seen(self, agent: str, path: Path) -> ReadState | None:
        return self._seen.get((agent, path))

    def record(self, agent: str, path: Path, state: ReadState) -> None:
        self._seen[(agent, path)] = state

    @asynccontextmanager
    async def writing(self, path: Path):
        lock = self._locks.setdefault(path, trio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and not lock.statistics().tasks_waiting:
                self._locks.pop(path, None)  # idle: a long session does not keep one per file ever written
