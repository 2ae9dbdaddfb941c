"""Loop detection (E15): the same call (name and arguments) repeated back to back.

A nudge at the 3rd identical call, a forced stop at the 5th; any different call resets the count.
"""
from __future__ import annotations

import msgspec

NUDGE_AT, STOP_AT = 3, 5


class LoopGuard:
    def __init__(self) -> None:
        self._last: bytes | None = None
        self.count = 0

    def see(self, name: str, args: dict) -> str:
        """Returns 'ok', 'nudge' or 'stop' for this call."""
        key = name.encode() + b"\0" + msgspec.json.encode(args, order="sorted")
        self.count = self.count + 1 if key == self._last else 1
        self._last = key
        if self.count >= STOP_AT:
            return "stop"
        return "nudge" if self.count == NUDGE_AT else "ok"
