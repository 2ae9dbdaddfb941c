"""Taking a trio lock or capacity limiter without a pass through the scheduler when it is free.

trio's `acquire` always yields once, even to a free lock; a turn takes several (its member's lock, the room's
worker limit, the bus), and at zero model latency each pass was a tenth of a line's cost. A cancelled task still
never takes one: the cancel is checked first, as `acquire` does.
"""
from __future__ import annotations

import trio


class held:
    """`async with held(lock):` for a `trio.Lock` or `trio.CapacityLimiter`: at once when it is free, else
    queued fairly by `acquire`. A class, not a generator: it runs several times per turn."""

    __slots__ = ("_lock",)

    def __init__(self, lock: trio.Lock | trio.CapacityLimiter):
        self._lock = lock

    async def __aenter__(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self._lock.acquire_nowait()  # a free lock has no waiters: a release hands it straight to the next
        except trio.WouldBlock:
            await self._lock.acquire()

    async def __aexit__(self, *exc_info) -> None:
        self._lock.release()
