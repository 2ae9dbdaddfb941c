"""Knowledge-base costs: indexing speed (MB/s) and query latency at 1,000 and 100,000 chunks.

Embeddings come from the deterministic HashEmbedder of tests/kbdata.py (offline, no model), so the
numbers are the knowledge base's own work plus a cheap stand-in for the model.

1. indexing: synthetic documents (prose, code and config lines) are chunked alone, then added to the
   memory backend and to the store's backend (a file-backed SQLite Store, WAL; or PostgreSQL) with full
   text only, then with vectors, then added again unchanged (the content-hash check).
2. labelled set: the 34 documents and 58 questions of tests/data/kb alone, in the store's backend:
   recall@5 (all, keyword, paraphrase), recall@1 and MRR per mode.
3. queries: the labelled corpus plus synthetic filler up to N chunks in the store's backend; its 58
   labelled questions are the queries, in every mode, for latency (median, p95) and for recall@5 among
   the filler.

    .venv/bin/python bench/knowledge.py            # full run: 8 MB indexed; 1,000 and 100,000 chunks (~2-3 min)
    .venv/bin/python bench/knowledge.py --quick    # smoke run: 2 MB; 1,000 and 10,000 chunks (~15 s)
    .venv/bin/python bench/knowledge.py --postgres # the same on PostgreSQL: a throwaway cluster from
                                                   # tests/pgcluster.py (or the server ORCHESTRATOR_TEST_PG names)
"""
from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.kbdata, when run as a script

from orchestrator.memory.knowledge import MODES, MemoryKnowledgeBase, StoreKnowledgeBase, chunk_text  # noqa: E402
from orchestrator.store.backends import open_store  # noqa: E402
from tests import pgcluster  # noqa: E402
from tests.kbdata import HashEmbedder, _line_words, documents, questions, recall_at  # noqa: E402

MB = 1 << 20


# --- synthetic text ------------------------------------------------------------------------------

def _vocabulary(rng: random.Random) -> list[str]:
    """The labelled corpus's own words (so filler competes on real terms) plus 20,000 made-up ones."""
    real = sorted({w for text in documents().values() for w in text.lower().split() if w.isalpha()})
    syllables = ["ka", "lo", "mi", "ten", "ra", "vo", "sel", "di", "nu", "por", "ex", "an", "ti", "gra", "sto", "ve"]
    made = {"".join(rng.choices(syllables, k=rng.randint(2, 4))) for _ in range(30_000)}
    vocab = real + sorted(made - set(real))[:20_000]
    rng.shuffle(vocab)  # Zipf ranks below are by position
    return vocab


def line_pool(size: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    weights = [1 / (i + 1) for i in range(len(vocab))]
    picks = iter(rng.choices(vocab, weights=weights, k=size * 12))
    w = lambda: next(picks)  # noqa: E731
    pool = []
    for _ in range(size):
        shape = rng.random()
        if shape < 0.12:
            pool.append("")
        elif shape < 0.55:
            pool.append(" ".join(w() for _ in range(rng.randint(5, 12))).capitalize() + ".")
        elif shape < 0.75:
            pool.append(f"    {w()}_{w()} = {w()}.{w()}({w()}, {rng.randint(0, 999)})")
        elif shape < 0.85:
            pool.append(f"def {w()}_{w()}({w()}: str, {w()}: int = {rng.randint(0, 99)}) -> {w().capitalize()}:")
        elif shape < 0.95:
            pool.append(f"- `{w()}.{w()}_{w()}` [{rng.randint(1, 9999)}] — {w()} {w()} {w()}")
        else:
            pool.append(f"## {w().capitalize()} {w()}")
    return pool


def synthetic_docs(pool: list[str], *, chunks: int | None = None, size: int | None = None,
                   seed: int = 11) -> dict[str, str]:
    """Documents of 150-2,500 lines drawn from the pool, until `chunks` chunks or `size` bytes."""
    rng = random.Random(seed)
    out: dict[str, str] = {}
    have = 0
    while (chunks is not None and have < chunks) or (size is not None and have < size):
        text = "\n".join(rng.choices(pool, k=rng.randint(150, 2500))) + "\n"
        n = len(chunk_text(text)) if chunks is not None else len(text.encode())
        if chunks is not None and have + n > chunks:  # trim the last document to land on the target
            lines = text.split("\n")[: max(6, (chunks - have) * 35)]
            text = "\n".join(lines) + "\n"
            n = len(chunk_text(text))
        out[f"synthetic/{len(out):05d}-{rng.choice(pool[:50]).split(' ')[0].lower() or 'doc'}.md"] = text
        have += n
    return out


# --- where the knowledge base lives ----------------------------------------------------------------

class Place:
    """New empty stores: SQLite files in a temporary folder, or fresh databases on one PostgreSQL server."""

    def __init__(self, server: pgcluster.Server | None, folder: Path):
        self.server, self.folder, self.made = server, folder, 0
        self.name = "PostgreSQL" if server else "SQLite"

    @contextlib.asynccontextmanager
    async def store(self):
        self.made += 1
        target = self.server.fresh(f"kb_bench_{self.made}") if self.server else self.folder / f"kb{self.made}.db"
        store = await open_store(target)
        try:
            yield store, target
        finally:
            await store.close()

    def size_mb(self, target) -> float:
        if self.server is None:
            return Path(target).stat().st_size / MB
        import psycopg
        with psycopg.connect(target) as conn:
            return conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] / MB


# --- measurements --------------------------------------------------------------------------------

async def _add_all(kb, docs: dict[str, str]) -> float:
    start = time.perf_counter()
    for path, text in docs.items():
        await kb.add_document(path, text)
    return time.perf_counter() - start


async def indexing(place: Place, mb: float, dim: int) -> list[tuple[str, float, float, str]]:
    docs = synthetic_docs(line_pool(100_000), size=int(mb * MB))
    size = sum(len(t.encode()) for t in docs.values()) / MB
    n_chunks = sum(len(chunk_text(t)) for t in docs.values())
    rows = []

    start = time.perf_counter()
    for text in docs.values():
        chunk_text(text)
    rows.append(("chunking only (chunk_text)", size, time.perf_counter() - start, ""))

    async with await MemoryKnowledgeBase.open() as kb:
        rows.append(("memory backend, full text only", size, await _add_all(kb, docs), ""))
    emb = HashEmbedder(dim=dim)
    async with place.store() as (store, _):
        kb = await StoreKnowledgeBase.open(store)
        rows.append((f"{place.name} backend, full text only", size, await _add_all(kb, docs), ""))
        for path in docs:
            await kb.remove_document(path)
        texts = [f"{Path(p).name}\n{c.text}" for p, t in docs.items() for c in chunk_text(t)]
        _line_words.cache_clear()
        start = time.perf_counter()
        HashEmbedder(dim=dim).vectors(texts)
        alone = time.perf_counter() - start
        _line_words.cache_clear()  # cold again, and `emb` is another instance: the add pays the same
        kb.embedder = emb
        took = await _add_all(kb, docs)
        rows.append((f"{place.name} backend, full text + vectors ({dim}-d)", size, took,
                     f"of which the stand-in embedder: {alone:.1f} s"))
        rows.append((f"{place.name} backend, same files again (unchanged)", size, await _add_all(kb, docs),
                     "sha256 + one lookup per document"))
    print(f"\nindexing: {len(docs)} documents, {size:.1f} MB, {n_chunks:,} chunks")
    return rows


async def labelled(place: Place) -> dict[str, tuple[float, float, float, float, float]]:
    """Per mode: recall@5, its keyword and paraphrase parts, recall@1 and MRR (first answer in the top 5)."""
    qs = questions()
    out = {}
    async with place.store() as (store, _):
        kb = await StoreKnowledgeBase.open(store, embedder=HashEmbedder())
        for path, text in documents().items():
            await kb.add_document(path, text)
        for mode in MODES:
            hits = [[(h.path, h.start, h.end) for h in await kb.search(q.q, 5, mode)] for q in qs]
            kinds = {kind: [i for i, q in enumerate(qs) if q.kind == kind] for kind in ("keyword", "paraphrase")}
            ranks = [next((r for r, h in enumerate(found, 1) if q.found_by(*h)), None) for q, found in zip(qs, hits)]
            out[mode] = (recall_at(hits, qs), *(recall_at([hits[i] for i in ix], [qs[i] for i in ix])
                                                for ix in kinds.values()),
                         recall_at(hits, qs, k=1), sum(1 / r for r in ranks if r) / len(qs))
    return out


async def queries(place: Place, target: int, dim: int, rounds: int) -> dict:
    labelled = documents()
    qs = questions()
    filler = synthetic_docs(line_pool(200_000), chunks=target - sum(len(chunk_text(t)) for t in labelled.values()))
    emb = HashEmbedder(dim=dim)
    result: dict = {"target": target}
    async with place.store() as (store, where):
        kb = await StoreKnowledgeBase.open(store, embedder=emb)
        docs = labelled | filler
        mb = sum(len(t.encode()) for t in docs.values()) / MB
        build = await _add_all(kb, docs)
        listing = await kb.list_documents()
        result |= {"chunks": sum(d.chunks for d in listing), "docs": len(listing), "mb": mb, "build": build,
                   "db_mb": place.size_mb(where)}
        start = time.perf_counter()
        await kb.search(qs[0].q, 5, "vector")  # the first vector search loads the matrix
        result["load"] = time.perf_counter() - start
        start = time.perf_counter()
        for q in qs:
            emb.vectors([q.q])
        result["embed_ms"] = (time.perf_counter() - start) / len(qs) * 1000
        for mode in MODES:
            # An untimed first pass (warms caches and worker threads) gives the hits for recall.
            hits = [[(h.path, h.start, h.end) for h in await kb.search(q.q, 5, mode)] for q in qs]
            times: list[float] = []
            for _ in range(rounds):
                for q in qs:
                    start = time.perf_counter()
                    await kb.search(q.q, 5, mode)
                    times.append(time.perf_counter() - start)
            times.sort()
            result[mode] = (statistics.median(times) * 1000, times[int(len(times) * 0.95)] * 1000,
                            recall_at(hits, qs))
    return result


def _print_indexing(rows) -> None:
    print("\n| what | MB | seconds | MB/s | note |\n|---|---:|---:|---:|---|")
    for name, size, took, note in rows:
        print(f"| {name} | {size:.1f} | {took:.2f} | {size / took:.2f} | {note} |")


def _print_queries(results) -> None:
    print("\n| chunks | documents | text MB | build s | build MB/s | database MB | first vector search (loads matrix) |"
          "\n|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['chunks']:,} | {r['docs']:,} | {r['mb']:.1f} | {r['build']:.1f} | {r['mb'] / r['build']:.2f} | "
              f"{r['db_mb']:.0f} | {r['load'] * 1000:.0f} ms |")
    print("\n| chunks | mode | median ms | p95 ms | recall@5 (58 labelled questions) |\n|---:|---|---:|---:|---:|")
    for r in results:
        for mode in MODES:
            med, p95, rec = r[mode]
            print(f"| {r['chunks']:,} | {mode} | {med:.2f} | {p95:.2f} | {rec:.3f} |")
    print("\nthe stand-in embedder's share of a vector or hybrid query: "
          + ", ".join(f"{r['embed_ms']:.2f} ms at {r['chunks']:,}" for r in results))


def _print_labelled(name: str, result) -> None:
    print(f"\nlabelled set ({name}, 1,024-d stand-in embedder)\n"
          "| mode | recall@5 | keyword | paraphrase | recall@1 | MRR |\n|---|---:|---:|---:|---:|---:|")
    for mode, (r5, keyword, paraphrase, r1, mrr) in result.items():
        print(f"| {mode} | {r5:.3f} | {keyword:.3f} | {paraphrase:.3f} | {r1:.3f} | {mrr:.3f} |")


async def main(args) -> None:
    started = time.perf_counter()
    server = pgcluster.start() if args.postgres else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            place = Place(server, Path(tmp))
            print(f"knowledge base in {place.name}")
            rows = await indexing(place, args.mb, args.dim)
            _print_indexing(rows)
            _print_labelled(place.name, await labelled(place))
            results = []
            for target in args.sizes:
                results.append(await queries(place, target, args.dim, args.rounds))
                print(f"built and queried {results[-1]['chunks']:,} chunks", file=sys.stderr)
            _print_queries(results)
    finally:
        if server is not None:
            server.stop()
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


def cli() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="2 MB indexed; 1,000 and 10,000 chunks; 1 round")
    p.add_argument("--sizes", help="chunk counts, comma-separated (default 1000,100000)")
    p.add_argument("--mb", type=float, help="MB of synthetic text for the indexing table (default 8)")
    p.add_argument("--dim", type=int, default=768, help="embedding width (default: %(default)s, as nomic-embed-text)")
    p.add_argument("--rounds", type=int, help="times each question is asked per mode (default 3)")
    p.add_argument("--postgres", action="store_true", help="the knowledge base on PostgreSQL, not SQLite")
    args = p.parse_args()
    sizes = args.sizes or ("1000,10000" if args.quick else "1000,100000")
    args.sizes = [int(s) for s in sizes.split(",")]
    args.mb = args.mb or (2.0 if args.quick else 8.0)
    args.rounds = args.rounds or (1 if args.quick else 3)
    return args


if __name__ == "__main__":
    trio.run(main, cli())
