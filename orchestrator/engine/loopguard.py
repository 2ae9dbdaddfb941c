"""Loop detection: the same call (name and arguments) repeated back to back, and the same round of
calls (a response's calls, in any order) repeated response after response.

A nudge at the 3rd repeat, a forced stop at the 5th, for a call and for a round alike; anything different
resets that count.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

NUDGE_AT, STOP_AT = 3, 5


def _key(name: str, args: dict[str, Any]) -> bytes:
    return name.encode() + b"\0" + msgspec.json.encode(args, order="sorted")


def _verdict(count: int) -> str:
    if count >= STOP_AT:
        return "stop"
    return "nudge" if count == NUDGE_AT else "ok"


class LoopGuard:
    """One turn's counts. A round of several calls never repeats a call back to back (A, B, A, B...),
    so rounds are compared whole: the multiset of their calls."""

    def __init__(self) -> None:
        self._last: bytes | None = None
        self._calls = 0
        self._round: list[bytes] | None = None
        self._rounds = 0
        self.count = 0  # the repeats behind the latest verdicts: what a nudge tells the model

    def see(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
        """One response's calls: 'ok', 'nudge' or 'stop' for each, in order."""
        keys = [_key(name, args) for name, args in calls]
        counts = []
        for key in keys:
            self._calls = self._calls + 1 if key == self._last else 1
            self._last = key
            counts.append(self._calls)
        this_round = sorted(keys)
        self._rounds = self._rounds + 1 if this_round == self._round else 1
        self._round = this_round
        self.count = max([*counts, self._rounds])
        return [_verdict(max(n, self._rounds)) for n in counts]
