"""Per-line limits (`team.limits`): model calls and tokens counted per user line, and the turn deadline.

Reaching one halts the group through the room's stop path; a new user line starts a new count.
"""
from __future__ import annotations

from typing import Callable

import trio

from orchestrator.core.types import Usage
from orchestrator.room.ledger import Ledger
from orchestrator.room.members import COMMANDER
from orchestrator.team.schema import Limits


class Meter:
    """What one user line has used so far; the engine reports each model call and its usage here."""

    def __init__(self, limits: Limits, ledger: Ledger, halt: Callable[[str], None]):
        self._limits, self._ledger, self._halt = limits, ledger, halt
        self.calls, self.tokens = 0, 0

    def on_call(self, agent: str) -> None:
        if agent == COMMANDER:  # this request carries every report that has arrived so far
            self._ledger.mark_read([t.id for t in self._ledger.unread()])
        self.calls += 1
        cap = self._limits.max_model_calls
        if cap is not None and self.calls > cap:
            self._halt(f"limit reached: at most {cap} model calls per user line")

    def on_usage(self, agent: str, usage: Usage) -> None:
        self.tokens += usage.input + usage.output
        cap = self._limits.max_tokens
        if cap is not None and self.tokens > cap:
            self._halt(f"limit reached: at most {cap} tokens per user line")


async def deadline(seconds: float, idle, current: Callable[[], Meter], meter: Meter,
                   halt: Callable[[str], None]) -> None:
    """Watches one line's work: gone as soon as the room is idle, a halt when time runs out first
    (unless a newer line has started its own count)."""
    with trio.move_on_after(seconds) as timer:
        await idle()
    if timer.cancelled_caught and current() is meter:
        halt(f"limit reached: a turn may take at most {seconds:g} s")
