"""The cyclic garbage collector in a process that holds many rooms: what the open rooms keep for long is
frozen out of its passes, so a pass costs what changed lately, not the size of every open room.

CPython's full pass walks every tracked object: with 2,000 open rooms (about 250 objects each) one took
0.2-0.9 s, and every room stood still meanwhile. A frozen object is still freed when its last reference goes;
only a cycle among frozen objects (a closed room, a finished turn) waits for the next thaw, which comes when
the memory in use has doubled since the last one (at most once a minute) or many rooms have closed: rarely,
and so does the one long pass it costs.

While the heap runs, the collector runs no pass of its own (threshold 0): each second the heap freezes what the
second left alive, after a young pass that frees that second's cycles. CPython's automatic passes cost a fifth of
a busy host's CPU: every object a line keeps (its messages, their model views) was walked by a young pass, again
by a middle one, and after each freeze CPython started a full pass every tenth middle one (it compares with the
unfrozen part only), walking a second's promotions (up to 55 ms) to find nothing. The young passes too find
nothing on a busy host in steady state, so each one that finds nothing doubles the gap to the next (up to
LONGEST seconds) and one that finds a cycle brings them back to every second: cyclic garbage made in a second
without a pass waits in the frozen heap for the next thaw.
"""
from __future__ import annotations

import gc
import sys
import time

import trio

from orchestrator.core import startup

SETTLE = 1.0  # seconds between the heap's freezes: how long cyclic garbage waits, what a pass walks
GAP = 60.0  # seconds at least between thaws for growth: rooms opening (live data, not garbage) grow memory fast
# Settles at most between two young passes while they find no garbage: a pass walks every object the second left
# alive (with many rooms waiting on their models, each one's turn in flight, that is costly once a second); a busy host makes no cycles in steady state, so the walks back off, and one that finds any comes back.
LONGEST = 16


_STARTED = False  # the process opened a room: what was alive then is frozen


def freeze_startup() -> None:
    """Once per process, as it opens its first room: what is alive then (its modules, its configuration) lives as
    long as the process does, so it is frozen out of the collector's passes. Each full pass walked all of it again:
    in a relay of 1,000 turns one came, 20-25 ms, a tenth of the run. Garbage is collected first, so none is frozen;
    a process that manages its collector itself (disabled it, or runs a Heap) is left as it is, and so is one
    whose program did not ask for it (core/startup.py)."""
    global _STARTED
    if _STARTED or not startup.tuned() or not gc.isenabled() or gc.get_threshold()[0] == 0:
        return
    _STARTED = True
    gc.collect()
    gc.freeze()


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
        self._spacing = 1  # settles from one young pass to the next: doubled by a pass that found nothing
        self._until = 0  # settles left before the next young pass

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
        if self._until <= 0:  # what the last second made: its cycles are freed, the rest is frozen
            self._spacing = 1 if gc.collect(1) else min(2 * self._spacing, LONGEST)
            self._until = self._spacing
        self._until -= 1
        # Blocks in use, not gc.get_freeze_count(), which walks every frozen object.
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
