"""How the knowledge base reaches files on the user's behalf: through the tools' checked open, so a link an
agent planted in a folder never leads `kb add` elsewhere (memory's ingest takes it as its Disk)."""
from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestrator.memory.knowledge import KnowledgeError
from orchestrator.tools.base import ToolError
from orchestrator.tools.sandbox import named, open_own, read_own, walk
from orchestrator.tools.session import ToolSession


class CheckedDisk:
    """The files `kb add` reads, through the tools' checked open: a path the user named is taken as written
    (a link on the way is refused), links inside a folder are counted, never followed, and credential files
    are never read; each file is read again without leaving the folder it was found in."""

    def __init__(self) -> None:
        self._tops: dict[Path, Path] = {}  # each file found -> the folder the user named, which reads stay in

    def locate(self, raw: str) -> tuple[Path, bool] | None:
        with _refused(raw):
            path = named(raw)
        try:
            st = os.stat(path, follow_symlinks=False)  # named() left no link to follow
        except FileNotFoundError:
            return None
        if stat.S_ISDIR(st.st_mode):
            return path, True
        self._tops[path] = path.parent
        return path, False

    def walk(self, folder: Path) -> Iterator[tuple[Path, list[str], list[str], list[str]]]:
        session = ToolSession(folder)
        with _refused(str(folder)), open_own(session, str(folder), "folder") as top:
            for here, fd, folders, files in walk(session, top):
                linked = _links(fd, files)
                single = [n for n in files if n not in linked]
                self._tops.update((here / n, folder) for n in single)
                yield here, folders, single, linked

    def read(self, path: Path, cap: int) -> bytes:
        with _refused(str(path)):
            return read_own(ToolSession(self._tops.get(path, path.parent)), str(path), cap)[1]


def _links(fd: int, files: list[str]) -> list[str]:
    """The names in an opened folder that are symbolic links (which the sandbox's walk leaves out), and the
    files in it with other hard links."""
    own = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)  # its own read offset
    try:
        with os.scandir(own) as entries:
            symbolic = [e.name for e in entries if e.is_symlink()]
    finally:
        os.close(own)
    return symbolic + [n for n in files if _names(fd, n) > 1]


def _names(folder: int, name: str) -> int:
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False).st_nlink
    except OSError:
        return 1  # gone since the listing: reading it says so


@contextmanager
def _refused(raw: str) -> Iterator[None]:
    """The sandbox's refusal as the knowledge base's own error; the result line names the path already."""
    try:
        yield
    except ToolError as exc:
        raise KnowledgeError(str(exc).removeprefix(f"{raw}: ")) from None
