"""WAL checkpoints on a busy store (store/checkpoint.py): after every EVERY writes a passive checkpoint copies the
WAL back into the database file in a thread, on a connection of its own; closing the store waits for it."""
from __future__ import annotations

import sqlite3
import threading
import time

import trio

from orchestrator.core.types import Draft, TextBlock
from orchestrator.store import checkpoint
from orchestrator.store.db import Store


def say(text: str) -> Draft:
    return Draft(author="user", kind="user", blocks=[TextBlock(text)], visible_to=["*"])


def wal(uri: str) -> tuple[int, int]:
    """Frames in the WAL and frames of it already copied into the database file."""
    conn = sqlite3.connect(uri, uri=True)
    try:
        _, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return frames, copied
    finally:
        conn.close()


async def test_a_passive_checkpoint_runs_in_the_thread_every_so_many_writes(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "EVERY", 20)
    runs: list[tuple[str, tuple[int, int]]] = []
    passive = checkpoint._passive

    def counted(uri: str) -> None:
        passive(uri)
        runs.append((threading.current_thread().name, wal(uri)))

    monkeypatch.setattr(checkpoint, "_passive", counted)
    store = await Store.open(tmp_path / "chat.db")
    room = await store.create_room("r")
    for i in range(18):  # with the room's row: 19 writes
        await store.append(room.id, say(str(i)))
    await trio.sleep(0.05)
    assert runs == []
    for i in range(2):
        await store.append(room.id, say(f"more {i}"))
    await store.close()  # waits for the checkpoint it started
    [(thread, (frames, copied))] = runs
    assert thread != threading.main_thread().name and frames > 0 and copied == frames


async def test_closing_waits_for_a_running_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "EVERY", 1)
    ended: list[float] = []
    passive = checkpoint._passive

    def slow(uri: str) -> None:
        time.sleep(0.3)
        passive(uri)
        ended.append(time.monotonic())

    monkeypatch.setattr(checkpoint, "_passive", slow)
    store = await Store.open(tmp_path / "chat.db")
    room = await store.create_room("r")
    await store.append(room.id, say("one"))
    await store.close()
    closed = time.monotonic()
    assert ended and ended[0] <= closed
    again = await Store.open(tmp_path / "chat.db")
    try:
        assert [m.text for m in await again.load(room.id)] == ["one"]
    finally:
        await again.close()
