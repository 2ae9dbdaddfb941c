"""The bus: the one place a message enters a room. It is committed to the store, delivered to the
partition of every member allowed to see it, then published to subscribers, under one lock.

Because the lock covers all three steps, the order subscribers see is the `seq` order on disk. Writes that
need no commit of their own ride the next message's transaction (a task's closing row) or, deferred (a turn's
usage), the first one after they waited `DEFER` seconds; `flush` writes what is left: a task's row when the room
settles, deferred rows once `due` (the room's next line usually carries them first) and when the room closes.
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

import trio

from orchestrator.core.events import ErrorEvent, Event, message_event
from orchestrator.core.log import logger
from orchestrator.core.passes import held
from orchestrator.core.types import Draft, Message, TextBlock
from orchestrator.room.members import ROOM, Member
from orchestrator.store.contract import Side, Store
from orchestrator.store.db import immediate
from orchestrator.store.records import TaskRecord, task_side

log = logger(__name__)

DEFER = 1.0  # seconds a deferred write waits for the room to settle before it rides the next message


class Bus:
    def __init__(self, store: Store, room_id: str, members: dict[str, Member]):
        self._store, self._room, self._members = store, room_id, members
        self._subscribers: list[Callable[[Event], None]] = []
        self._lock = trio.Lock()
        self._carried: list[Side] = []  # side writes waiting for the next message's transaction
        self._deferred: list[Side] = []  # and those that may wait until `_due`
        self._due = _NEVER
        self._assigning: _Assignments | None = None  # assignments being committed together, while others may join
        self._held: list[tuple[Draft, int | None]] = []  # to commit first in the next message's transaction
        # Told of each assignment's ledger entry once it is on disk (the ledger announces it): all of a response's
        # together, before any of their workers starts its turn.
        self.landed: Callable[[TaskRecord], object] = lambda task: None

    def subscribe(self, fn: Callable[[Event], None]) -> None:
        self._subscribers.append(fn)

    def publish(self, ev: Event) -> None:
        """An event that is not a message (a delta, a floor change, a task): to subscribers only."""
        ev.room = self._room
        for fn in self._subscribers:
            fn(ev)

    async def post(self, draft: Draft, notify: tuple[str, ...] = (), *, task: TaskRecord | None = None,
                   alone: bool = False, answers: int | None = None) -> Message:
        """Commit a message: store, partitions of everyone allowed to see it, then subscribers.

        Only the members in `notify` are asked to answer it; the others just see it. `task` (an
        assignment's ledger entry) is committed with it, in one transaction, which the assignments made in the
        same scheduler pass (a response's parallel dispatches) share, unless it is `alone` (the only one in its
        response); so is `answers`, the newest seq an agent's reply answers.
        """
        if task is not None:
            return await self._assign(draft, task, alone)
        async with held(self._lock):  # a line posts about ten messages
            return (await self._commit([draft], notify, answers=answers))[0]

    async def _assign(self, draft: Draft, task: TaskRecord, alone: bool) -> Message:
        if (batch := self._assigning) is not None:  # another assignment of this pass is being committed: join it
            at = batch.join(draft, task)
            with trio.CancelScope(shield=True):  # its rows are in that transaction: wait to learn how it ended
                await batch.done.wait()
            return batch.outcome(at)
        batch = self._assigning = _Assignments(draft, task)
        # Shielded: the assignments that join wait for this commit. Taking the lock yields, so the rest of this
        # scheduler pass (a response's other dispatches) runs meanwhile and joins; one alone has none to wait for.
        with trio.CancelScope(shield=True):
            async with held(self._lock) if alone else self._lock:
                self._assigning = None
                try:
                    batch.messages = await self._commit(batch.drafts, (), batch.tasks)
                except BaseException as exc:
                    batch.error = exc
                    raise
                finally:
                    batch.done.set()
        return batch.messages[0]

    async def _commit(self, drafts: list[Draft], notify: tuple[str, ...], tasks: Sequence[TaskRecord] = (), *,
                      answers: int | None = None) -> list[Message]:
        """Under the lock: one transaction for `drafts`, the ledger rows of `tasks` and what is carried (if due)."""
        carried = self._take(bool(self._deferred) and trio.current_time() >= self._due)
        sides = carried + [task_side(t) for t in tasks]
        held, self._held = self._held, []
        try:
            messages = await self._store.append_many(self._room, [d for d, _ in held] + drafts,
                                                      side=_together(sides) if sides else None,
                                                      answers=[a for _, a in held] + [answers])
        except BaseException:
            self._give_back(carried)
            self._held[:0] = held
            raise
        for i, msg in enumerate(messages):
            for viewer in msg.visible_to:
                member = self._members.get(viewer)
                if member is not None:
                    member.partition.append(msg, addressed=i >= len(held) and viewer in notify)
            if self._subscribers:  # an event is built only for someone to read it
                self.publish(message_event(msg))
        for task in tasks:
            self.landed(task)
        return messages[len(held):]

    def hold(self, draft: Draft, answers: int | None = None) -> None:
        """Commit `draft` (with what it `answers`) first in the room's next message's transaction instead of in one
        of its own: for a message that such a message follows at once, with nothing depending on it meanwhile (a
        tool call whose tools' first act is to post their task; a report that is its tool result's next).
        Nobody sees it until then; if that commit fails, it waits for the next one."""
        self._held.append((draft, answers))

    def carry(self, side: Side, *, defer: bool = False) -> None:
        """Write `side` with the room's next message, in its transaction; `flush` if none comes. `defer`: a write
        that may wait (a turn's usage), so a busy room commits its rows together, not one per message; a waiting
        write with a `join(side) -> bool` may take the next one into itself."""
        if not defer:
            self._carried.append(side)
            return
        if not self._deferred:
            self._due = trio.current_time() + DEFER
        elif (join := getattr(self._deferred[-1], "join", None)) is not None and join(side):
            return  # the waiting write takes these rows too (store/usage.py: Rows)
        self._deferred.append(side)

    def _take(self, deferred: bool) -> list[Side]:
        carried, self._carried = self._carried, []
        if deferred:
            carried += self._deferred
            self._deferred, self._due = [], _NEVER
        return carried

    def _give_back(self, carried: list[Side]) -> None:
        """Not written: they wait for the next commit (the deferred ones among them too)."""
        self._carried[:0] = carried

    @property
    def carrying(self) -> bool:
        """Rows to write before the room counts as idle: a task's closing row that rode no message."""
        return bool(self._carried)

    @property
    def deferring(self) -> bool:
        """Rows that may wait until `due` (a turn's usage)."""
        return bool(self._deferred)

    @property
    def due(self) -> float:
        return self._due

    async def flush(self) -> None:
        """Write what is carried now, in one transaction of its own (the room settled with no message to come)."""
        with trio.CancelScope(shield=True):
            async with self._lock:
                carried = self._take(deferred=True)
                if carried:
                    try:
                        await self._store.call(_transaction, _together(carried), small=True)
                    except BaseException:
                        self._give_back(carried)
                        raise

    async def flush_when_due(self) -> None:
        """The deferred rows, once due: a room that answers one short line after another has its next line carry
        them, so its rows cost a write per second, not a task and a write per line. A failure is told, and the
        rows wait for the room's next message or its close."""
        try:
            await trio.sleep_until(self._due)
            await self.flush()
        except Exception as exc:
            log.exception("usage rows not written")
            self.publish(ErrorEvent(ts=time.time(), message=f"usage rows not written yet: {exc}",
                                    error_class=type(exc).__name__))

    async def flush_closing(self, failing: bool) -> None:
        """The room is closing: what waits is written now. When an error is closing it, that error is the one
        the caller hears about; the rows' write failing too is only logged."""
        try:
            await self.flush()
        except Exception:
            if not failing:
                raise
            log.exception("usage rows not written as the room closed")

    async def notice(self, text: str, visible_to: list[str], notify: tuple[str, ...] = ()) -> Message:
        """A line the room itself writes (an unknown @name, a limit, an answered question)."""
        return await self.post(Draft(author=ROOM, kind="notice", blocks=[TextBlock(text)], visible_to=visible_to),
                               notify)


_NEVER = float("inf")


def _together(sides: list[Side]) -> Side:
    if len(sides) == 1:
        return sides[0]

    def write(db) -> None:
        for side in sides:
            side(db)

    return write


def _transaction(db, side: Side) -> None:
    with immediate(db):
        side(db)


class _Assignments:
    """Task messages and their ledger rows made in one scheduler pass, committed in one transaction."""

    def __init__(self, draft: Draft, task: TaskRecord):
        self.drafts, self.tasks = [draft], [task]
        self.messages: list[Message] = []
        self.error: BaseException | None = None
        self.done = trio.Event()

    def join(self, draft: Draft, task: TaskRecord) -> int:
        self.drafts.append(draft)
        self.tasks.append(task)
        return len(self.drafts) - 1

    def outcome(self, at: int) -> Message:
        if self.error is not None:
            raise self.error
        return self.messages[at]
