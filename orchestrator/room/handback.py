"""The handback marker: strict detection, removal from stored text, and hold-back while streaming.

Only `<handback />` standing at the very end of a message, after whitespace or at its start,
hands the floor back; a quoted marker, `<handback` or `<handbacks/>` in prose is just text.
"""
from __future__ import annotations

import re

MARKER = "<handback />"
_AT_END = re.compile(r"(?:^|(?<=\s))<handback />\s*\Z")


def split(text: str) -> tuple[str, bool]:
    """(text without the marker, whether it was a handback)."""
    m = _AT_END.search(text)
    if not m:
        return text, False
    return text[:m.start()].rstrip(), True


class StreamFilter:
    """Holds back a streamed tail that may still become the marker, so it is never shown."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, delta: str) -> str:
        text = self._held + delta
        cut = text.rfind("<")
        tail = text[cut:]
        if cut != -1 and (MARKER.startswith(tail) or tail.rstrip() == MARKER):
            self._held = text[cut:]
            return text[:cut]
        self._held = ""
        return text

    def flush(self) -> str:
        """At the end of the message: a complete marker is dropped, anything else released."""
        held, self._held = self._held, ""
        return "" if held.strip() == MARKER else held
