"""The file tools (E18): read_file, write_file, edit_file, stat_file, search_files and grep_files.
Also read-before-write (E14): ReadLedger, what each agent last read of each file, and the per-path write locks.
"""
from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import msgspec
import pathspec
import trio

from orchestrator.core.documents import DocumentError, document_text
from orchestrator.tools.base import Tool, ToolContext, ToolError
from orchestrator.tools.sandbox import Opened, open_checked, open_entry, replace, resolve, root_of, shown, \
    stat_checked, walk
from orchestrator.tools.reads import ReadState, read_state as _state
from orchestrator.tools.session import ToolSession

READ_CAP = 50_000  # characters of file text in one result
MAX_FILE_BYTES = 32 << 20  # read_file and edit_file hold the whole file in memory
GREP_FILE_BYTES = 4 << 20  # larger files are skipped by grep_files (and said so)
LINE_CAP = 400  # characters of one grep line
RESULTS_MAX = 1000
_FILE_IO = trio.CapacityLimiter(8)


async def _io(fn, *args):
    return await trio.to_thread.run_sync(fn, *args, limiter=_FILE_IO)


# --- read before write (E14) ---

def _check_fresh(raw: str, seen: ReadState | None, current: ReadState) -> None:
    # content decides, not mtime: a touch is not a change, and a rewrite within one clock tick still is
    if seen is None:
        raise ToolError(f"{raw}: read it first: call read_file on it before you edit or overwrite it")
    if (seen.size, seen.sha256) != (current.size, current.sha256):
        raise ToolError(f"{raw}: stale: it changed since you read it (another agent or process wrote it); "
                        f"read it again, then redo your change")


def _read_fd(raw: str, fd: int, cap: int) -> bytes:
    chunks, total = [], 0
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
        total += len(chunk)
        if total > cap:
            raise ToolError(f"{raw}: larger than {cap >> 20} MiB; use grep_files to find the part you need")
    return b"".join(chunks)


def _current(raw: str, f: Opened) -> tuple[bytes, ReadState]:
    if f.st.st_size > MAX_FILE_BYTES:
        raise ToolError(f"{raw}: {f.st.st_size} bytes is larger than {MAX_FILE_BYTES >> 20} MiB; "
                        f"use grep_files to find the part you need")
    data = _read_fd(raw, f.fd, MAX_FILE_BYTES)
    return data, _state(data, f.st)


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


def _with_note(body: str, note: str) -> str:
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
        return _with_note(body, f"showing characters {offset}-{end} of {total}; "
                                f"call read_file with offset={end} to read on")
    return body


def _line_range(text: str, args: ReadArgs, name: str) -> str:
    lines = _lines(text)
    count = len(lines)
    first = max(1, args.start_line or 1)
    last = min(args.end_line or count, count)
    if first > count:
        return f"[start_line={first} is past the end of {name} ({count} lines)]"
    out, used, n = [], 0, first
    while n <= last:
        line = lines[n - 1]
        piece = f"{n:>6}\t{line}" if args.line_numbers else line
        if used + len(piece) > READ_CAP:
            if out:
                return _with_note("".join(out), f"showing lines {first}-{n - 1} of {count}; "
                                                f"call read_file with start_line={n} to read on")
            at = sum(len(x) for x in lines[:n - 1]) + READ_CAP - (len(piece) - len(line))
            return _with_note(piece[:READ_CAP], f"line {n} is longer than {READ_CAP} characters and was cut; "
                                                f"call read_file with offset={at} to read the rest of it")
        out.append(piece)
        used += len(piece)
        n += 1
    body = "".join(out)
    return _with_note(body, f"lines {first}-{last} of {count}") if (first, last) != (1, count) else body


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


class WriteArgs(msgspec.Struct, forbid_unknown_fields=True):
    path: str
    content: str


def _write(session: ToolSession, raw: str, path: Path, content: str, seen: ReadState | None) -> tuple[ReadState, bool]:
    data = content.encode("utf-8")
    with open_checked(session, raw, "write") as f:
        _same_target(raw, f, path)
        if f.fd is not None:
            _check_fresh(raw, seen, _current(raw, f)[1])
        st = replace(f, data)
    return _state(data, st), f.fd is None


async def write_file(args: WriteArgs, ctx: ToolContext) -> str:
    reads = ctx.session.reads
    path = await _io(resolve, ctx.session, args.path)
    async with reads.writing(path):
        state, created = await _io(_write, ctx.session, args.path, path, args.content, reads.seen(ctx.agent, path))
        reads.record(ctx.agent, path, state)
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
          seen: ReadState | None) -> tuple[ReadState, int, int]:
    with open_checked(session, raw, "file") as f:
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
    async with reads.writing(path):
        state, first, last = await _io(_edit, ctx.session, args.path, path, args.old, args.new,
                                       reads.seen(ctx.agent, path))
        reads.record(ctx.agent, path, state)
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


# --- search_files and grep_files ---

def glob_regex(pattern: str) -> re.Pattern:
    """`*` and `?` within a name, `**` across folders, `[abc]` and `{a,b}` alternatives."""
    try:
        return re.compile(rf"(?s:{_glob(pattern)})\Z")
    except re.error as exc:
        raise ToolError(f"invalid glob {pattern!r}: {exc}") from None


def _glob(p: str) -> str:
    out, i = [], 0
    while i < len(p):
        if p.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif p.startswith("**", i):
            out.append(".*")
            i += 2
        elif p[i] == "*":
            out.append("[^/]*")
            i += 1
        elif p[i] == "?":
            out.append("[^/]")
            i += 1
        elif p[i] == "[" and (end := p.find("]", i + 2)) != -1:
            body = p[i + 1:end]
            negate = body[0] in "!^"
            chars = "".join(c if c == "-" else re.escape(c) for c in body[negate:])
            out.append(f"[{'^' if negate else ''}{chars}]")
            i = end + 1
        elif p[i] == "{" and (end := p.find("}", i)) != -1:
            out.append("(?:" + "|".join(_glob(alt) for alt in p[i + 1:end].split(",")) + ")")
            i = end + 1
        else:
            out.append(re.escape(p[i]))
            i += 1
    return "".join(out)


class _Ignores:
    """The .gitignore files that apply under a root: each folder's own, deeper ones overriding."""

    def __init__(self, session: ToolSession, top: Path):
        self._specs: dict[Path, pathspec.GitIgnoreSpec] = {}
        root = root_of(session, top)
        for folder in reversed(top.parents):  # those above the searched folder apply too; its own comes in enter()
            if folder.is_relative_to(root):
                try:
                    with open_checked(session, str(folder / ".gitignore"), "file") as f:
                        self._add(folder, _read_fd(".gitignore", f.fd, 1 << 20))
                except ToolError:
                    pass  # none there, or not readable: nothing to ignore

    def _add(self, folder: Path, data: bytes) -> None:
        self._specs[folder] = pathspec.GitIgnoreSpec.from_lines(data.decode("utf-8", "replace").splitlines())

    def enter(self, folder: Path, fd: int, files: list[str]) -> None:
        if ".gitignore" in files and (opened := open_entry(fd, ".gitignore")):
            try:
                self._add(folder, _read_fd(".gitignore", opened[0], 1 << 20))
            except ToolError:
                pass  # a .gitignore over a MiB is not one
            finally:
                os.close(opened[0])

    def ignored(self, path: Path, is_dir: bool) -> bool:
        verdict = None
        for folder in reversed(path.parents):
            if spec := self._specs.get(folder):
                rel = path.relative_to(folder).as_posix() + ("/" if is_dir else "")
                if (hit := spec.check_file(rel).include) is not None:
                    verdict = hit
        return bool(verdict)


def _files(session: ToolSession, top: Opened, include_ignored: bool) -> Iterator[tuple[Path, int, str]]:
    """(folder, its fd, file name) under `top`, skipping .git and, unless asked, what .gitignore ignores."""
    ignores = None if include_ignored else _Ignores(session, top.path)
    for folder, fd, folders, files in walk(session, top):
        if ignores:
            ignores.enter(folder, fd, files)
            folders[:] = [d for d in folders if d != ".git" and not ignores.ignored(folder / d, True)]
            files = [n for n in files if not ignores.ignored(folder / n, False)]
        else:
            folders[:] = [d for d in folders if d != ".git"]
        for name in files:
            yield folder, fd, name


def _cap(requested: int) -> int:
    return max(1, min(requested, RESULTS_MAX))


class SearchArgs(msgspec.Struct, forbid_unknown_fields=True):
    pattern: str
    path: str = "."
    include_ignored: bool = False
    max_results: int = 200


def _search(session: ToolSession, args: SearchArgs) -> str:
    pattern = args.pattern.strip().removeprefix("./").lstrip("/")
    if not pattern:
        raise ToolError("the pattern is empty; `**/*` lists every file")
    rx = glob_regex(pattern)
    by_name = "/" not in pattern
    cap = _cap(args.max_results)
    found, total = [], 0
    with open_checked(session, args.path, "folder") as top:
        for folder, _, name in _files(session, top, args.include_ignored):
            rel = name if by_name else (folder / name).relative_to(top.path).as_posix()
            if rx.match(rel):
                total += 1
                if len(found) < cap:
                    found.append(shown(session, folder / name))
    if not found:
        return f"no files match {args.pattern!r} under {args.path}"
    body = "\n".join(found)
    if total > cap:
        body = _with_note(body, f"showing the first {cap} of {total} matches; narrow the pattern, pass `path`, "
                                f"or raise max_results (at most {RESULTS_MAX})")
    return body


async def search_files(args: SearchArgs, ctx: ToolContext) -> str:
    return await _io(_search, ctx.session, args)


SEARCH_FILES = Tool(
    "search_files",
    "Find files by name with a glob `pattern`. Without a `/` it matches file names at any depth (`*.py`, "
    "`test_*.{py,txt}`); with one it matches paths relative to `path` (`src/**/*.ts`; `**` spans folders). "
    "Optional: `path` the folder to search (default the workspace); `include_ignored: true` also lists what "
    ".gitignore excludes (.git is always skipped); `max_results` (default 200, at most 1000). Symbolic links "
    "are not followed.",
    SearchArgs, search_files, read_only=True,
)


class GrepArgs(msgspec.Struct, forbid_unknown_fields=True):
    pattern: str
    path: str = "."
    glob: str | None = None
    context: int = 0
    ignore_case: bool = False
    include_ignored: bool = False
    max_matches: int = 100


def _clip(line: str) -> str:
    line = line.removesuffix("\r")
    return line if len(line) <= LINE_CAP else f"{line[:LINE_CAP]}... [{len(line)} characters]"


class _Grep:
    """Collects ripgrep-style output (`path:line:text`, context as `path-line-text`) up to the caps."""

    def __init__(self, rx: re.Pattern, context: int, cap: int):
        self.rx, self.context, self.cap = rx, context, cap
        self.out: list[str] = []
        self.size = 0
        self.matches = 0
        self.skipped = 0
        self.stopped = ""  # why output stopped early, as a note for the model

    def file(self, name: str, data: bytes) -> None:
        if b"\0" in data[:8192]:
            self.skipped += 1
            return
        lines = data.decode("utf-8", errors="replace").removesuffix("\n").split("\n")
        hits = [i for i, line in enumerate(lines) if self.rx.search(line)]
        hit_set = set(hits)
        done = -1  # the last line of this file already written
        for i in hits:
            if self.matches >= self.cap:
                self.stopped = (f"stopped after {self.cap} matches; narrow with `path`, `glob` or the pattern, "
                                f"or raise max_matches (at most {RESULTS_MAX})")
                return
            if self.size >= READ_CAP:
                self.stopped = (f"stopped at {READ_CAP} characters of output after {self.matches} matches; "
                                f"narrow with `path`, `glob` or the pattern")
                return
            self.matches += 1
            lo, hi = max(0, i - self.context, done + 1), min(len(lines) - 1, i + self.context)
            if self.context and self.out and (done == -1 or lo > done + 1):
                self._emit("--")
            for j in range(lo, hi + 1):
                sep = ":" if j in hit_set else "-"
                self._emit(f"{name}{sep}{j + 1}{sep}{_clip(lines[j])}")
            done = max(done, hi)

    def _emit(self, line: str) -> None:
        self.out.append(line)
        self.size += len(line) + 1


def _grep(session: ToolSession, args: GrepArgs) -> str:
    try:
        rx = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {args.pattern!r}: {exc}") from None
    name_glob = args.glob.strip().removeprefix("./").lstrip("/") if args.glob else ""
    name_rx = glob_regex(name_glob) if name_glob else None
    grep = _Grep(rx, max(0, min(args.context, 10)), _cap(args.max_matches))
    with open_checked(session, args.path, "any") as top:
        if stat.S_ISREG(top.st.st_mode):
            grep.file(shown(session, top.path), _read_fd(args.path, top.fd, GREP_FILE_BYTES))
        else:
            for folder, fd, name in _files(session, top, args.include_ignored):
                if name_rx and not name_rx.match(name if "/" not in name_glob
                                                 else (folder / name).relative_to(top.path).as_posix()):
                    continue
                if (opened := open_entry(fd, name)) is None or opened[1].st_size > GREP_FILE_BYTES:
                    grep.skipped += 1
                    if opened:
                        os.close(opened[0])
                    continue
                try:
                    data = _read_fd(name, opened[0], GREP_FILE_BYTES)
                except ToolError:  # it grew past the cap while being read
                    grep.skipped += 1
                    continue
                finally:
                    os.close(opened[0])
                grep.file(shown(session, folder / name), data)
                if grep.stopped:
                    break
    skipped = (f"skipped {grep.skipped} files that are binary, larger than {GREP_FILE_BYTES >> 20} MiB "
               f"or hard-linked") if grep.skipped else ""
    if not grep.out:
        return f"no matches for {args.pattern!r} under {args.path}" + (f" [{skipped}]" if skipped else "")
    body = "\n".join(grep.out)
    for note in (grep.stopped, skipped):
        if note:
            body = _with_note(body, note)
    return body


async def grep_files(args: GrepArgs, ctx: ToolContext) -> str:
    return await _io(_grep, ctx.session, args)


GREP_FILES = Tool(
    "grep_files",
    "Search file contents for a regular expression `pattern` (Python syntax, matched per line). Prints "
    "`path:line:text`, context lines as `path-line-text`. Optional: `path` a folder or one file (default the "
    "workspace); `glob` only files whose name (or, with a `/`, path) matches, e.g. `*.py`; `context` lines "
    "around each match (at most 10); `ignore_case`; `include_ignored: true` also searches what .gitignore "
    f"excludes; `max_matches` (default 100, at most {RESULTS_MAX}). Binary files, files over "
    f"{GREP_FILE_BYTES >> 20} MiB and .git are skipped; lines are cut at {LINE_CAP} characters.",
    GrepArgs, grep_files, read_only=True,
)

FILE_TOOLS = [READ_FILE, WRITE_FILE, EDIT_FILE, STAT_FILE, SEARCH_FILES, GREP_FILES]

