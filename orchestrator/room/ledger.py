"""The light task ledger: task, assignee, status, result summary, and whether the commander read it.

Every change is persisted and announced as a `task` event; the commander's prompt renders it. A task whose
report becomes a tool result is closed with that result's commit: both are on disk, or neither.
"""
from __future__ import annotations

import time
import uuid
from itertools import islice
from typing import Callable, Literal, Sequence, cast

from orchestrator.core.events import TaskEvent
from orchestrator.core.tokens import estimate
from orchestrator.store.contract import Side, Store
from orchestrator.store.records import TaskRecord, task_side

SUMMARY_CHARS = 200


class Ledger:
    def __init__(self, store: Store, room_id: str, publish: Callable[[TaskEvent], None],
                 spawn: Callable[..., None], carry: Callable[[Side], None], tasks: Sequence[TaskRecord] = ()):
        self._store, self._room, self._publish, self._spawn, self._carry = store, room_id, publish, spawn, carry
        self.load(tasks)

    def load(self, tasks: Sequence[TaskRecord]) -> None:
        """The room's tasks as stored, oldest first."""
        self.tasks: dict[str, TaskRecord] = {}
        # Running and unread tasks by id, so that a turn's questions cost what is open, not the room's age.
        self._running: set[str] = set()
        self._unread: set[str] = set()
        self._order: dict[str, int] = {}  # id -> position in `tasks`
        self._lines: dict[str, tuple[TaskRecord, str, int]] = {}  # id -> (the record shown, its line, tokens)
        for t in tasks:
            self._index(t)

    async def restore(self, tasks: Sequence[TaskRecord]) -> None:
        """A reopened room's tasks: those still running died with the process that ran them."""
        self.load(tasks)
        for t in self.running():
            await self.close(t.id, "cancelled", "interrupted by a restart")

    def _index(self, rec: TaskRecord) -> None:
        self._order.setdefault(rec.id, len(self._order))
        self.tasks[rec.id] = rec
        running = rec.status == "running"
        (self._running.add if running else self._running.discard)(rec.id)
        (self._unread.add if not running and rec.background and not rec.read else self._unread.discard)(rec.id)

    def new(self, agent: str, kind: str, task: str, *, background: bool = False) -> TaskRecord:
        """A running task, not stored yet: the bus commits it with its assignment, then calls `opened`."""
        return TaskRecord(id="t" + uuid.uuid4().hex[:6], room=self._room, agent=agent, kind=kind,
                          status="running", task=task, background=background, created=time.time())

    def opened(self, rec: TaskRecord) -> TaskRecord:
        self._index(rec)
        self._announce(rec)
        return rec

    async def close(self, task_id: str, status: str, result: str = "") -> TaskRecord:
        """Closed, unread, in a commit of its own."""
        return await self._put(self._closed(task_id, status, result, read=False))

    def close_with_report(self, task_id: str, status: str, result: str) -> TaskRecord:
        """Closed and read: its report is the tool result about to be committed, whose transaction the row rides."""
        rec = self._closed(task_id, status, result, read=True)
        self._index(rec)
        self._carry(task_side(rec))
        self._announce(rec)
        return rec

    def _closed(self, task_id: str, status: str, result: str, read: bool) -> TaskRecord:
        summary = result if len(result) <= SUMMARY_CHARS else result[:SUMMARY_CHARS - 1] + "…"
        return TaskRecord(**{**_fields(self.tasks[task_id]), "status": status, "result": summary, "read": read})

    def mark_read(self, task_ids: list[str]) -> None:
        """Now in memory (a request is being built); on disk soon after, in the room's nursery."""
        for tid in task_ids:
            rec = TaskRecord(**{**_fields(self.tasks[tid]), "read": True})
            self._index(rec)
            self._spawn(self._store.put_task, rec)

    def running(self) -> list[TaskRecord]:
        return self._oldest_first(self._running)

    def unread(self) -> list[TaskRecord]:
        """Background tasks that ended and whose report the commander has not had a turn to read."""
        return self._oldest_first(self._unread)

    def recent(self, n: int) -> list[TaskRecord]:
        """The last n tasks opened, oldest first."""
        return list(islice(reversed(self.tasks.values()), n))[::-1]

    def lines(self, n: int) -> list[tuple[str, int]]:
        """The last n tasks as the commander's prompt shows them, each with its tokens: made once per change."""
        shown, recent = [], self.recent(n)
        for rec in recent:
            kept = self._lines.get(rec.id)
            if kept is None or kept[0] is not rec:
                line = f"{rec.id} {rec.agent} [{rec.status}] {rec.task}" + (f" -> {rec.result}" if rec.result else "")
                # + 1: a line estimated alone counts up to one token fewer than inside the whole prompt
                kept = self._lines[rec.id] = (rec, line, estimate(f"- {line}\n") + 1)
            shown.append(kept[1:])
        if len(self._lines) > 2 * n:  # only the shown ones are worth keeping
            self._lines = {rec.id: self._lines[rec.id] for rec in recent}
        return shown

    def _oldest_first(self, ids: set[str]) -> list[TaskRecord]:
        return [self.tasks[i] for i in sorted(ids, key=self._order.__getitem__)]

    async def _put(self, rec: TaskRecord) -> TaskRecord:
        self._index(rec)
        await self._store.put_task(rec)
        self._announce(rec)
        return rec

    def _announce(self, rec: TaskRecord) -> None:
        self._publish(TaskEvent(ts=time.time(), room=self._room, task_id=rec.id, agent=rec.agent,
                                # TaskRecord keeps kind and status as plain str (store/records.py)
                                kind=cast(Literal["dispatch", "worker"], rec.kind),
                                status=cast(Literal["running", "done", "failed", "cancelled"], rec.status)))


def _fields(rec: TaskRecord) -> dict:
    return {f: getattr(rec, f) for f in rec.__struct_fields__}
