"""The knowledge base: documents chunked on line boundaries, indexed by full text and by vectors.
Owns chunking, the kb_* tables (SQLite, PostgreSQL, in memory) behind one interface and hybrid retrieval (RRF).
"""
from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec
import trio

from orchestrator.core.errors import InputError, ProviderError
from orchestrator.core.log import logger
from orchestrator.memory.embeddings import ENV_MODEL, Embedder, numpy
from orchestrator.memory.fulltext import PG_WORDS, FullText, fts_query, index_words, ranked
from orchestrator.store.db import immediate
from orchestrator.store.sqlite import sqlite_utils

if TYPE_CHECKING:
    import numpy as np
    from typing_extensions import TypeIs

    from orchestrator.store.contract import Store

log = logger(__name__)

Mode = Literal["hybrid", "fts", "vector"]
MODES: tuple[Mode, ...] = ("hybrid", "fts", "vector")
Status = Literal["added", "replaced", "embedded", "unchanged", "skipped"]

# Chunking and the query-side vector work are pure CPU; numpy's matmul releases the GIL.
_CPU = trio.CapacityLimiter(2)


class KnowledgeError(InputError):
    """A request that cannot be served as asked (vector search without a model, an unreadable file): bad input."""


class Chunking(msgspec.Struct, frozen=True, kw_only=True):
    max_lines: int = 40
    max_chars: int = 1500
    overlap: int = 5  # lines repeated at the start of the next chunk

    @property
    def signature(self) -> str:
        """Stored with each document, so changed settings re-chunk it on the next add."""
        return f"{self.max_lines}/{self.max_chars}/{self.overlap}"


class Fusion(msgspec.Struct, frozen=True, kw_only=True):
    """Reciprocal rank fusion: a chunk scores Σ w_pass / (rrf_k + rank in that pass).

    Scores are reported divided by what first place in every pass that found something would get,
    so 1.0 is the best possible and `threshold` reads the same whatever the weights.
    Tuned on tests/data/kb (bench/README.md, "Knowledge base"): the semantic pass weighs more.
    """

    rrf_k: int = 60
    w_vector: float = 0.6
    w_fts: float = 0.4
    depth: int = 50  # candidates each pass contributes
    threshold: float = 0.2
    min_similarity: float = 0.0  # cosine below this is no vector candidate at all


class Chunk(msgspec.Struct, frozen=True):
    start: int  # first line, 1-based
    end: int  # last line, inclusive
    text: str


class Hit(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    start: int
    end: int
    text: str
    score: float
    fts_rank: int | None = None
    vector_rank: int | None = None
    similarity: float | None = None


class Document(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    sha256: str  # of the file's bytes when added from a file, else of the text
    chunking: str
    bytes: int  # of the indexed text, UTF-8
    lines: int
    chunks: int
    vectors: int  # chunks that have a vector of `model`
    model: str | None
    added: float


class AddResult(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    status: Status
    chunks: int = 0
    message: str = ""


class KnowledgeBase(Protocol):
    embedder: Embedder | None
    chunking: Chunking

    async def add_document(self, path: str, text: str, *, digest: str | None = None) -> AddResult: ...

    async def remove_document(self, path: str) -> bool: ...

    async def list_documents(self) -> list[Document]: ...

    async def search(self, query: str, k: int = 5, mode: Mode = "hybrid") -> list[Hit]: ...

    async def aclose(self) -> None: ...


# --- chunking --------------------------------------------------------------------------------

def chunk_text(text: str, spec: Chunking = Chunking()) -> list[Chunk]:
    """Line-aligned chunks of at most `max_lines` lines and about `max_chars` characters, each starting
    `overlap` lines before the previous one ended. Lines are split on "\\n" only, as the file tools count them."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()  # a final newline ends the last line; it does not start another
    chunks: list[Chunk] = []
    start, n = 0, len(lines)
    while start < n:
        end, size = start, 0
        while end < n and end - start < spec.max_lines and (end == start or size + len(lines[end]) <= spec.max_chars):
            size += len(lines[end]) + 1
            end += 1
        if end < n:
            # A full chunk ends after a blank line in its last third when there is one, so paragraphs and
            # functions are less often cut in two; the floor keeps every chunk longer than the overlap.
            floor = start + max(spec.overlap + 1, (end - start) * 2 // 3)
            for cut in range(end - 1, floor - 1, -1):
                if not lines[cut].strip():
                    end = cut + 1
                    break
        body = "\n".join(lines[start:end])
        if body.strip():
            if end - start == 1 and len(body) > spec.max_chars:
                # One huge line (minified code, a data dump): pieces that all carry its line number.
                chunks += [Chunk(start + 1, end, body[i:i + spec.max_chars])
                           for i in range(0, len(body), spec.max_chars)]
            else:
                chunks.append(Chunk(start + 1, end, body))
        if end >= n:
            break
        start = max(end - spec.overlap, start + 1)
    return chunks


# --- fusion ----------------------------------------------------------------------------------

def rrf(passes: Sequence[tuple[float, Sequence[int]]], k: int) -> dict[int, float]:
    """Σ w / (k + rank) per id over the ranked passes, divided by first place in every non-empty pass."""
    best = sum(w / (k + 1) for w, ids in passes if ids)
    scores: dict[int, float] = {}
    for w, ids in passes:
        for rank, cid in enumerate(ids, 1):
            scores[cid] = scores.get(cid, 0.0) + w / (k + rank)
    return {cid: s / best for cid, s in scores.items()}


def _unit(rows: np.ndarray) -> np.ndarray:
    np = numpy()
    rows = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1, norms)  # a zero vector stays zero: similar to nothing


@dataclass(frozen=True)
class _Matrix:
    key: tuple[int, str, int]  # (generation, model, width): reloaded when any of them changes
    ids: np.ndarray
    rows: np.ndarray  # unit rows, so a dot product is the cosine


def _nearest(m: _Matrix, q: np.ndarray, depth: int, floor: float) -> list[tuple[int, float]]:
    # einsum, not `@`: OpenBLAS's threaded gemv was slower here and, on a busy
    # machine, its spinning threads made quick searches many times slower; einsum stays on this one thread.
    np = numpy()
    sims = np.einsum("ij,j->i", m.rows, q)
    n = min(depth, len(sims))
    top = np.argpartition(-sims, n - 1)[:n]
    top = top[np.argsort(-sims[top], kind="stable")]
    return [(int(m.ids[i]), float(sims[i])) for i in top if sims[i] >= floor]


# --- the tables (run in the database's thread) ---------------------------------------------------
# One set of queries for both stores: on PostgreSQL `db` is the store's session, which takes SQLite's
# placeholders; its tables come from the store's migrations (store/pg_schema.py). Only the words index differs.

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS kb_documents (path TEXT PRIMARY KEY, sha256 TEXT NOT NULL, chunking TEXT NOT NULL, "
    "bytes INTEGER NOT NULL, lines INTEGER NOT NULL, chunks INTEGER NOT NULL, vectors INTEGER NOT NULL, "
    "model TEXT, added REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS kb_chunks (id INTEGER PRIMARY KEY, path TEXT NOT NULL, first_line INTEGER NOT NULL, "
    "last_line INTEGER NOT NULL, name TEXT NOT NULL, text TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS kb_chunks_path ON kb_chunks (path)",
    # External content: the index holds no second copy of the text; the triggers keep it in step.
    "CREATE VIRTUAL TABLE IF NOT EXISTS kb_chunks_fts USING fts5 (name, text, content='kb_chunks', "
    "content_rowid='id', tokenize='porter unicode61')",
    "CREATE TRIGGER IF NOT EXISTS kb_chunks_ai AFTER INSERT ON kb_chunks BEGIN "
    "INSERT INTO kb_chunks_fts (rowid, name, text) VALUES (new.id, new.name, new.text); END",
    "CREATE TRIGGER IF NOT EXISTS kb_chunks_ad AFTER DELETE ON kb_chunks BEGIN "
    "INSERT INTO kb_chunks_fts (kb_chunks_fts, rowid, name, text) VALUES ('delete', old.id, old.name, old.text); END",
    # Thai, Lao, Khmer, Burmese, Chinese, Japanese and Korean do not put spaces between words, so the word
    # index above never sees their words: a trigram index beside it finds any run of three characters.
    "CREATE VIRTUAL TABLE IF NOT EXISTS kb_chunks_tri USING fts5 (text, content='kb_chunks', "
    "content_rowid='id', tokenize='trigram')",
    "CREATE TRIGGER IF NOT EXISTS kb_chunks_tri_ai AFTER INSERT ON kb_chunks BEGIN "
    "INSERT INTO kb_chunks_tri (rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER IF NOT EXISTS kb_chunks_tri_ad AFTER DELETE ON kb_chunks BEGIN "
    "INSERT INTO kb_chunks_tri (kb_chunks_tri, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE TABLE IF NOT EXISTS kb_vectors (chunk INTEGER PRIMARY KEY, model TEXT NOT NULL, vector BLOB NOT NULL)",
    # Bumped by every write, so a process notices that another one changed the vectors it holds in memory.
    "CREATE TABLE IF NOT EXISTS kb_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
]
_DOCUMENT = f"SELECT {', '.join(Document.__struct_fields__)} FROM kb_documents"
_BUMP = ("INSERT INTO kb_meta (key, value) VALUES ('generation', 1) "
         "ON CONFLICT (key) DO UPDATE SET value = kb_meta.value + 1")
_CHUNK = "INSERT INTO kb_chunks (path, first_line, last_line, name, text) VALUES (?, ?, ?, ?, ?)"
_PG_CHUNK = f"INSERT INTO kb_chunks (path, first_line, last_line, name, text, words) VALUES (?, ?, ?, ?, ?, {PG_WORDS})"
_VECTOR = ("INSERT INTO kb_vectors (chunk, model, vector) VALUES (?, ?, ?) "
           "ON CONFLICT (chunk) DO UPDATE SET model = excluded.model, vector = excluded.vector")
_PG_WRITER = 0x4F524B42  # "ORKB": the advisory lock that makes knowledge-base writes one at a time, as in SQLite


def _sqlite(db: Any) -> TypeIs[sqlite_utils.Database]:
    return isinstance(db, sqlite_utils.Database)


def _create(db: sqlite_utils.Database) -> None:
    if not _sqlite(db):
        return  # PostgreSQL: the tables are made by the store's migrations
    with immediate(db):
        fresh = "kb_chunks_tri" not in db.table_names()
        for statement in _SCHEMA:
            db.execute(statement)
        if fresh:  # a knowledge base made before the trigram index: index what it already holds
            db.execute("INSERT INTO kb_chunks_tri (kb_chunks_tri) VALUES ('rebuild')")


def _has_tables(db: sqlite_utils.Database) -> bool:
    if _sqlite(db):
        return db["kb_documents"].exists()
    return db.execute("SELECT to_regclass('kb_documents') IS NOT NULL").fetchone()[0]


@contextmanager
def _writing(db: sqlite_utils.Database) -> Iterator[None]:
    """One write transaction; writers queue on SQLite's write lock, or on an advisory lock on PostgreSQL
    (two hosts adding the same path at once would otherwise both delete, then both insert it)."""
    with immediate(db):
        if not _sqlite(db):
            db.execute("SELECT pg_advisory_xact_lock(?)", [_PG_WRITER])
        yield


def _many(db: sqlite_utils.Database, sql: str, rows: list[tuple]) -> None:
    (db.conn if _sqlite(db) else db).executemany(sql, rows)


def _memory_db() -> sqlite_utils.Database:
    db = sqlite_utils.Database(sqlite3.connect(":memory:", check_same_thread=False))
    _create(db)
    return db


def _documents(db: sqlite_utils.Database, path: str | None) -> list[Document]:
    rows = db.execute(_DOCUMENT + (" WHERE path = ?" if path is not None else " ORDER BY path"),
                      [path] if path is not None else [])
    return [Document(**dict(zip(Document.__struct_fields__, r))) for r in rows]


def _missing(db: sqlite_utils.Database, path: str, model: str) -> list[tuple[int, str]]:
    """Chunks of `path` without a vector of `model`, in document order."""
    return db.execute("SELECT c.id, c.text FROM kb_chunks c LEFT JOIN kb_vectors v ON v.chunk = c.id "
                      "AND v.model = ? WHERE c.path = ? AND v.chunk IS NULL ORDER BY c.id", [model, path]).fetchall()


def _put_vectors(db: sqlite_utils.Database, ids: list[int], vectors: np.ndarray, model: str) -> None:
    _many(db, _VECTOR, [(cid, model, v.tobytes()) for cid, v in zip(ids, vectors)])


def _count_vectors(db: sqlite_utils.Database, path: str, model: str | None) -> None:
    db.execute("UPDATE kb_documents SET model = ?, vectors = (SELECT count(*) FROM kb_vectors v JOIN kb_chunks c "
               "ON c.id = v.chunk WHERE c.path = ? AND v.model = ?) WHERE path = ?", [model, path, model, path])


def _embed_missing(db: sqlite_utils.Database, path: str, ids: list[int], vectors: np.ndarray, model: str) -> None:
    with _writing(db):
        _put_vectors(db, ids, vectors, model)
        _count_vectors(db, path, model)
        db.execute(_BUMP)


def _replace(db: sqlite_utils.Database, doc: Document, chunks: list[Chunk], vectors: np.ndarray | None) -> None:
    name = PurePath(doc.path).name
    with _writing(db):
        _delete(db, doc.path)
        if _sqlite(db):  # FTS5's triggers index the new rows
            _many(db, _CHUNK, [(doc.path, c.start, c.end, name, c.text) for c in chunks])
        else:
            words = index_words(name)
            _many(db, _PG_CHUNK, [(doc.path, c.start, c.end, name, c.text, words, index_words(c.text))
                                  for c in chunks])
        if vectors is not None and doc.model is not None:
            # Deleted first in this transaction, so these are exactly the new chunks, in insertion order.
            ids = [r[0] for r in db.execute("SELECT id FROM kb_chunks WHERE path = ? ORDER BY id", [doc.path])]
            _put_vectors(db, ids, vectors, doc.model)
        fields = msgspec.structs.asdict(doc)
        db.execute(f"INSERT INTO kb_documents ({', '.join(fields)}) VALUES ({', '.join(':' + f for f in fields)})",
                   fields)
        db.execute(_BUMP)


def _delete(db: sqlite_utils.Database, path: str) -> bool:
    db.execute("DELETE FROM kb_vectors WHERE chunk IN (SELECT id FROM kb_chunks WHERE path = ?)", [path])
    db.execute("DELETE FROM kb_chunks WHERE path = ?", [path])
    return db.execute("DELETE FROM kb_documents WHERE path = ?", [path]).rowcount > 0


def _remove(db: sqlite_utils.Database, path: str) -> bool:
    with _writing(db):
        found = _delete(db, path)
        if found:
            db.execute(_BUMP)
        return found


def _passes(db: sqlite_utils.Database, fts: FullText | None, depth: int, model: str | None, width: int,
            held: tuple[int, str, int] | None) -> tuple[list[int], _Matrix | None]:
    """The full-text ranking, and the vector matrix when the one held in memory is stale (else None).
    One call, so the ranking and the generation are read from the same state."""
    ids = ranked(db, fts, depth)
    if model is None:
        return ids, None
    found = db.execute("SELECT value FROM kb_meta WHERE key = 'generation'").fetchone()
    key = (found[0] if found else 0, model, width)
    if key == held:
        return ids, None
    rows = db.execute("SELECT chunk, vector FROM kb_vectors WHERE model = ? AND length(vector) = ? ORDER BY chunk",
                      [model, width * 4]).fetchall()
    np = numpy()
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), width)
    return ids, _Matrix(key, np.array([r[0] for r in rows], dtype=np.int64), matrix)


def _rows(db: sqlite_utils.Database, ids: list[int]) -> dict[int, tuple[str, int, int, str]]:
    found: dict[int, tuple[str, int, int, str]] = {}
    for start in range(0, len(ids), 500):  # SQLite's limit on bound parameters
        part = ids[start:start + 500]
        for r in db.execute(f"SELECT id, path, first_line, last_line, text FROM kb_chunks WHERE id IN "
                            f"({', '.join('?' * len(part))})", part):
            found[r[0]] = r[1:]
    return found


# --- the backends ------------------------------------------------------------------------------

Run = Callable[..., Awaitable[Any]]  # run(fn, *args) -> fn(db, *args), in the database's thread


def is_current(doc: Document | None, digest: str, chunking: Chunking, embedder: Embedder | None) -> bool:
    """Nothing to do for this document: same content, same chunking, and every chunk embedded if a model is set."""
    return (doc is not None and doc.sha256 == digest and doc.chunking == chunking.signature
            and (embedder is None or (doc.model == embedder.model and doc.vectors == doc.chunks)))


class StoreKnowledgeBase:
    """The persistent backend: `kb_*` tables beside the rooms, in the store's SQLite file or PostgreSQL database,
    through the store's connection. Everything but the full-text pass's SQL is the same on both."""

    def __init__(self, run: Run, *, embedder: Embedder | None = None, fusion: Fusion = Fusion(),
                 chunking: Chunking = Chunking()):
        self._run = run
        self.embedder = embedder
        self.fusion = fusion
        self.chunking = chunking
        self._vectors: _Matrix | None = None

    @classmethod
    async def open(cls, store: Store, **options: Any) -> StoreKnowledgeBase:
        if not store.readonly:
            await store.call(_create)
        elif not await store.call(_has_tables):
            # A read-only store that never indexed anything cannot gain the tables: it reads as empty.
            return await MemoryKnowledgeBase.open(**options)
        return cls(store.call, **options)

    async def aclose(self) -> None:
        """The store belongs to whoever opened it: nothing of ours to close."""

    async def __aenter__(self) -> StoreKnowledgeBase:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def add_document(self, path: str, text: str, *, digest: str | None = None) -> AddResult:
        """Index `text` as the document `path`, replacing what was indexed under that path.
        `digest` identifies the content (the file's sha256); without it, the text's sha256."""
        digest = digest or hashlib.sha256(text.encode()).hexdigest()
        text = text.replace("\0", "\ufffd")  # PostgreSQL text cannot hold NUL: U+FFFD, as for an undecodable byte
        found = await self._run(_documents, path)
        old = found[0] if found else None
        if old is not None and is_current(old, digest, self.chunking, self.embedder):
            return AddResult(path=path, status="unchanged", chunks=old.chunks)
        if old is not None and old.sha256 == digest and old.chunking == self.chunking.signature and self.embedder:
            # Same chunks; only vectors of the configured model are missing (added without one, or another model).
            model = self.embedder.model
            missing = await self._run(_missing, path, model)
            added = await self._embed(path, [t for _, t in missing])
            await self._run(_embed_missing, path, [cid for cid, _ in missing], added, model)
            return AddResult(path=path, status="embedded", chunks=old.chunks,
                             message=f"{len(missing)} chunks embedded with {model}")
        chunks = await trio.to_thread.run_sync(chunk_text, text, self.chunking, limiter=_CPU)
        vectors = await self._embed(path, [c.text for c in chunks]) if self.embedder and chunks else None
        data = text.encode()
        doc = Document(path=path, sha256=digest, chunking=self.chunking.signature, bytes=len(data),
                       lines=text.count("\n") + (1 if text and not text.endswith("\n") else 0), chunks=len(chunks),
                       vectors=0 if vectors is None else len(chunks),
                       model=self.embedder.model if vectors is not None and self.embedder else None, added=time.time())
        await self._run(_replace, doc, chunks, vectors)
        return AddResult(path=path, status="added" if old is None else "replaced", chunks=len(chunks))

    async def _embed(self, path: str, texts: list[str]) -> np.ndarray:
        assert self.embedder is not None
        name = PurePath(path).name
        # The file name gives a chunk its context (a heading-less middle part of `retry.md` is still about retries).
        raw = await self.embedder.embed([f"{name}\n{t}" for t in texts])
        return await trio.to_thread.run_sync(_unit, raw, limiter=_CPU)

    async def remove_document(self, path: str) -> bool:
        return await self._run(_remove, path)

    async def list_documents(self) -> list[Document]:
        return await self._run(_documents, None)

    async def search(self, query: str, k: int = 5, mode: Mode = "hybrid") -> list[Hit]:
        """The top `k` chunks for `query`, deduplicated by (document, start line), none below the threshold.
        "hybrid" without an embedding model (or when the model fails) searches the full text only."""
        if mode not in MODES:
            raise KnowledgeError(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")
        query = query.strip()
        if not query or k < 1:
            return []
        f = self.fusion
        q = await self._query_vector(query, mode) if mode != "fts" else None
        model = self.embedder.model if self.embedder is not None and q is not None else None
        fts_ids, fresh = await self._run(_passes, fts_query(query) if mode != "vector" else None, f.depth, model,
                                         0 if q is None else len(q), self._vectors.key if self._vectors else None)
        if fresh is not None:
            self._vectors = fresh
        near: list[tuple[int, float]] = []
        if q is not None and self._vectors is not None and len(self._vectors.ids):
            near = await trio.to_thread.run_sync(_nearest, self._vectors, q, f.depth, f.min_similarity, limiter=_CPU)
        scores = rrf([(f.w_fts, fts_ids), (f.w_vector, [cid for cid, _ in near])], f.rrf_k)
        if not scores:
            return []
        rows = await self._run(_rows, list(scores))
        fts_rank = {cid: r for r, cid in enumerate(fts_ids, 1)}
        vec_rank = {cid: (r, sim) for r, (cid, sim) in enumerate(near, 1)}
        hits: dict[tuple[str, int], Hit] = {}
        # A chunk removed since the passes ran (another task or process) has no row: it is left out.
        for cid in sorted(rows, key=lambda c: (-scores[c], rows[c][0], rows[c][1])):
            path, start, end, text = rows[cid]
            if scores[cid] < f.threshold or len(hits) == k:
                break
            if (path, start) in hits:
                continue  # the better-scored one of the same place is already in
            r, sim = vec_rank.get(cid, (None, None))
            hits[(path, start)] = Hit(path=path, start=start, end=end, text=text, score=round(scores[cid], 4),
                                      fts_rank=fts_rank.get(cid), vector_rank=r, similarity=sim)
        return list(hits.values())

    async def _query_vector(self, query: str, mode: Mode) -> np.ndarray | None:
        if self.embedder is None:
            if mode == "vector":
                raise KnowledgeError(f"vector search needs an embedding model: pass --embed PROVIDER/MODEL (e.g. "
                                     f"--embed ollama/nomic-embed-text) or set {ENV_MODEL}, and add the documents "
                                     "again to embed them; without one, use --mode fts")
            return None
        try:
            raw = await self.embedder.embed([query])
        except ProviderError as exc:
            if mode == "vector":
                raise
            log.warning("the embedding model failed; searching the full text only", model=self.embedder.model,
                        error=str(exc))
            return None
        return _unit(raw)[0]


class MemoryKnowledgeBase(StoreKnowledgeBase):
    """Tests and throwaway use: the same tables and queries in a private in-memory SQLite database,
    so it ranks as an SQLite store does by construction. Close it (`aclose`, or `async with`)."""

    def __init__(self, db: sqlite_utils.Database, **options: Any):
        limiter = trio.CapacityLimiter(1)  # one connection: its calls must not overlap

        async def run(fn: Callable[..., Any], *args: Any) -> Any:
            return await trio.to_thread.run_sync(fn, db, *args, limiter=limiter)

        super().__init__(run, **options)
        self._db = db

    @classmethod
    async def open(cls, **options: Any) -> MemoryKnowledgeBase:  # type: ignore[override]
        return cls(await trio.to_thread.run_sync(_memory_db), **options)

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):  # `finally: await kb.aclose()` still closes inside a cancelled scope
            await self._run(sqlite_utils.Database.close)


async def for_store(store: Store) -> KnowledgeBase:
    """The knowledge base kept beside the store's rooms: its kb_* tables, in the SQLite file or PostgreSQL."""
    return await StoreKnowledgeBase.open(store)
