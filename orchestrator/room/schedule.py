"""A host's self-improvement schedule: each agent-bound room it has run gets a pass `every_hours` after its last one
when it saw user lines and some signal since, or `fallback_days` after it when it saw lines but no signal.

The schedule follows rooms through their events while they are open and reopens a closed one for its pass; the
last pass of a room is read back from its usage rows, so a restart keeps the clock. One room's pass failing (or
its room failing to open) is logged and delays nothing else.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
import trio

from orchestrator.core.events import Event, Evolution, MessageEvent
from orchestrator.core.log import logger
from orchestrator.room import improvement
from orchestrator.room.evolution import DAY, HOUR, Settings, last_pass_at
from orchestrator.room.members import USER
from orchestrator.room.room import Room
from orchestrator.room.signals import Signals
from orchestrator.store.contract import Store

log = logger(__name__)

Use = Callable[[str], AbstractAsyncContextManager[Room]]  # RoomHost.room: a room by id, opened if it is not


@dataclass(eq=False, kw_only=True)
class Track:
    """What the schedule knows of one room."""

    room_id: str
    settings: Settings
    wake: Callable[[], None]
    last_pass: float | None = None  # trio time of its last pass (None: not read from the store yet)
    first_seq: int | None = None  # its first user line since that pass
    pending: float = 0.0  # its signals' sum when it closed
    signals: Signals | None = None  # the open room's
    running: bool = False
    passes: int = 0  # how many passes it has seen end
    _signalled = False

    def total(self) -> float:
        return self.signals.total if self.signals is not None else self.pending

    def due(self) -> tuple[float, improvement.Why]:
        """When its next pass is due, and why (math.inf: not until it sees a user line)."""
        if self.first_seq is None or self.last_pass is None:
            return math.inf, "schedule"
        s = self.settings
        if self.total() > 0:
            return self.last_pass + max(s.every_hours * HOUR, s.cooldown_hours * HOUR), "schedule"
        return self.last_pass + max(s.fallback_days * DAY, s.cooldown_hours * HOUR), "fallback"

    def observe(self, ev: Event) -> None:
        if isinstance(ev, MessageEvent) and ev.kind == "user" and ev.author == USER and self.first_seq is None:
            self.first_seq = ev.seq
            self.wake()
        elif isinstance(ev, Evolution):  # the room's own pass (its signals) counts as one
            self.passed()
        if self._signalled != (self.total() > 0):
            self._signalled = not self._signalled
            self.wake()

    def passed(self) -> None:
        self.last_pass, self.first_seq, self.pending, self._signalled = trio.current_time(), None, 0.0, False
        self.passes += 1
        self.wake()


class Schedule:
    """The host's schedule (RoomHost starts `run` and tells it of each room it opens and closes)."""

    def __init__(self, store: Store, use: Use):
        self._store, self._use = store, use
        self.tracks: dict[str, Track] = {}
        self._changed = trio.Event()

    def _wake(self) -> None:
        self._changed.set()

    def opened(self, room: Room) -> None:
        settings = room._evolve
        if settings is None or room._signals is None:
            return
        track = self.tracks.get(room.id)
        if track is None:  # reopened, the room read back its own signals' sum (Room keeps it in its metadata)
            track = self.tracks[room.id] = Track(room_id=room.id, settings=settings, wake=self._wake)
        track.settings, track.signals, track.pending = settings, room._signals, 0.0
        if room._line_seq is not None and track.first_seq is None:
            track.first_seq = room._line_seq
        room.subscribe(track.observe)
        self._wake()

    def closed(self, room: Room) -> None:
        track = self.tracks.get(room.id)
        if track is not None and track.signals is room._signals:
            track.pending, track.signals = track.total(), None

    async def run(self, scope: trio.CancelScope) -> None:
        with scope:
            async with trio.open_nursery() as passes:
                while True:
                    self._changed = trio.Event()
                    await self._read_last_passes()
                    now, soonest = trio.current_time(), math.inf
                    for track in self.tracks.values():
                        if track.running:
                            continue
                        at, why = track.due()
                        if at <= now:
                            track.running = True
                            passes.start_soon(self._pass, track, why)
                        else:
                            soonest = min(soonest, at)
                    with trio.move_on_at(soonest):
                        await self._changed.wait()

    async def _read_last_passes(self) -> None:
        for track in [t for t in self.tracks.values() if t.last_pass is None]:
            try:
                stamp = await last_pass_at(self._store, track.room_id)
            except Exception:
                log.exception("self-improvement schedule: the last pass could not be read", room=track.room_id)
                stamp = None
            now = trio.current_time()
            # the store keeps wall time; the schedule counts in the event loop's clock
            track.last_pass = now if stamp is None else now - max(0.0, time.time() - stamp)

    async def _pass(self, track: Track, why: improvement.Why) -> None:
        first = track.first_seq or 1  # due() names only tracks that saw a line
        seen = track.passes
        try:
            async with self._use(track.room_id) as room:
                if room._evolve is not None:
                    await improvement.scheduled(room, first, why)
        except Exception:  # this room's alone: the others' passes go on
            log.exception("scheduled self-improvement pass failed", room=track.room_id, why=why)
        finally:
            track.running = False
            if track.passes == seen:
                # No pass ended (it raised, or the room has none now): the next try is a period on. A pass that
                # did end already counted itself, and a line since then must not be forgotten here.
                track.passed()
            else:
                track.wake()
