"""The cyclic garbage collector in a process that holds many rooms: what the open rooms keep for long is
frozen out of its passes, so a pass costs what changed lately, not the size of every open room.

CPython's full pass walks every tracked object: with 2,000 open rooms (about 250 objects each) one took
0.2-0.9 s, and every room stood still meanwhile. A frozen object is still freed when its last reference goes;
only a cycle among frozen objects (a closed room, a finished turn) waits for the next thaw, which comes when
the memory in use has doubled since the last one (at most once a minute) or many rooms have closed: rarely,
and so does the one long pass it costs.

Between freezes CPython would still run a full pass every tenth middle one: it starts one when what reached the old
generation since the last full pass exceeds a quarter of what that pass left there, and after a freeze that is
next to nothing. Those passes walked a second's promotions (tens of thousands of objects, up to 55 ms, several
times a second at 100 busy rooms) and found no garbage: while the heap runs, full passes are only its own.
"""
from __future__ import annotations

import gc
import sys
import time

import trio

SETTLE = 1.0  # seconds between freezes: what a full pass of the collector may still have to walk
GAP = 60.0  # seconds at least between thaws for growth: rooms opening (live data, not garbage) grow memory fast
NO_FULL_PASS = 1 << 30  # the old generation's threshold while the heap runs: middle passes before a full one


class Heap:
    """`run` it in the host's nursery; tell it `closed()` as rooms close, and `release()` at the end."""

    def __init__(self, every: float = SETTLE, used=sys.getallocatedblocks,  # noqa: ANN001 - the measure of memory
                 gap: float = GAP):
        self.every, self._used, self._gap = every, used, gap
        self._last = time.monotonic()  # when the last thaw (or the first freeze) was
        self._thawed = 0  # memory blocks in use after the last thaw (or the first freeze)
        self._closed = 0  # rooms closed since the last thaw
        self._due = False  # many rooms closed: their cycles wait in the frozen heap
        self._thresholds: tuple[int, int, int] | None = None  # the collector's own, while the heap runs

    def closed(self, open_rooms: int) -> None:
        self._closed += 1
        if self._closed > max(50, open_rooms // 4) and not self._due:
            self._due = True
            gc.unfreeze()  # at once: a collection that runs before the next settle frees them too

    async def run(self) -> None:
        if self._thresholds is None:
            self._thresholds = gc.get_threshold()
            gc.set_threshold(*self._thresholds[:2], NO_FULL_PASS)
        while True:
            await trio.sleep(self.every)
            self.settle()

    def settle(self) -> None:
        gc.collect(1)  # the young generations first: a cycle that is garbage already is not frozen
        # Blocks in use, not gc.get_freeze_count(), which walks every frozen object (~0.1 s for 600,000).
        used = self._used()
        now = time.monotonic()
        if not self._thawed:
            self._thawed, self._last = used, now
        elif self._due or (used > 2 * self._thawed and now - self._last >= self._gap):
            gc.unfreeze()
            gc.collect()  # the rare full pass: frozen cycles are freed
            self._closed, self._due, self._thawed, self._last = 0, False, self._used(), now
        gc.freeze()

    def release(self) -> None:
        """The host is closing: everything goes back to the collector, with its own thresholds."""
        gc.unfreeze()
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
