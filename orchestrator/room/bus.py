"""The bus: the one place a message enters a room. It is committed to the store, delivered to the
partition of every member allowed to see it, then published to subscribers, under one lock.

Because the lock covers all three steps, the order subscribers see is the `seq` order on disk. Writes that
need no commit of their own (a turn's usage) ride the next message's transaction, or `flush` writes them.
"""
from __future__ import annotations

from typing import Callable

import trio

from orchestrator.core.events import Event, message_event
from orchestrator.core.types import Draft, Message, TextBlock
from orchestrator.room.members import ROOM, Member
from orchestrator.store.db import Side, Store, TaskRecord, immediate


class Bus:
    def __init__(self, store: Store, room_id: str, members: dict[str, Member]):
        self._store, self._room, self._members = store, room_id, members
        self._subscribers: list[Callable[[Event], None]] = []
        self._lock = trio.Lock()
        self._carried: list[Side] = []  # side writes waiting for the next message's transaction

    def subscribe(self, fn: Callable[[Event], None]) -> None:
        self._subscribers.append(fn)

    def publish(self, ev: Event) -> None:
        """An event that is not a message (a delta, a floor change, a task): to subscribers only."""
        ev.room = self._room
        for fn in self._subscribers:
            fn(ev)

    async def post(self, draft: Draft, notify: tuple[str, ...] = (), *, task: TaskRecord | None = None,
                   answers: int | None = None) -> Message:
        """Commit a message: store, partitions of everyone allowed to see it, then subscribers.

        Only the members in `notify` are asked to answer it; the others just see it (G3). `task` (an
        assignment's ledger entry) is committed with it, in one transaction; so is `answers`, the newest
        seq an agent's reply answers.
        """
        async with self._lock:
            carried, self._carried = self._carried, []
            try:
                msg = await self._store.append(self._room, draft, task=task,
                                               side=_together(carried) if carried else None, answers=answers)
            except BaseException:
                self._carried[:0] = carried  # not written: they wait for the next commit
                raise
            for viewer in msg.visible_to:
                member = self._members.get(viewer)
                if member is not None:
                    member.partition.append(msg, addressed=viewer in notify)
            self.publish(message_event(msg))
        return msg

    def carry(self, side: Side) -> None:
        """Write `side` with the room's next message, in its transaction; `flush` if none comes."""
        self._carried.append(side)

    @property
    def carrying(self) -> bool:
        return bool(self._carried)

    async def flush(self) -> None:
        """Write what is carried now, in one transaction of its own (the room settled with no message to come)."""
        with trio.CancelScope(shield=True):
            async with self._lock:
                carried, self._carried = self._carried, []
                if carried:
                    try:
                        await self._store.call(_transaction, _together(carried), small=True)
                    except BaseException:
                        self._carried[:0] = carried
                        raise

    async def notice(self, text: str, visible_to: list[str], notify: tuple[str, ...] = ()) -> Message:
        """A line the room itself writes (an unknown @name, a limit, an answered question)."""
        return await self.post(Draft(author=ROOM, kind="notice", blocks=[TextBlock(text)], visible_to=visible_to),
                               notify)


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
