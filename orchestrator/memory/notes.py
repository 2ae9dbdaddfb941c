"""Cross-session memory: the user profile and the notes, their caps, and the snapshot of both that
is frozen into every agent's system prompt at the start of a turn. Kept in the Store's file, table `memory`.
"""
from __future__ import annotations

import re
import sqlite3
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import trio

from orchestrator.core.errors import OrchestratorError
from orchestrator.core.prompts import render
from orchestrator.memory import scan
from orchestrator.store.db import immediate
from orchestrator.store.sqlite import sqlite_utils

if TYPE_CHECKING:
    from orchestrator.store.contract import Store

T = TypeVar("T")
Target = Literal["profile", "notes"]
TARGETS: tuple[Target, ...] = ("profile", "notes")
PROFILE_CAP = 1500
NOTES_CAP = 3000
REFRESH = 1.0  # seconds a snapshot is reused when this process wrote nothing: another process's change shows by then

_writes = 0  # writes through any Memory of this process: a snapshot taken before one is read again


class _Snapshot:
    """The memory block last rendered, what it was rendered from, and when it was read."""

    __slots__ = ("key", "text", "read", "fresh_until")

    def __init__(self) -> None:
        self.key: tuple[tuple[str, ...], ...] | None = None
        self.text = ""
        self.read = -1  # the process's write count when it was last read
        self.fresh_until = 0.0


# One snapshot per store and caps, shared by every Memory on it (a host's rooms): the table holds no room's own
# entries, so a thousand rooms read it once a second between them, not each once a second.
_SNAPSHOTS: weakref.WeakKeyDictionary[Store, dict[tuple[int, int], _Snapshot]] = weakref.WeakKeyDictionary()


class NoteError(OrchestratorError):
    """A memory change that was not made; the message says why and what to do instead."""


class Conflict(NoteError):
    """The memory changed between reading it and writing a whole new version of it."""


class Memory:
    """The profile and the notes of one database. Writes from the model go through add, replace and
    remove, which scan first; `rewrite` is the user's own edit and is not scanned."""

    def __init__(self, store: Store, *, profile_cap: int = PROFILE_CAP, notes_cap: int = NOTES_CAP):
        self._store = store
        self.caps: dict[Target, int] = {"profile": profile_cap, "notes": notes_cap}
        self._ready = False  # read-only: whether the file's table was looked for
        self._snapshot = _SNAPSHOTS.setdefault(store, {}).setdefault((profile_cap, notes_cap), _Snapshot())
        self._scratch: sqlite_utils.Database | None = None  # stands in for a read-only file without the table

    async def entries(self, target: Target) -> list[str]:
        return [text for _, text in await self._call(_rows, _known(target))]

    async def add(self, target: Target, text: str) -> str:
        text = _clean(text)
        if not text:
            raise NoteError("nothing to add: the entry is empty")
        self._vet(_known(target), text)
        return await self._write(_add, target, text, self.caps[target])

    async def replace(self, target: Target, old: str, new: str) -> str:
        """Change the one occurrence of `old` (exact text) in the one entry that holds it."""
        if not old:
            raise NoteError("say which text to replace: the old text is empty")
        self._vet(_known(target), new)
        return await self._write(_replace, target, old, new, self.caps[target])

    async def remove(self, target: Target, text_or_index: str | int) -> str:
        """Remove entry number `text_or_index` (from 1, as `memory show` numbers them), or the one entry
        that contains that exact text."""
        if text_or_index == "":
            raise NoteError("say which entry to remove: the text is empty")
        return await self._write(_remove, _known(target), text_or_index, self.caps[target])

    async def rewrite(self, parts: dict[Target, list[str]], *,
                      expected: dict[Target, list[str]] | None = None) -> list[str]:
        """Replace whole parts with the user's edited entries, in one transaction; caps still hold.
        Raises Conflict if a part no longer equals `expected`. Returns notes on repeated entries dropped."""
        for target in parts:
            _known(target)
        return await self._write(_rewrite, parts, expected, self.caps)

    async def snapshot(self) -> str:
        """The memory block of a system prompt, or "" when both parts are empty."""
        # Read again once this process wrote, or REFRESH after the last read (another process may have written);
        # rendered only when it did change.
        shot = self._snapshot
        if shot.read == _writes and trio.current_time() < shot.fresh_until:
            return shot.text
        writes, until = _writes, trio.current_time() + REFRESH  # as of before the read: a write meanwhile reads again
        parts = await self._call(_parts, small=True)
        key = tuple(tuple(entries) for entries in parts.values())
        text = shot.text if key == shot.key else self._render(parts)
        if writes >= shot.read:  # another room's read may have ended first, with a newer count
            shot.key, shot.text, shot.read, shot.fresh_until = key, text, writes, until
        return text

    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        global _writes
        try:
            return await self._call(fn, *args)
        finally:
            _writes += 1  # every snapshot of this process reads again

    def _render(self, parts: dict[Target, list[str]]) -> str:
        if not any(parts.values()):
            return ""
        return render("memory.md.j2", parts=[
            {"name": target, "entries": [_shown(e) for e in entries],
             "used": f"{_used(entries):,}", "cap": f"{self.caps[target]:,}"}
            for target, entries in parts.items() if entries])

    def _vet(self, target: Target, text: str) -> None:
        # A text over the cap could never be stored; refusing it unscanned keeps the scan (which runs on
        # the event loop) as short as a cap.
        if len(text) > self.caps[target]:
            raise _full(target, 0, self.caps[target], len(text))
        _scanned(text)

    async def _call(self, fn: Callable[..., T], *args: Any, small: bool = False) -> T:
        if not self._store.readonly:
            await self._store.prepare(_create)
        elif not self._ready:
            if not await self._store.call(_has_table):
                # A read-only file that never kept a memory cannot gain the table: it reads as empty.
                self._scratch = sqlite_utils.Database(sqlite3.connect(":memory:", check_same_thread=False))
                _create(self._scratch)
            self._ready = True
        if self._scratch is not None:  # an empty table in memory: no blocking work to move to a thread
            return fn(self._scratch, *args)
        return await self._store.call(fn, *args, small=small)


# --- text ---------------------------------------------------------------------------------

_DELIMITER = re.compile(r"<(?=\s*/?\s*(?:memory|profile|notes)\b)", re.IGNORECASE)


def _known(target: str) -> Target:
    if target not in TARGETS:
        raise NoteError(f"unknown memory target {target!r}: use profile or notes")
    return target


def _clean(text: str) -> str:
    # No blank lines inside an entry: a blank line is what separates entries in `memory edit`.
    lines = (line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    return "\n".join(line for line in lines if line.strip()).strip()


def _scanned(text: str, kept: list[str] | None = None) -> None:
    """Refuse what the scanner finds in `text`, alone and read with the entries already kept (`kept`): an
    instruction begun in one entry ("'quiet mode' means ...") is refused at the write that completes it."""
    if findings := scan.scan(text, context=kept or ()):
        raise NoteError(f"refused: the text carries {scan.explain(findings)}; memory is unchanged. "
                        f"Save facts and preferences in plain words")


def _shown(entry: str) -> str:
    # A user's own edit may hold our delimiters; escaped, an entry cannot close the block it sits in.
    return _DELIMITER.sub("&lt;", entry).replace("\n", "\n  ")


def _used(entries: list[str]) -> int:
    return sum(map(len, entries))


def _quote(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _be(target: Target) -> str:
    return "is" if target == "profile" else "are"


def _usage(used: int, cap: int) -> str:
    return f"{used:,} of {cap:,} characters used"


def _full(target: Target, used: int, cap: int, size: int) -> NoteError:
    if size > cap:
        return NoteError(f"the entry has {size:,} characters and {target} {'holds' if target == 'profile' else 'hold'}"
                         f" at most {cap:,}; shorten it")
    return NoteError(f"{target} {_be(target)} full: {used:,} of {cap:,} characters used, and this entry has "
                     f"{size:,}; remove or shorten an entry first")


def _entry_numbers(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}"


# --- in the store's thread ------------------------------------------------------------------

def _create(db: sqlite_utils.Database) -> None:
    if not isinstance(db, sqlite_utils.Database):
        return  # PostgreSQL: the table is made by the store's migrations
    # Under the write lock from the start: another process writing the file between this statement's schema
    # read and its write would make SQLite refuse it at once ("database is locked", no busy wait).
    with immediate(db):
        db.table("memory").create({"id": int, "target": str, "text": str}, pk="id", if_not_exists=True)


def _has_table(db: sqlite_utils.Database) -> bool:
    return db["memory"].exists()


def _rows(db: sqlite_utils.Database, target: Target) -> list[tuple[int, str]]:
    return db.execute("SELECT id, text FROM memory WHERE target = ? ORDER BY id", [target]).fetchall()


def _kept(db: sqlite_utils.Database, skip: int | None = None) -> list[str]:
    """Every entry, profile and notes, oldest first: both are in the system prompt, so either can hold the
    first half of an instruction the other completes."""
    return [text for row_id, text in db.execute("SELECT id, text FROM memory ORDER BY id").fetchall() if row_id != skip]


def _parts(db: sqlite_utils.Database) -> dict[Target, list[str]]:
    parts: dict[Target, list[str]] = {target: [] for target in TARGETS}
    for target, text in db.execute("SELECT target, text FROM memory ORDER BY id").fetchall():  # every turn
        if target in parts:
            parts[target].append(text)
    return parts


def _find(rows: list[tuple[int, str]], target: Target, text: str) -> int:
    """The index of the one entry holding `text` exactly once."""
    holding = [i for i, (_, entry) in enumerate(rows) if text in entry]
    if not holding:
        raise NoteError(f"no {target} entry contains {_quote(text)}; copy the text exactly as the memory shows it")
    if len(holding) > 1:
        raise NoteError(f"{_quote(text)} is in entries {_entry_numbers([i + 1 for i in holding])} of {target}; "
                        f"quote more of the entry you mean")
    if rows[holding[0]][1].count(text) > 1:
        raise NoteError(f"{_quote(text)} occurs more than once in entry {holding[0] + 1} of {target}; "
                        f"quote more of it")
    return holding[0]


def _same(rows: list[tuple[int, str]], text: str, skip: int | None = None) -> int | None:
    key = scan.fold(text)
    return next((i for i, (_, entry) in enumerate(rows) if i != skip and scan.fold(entry) == key), None)


def _add(db: sqlite_utils.Database, target: Target, text: str, cap: int) -> str:
    with immediate(db):
        rows = _rows(db, target)
        used = _used([entry for _, entry in rows])
        if (twin := _same(rows, text)) is not None:
            return f"not added: {target} already has it as entry {twin + 1}; {_usage(used, cap)}"
        if used + len(text) > cap:
            raise _full(target, used, cap, len(text))
        # Read with what is kept, under the write lock: no other write can slip in between the read and this one.
        _scanned(text, _kept(db))
        db.execute("INSERT INTO memory (target, text) VALUES (?, ?)", [target, text])
    return (f"added to {target} as entry {len(rows) + 1}; {_usage(used + len(text), cap)}. "
            f"It shows in the system prompt from the next turn on")


def _replace(db: sqlite_utils.Database, target: Target, old: str, new: str, cap: int) -> str:
    with immediate(db):
        rows = _rows(db, target)
        i = _find(rows, target, old)
        row_id, before = rows[i]
        after = _clean(before.replace(old, new))
        used = _used([entry for _, entry in rows]) - len(before)
        if not after:
            db.execute("DELETE FROM memory WHERE id = ?", [row_id])
            return f"removed entry {i + 1} of {target}: nothing was left of it; {_usage(used, cap)}"
        # The joined entry is scanned too: two harmless halves can make one instruction; and with the other
        # entries, which it may complete.
        _scanned(after, _kept(db, skip=row_id))
        if (twin := _same(rows, after, skip=i)) is not None:
            raise NoteError(f"the changed entry {i + 1} would repeat entry {twin + 1} of {target}; "
                            f"remove entry {i + 1} instead")
        if used + len(after) > cap:
            raise _full(target, used, cap, len(after))
        db.execute("UPDATE memory SET text = ? WHERE id = ?", [after, row_id])
    return f"replaced in entry {i + 1} of {target}; {_usage(used + len(after), cap)}"


def _remove(db: sqlite_utils.Database, target: Target, which: str | int, cap: int) -> str:
    with immediate(db):
        rows = _rows(db, target)
        if not rows:
            raise NoteError(f"{target} {_be(target)} empty; nothing to remove")
        if isinstance(which, int):
            if not 1 <= which <= len(rows):
                raise NoteError(f"{target} has entries 1 to {len(rows)}; there is no entry {which}")
            i = which - 1
        else:
            i = _find(rows, target, which)
        db.execute("DELETE FROM memory WHERE id = ?", [rows[i][0]])
    used = _used([entry for _, entry in rows]) - len(rows[i][1])
    return f"removed entry {i + 1} of {target}; {_usage(used, cap)}"


def _rewrite(db: sqlite_utils.Database, parts: dict[Target, list[str]],
             expected: dict[Target, list[str]] | None, caps: dict[Target, int]) -> list[str]:
    notes: list[str] = []
    with immediate(db):
        for target, entries in parts.items():
            current = [entry for _, entry in _rows(db, target)]
            if expected is not None and current != expected.get(target, []):
                raise Conflict(f"{target} changed while you were editing it (an agent saved something)")
            kept: list[str] = []
            for entry in filter(None, map(_clean, entries)):
                if _same([(0, k) for k in kept], entry) is None:
                    kept.append(entry)
            if dropped := len([e for e in entries if _clean(e)]) - len(kept):
                notes.append(f"dropped {dropped} repeated {'entry' if dropped == 1 else 'entries'} from {target}")
            if (used := _used(kept)) > caps[target]:
                raise NoteError(f"{target} would hold {used:,} characters and its cap is {caps[target]:,}; "
                                f"shorten or remove entries")
            db.execute("DELETE FROM memory WHERE target = ?", [target])
            for entry in kept:
                db.execute("INSERT INTO memory (target, text) VALUES (?, ?)", [target, entry])
    return notes
