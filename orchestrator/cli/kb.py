"""The `orchestrator kb` command: add, search, list and remove knowledge-base documents.
Owns its arguments, which embedding model a run uses, and what a person sees; the index lives beside the rooms.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from functools import partial
from pathlib import Path

import msgspec
import trio

from orchestrator.cli.paths import add_actions, database, default_db, open_db
from orchestrator.cli.words import count
from orchestrator.core.errors import InputError, ProviderError
from orchestrator.memory.embeddings import ENV_MODEL, HttpEmbedder, embedder_from_config
from orchestrator.memory.fulltext import fts_query
from orchestrator.memory.ingest import add_files, find_files
from orchestrator.memory.knowledge import MODES, AddResult, Document, StoreKnowledgeBase
from orchestrator.providers.config import load_config
from orchestrator.tools.disk import CheckedDisk

SHOWN_LINES = 8  # of each hit, without --full
_WORD = re.compile(r"[^\W_]+")


def add_parser(subparsers: argparse._SubParsersAction) -> None:

    kb = subparsers.add_parser("kb", help="the knowledge base: add, search, list and remove documents")
    sub = add_actions(kb, "kb_command")
    db = argparse.ArgumentParser(add_help=False)
    db.add_argument("--db", type=database, default=default_db(),
                    help="the SQLite file or a postgresql:// URL (default: %(default)s)")
    embed = argparse.ArgumentParser(add_help=False)
    embed.add_argument("--embed", metavar="PROVIDER/MODEL",
                       help=f"embedding model, e.g. ollama/nomic-embed-text, or `none` for full text only (default: "
                            f"${ENV_MODEL}, else the model the index was built with, else none)")

    a = sub.add_parser("add", parents=[db, embed], help="index files and folders (a changed file is re-indexed)")
    a.add_argument("paths", nargs="+", metavar="PATH")
    a.set_defaults(fn=cmd_add)

    s = sub.add_parser("search", parents=[db, embed], help="search the knowledge base")
    s.add_argument("query")
    s.add_argument("-k", type=int, default=5, help="how many results (default: %(default)s)")
    s.add_argument("--mode", choices=MODES, default="hybrid")
    s.add_argument("--full", action="store_true", help=f"print whole chunks, not just their (at most {SHOWN_LINES}) matching lines")
    s.add_argument("--json", action="store_true", help="one JSON object per result")
    s.set_defaults(fn=cmd_search)

    ls = sub.add_parser("list", parents=[db], help="list indexed documents")
    ls.add_argument("--json", action="store_true", help="one JSON object per document")
    ls.set_defaults(fn=cmd_list)

    r = sub.add_parser("remove", parents=[db], help="remove documents (a folder removes everything under it)")
    r.add_argument("paths", nargs="+", metavar="PATH")
    r.set_defaults(fn=cmd_remove)


@asynccontextmanager
async def _knowledge(args: argparse.Namespace, *, create: bool = False,
                     write: bool = False) -> AsyncIterator[StoreKnowledgeBase]:
    store = await open_db(args.db, create=create, readonly=not (create or write))  # search and list only read
    try:
        async with AsyncExitStack() as stack:
            kb = await StoreKnowledgeBase.open(store)
            if hasattr(args, "embed"):
                kb.embedder = await _embedder(args.embed, await kb.list_documents(), stack)
            yield kb
    finally:
        await store.close()


async def _embedder(flag: str | None, docs: list[Document], stack: AsyncExitStack) -> HttpEmbedder | None:
    """The flag, else the environment, else the model most of the index was embedded with: searching with
    another model than the one that made the vectors would compare nothing."""
    choice = (flag or os.environ.get(ENV_MODEL, "")).strip()
    if not choice:
        models = Counter(d.model for d in docs if d.model)
        choice = models.most_common(1)[0][0] if models else "none"
    if choice.lower() == "none":
        return None
    return await stack.enter_async_context(embedder_from_config(choice, load_config()))


_VERB = {"added": "added    ", "replaced": "replaced ", "embedded": "embedded ", "unchanged": "unchanged",
         "skipped": "SKIPPED  "}


def _report(r: AddResult) -> None:
    detail = f" ({count(r.chunks, 'chunk')})" if r.status != "skipped" else ""
    print(f"{_VERB[r.status]} {r.path}{detail}{': ' + r.message if r.message else ''}")


_FIND_IO = trio.CapacityLimiter(1)  # one walk at a time: `kb add` names its folders in order


async def cmd_add(args: argparse.Namespace) -> int:
    passed: Counter[str] = Counter()
    disk = CheckedDisk()
    links: list[Path] = []
    files, problems = await trio.to_thread.run_sync(partial(find_files, args.paths, passed, disk=disk, links=links),
                                                    limiter=_FIND_IO)
    counts: Counter[str] = Counter()
    for r in problems:
        _report(r)
        counts[r.status] += 1
    async with _knowledge(args, create=True) as kb:
        try:
            async with aclosing(add_files(kb, files, disk=disk)) as results:
                async for r in results:
                    _report(r)
                    counts[r.status] += 1
        except ProviderError as exc:
            assert kb.embedder is not None  # only the embedding model calls out
            print(f"error: the embedding model {kb.embedder.model} failed: {exc}\n"
                  f"(files before this one are indexed; pass --embed none for full text only)", file=sys.stderr)
            return 3
    summary = ", ".join(f"{n} {status}" for status, n in counts.items()) or "nothing to add"
    if links:  # a link could lead anywhere, credentials included: never followed, only counted
        summary += (f"; {count(len(links), 'link')} skipped (symbolic and hard links in the folders given are "
                    "not followed)")
    print(summary)
    if passed:
        kinds = ", ".join(f"{n} {suffix}" for suffix, n in passed.most_common())
        print(f"not indexed: {count(sum(passed.values()), 'file')} of types the knowledge base does not read in the "
              f"folders given ({kinds}); name a text file itself to add it anyway")
    return 1 if counts["skipped"] else 0


async def cmd_search(args: argparse.Namespace) -> int:
    if args.k < 1:
        raise InputError("-k must be at least 1")
    async with _knowledge(args) as kb:
        hits = await kb.search(args.query, args.k, args.mode)
    for n, h in enumerate(hits, 1):
        if args.json:
            print(msgspec.json.encode(h).decode())
            continue
        passes = ", ".join(f"{name} #{rank}" for name, rank in (("fts", h.fts_rank), ("vector", h.vector_rank)) if rank)
        print(f"{n}. {h.path}:{h.start}-{h.end}  score {h.score:.2f}  ({passes})")
        lines = h.text.split("\n")
        shown = range(len(lines)) if args.full else _shown(lines, args.query)
        width = len(str(h.start + len(lines)))
        last = -1
        for i in shown:
            if last >= 0 and i > last + 1:
                print(f"   {'':>{width}}  …")
            print(f"   {h.start + i:>{width}}: {lines[i]}".rstrip())
            last = i
        if len(shown) < len(lines):
            print(f"   ({len(lines) - len(shown)} more lines in this chunk; --full prints them)")
    if not hits and not args.json:
        print("no results")
    return 0


def _shown(lines: list[str], query: str) -> list[int]:
    """Which of a hit's lines to print: those holding a query term (a word by its first letters, as the
    index stems it), else the first ones; at most SHOWN_LINES."""
    found = fts_query(query)
    words = [w.lower() for w in _WORD.findall(found.words or "")] if found else []
    needles = [w[:max(4, len(w) - 3)] for w in words if len(w) > 1] + [d.lower() for d in (found.dense if found else ())]
    hits = [i for i, line in enumerate(lines) if any(n in line.lower() for n in needles)]
    if not hits:
        return list(range(min(SHOWN_LINES, len(lines))))
    return hits[:SHOWN_LINES]


async def cmd_list(args: argparse.Namespace) -> int:
    async with _knowledge(args) as kb:
        docs = await kb.list_documents()
    for d in docs:
        if args.json:
            print(msgspec.json.encode(d).decode())
        else:
            vectors = f"{count(d.vectors, 'vector')} ({d.model})" if d.model else "no vectors"
            print(f"{d.path}  {count(d.chunks, 'chunk')}, {vectors}, {count(d.bytes, 'byte')}")
    if not args.json:
        print(count(len(docs), "document"))
    return 0


async def cmd_remove(args: argparse.Namespace) -> int:
    missing = 0
    async with _knowledge(args, write=True) as kb:
        known = [d.path for d in await kb.list_documents()]
        for raw in args.paths:
            full = Path(raw).expanduser().resolve()
            # A folder means every document under it; a key an API caller chose (never resolved) is tried as given.
            targets = [p for p in known if p == str(full) or p.startswith(f"{full}/")] or \
                      [p for p in known if p == raw]
            if not targets:
                print(f"not in the knowledge base: {raw}")
                missing += 1
            for p in targets:
                await kb.remove_document(p)
                print(f"removed {p}")
    return 1 if missing else 0
