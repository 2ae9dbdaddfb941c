"""`orchestrator memory show|edit|export`: the user sees and changes everything the agents keep.

The user's own edit is not refused by the scanner, only warned about: the person at the keyboard decides.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import msgspec
import trio

from orchestrator.cli.paths import add_actions, database, default_db, open_db
from orchestrator.core.errors import InputError
from orchestrator.memory import scan
from orchestrator.memory.notes import TARGETS, Conflict, Memory, NoteError, Target

_SECTION = re.compile(r"===\s*(\S+)\s*===")
_HEADER = """\
# Edit the saved memory, then save and close the editor.
# Entries are separated by blank lines; one entry may span several lines. Delete an entry to forget it.
# Keep the two section lines ("=== profile ===", "=== notes ===") as they are; an empty section clears it.
# The profile holds at most {profile:,} characters, the notes {notes:,}. Lines above the first section are ignored.
"""
_PROBLEM = "# error: "
_ROUNDS = 5  # editor runs per edit: an editor that is a script must not loop for ever on an error


def add_parser(subparsers) -> None:
    """Register `memory` and its three actions on the `orchestrator` command's subparsers."""

    memory = subparsers.add_parser("memory", help="see and change the saved profile and notes")
    actions = add_actions(memory, "memory_command")
    for name, fn, help_ in (("show", cmd_show, "print the profile and the notes, entries numbered"),
                            ("edit", cmd_edit, "change the profile and the notes in $EDITOR"),
                            ("export", cmd_export, "print the profile and the notes as JSON")):
        s = actions.add_parser(name, help=help_)
        s.add_argument("--db", type=database, default=default_db(), help="the SQLite file or postgresql:// URL (default: %(default)s)")
        s.set_defaults(fn=fn)


@asynccontextmanager
async def _memory(db: Path, *, create: bool = False) -> AsyncIterator[Memory]:
    store = await open_db(db, create=create, readonly=not create)  # show and export only read
    try:
        yield Memory(store)
    finally:
        await store.close()


def _summary(target: Target, entries: list[str], cap: int) -> str:
    used = f"{sum(map(len, entries)):,} of {cap:,} characters"
    if not entries:
        return f"{target}: empty ({used})"
    return f"{target}: {len(entries)} {'entry' if len(entries) == 1 else 'entries'}, {used}"


async def cmd_show(args) -> int:
    if args.db == default_db() and not args.db.exists():
        print(f"nothing is saved yet: agents save the profile and notes in `orchestrator chat` rooms, kept in "
              f"{args.db} (scenario runs keep their own, apart from yours)")
        return 0
    async with _memory(args.db) as memory:
        parts = {target: await memory.entries(target) for target in TARGETS}
    for target, entries in parts.items():
        if target != TARGETS[0]:
            print()
        print(_summary(target, entries, memory.caps[target]))
        for n, entry in enumerate(entries, 1):
            print(f"{n:>4}. " + entry.replace("\n", "\n      "))
    return 0


async def cmd_export(args) -> int:
    async with _memory(args.db) as memory:
        parts = {target: await memory.entries(target) for target in TARGETS}
    data = {target: {"entries": entries, "used": sum(map(len, entries)), "cap": memory.caps[target]}
            for target, entries in parts.items()}
    print(msgspec.json.format(msgspec.json.encode(data).decode(), indent=2))
    return 0


# --- edit ---------------------------------------------------------------------------------

def compose(parts: dict[Target, list[str]], caps: dict[Target, int]) -> str:
    """The text the user edits: a header, then each part's entries under its section line."""
    lines = [_HEADER.format(**caps)]
    for target in TARGETS:
        lines += [f"=== {target} ===", ""]
        for entry in parts[target]:
            lines += [entry, ""]
    return "\n".join(lines)


def parse(text: str) -> dict[Target, list[str]]:
    """The entries of an edited text; raises NoteError when a section line is missing or unknown."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if m := _SECTION.fullmatch(line.strip()):
            name = m.group(1).lower()
            if name not in TARGETS or name in sections:
                raise NoteError(f"{line.strip()!r}: the sections are '=== profile ===' and '=== notes ===', "
                                f"once each")
            current = sections[name] = []
        elif current is not None:
            current.append(line)
    for target in TARGETS:
        if target not in sections:
            raise NoteError(f"the line '=== {target} ===' is missing; put it back (an empty section clears it)")
    return {target: _blocks(sections[target]) for target in TARGETS}


def _blocks(lines: list[str]) -> list[str]:
    blocks, block = [], []
    for line in [*lines, ""]:
        if line.strip():
            block.append(line.rstrip())
        elif block:
            blocks.append("\n".join(block))
            block = []
    return blocks


def _with_problem(text: str, problem: str) -> str:
    # The error goes on top of the user's own text, replacing the previous one: above the first section,
    # where parse() ignores it.
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if _SECTION.fullmatch(line.strip())), len(lines))
    head = [line for line in lines[:first] if not line.startswith(_PROBLEM)]
    return "\n".join([f"{_PROBLEM}{problem}", f"{_PROBLEM}fix it and save, or close without saving to give up",
                      *head, *lines[first:]]) + "\n"


def _editor() -> list[str]:
    """$EDITOR, else vi; vi draws on a terminal, so without one (piped, run by a script) it is bad input."""
    if chosen := os.environ.get("EDITOR"):
        return shlex.split(chosen)
    if not (os.isatty(0) and os.isatty(1)):
        raise InputError("`memory edit` opens vi in a terminal and this is none: run it in one, or set EDITOR to "
                         "an editor that needs none")
    return ["vi"]


async def _run_editor(path: Path) -> None:
    command = _editor()
    try:
        done = await trio.run_process([*command, str(path)], check=False, stdin=None)
    except FileNotFoundError:
        raise InputError(f"editor {command[0]!r} not found; set EDITOR to the editor you use") from None
    if done.returncode:
        raise NoteError(f"the editor {command[0]!r} exited with status {done.returncode}")


async def _edit(memory: Memory, before: dict[Target, list[str]], path: Path) -> list[str] | None:
    """Run the editor until its text saves, then return the notes on it; None when nothing changed.
    Raises NoteError when nothing was saved; the user's text is then still in `path`."""
    text, problem = compose(before, memory.caps), ""
    for _ in range(_ROUNDS):
        if problem:
            print(f"error: {problem}; opening the editor again", file=sys.stderr)
        path.write_text(text, encoding="utf-8")
        await _run_editor(path)
        edited = path.read_text(encoding="utf-8")
        if edited == text and problem:
            break  # saved as it was shown: the user gives up
        try:
            parts = parse(edited)
            return None if parts == before else await memory.rewrite(parts, expected=before)
        except Conflict:
            raise
        except NoteError as exc:
            problem, text = str(exc), _with_problem(edited, str(exc))
    raise NoteError(problem)


async def cmd_edit(args) -> int:
    _editor()  # no editor to run: said before anything is opened
    async with _memory(args.db, create=True) as memory:
        before = {target: await memory.entries(target) for target in TARGETS}
        folder = Path(tempfile.mkdtemp(prefix="orchestrator-memory-"))  # 0700: the text stays private
        path = folder / "memory.txt"
        try:
            notes = await _edit(memory, before, path)
        except NoteError as exc:
            again = ("; run `orchestrator memory edit` again and copy your changes over"
                     if isinstance(exc, Conflict) else "")
            print(f"error: {exc}; nothing saved. Your text is kept in {path}{again}", file=sys.stderr)
            return 1
        shutil.rmtree(folder)
        if notes is None:
            print("no changes")
            return 0
        for note in notes:
            print(note)
        for target in TARGETS:
            saved = await memory.entries(target)
            for n, entry in enumerate(saved, 1):
                if entry not in before[target] and (findings := scan.scan(entry)):
                    print(f"warning: {target} entry {n} carries {scan.explain(findings)}; it is saved because you "
                          f"wrote it, and every agent will read it in its system prompt", file=sys.stderr)
            print("saved " + _summary(target, saved, memory.caps[target]))
    return 0
