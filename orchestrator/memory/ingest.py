"""Adding files to the knowledge base: which files a path names (text types, PDF and .docx; version
control and build folders skipped), their text, and re-adding only what changed.

How the files are reached is the caller's (a Disk): the command line's goes through the tools' checked open,
which this layer cannot import, so that a link planted in a folder never leads the indexing elsewhere.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Protocol

import trio

from orchestrator.core.documents import DocumentError, document_text
from orchestrator.memory.knowledge import AddResult, Document, KnowledgeBase, KnowledgeError, is_current

TEXT_SUFFIXES = frozenset("""
.txt .text .md .markdown .mdx .rst .adoc .org .tex .csv .tsv .log
.py .pyi .js .jsx .mjs .cjs .ts .tsx .go .rs .java .kt .kts .scala .c .h .cc .cpp .cxx .hpp .cs .swift .m .rb .php
.pl .lua .r .jl .sh .bash .zsh .fish .ps1 .sql .html .htm .css .scss .vue .svelte .xml .proto .graphql
.toml .yaml .yml .json .ini .cfg .conf .env .properties .gradle .cmake .mk .dockerfile .tf
""".split())
DOCUMENT_SUFFIXES = frozenset({".pdf", ".docx"})
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache",
                       ".pytest_cache", ".ruff_cache", "dist", "build", "target"})
TEXT_NAMES = frozenset({"Dockerfile", "Makefile", "README", "LICENSE"})  # suffix-less files worth indexing
_INDEXED = TEXT_SUFFIXES | DOCUMENT_SUFFIXES
MAX_FILE_BYTES = 16 << 20
_FILE_IO = trio.CapacityLimiter(4)


class Disk(Protocol):
    """How ingest reaches files. Errors: KnowledgeError (refused, with why) or OSError."""

    def locate(self, raw: str) -> tuple[Path, bool] | None:
        """The absolute path `raw` names and whether it is a folder; None when nothing is there."""

    def walk(self, folder: Path) -> Iterator[tuple[Path, list[str], list[str], list[str]]]:
        """(folder, subfolders, regular files, links) from `folder` down; the subfolders pruned in place
        are not entered. Links (symbolic, or files with other hard links) are listed, never followed."""

    def read(self, path: Path, cap: int) -> bytes:
        """A file's bytes; KnowledgeError when it is larger than `cap`."""


def _skipped(name: str) -> bool:
    """Hidden, version control and build entries are never indexed."""
    return name.startswith(".") or name in SKIP_DIRS


def _walk(disk: Disk, root: Path, passed: Counter[str], links: list[Path]) -> Iterator[Path]:
    for here, folders, files, linked in disk.walk(root):
        folders[:] = [f for f in folders if not _skipped(f)]
        links += [here / n for n in linked if not _skipped(n)]
        for name in files:
            if _skipped(name):
                continue
            suffix = Path(name).suffix.lower()
            if suffix in _INDEXED or name in TEXT_NAMES:
                yield here / name
            else:
                passed[suffix or "(no suffix)"] += 1


def find_files(paths: Sequence[str | PathLike[str]], passed: Counter[str] | None = None, *,
               disk: Disk, links: list[Path] | None = None) -> tuple[list[Path], list[AddResult]]:
    """Every file named, and in each folder named the files with a text, code or document suffix (hidden
    and vendored folders skipped), resolved and without repeats; plus what could not be used, and why.
    `passed` counts, by suffix, the files in those folders that are not of an indexed type; `links` gets
    the links found in them, which are not followed."""
    files: dict[Path, None] = {}
    problems: list[AddResult] = []
    passed = Counter() if passed is None else passed
    links = [] if links is None else links
    for raw in paths:
        try:
            found = disk.locate(str(raw))
            if found is None:
                problems.append(AddResult(path=str(raw), status="skipped", message="no such file or folder"))
            elif found[1]:
                files.update(dict.fromkeys(_walk(disk, found[0], passed, links)))
            else:
                files[found[0]] = None
        except KnowledgeError as exc:
            problems.append(AddResult(path=str(raw), status="skipped", message=str(exc)))
        except OSError as exc:
            problems.append(AddResult(path=str(raw), status="skipped", message=f"cannot read it ({exc})"))
    return list(files), problems


def _read(disk: Disk, path: Path) -> tuple[bytes, str]:
    data = disk.read(path, MAX_FILE_BYTES)
    return data, hashlib.sha256(data).hexdigest()


def _text(path: Path, data: bytes) -> str:
    suffix = path.suffix.lower()
    if suffix in DOCUMENT_SUFFIXES:
        try:
            return document_text(suffix, data)
        except DocumentError as exc:  # the optional `docs` extra is missing, or the file is damaged
            raise KnowledgeError(str(exc)) from None
    if b"\0" in data[:8192]:
        raise KnowledgeError(f"looks like a binary file ({len(data)} bytes)")
    return data.decode("utf-8", errors="replace")


async def add_files(kb: KnowledgeBase, files: Sequence[Path], *,
                    disk: Disk) -> AsyncGenerator[AddResult, None]:
    """Add each file (from `find_files`, read through the same `disk`) under its resolved path, one result per
    file as it is done. A file whose bytes did not change is neither read as text nor chunked nor embedded again."""
    known: Mapping[str, Document] = {d.path: d for d in await kb.list_documents()}
    for path in files:
        key = str(path)
        try:
            data, digest = await trio.to_thread.run_sync(_read, disk, path, limiter=_FILE_IO)
            if is_current(known.get(key), digest, kb.chunking, kb.embedder):
                yield AddResult(path=key, status="unchanged", chunks=known[key].chunks)
                continue
            text = await trio.to_thread.run_sync(_text, path, data, limiter=_FILE_IO)
        except (OSError, KnowledgeError) as exc:
            yield AddResult(path=key, status="skipped", message=str(exc))
            continue
        yield await kb.add_document(key, text, digest=digest)
