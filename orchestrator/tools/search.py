"""The file tools that find: search_files (names by glob) and grep_files (lines by pattern), over
the workspace as the sandbox walks it, honouring .gitignore unless asked not to.
"""
from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import trio

from orchestrator.tools.base import Tool, ToolContext, ToolError
from orchestrator.tools.files import READ_CAP, with_note
from orchestrator.tools.sandbox import Listings, Opened, open_checked, open_entry, read_fd, root_of, shown, still_single, walk
from orchestrator.tools.session import ToolSession

if TYPE_CHECKING:
    import pathspec

GREP_FILE_BYTES = 4 << 20  # larger files are skipped by grep_files (and said so)
LINE_CAP = 400  # characters of one grep line
RESULTS_MAX = 1000
_FILE_IO = trio.CapacityLimiter(8)


async def _io(fn, *args):
    return await trio.to_thread.run_sync(fn, *args, limiter=_FILE_IO)


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
                        self._add(folder, read_fd(".gitignore", f.held()[0], 1 << 20))
                except ToolError:
                    pass  # none there, or not readable: nothing to ignore

    def _add(self, folder: Path, data: bytes) -> None:
        import pathspec  # with the first .gitignore read, not with every import of the tools

        self._specs[folder] = pathspec.GitIgnoreSpec.from_lines(data.decode("utf-8", "replace").splitlines())

    def enter(self, folder: Path, fd: int, files: list[str]) -> None:
        if ".gitignore" in files and (opened := open_entry(fd, ".gitignore")):
            try:
                self._add(folder, read_fd(".gitignore", opened[0], 1 << 20))
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
    found: list[str] = []
    total = 0
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
        body = with_note(body, f"showing the first {cap} of {total} matches; narrow the pattern, pass `path`, "
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
        top_fd, top_st = top.held()
        if stat.S_ISREG(top_st.st_mode):
            data = read_fd(args.path, top_fd, GREP_FILE_BYTES)
            if not still_single(top.folder, top.name, top_fd, top_st):
                raise ToolError(f"{args.path}: changed while being read (renamed, replaced or given another name); "
                                "try again")
            grep.file(shown(session, top.path), data)
        else:
            listings: Listings = {}
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
                    data = read_fd(name, opened[0], GREP_FILE_BYTES)
                    if not still_single(fd, name, opened[0], opened[1], listings):  # swapped: as if skipped
                        raise ToolError(name)
                except ToolError:  # it grew past the cap, or changed, while being read
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
            body = with_note(body, note)
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


SEARCH_TOOLS = [SEARCH_FILES, GREP_FILES]
