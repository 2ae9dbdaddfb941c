"""The cyclic garbage collector in a process that holds many rooms: what the open rooms keep for long is
frozen out of its passes, so a pass costs what changed lately, not the size of every open room.

CPython's full pass walks every tracked object: with 2,000 open rooms (about 250 objects each) one took
0.2-0.9 s, and every room stood still meanwhile. A frozen object is still freed when its last reference goes;
only a cycle among frozen objects (a closed room, a finished turn) waits for the next thaw, which comes when
the memory in use has doubled since the last one (at most once a minute) or many rooms have closed: rarely,
and so does the one long pass it costs.

While the heap runs, the collector runs no pass of its own (threshold 0): the heap's pass every second collects
the young cycles of that second, then freezes what is left. CPython's automatic passes cost a fifth of a busy
host's CPU: every object a line keeps (its messages, their model views) was walked by a young pass, again by a
middle one, and after each freeze CPython started a full pass every tenth middle one (it compares with the
unfrozen part only), walking a second's promotions (up to 55 ms) to find nothing. Cyclic garbage waits at most
a second.
"""
from __future__ import annotations

import gc
import sys
import time

import trio

SETTLE = 1.0  # seconds between the heap's passes: how long cyclic garbage waits, what a pass walks
GAP = 60.0  # seconds at least between thaws for growth: rooms opening (live data, not garbage) grow memory fast


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
            gc.unfreeze()  # at once: the next settle's full pass frees them

    async def run(self) -> None:
        if self._thresholds is None:
            self._thresholds = gc.get_threshold()
            gc.set_threshold(0)  # no automatic pass: settle's are the only ones
        while True:
            await trio.sleep(self.every)
            self.settle()

    def settle(self) -> None:
        gc.collect(1)  # what the last second made: its cycles are freed, the rest is frozen
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
