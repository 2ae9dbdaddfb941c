"""The room's tasks: each runs in the room's nursery under a cancel scope of its own, counted so that `idle`
waits for turns and background work and a stop waits for shell jobs too.

A task that fails with a bug is reported on the bus, never tearing the room down.
"""
from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from orchestrator.core.events import Event, ErrorEvent
from orchestrator.core.log import logger
from orchestrator.room.lines import Lines
from orchestrator.room.members import Member, TurnFailed
from orchestrator.trace.spans import Span

log = logger(__name__)


class Tasks:
    """`spawn` counts for idle and stop; `spawn_job` (shell jobs) only for stop. `ended` is called whenever a
    counted task ends, after the count drops: the room decides there what an idle room does next."""

    def __init__(self, nursery: trio.Nursery, lines: Lines, publish: Callable[[Event], None],
                 ended: Callable[[], None]):
        self._nursery, self._lines, self._publish, self._ended = nursery, lines, publish, ended
        self.scopes: set[trio.CancelScope] = set()
        self.running = 0  # room tasks alive: turns, background work, a limit's stop
        self.jobs = 0  # shell jobs alive: not "running" for idle, but a stop waits for them
        self._settling = trio.lowlevel.ParkingLot()  # woken whenever a task ends

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        self._start(fn, args, counted=True)

    def spawn_job(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        self._start(fn, args, counted=False)

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Unscoped and uncounted: work a stop must not end (it reports the stop)."""
        self._nursery.start_soon(fn, *args)

    def scoped(self, fn: Callable[[], Awaitable[Any]]) -> trio.CancelScope:
        """Uncounted work that a stop ends all the same (the room is idle meanwhile); its scope, to tell it runs."""
        scope = trio.CancelScope()
        self.scopes.add(scope)

        async def run() -> None:
            try:
                with scope:
                    await fn()
            finally:
                self.scopes.discard(scope)
        self._nursery.start_soon(run)
        return scope

    def cancel_all(self) -> None:
        for scope in list(self.scopes):
            scope.cancel()

    def wake(self) -> None:
        """Whoever waits on the room's state looks again."""
        self._settling.unpark_all()

    async def settled(self, others: int) -> None:
        """Until at most `others` counted tasks are alive."""
        while self.running > others:
            await self._settling.park()

    async def quiet(self, others: int) -> None:
        """After a cancel: every task ended but `others`, and every shell job's process group killed."""
        while self.running > others or self.jobs:
            await self._settling.park()

    async def until(self, ready: Callable[[], bool]) -> None:
        """Until `ready()` or no counted task is alive."""
        while self.running and not ready():
            await self._settling.park()

    def count_ended(self) -> None:
        """A counted task (or a stop's report, counted by hand) ended."""
        self.running -= 1
        self._ended()
        self._settling.unpark_all()

    def _start(self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...], counted: bool) -> None:
        scope = trio.CancelScope()
        self.scopes.add(scope)
        if counted:
            self.running += 1
            if args and isinstance(args[0], Member):
                args[0].active += 1
        else:
            self.jobs += 1
        line = self._lines.hold() if counted else None  # a shell job may outlive its line
        self._nursery.start_soon(self._guarded, scope, fn, args, counted, line)

    async def _guarded(self, scope: trio.CancelScope, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...],
                       counted: bool, line: Span | None) -> None:
        try:
            with scope:
                await fn(*args)
        except TurnFailed:
            pass
        except Exception as exc:  # a bug: report it on the bus instead of tearing the room down
            log.exception("room task crashed")
            self._publish(ErrorEvent(ts=time.time(), message=f"internal error: {exc}", error_class="internal"))
        finally:
            self.scopes.discard(scope)
            self._lines.release(line)
            if counted:
                if args and isinstance(args[0], Member):
                    args[0].active -= 1
                self.count_ended()
            else:
                self.jobs -= 1
                self._settling.unpark_all()
