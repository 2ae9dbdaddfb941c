"""Group commit: the store's small writes made while the event loop has other work to do (other rooms' messages)
are gathered for a few scheduler passes and committed together, in one transaction, on the loop.

A commit costs about as much for one message as for fifty (the pages at the end of the tables and indexes are
shared), so a busy host commits far less often; a write on a quiet loop (one room talking) never waits. Each
write that fails (a fenced room) fails alone: the group runs again without it, and the others commit.
"""
from __future__ import annotations

from typing import Any, Callable

import trio

Write = tuple[Callable[..., Any], tuple]
# The connections whose group is running (by id): `immediate` on them adds nothing. Any other transaction still
# open when `immediate` begins one is a bug, and SQLite says so.
RUNNING: set[int] = set()


class Group:
    """Writes gathered to commit together, and how each one ended."""

    def __init__(self) -> None:
        self.writes: list[Write] = []
        self.results: list[Any] = []  # a write's return value, or the exception it raised
        self.failed: BaseException | None = None  # what stopped the whole group (its commit failed, say)
        self.landed = False
        self._waiting: list[trio.lowlevel.Task] = []

    def add(self, fn: Callable[..., Any], args: tuple) -> int:
        self.writes.append((fn, args))
        return len(self.writes) - 1

    def land(self) -> None:
        self.landed = True
        for task in self._waiting:
            trio.lowlevel.reschedule(task)

    async def result(self, at: int) -> Any:
        """The write's result once its group committed. A cancel cannot end the wait (its rows may already be in
        the transaction): a wait that refuses to be aborted, as a shielded Event.wait but without a cancel scope
        per write."""
        if not self.landed:
            self._waiting.append(trio.lowlevel.current_task())
            await trio.lowlevel.wait_task_rescheduled(_refuse)
        if self.failed is not None:
            raise self.failed
        if isinstance(result := self.results[at], _Failed):
            raise result.error
        return result


def _refuse(_raise_cancel) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.FAILED


class _Failed:
    def __init__(self, error: Exception):
        self.error = error


def run(conn, writes: list[Write]) -> list[Any]:
    """Every write in one IMMEDIATE transaction (their own `immediate` adds nothing inside it): its return value, or
    the exception it raised. A write that raises makes the transaction roll back and run again without it, so it
    fails alone (rarely: a fenced room) and the others cost no savepoint each. If the transaction cannot begin or
    commit, this raises."""
    RUNNING.add(id(conn))
    try:
        return _run(conn, writes)
    finally:
        RUNNING.discard(id(conn))


def _run(conn, writes: list[Write]) -> list[Any]:
    failed: dict[int, Exception] = {}
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            results: list[Any] = []
            for at, (fn, args) in enumerate(writes):
                if at in failed:
                    results.append(_Failed(failed[at]))
                    continue
                try:
                    results.append(fn(*args))
                except Exception as exc:
                    failed[at] = exc
                    break
            else:
                conn.commit()
                return results
            conn.rollback()
        except BaseException:
            conn.rollback()
            raise
