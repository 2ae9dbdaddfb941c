"""Adding files to the knowledge base: which files a path names (text types, PDF and .docx; version
control and build folders skipped), their text, and re-adding only what changed.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path

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


def _walk(root: Path, passed: Counter[str]) -> Iterator[Path]:
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(".") or entry.name in SKIP_DIRS:
            continue
        if entry.is_dir() and not entry.is_symlink():
            yield from _walk(entry, passed)
        elif entry.is_file() and (entry.suffix.lower() in _INDEXED or entry.name in TEXT_NAMES):
            yield entry
        elif entry.is_file():
            passed[entry.suffix.lower() or "(no suffix)"] += 1


def find_files(paths: Sequence[str | PathLike[str]],
               passed: Counter[str] | None = None) -> tuple[list[Path], list[AddResult]]:
    """Every file named, and in each folder named the files with a text, code or document suffix (hidden
    and vendored folders skipped), resolved and without repeats; plus what could not be used, and why.
    `passed` counts, by suffix, the files in those folders that are not of an indexed type."""
    files: dict[Path, None] = {}
    problems: list[AddResult] = []
    passed = Counter() if passed is None else passed
    for raw in paths:
        p = Path(raw).expanduser()
        try:
            if p.is_dir():
                files.update(dict.fromkeys(f.resolve() for f in _walk(p, passed)))
            elif p.is_file():
                files[p.resolve()] = None
            else:
                problems.append(AddResult(path=str(raw), status="skipped", message="no such file or folder"))
        except OSError as exc:
            problems.append(AddResult(path=str(raw), status="skipped", message=f"cannot read it ({exc})"))
    return list(files), problems


def _read(path: Path) -> tuple[bytes, str]:
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise KnowledgeError(f"{size} bytes is larger than {MAX_FILE_BYTES >> 20} MiB")
    data = path.read_bytes()
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


async def add_files(kb: KnowledgeBase, files: Sequence[Path]) -> AsyncIterator[AddResult]:
    """Add each file (from `find_files`) under its resolved path, one result per file as it is done.
    A file whose bytes did not change is neither read as text nor chunked nor embedded again."""
    known: Mapping[str, Document] = {d.path: d for d in await kb.list_documents()}
    for path in files:
        key = str(path)
        try:
            data, digest = await trio.to_thread.run_sync(_read, path, limiter=_FILE_IO)
            if is_current(known.get(key), digest, kb.chunking, kb.embedder):
                yield AddResult(path=key, status="unchanged", chunks=known[key].chunks)
                continue
            text = await trio.to_thread.run_sync(_text, path, data, limiter=_FILE_IO)
        except (OSError, KnowledgeError) as exc:
            yield AddResult(path=key, status="skipped", message=str(exc))
            continue
        yield await kb.add_document(key, text, digest=digest)
