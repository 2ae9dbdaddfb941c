"""The file tools that touch one file: read_file, write_file, edit_file and stat_file, with
read-before-write over the session's read states (reads.py). Finding files is search.py's.
"""
from __future__ import annotations

import os
import stat
from datetime import datetime, timezone
from pathlib import Path

import msgspec
import trio

from orchestrator.core.documents import DocumentError, document_text
from orchestrator.tools.base import Tool, ToolContext, ToolError
from orchestrator.tools import guard
from orchestrator.tools.sandbox import Opened, open_checked, protection, read_whole, replace, resolve, shown, \
    stat_checked
from orchestrator.tools.reads import ReadState, read_state as _state
from orchestrator.tools.session import ToolSession

READ_CAP = 50_000  # characters of file text in one result
MAX_FILE_BYTES = 32 << 20  # read_file and edit_file hold the whole file in memory
_FILE_IO = trio.CapacityLimiter(8)


async def _io(fn, *args):
    return await trio.to_thread.run_sync(fn, *args, limiter=_FILE_IO)


# --- read before write ---

def _check_fresh(raw: str, seen: ReadState | None, current: ReadState) -> None:
    # content decides, not mtime: a touch is not a change, and a rewrite within one clock tick still is
    if seen is None:
        raise ToolError(f"{raw}: read it first: call read_file on it before you edit or overwrite it")
    if (seen.size, seen.sha256) != (current.size, current.sha256):
        raise ToolError(f"{raw}: stale: it changed since you read it (another agent or process wrote it); "
                        f"read it again, then redo your change")


def _current(raw: str, f: Opened) -> tuple[bytes, ReadState]:
    data = read_whole(raw, f, MAX_FILE_BYTES, hint="; use grep_files to find the part you need")
    return data, _state(data, f.held()[1])


# --- read_file ---

def _read(session: ToolSession, raw: str) -> tuple[Path, str, ReadState]:
    with open_checked(session, raw, "file") as f:
        data, state = _current(raw, f)
    suffix = f.path.suffix.lower()
    if suffix in (".pdf", ".docx"):
        try:
            return f.path, document_text(suffix, data), state
        except DocumentError as exc:
            raise ToolError(f"{raw}: {exc}") from None
    if b"\0" in data[:8192]:
        raise ToolError(f"{raw}: looks like a binary file ({len(data)} bytes); read_file reads text, PDF and .docx")
    return f.path, data.decode("utf-8", errors="replace"), state


def _lines(text: str) -> list[str]:
    """Lines with their "\\n", split only on "\\n" so numbers agree with grep_files."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _numbered(text: str, first: int) -> str:
    return "".join(f"{n:>6}\t{line}" for n, line in enumerate(_lines(text), first))


def with_note(body: str, note: str) -> str:
    sep = "" if not body or body.endswith("\n") else "\n"
    return f"{body}{sep}[{note}]"


class ReadArgs(msgspec.Struct, forbid_unknown_fields=True):
    path: str
    offset: int | None = None
    limit: int | None = None
    start_line: int | None = None
    end_line: int | None = None
    line_numbers: bool = False


def _char_range(text: str, args: ReadArgs, name: str) -> str:
    total = len(text)
    offset = max(0, args.offset or 0)
    if offset and offset >= total:
        return f"[offset {offset} is past the end of {name} ({total} characters)]"
    chunk = text[offset:offset + max(1, min(args.limit or READ_CAP, READ_CAP))]
    end = offset + len(chunk)
    body = _numbered(chunk, text.count("\n", 0, offset) + 1) if args.line_numbers else chunk
    if end < total:
        return with_note(body, f"showing characters {offset}-{end} of {total}; "
                                f"call read_file with offset={end} to read on")
    return body


def _line_range(text: str, args: ReadArgs, name: str) -> str:
    lines = _lines(text)
    count = len(lines)
    first = max(1, args.start_line or 1)
    last = min(args.end_line or count, count)
    if first > count:
        return f"[start_line={first} is past the end of {name} ({count} lines)]"
    out: list[str] = []
    used, n = 0, first
    while n <= last:
        line = lines[n - 1]
        piece = f"{n:>6}\t{line}" if args.line_numbers else line
        if used + len(piece) > READ_CAP:
            if out:
                return with_note("".join(out), f"showing lines {first}-{n - 1} of {count}; "
                                                f"call read_file with start_line={n} to read on")
            at = sum(len(x) for x in lines[:n - 1]) + READ_CAP - (len(piece) - len(line))
            return with_note(piece[:READ_CAP], f"line {n} is longer than {READ_CAP} characters and was cut; "
                                                f"call read_file with offset={at} to read the rest of it")
        out.append(piece)
        used += len(piece)
        n += 1
    body = "".join(out)
    return with_note(body, f"lines {first}-{last} of {count}") if (first, last) != (1, count) else body


async def read_file(args: ReadArgs, ctx: ToolContext) -> str:
    by_lines = args.start_line is not None or args.end_line is not None
    if by_lines and (args.offset is not None or args.limit is not None):
        raise ToolError("pass either offset/limit (characters) or start_line/end_line (lines), not both")
    if args.start_line and args.end_line and args.end_line < args.start_line:
        raise ToolError(f"end_line ({args.end_line}) is before start_line ({args.start_line})")
    path, text, state = await _io(_read, ctx.session, args.path)
    ctx.session.reads.record(ctx.agent, path, state)
    name = shown(ctx.session, path)
    if not text:
        return f"[{name} is empty]"
    return _line_range(text, args, name) if by_lines else _char_range(text, args, name)


READ_FILE = Tool(
    "read_file",
    f"Read a file in the workspace or a granted folder (text; PDF and .docx as extracted text). At most "
    f"{READ_CAP} characters come back; a note says how to read on. Optional: `offset` and `limit` pick a "
    f"character range; or `start_line` and `end_line` (1-based, inclusive) pick lines; `line_numbers: true` "
    f"prefixes each line with its number. Reading is what allows a later edit_file or overwrite.",
    ReadArgs, read_file, read_only=True,
)


# --- write_file and edit_file ---

def _same_target(raw: str, f: Opened, path: Path) -> None:
    if f.path != path:  # a link on the way changed between taking the lock and opening
        raise ToolError(f"{raw}: changed while being written (a symbolic link on the way moved); try again")


async def _allowed(ctx: ToolContext, path: Path, tool: str) -> tuple[Path, ...]:
    """A protected path (a git file, an editor's settings, the orchestrator's own, a home's startup file)
    is written only when the user says yes, as for a command's `writable`; () when it is not protected."""
    why = protection(ctx.session, path)
    if why is None:
        return ()
    if not await ctx.session.confirm(ctx.agent, f"write:{path}", f"{tool} {shown(ctx.session, path)}\n"
                                                                  f"(wants to write {why})"):
        raise ToolError(f"{shown(ctx.session, path)}: refused: {why}; the user did not allow writing it")
    return (path,)


class WriteArgs(msgspec.Struct, forbid_unknown_fields=True):
    path: str
    content: str


def _write(session: ToolSession, raw: str, path: Path, content: str, seen: ReadState | None,
           allowed: tuple[Path, ...]) -> tuple[ReadState, bool]:
    data = content.encode("utf-8")
    with open_checked(session, raw, "write", allowed=allowed) as f:
        _same_target(raw, f, path)
        if f.fd is not None:
            _check_fresh(raw, seen, _current(raw, f)[1])
        st = replace(f, data)
    return _state(data, st), f.fd is None


async def write_file(args: WriteArgs, ctx: ToolContext) -> str:
    reads = ctx.session.reads
    path = await _io(resolve, ctx.session, args.path)
    allowed = await _allowed(ctx, path, "write_file")
    async with reads.writing(path):
        state, created = await _io(_write, ctx.session, args.path, path, args.content, reads.seen(ctx.agent, path),
                                   allowed)
        reads.record(ctx.agent, path, state)
    await _io(guard.of(ctx.session).wrote, ctx.agent, path)
    return f"{'created' if created else 'overwrote'} {shown(ctx.session, path)} ({len(args.content)} characters)"


WRITE_FILE = Tool(
    "write_file",
    "Write `content` as the whole content of a file, creating it (and missing folders) if needed. Overwriting "
    "an existing file needs a read_file of its current version first. For a change inside a file, use edit_file.",
    WriteArgs, write_file,
)


class EditArgs(msgspec.Struct, forbid_unknown_fields=True):
    path: str
    old: str
    new: str


def _occurrences(text: str, old: str) -> list[int]:
    found, at = [], text.find(old)
    while at != -1:  # overlapping ones count too: "aa" in "aaa" is ambiguous
        found.append(at)
        at = text.find(old, at + 1)
    return found


def _edit(session: ToolSession, raw: str, path: Path, old: str, new: str,
          seen: ReadState | None, allowed: tuple[Path, ...]) -> tuple[ReadState, int, int]:
    with open_checked(session, raw, "edit", allowed=allowed) as f:
        _same_target(raw, f, path)
        data, current = _current(raw, f)
        _check_fresh(raw, seen, current)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{raw}: not UTF-8 text; edit_file edits text files only") from None
        found = _occurrences(text, old)
        if not found:
            hint = ""
            if "\r\n" in text and old.replace("\r\n", "\n").replace("\n", "\r\n") in text:
                hint = " (the file has CRLF line endings: use \\r\\n in `old`)"
            raise ToolError(f"{raw}: `old` was not found{hint}; it must match the file exactly, whitespace and "
                            f"indentation included; read the file again and copy the text")
        if len(found) > 1:
            where = ", ".join(str(text.count("\n", 0, at) + 1) for at in found[:10])
            raise ToolError(f"{raw}: `old` matches {len(found)} times (at lines {where}"
                            f"{', ...' if len(found) > 10 else ''}); it must match exactly once: "
                            f"include more of the surrounding lines")
        at = found[0]
        data = (text[:at] + new + text[at + len(old):]).encode("utf-8")
        st = replace(f, data)
    first = text.count("\n", 0, at) + 1
    return _state(data, st), first, first + new.count("\n", 0, len(new) - 1)  # a final newline ends a line


async def edit_file(args: EditArgs, ctx: ToolContext) -> str:
    if not args.old:
        raise ToolError(f"{args.path}: `old` is empty; give the exact text to replace (write_file writes a whole file)")
    if args.old == args.new:
        raise ToolError(f"{args.path}: `old` and `new` are the same; nothing would change")
    reads = ctx.session.reads
    path = await _io(resolve, ctx.session, args.path)
    allowed = await _allowed(ctx, path, "edit_file")
    async with reads.writing(path):
        state, first, last = await _io(_edit, ctx.session, args.path, path, args.old, args.new,
                                       reads.seen(ctx.agent, path), allowed)
        reads.record(ctx.agent, path, state)
    await _io(guard.of(ctx.session).wrote, ctx.agent, path)
    span = f"line {first}" if first == last else f"lines {first}-{last}"
    return f"edited {shown(ctx.session, path)}: replaced the one match; the new text is at {span}"


EDIT_FILE = Tool(
    "edit_file",
    "Replace the exact text `old` with `new` in a file. `old` must occur exactly once (copy it from read_file, "
    "whitespace included; add surrounding lines to make it unique). Needs a read_file of the file's current "
    "version first; after an edit you may edit again without re-reading.",
    EditArgs, edit_file,
)


# --- stat_file ---

class StatArgs(msgspec.Struct, forbid_unknown_fields=True):
    path: str


def _stat(session: ToolSession, raw: str) -> str:
    path, st = stat_checked(session, raw)
    if stat.S_ISDIR(st.st_mode):
        with open_checked(session, raw, "folder") as f:
            count = len(os.listdir(f.fd))
        kind = f"folder ({count} {'entry' if count == 1 else 'entries'})"
    elif stat.S_ISREG(st.st_mode):
        kind = "file"
    else:
        kind = "special file (device, pipe or socket)"
    when = datetime.fromtimestamp(st.st_mtime_ns / 1e9, timezone.utc).isoformat(timespec="seconds")
    return (f"path: {shown(session, path)}\ntype: {kind}\nsize: {st.st_size} bytes\nmodified: {when}\n"
            f"permissions: {stat.S_IMODE(st.st_mode):04o}\nhard links: {st.st_nlink}")


async def stat_file(args: StatArgs, ctx: ToolContext) -> str:
    return await _io(_stat, ctx.session, args.path)


STAT_FILE = Tool(
    "stat_file",
    "Facts about a file or folder: type, size in bytes, last modified time (UTC), permissions, hard links.",
    StatArgs, stat_file, read_only=True,
)


FILE_TOOLS = [READ_FILE, WRITE_FILE, EDIT_FILE, STAT_FILE]

