"""Text from a model, a tool or a file made safe to show a person: every control character, escape sequence
and bidi override is shown as a visible sign, never interpreted by the terminal.

A terminal acts on what it is sent: ESC ] 52 rewrites the clipboard, ESC [ 2 J clears the screen, ESC [ 1 A
with ESC [ 2 K erases the line above (a risky command shown as another), and a right-to-left override
reorders what follows. Each such character is replaced by itself (ESC as ␛, the other C0 controls by
their control pictures, C1 controls and format characters as ⟨U+XXXX⟩), so what it spelled stays readable
and nothing acts. Mapped one character at a time, so text streamed in pieces comes out the same.
"""
from __future__ import annotations

import unicodedata
from typing import Any, TypeVar

import msgspec

from orchestrator.core.events import Confirm, Event

E = TypeVar("E", bound=Event)

# C0 controls but newline and tab, as the Unicode control pictures (U+2400 + code); DEL as ␡
_TABLE: dict[int, str] = {c: chr(0x2400 + c) for c in range(0x20) if c not in (0x0A, 0x09)}
_TABLE[0x1B] = "␛"
_TABLE[0x7F] = "␡"
_TABLE.update({c: f"⟨U+{c:04X}⟩" for c in range(0x80, 0xA0)})  # C1: U+009B is a CSI to some terminals
# what reorders or hides text: the bidi embeddings, overrides, isolates and marks, and the line and
# paragraph separators (a terminal may break the line there)
_TABLE.update({c: f"⟨U+{c:04X}⟩" for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A),
                                          0x2028, 0x2029)})

# everything of category Cf (format: zero-width spaces and joiners, soft hyphen, tag characters ...) and the
# variation selectors too, for text whose every character matters (a command the user is asked to allow);
# in ordinary text they stay, since emoji sequences and scripts need the joiners
_STRICT: dict[int, str] = dict(_TABLE)
_FILLERS = (0x115F, 0x1160, 0x3164, 0xFFA0)  # Hangul fillers: letters that show nothing
_STRICT.update({c: f"⟨U+{c:04X}⟩" for c in (*range(0x0080, 0x0100), *range(0x2000, 0x2070), 0x180E, *_FILLERS,
                                          *range(0xFE00, 0xFE10), 0xFEFF, *range(0xFFF9, 0xFFFC))
                if unicodedata.category(chr(c)) == "Cf" or 0xFE00 <= c < 0xFE10 or c in _FILLERS})
_STRICT.update({c: f"⟨U+{c:04X}⟩" for c in range(0xE0000, 0xE0080)})  # tag characters: invisible ASCII


def visible(text: str) -> str:
    """`text` with every control character, escape sequence and bidi control shown, not acted on."""
    return text.translate(_TABLE)


def exact(text: str) -> str:
    """visible(), and every invisible character shown too: for a command the user is asked to allow, where
    what they read must be what runs."""
    return text.translate(_STRICT)


class Shown:
    """A text stream that writes on what it is given made visible: the output of a command a person reads,
    where any line may quote what an agent, a tool or a file wrote (a note, a skill, an error)."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(visible(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, buffer: the stream's own
        return getattr(self._stream, name)


def displayed(ev: E) -> E:
    """The event with every text a person will read made visible (a confirmation's summary exactly):
    the one place the terminal's printers take their text from."""
    changes = {}
    for field in msgspec.structs.fields(ev):
        value = getattr(ev, field.name)
        new = _shown(value, exact if isinstance(ev, Confirm) and field.name == "summary" else visible)
        if new is not value:
            changes[field.name] = new
    return msgspec.structs.replace(ev, **changes) if changes else ev


def _shown(value: Any, fn) -> Any:
    if isinstance(value, str):
        new = fn(value)
        return value if new == value else new
    if isinstance(value, list):
        items = [_shown(v, fn) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    if isinstance(value, dict):
        entries = {k: _shown(v, fn) for k, v in value.items()}
        return value if all(entries[k] is v for k, v in value.items()) else entries
    if isinstance(value, msgspec.Struct):
        changes = {f.name: n for f in msgspec.structs.fields(value)
                   if (n := _shown(getattr(value, f.name), fn)) is not getattr(value, f.name)}
        return msgspec.structs.replace(value, **changes) if changes else value
    return value
