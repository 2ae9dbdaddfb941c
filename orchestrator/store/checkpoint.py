"""The WAL's checkpoints on a busy store: its pages are copied back into the database file in a thread, on a
connection of its own, while the loop goes on committing.

SQLite checkpoints inside the commit that crosses `wal_autocheckpoint` pages, on the event loop here: at 200 busy
rooms that was a stall of 40-90 ms every second (copying and two fsyncs). A passive checkpoint in the thread
after every EVERY writes does that copying meanwhile; the one inside a commit then finds little left to copy,
and still resets the WAL, which a checkpoint running beside new commits cannot do.
"""
from __future__ import annotations

import sqlite3

import trio

from orchestrator.core.log import logger

EVERY = 1_000  # small calls on the loop (messages, ledger rows, the reads beside them) between passive checkpoints


class Checkpointer:
    def __init__(self, uri: str):
        self._uri = uri
        self._written = 0
        self._running: trio.Event | None = None

    def wrote(self, n: int = 1) -> None:
        """Count `n` writes; start a checkpoint in the thread once EVERY were made since the last one began."""
        self._written += n
        if self._written >= EVERY and self._running is None:
            self._written = 0
            self._running = trio.Event()
            trio.lowlevel.spawn_system_task(self._checkpoint)

    async def wait(self) -> None:
        """Until no checkpoint runs (the store is closing)."""
        if self._running is not None:
            await self._running.wait()

    async def _checkpoint(self) -> None:
        try:
            await trio.to_thread.run_sync(_passive, self._uri)
        except Exception as exc:  # a checkpoint that failed is retried by the next one, or by SQLite's own
            logger().warning("wal checkpoint failed", error=str(exc))
        finally:
            running, self._running = self._running, None
            assert running is not None  # set by `wrote` before it spawned this
            running.set()


def _passive(uri: str) -> None:
    conn = sqlite3.connect(uri, uri=True)
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    finally:
        conn.close()
