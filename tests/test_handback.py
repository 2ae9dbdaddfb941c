"""The handback marker: strict detection, removal, and never shown while it streams in pieces."""
from __future__ import annotations

import pytest

from orchestrator.room.handback import MARKER, StreamFilter, split


@pytest.mark.parametrize("text, kept, handed", [
    ("Right, 3/4! <handback />", "Right, 3/4!", True),
    ("<handback />", "", True),
    ("All set.\n<handback />\n", "All set.", True),
    ("x <handback/>", "x <handback/>", False),
    ("x <handback>", "x <handback>", False),
    ("x <handbacks/>", "x <handbacks/>", False),
    ('I will write "<handback />" when done', 'I will write "<handback />" when done', False),
    ("Write `<handback />`", "Write `<handback />`", False),
    ("a <handback /> b", "a <handback /> b", False),
    ("no<handback />", "no<handback />", False),
    ("<handback", "<handback", False),
])
def test_strict_marker(text, kept, handed):
    assert split(text) == (kept, handed)


def _stream(pieces: list[str]) -> str:
    f = StreamFilter()
    return "".join(f.feed(p) for p in pieces) + f.flush()


@pytest.mark.parametrize("text", [
    "Right, 3/4! <handback />", "Done <handback />", "tags <b> stay", "a < b and <handle it>",
    'quoted "<handback />" stays', "ends with <hand",
])
def test_stream_filter_matches_split_for_every_chunking(text):
    expected = split(text)[0] if split(text)[1] else text
    for size in range(1, len(text) + 1):
        shown = _stream([text[i:i + size] for i in range(0, len(text), size)])
        assert shown.rstrip() == expected.rstrip(), (size, shown)
        assert MARKER not in shown or not split(text)[1]
