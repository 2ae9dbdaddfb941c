"""The knowledge base (M4): chunking, safe full-text queries, RRF, both backends, the HTTP embedder, the
search_knowledge tool, `orchestrator kb`, and retrieval quality on the labelled set in tests/data/kb."""
from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.cli import kb as kb_cli
from orchestrator.core import errors as E
from orchestrator.core.errors import InputError
from orchestrator.core.retry import RetryPolicy
from orchestrator.memory.embeddings import HttpEmbedder, embedder_from_config
from orchestrator.memory.ingest import add_files, find_files
from orchestrator.tools.disk import CheckedDisk
from orchestrator.memory.fulltext import fts_query
from orchestrator.memory.knowledge import (
    MODES, Chunking, Fusion, KnowledgeError, MemoryKnowledgeBase, StoreKnowledgeBase, chunk_text, rrf,
)
from orchestrator.providers.config import load_config
from orchestrator.scenario.loader import load_scenario
from orchestrator.scenario.runner import run_scenario
from orchestrator.store.backends import open_store
from orchestrator.tools.base import ToolContext, ToolError
from orchestrator.tools.kb_tool import kb_tool
from orchestrator.tools.session import ToolSession
from tests.fakeserver import FakeServer, Reply, json_body
from tests.kbdata import HashEmbedder, documents, questions, recall_at

KEY = "sk-test-0123456789abcdef"


# --- chunking ----------------------------------------------------------------------------------

def test_chunks_are_line_aligned_with_five_lines_of_overlap():
    text = "".join(f"line {i}\n" for i in range(1, 101))
    chunks = chunk_text(text)
    assert [(c.start, c.end) for c in chunks] == [(1, 40), (36, 75), (71, 100)]
    lines = text.split("\n")
    for c in chunks:
        assert c.text == "\n".join(lines[c.start - 1:c.end])


def test_long_lines_end_a_chunk_at_about_1500_characters():
    text = "\n".join("x" * 99 for _ in range(100))
    chunks = chunk_text(text)
    assert all(len(c.text) <= 1500 for c in chunks)
    assert [c.end - c.start + 1 for c in chunks][:2] == [15, 15]
    assert chunks[1].start == chunks[0].end - 4  # five shared lines


def test_a_full_chunk_ends_after_a_blank_line_in_its_last_third():
    lines = [f"a{i}" for i in range(1, 60)]
    lines[32] = ""  # line 33
    chunks = chunk_text("\n".join(lines))
    assert (chunks[0].start, chunks[0].end) == (1, 33)
    assert chunks[1].start == 29


def test_a_huge_single_line_is_cut_into_pieces_that_keep_its_line_number():
    chunks = chunk_text("head\n" + "y" * 4000 + "\ntail")
    assert [(c.start, c.end, len(c.text)) for c in chunks] == [(1, 1, 4), (2, 2, 1500), (2, 2, 1500), (2, 2, 1000),
                                                                (3, 3, 4)]


def test_empty_whitespace_and_crlf_texts():
    assert chunk_text("") == []
    assert chunk_text("\n  \n\t\n") == []
    assert [(c.start, c.end, c.text) for c in chunk_text("a\r\nb\r\n")] == [(1, 2, "a\nb")]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.just(""), st.text(alphabet="ab ", max_size=120)), max_size=200),
       st.integers(2, 50), st.integers(200, 3000), st.integers(0, 10))
def test_chunking_covers_every_nonblank_line_within_its_limits(lines, max_lines, max_chars, overlap):
    spec = Chunking(max_lines=max_lines, max_chars=max_chars, overlap=overlap)
    chunks = chunk_text("\n".join(lines), spec)
    covered = {n for c in chunks for n in range(c.start, c.end + 1)}
    assert {n for n, line in enumerate(lines, 1) if line.strip()} <= covered
    for prev, c in zip(chunks, chunks[1:]):
        assert c.start >= prev.start  # progress, never backwards
        assert prev.end - c.start + 1 <= max(overlap, 1)
    for c in chunks:
        assert 1 <= c.start <= c.end <= len(lines)
        assert c.end - c.start + 1 <= max_lines
        assert len(c.text) <= max_chars


# --- full-text queries ------------------------------------------------------------------------

def _words(text: str) -> str | None:
    found = fts_query(text)
    return found.words if found else None


def test_every_term_is_quoted_and_stopwords_dropped():
    assert _words("server-sent") == '"server-sent"'
    assert _words('a & b "x" (y)') == '"b" OR """x""" OR "(y)"'
    assert _words("What is the max_inflight_requests?") == '"max_inflight_requests?"'
    assert fts_query("the of & ( ) *") is None
    assert _words("Retry retry RETRY") == '"Retry"'


def test_space_less_scripts_go_to_the_trigram_index_as_runs():
    found = fts_query("restart เซิร์ฟเวอร์ and 服务器 サーバー 서버를")
    assert found.words == '"restart"'
    assert found.dense == ("เซิร์ฟเวอร์", "服务器", "サーバー", "서버를")


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=80))
def test_no_input_breaks_an_fts5_match(text):
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE t USING fts5 (body, tokenize='porter unicode61')")
        db.execute("CREATE VIRTUAL TABLE tri USING fts5 (body, tokenize='trigram')")
        for table in ("t", "tri"):
            db.execute(f"INSERT INTO {table} VALUES ('server-sent events a & b (paren) \"quoted\" "
                       "max_inflight_requests 服务器')")
        query = fts_query(text)
        if query is not None and query.words:
            db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", [query.words]).fetchall()
        for term in query.dense if query else ():
            db.execute("SELECT rowid FROM tri WHERE tri MATCH ?", ['"' + term.replace('"', '""') + '"']).fetchall()
    finally:
        db.close()


def test_rrf_weights_ranks_and_normalises_to_first_place_everywhere():
    scores = rrf([(0.4, [1, 2]), (0.6, [2, 3])], 60)
    assert scores[2] == pytest.approx((0.4 / 62 + 0.6 / 61) / (1.0 / 61))
    assert scores[1] == pytest.approx(0.4 / 61 / (1.0 / 61))
    assert scores[3] == pytest.approx(0.6 / 62 / (1.0 / 61))
    assert rrf([(0.4, [7]), (0.6, [])], 60) == {7: 1.0}  # an empty pass does not cap the others
    assert rrf([(0.4, []), (0.6, [])], 60) == {}


# --- the backends ------------------------------------------------------------------------------

class Failing:
    model = "broken/model"

    async def embed(self, texts):
        raise E.ProviderConnectionError("connection refused", provider="broken")


def _place(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> Path | str:
    if kind == "sqlite":
        return tmp_path / "kb.db"
    name = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:50] + f"_{id(request) % 10_000}"
    return request.getfixturevalue("pg_server").fresh(name)


@pytest.fixture(params=["sqlite", "postgres"])
def stored(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where a store-backed knowledge base lives: an SQLite file, or a fresh PostgreSQL database."""
    return _place(request, tmp_path, request.param)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str | None:
    """`stored`, or None for the in-memory backend."""
    return None if request.param == "memory" else _place(request, tmp_path, request.param)


@asynccontextmanager
async def backend(where: Path | str | None, **options) -> AsyncIterator[MemoryKnowledgeBase | StoreKnowledgeBase]:
    if where is None:
        async with await MemoryKnowledgeBase.open(**options) as kb:
            yield kb
        return
    store = await open_store(where)
    try:
        yield await StoreKnowledgeBase.open(store, **options)
    finally:
        await store.close()


DOC = "\n".join(f"line {i} of the orchard manual" for i in range(1, 61)) + "\nthe word pomegranate ends it\n"


async def test_add_unchanged_replace_and_remove(where):
    emb = HashEmbedder()
    async with backend(where, embedder=emb) as kb:
        assert (await kb.add_document("orchard.md", DOC)).status == "added"
        calls = emb.calls
        again = await kb.add_document("orchard.md", DOC)
        assert (again.status, again.chunks) == ("unchanged", 2)
        assert emb.calls == calls  # no work at all: not chunked, not embedded
        [doc] = await kb.list_documents()
        assert (doc.path, doc.chunks, doc.vectors, doc.model, doc.lines) == ("orchard.md", 2, 2, emb.model, 61)

        assert [h.start for h in await kb.search("pomegranate", mode="fts")] == [36]
        changed = DOC.replace("pomegranate", "quince")
        assert (await kb.add_document("orchard.md", changed)).status == "replaced"
        assert await kb.search("pomegranate", mode="fts") == []
        assert [h.end for h in await kb.search("quince", mode="fts")] == [61]
        assert len(await kb.list_documents()) == 1

        assert await kb.remove_document("orchard.md") is True
        assert await kb.remove_document("orchard.md") is False
        assert await kb.list_documents() == []
        for mode in MODES:
            assert await kb.search("quince orchard", mode=mode) == []


async def test_vectors_added_later_for_unchanged_chunks(where):
    async with backend(where) as kb:
        await kb.add_document("orchard.md", DOC)
        with pytest.raises(KnowledgeError, match="embedding model"):
            await kb.search("orchard", mode="vector")
        kb.embedder = emb = HashEmbedder()
        r = await kb.add_document("orchard.md", DOC)
        assert (r.status, emb.texts) == ("embedded", 2)
        assert (await kb.add_document("orchard.md", DOC)).status == "unchanged"
        assert [h.start for h in await kb.search("pomegranate", k=1, mode="vector")] == [36]


async def test_hits_are_deduplicated_by_document_and_start_line(where):
    # One 5,000-character line becomes four chunks that all start on line 2.
    text = "intro\n" + ("walnut " * 700) + "\noutro"
    async with backend(where, embedder=HashEmbedder()) as kb:
        await kb.add_document("nuts.txt", text)
        for mode in MODES:
            hits = await kb.search("walnut", k=10, mode=mode)
            keys = [(h.path, h.start) for h in hits]
            assert len(keys) == len(set(keys))
            assert ("nuts.txt", 2) in keys


async def test_threshold_top_k_and_hybrid_without_a_model(where):
    async with backend(where, embedder=HashEmbedder()) as kb:
        await kb.add_document("best.md", "apple cherry\n")
        for i in range(4):
            await kb.add_document(f"apple{i}.md", f"apple {'filler ' * i}\n")
            await kb.add_document(f"cherry{i}.md", f"cherry {'other ' * i}\n")
        assert len(await kb.search("apple cherry", k=3)) == 3
        assert len(await kb.search("apple cherry", k=20)) == 9
        kb.fusion = Fusion(threshold=0.99)
        [best] = await kb.search("apple cherry", k=9)
        assert (best.path, best.score, best.fts_rank, best.vector_rank) == ("best.md", 1.0, 1, 1)
        kb.fusion = Fusion(threshold=0.0)
        kb.embedder = None
        hybrid = await kb.search("cherry", k=9)
        assert [h.path for h in hybrid] == [h.path for h in await kb.search("cherry", k=9, mode="fts")]
        assert len(hybrid) == 5 and all(h.vector_rank is None for h in hybrid)


async def test_a_failing_model_leaves_hybrid_on_keywords_and_fails_vector(where):
    async with backend(where) as kb:
        await kb.add_document("orchard.md", DOC)
        kb.embedder = Failing()
        assert [h.start for h in await kb.search("pomegranate")] == [36]
        with pytest.raises(E.ProviderConnectionError):
            await kb.search("pomegranate", mode="vector")


async def test_hostile_queries_never_break_a_search(where):
    async with backend(where, embedder=HashEmbedder()) as kb:
        await kb.add_document("sse.md", "Server-sent events: a & b (paren) \"quoted\" NEAR(x y) col:value\n")
        for q in ["server-sent", "a & b", '"unbalanced', "(paren", "NEAR(x y)", "x OR", "AND", "*", "^col:x",
                  "col:value", "it's", "-", "'", '""', "\\", "   ", "é ü ß", "\0"]:
            for mode in MODES:
                await kb.search(q, mode=mode)
        [hit] = await kb.search("server-sent", mode="fts")
        assert hit.path == "sse.md"
        await kb.add_document("nul.txt", "before\0after walnut\n")  # a NUL late in a file, or from an API caller
        [hit] = await kb.search("walnut", mode="fts")
        assert (hit.path, hit.text) == ("nul.txt", "before\ufffdafter walnut")
        assert [h.path for h in await kb.search('"quoted" (paren)', mode="fts")] == ["sse.md"]


async def test_words_match_across_case_diacritics_stems_and_identifier_parts(where):
    async with backend(where) as kb:
        await kb.add_document("notes.md", "filler\n" * 50 + "The Café settings live in ledger.flush_interval_ms "
                              "and config.toml; compaction retries twice\n")
        await kb.add_document("other.md", "nothing of the kind\n")
        for query in ["cafe", "CAFÉ", "flush_interval", "interval", "toml", "config.toml", "retry", "compacting",
                      "ledger.flush_interval_ms?"]:
            assert [(h.path, h.start) for h in await kb.search(query, mode="fts")] == [("notes.md", 36)], query
        assert await kb.search("flush_ledger", mode="fts") == []  # a phrase: its words in that order


async def test_a_second_process_sees_vectors_another_one_added(stored):
    one, two = await open_store(stored), await open_store(stored)
    try:
        a = await StoreKnowledgeBase.open(one, embedder=HashEmbedder())
        b = await StoreKnowledgeBase.open(two, embedder=HashEmbedder())
        await a.add_document("first.md", "apples and pears\n")
        assert [h.path for h in await a.search("apples", mode="vector")] == ["first.md"]  # a holds the matrix now
        await b.add_document("second.md", "quinces and medlars\n")
        assert [h.path for h in await a.search("quinces medlars", k=1, mode="vector")] == ["second.md"]
        assert await b.remove_document("first.md")
        assert "first.md" not in [h.path for h in await a.search("apples pears", mode="vector")]
    finally:
        await one.close()
        await two.close()


async def test_two_writers_adding_one_path_at_once_leave_one_copy(stored):
    one, two = await open_store(stored), await open_store(stored)
    try:
        a, b = await StoreKnowledgeBase.open(one), await StoreKnowledgeBase.open(two)
        async with trio.open_nursery() as nursery:
            for kb, fruit in ((a, "pomegranate"), (b, "quince")):
                nursery.start_soon(kb.add_document, "orchard.md", DOC.replace("pomegranate", fruit))
        [doc] = await a.list_documents()
        hits = await a.search("pomegranate quince orchard", k=10, mode="fts")
        assert doc.chunks == 2 and len(hits) == 2 and {h.path for h in hits} == {"orchard.md"}
    finally:
        await one.close()
        await two.close()


async def test_the_index_persists(stored):
    store = await open_store(stored)
    try:
        kb = await StoreKnowledgeBase.open(store, embedder=HashEmbedder())
        await kb.add_document("orchard.md", DOC)
    finally:
        await store.close()
    store = await open_store(stored)
    try:
        kb = await StoreKnowledgeBase.open(store, embedder=HashEmbedder())
        assert (await kb.add_document("orchard.md", DOC)).status == "unchanged"
        assert [h.start for h in await kb.search("pomegranate", mode="vector", k=1)] == [36]
        assert await store.rooms() == []  # the knowledge base's tables sit beside the store's own
    finally:
        await store.close()
    store = await open_store(stored, readonly=True)
    try:  # search and list open the store read-only
        kb = await StoreKnowledgeBase.open(store)
        assert [h.start for h in await kb.search("pomegranate", mode="fts")] == [36]
    finally:
        await store.close()


# --- retrieval quality on the labelled set ------------------------------------------------------

async def _run_questions(kb) -> dict[str, list[list[tuple[str, int, int]]]]:
    qs = questions()
    return {mode: [[(h.path, h.start, h.end) for h in await kb.search(q.q, k=5, mode=mode)] for q in qs]
            for mode in MODES}


async def _labelled(kb) -> None:
    for path, text in documents().items():
        await kb.add_document(path, text)


def test_the_labelled_set_is_big_enough_and_every_label_resolves():
    docs, qs = documents(), questions()  # questions() fails on a label whose text is not in its document
    assert len(docs) >= 30
    assert len(qs) >= 40
    kinds = [q.kind for q in qs]
    assert kinds.count("keyword") >= 15 and kinds.count("paraphrase") >= 15


async def test_hybrid_recall_at_5_is_at_least_the_better_single_mode(where):
    async with backend(where, embedder=HashEmbedder()) as kb:
        await _labelled(kb)
        hits = await _run_questions(kb)
    qs = questions()
    recall = {mode: recall_at(hits[mode], qs) for mode in MODES}
    assert recall["hybrid"] >= max(recall["fts"], recall["vector"]), recall
    assert recall["hybrid"] >= 0.9, recall
    assert Fusion().w_vector > Fusion().w_fts  # the semantic pass is favoured by default


async def test_both_sqlite_backends_rank_the_labelled_set_alike(tmp_path):
    async with backend(None, embedder=HashEmbedder()) as mem, \
            backend(tmp_path / "kb.db", embedder=HashEmbedder()) as disk:
        await _labelled(mem)
        await _labelled(disk)
        assert await _run_questions(mem) == await _run_questions(disk)


async def test_postgresql_ranks_the_labelled_set_as_well_as_sqlite(pg_server):
    """Its full-text ranking is its own (no bm25 in PostgreSQL), so the hits may differ; the vector pass is
    the same code on the same bytes, and in every mode as many questions must be found as on SQLite."""
    async with backend(None, embedder=HashEmbedder()) as lite, \
            backend(pg_server.fresh("kb_labelled"), embedder=HashEmbedder()) as pg:
        await _labelled(lite)
        await _labelled(pg)
        want, got = await _run_questions(lite), await _run_questions(pg)
    assert got["vector"] == want["vector"]
    qs = questions()
    for mode in MODES:
        assert recall_at(got[mode], qs) >= recall_at(want[mode], qs), mode
        for kind in ("keyword", "paraphrase"):
            mine = [i for i, q in enumerate(qs) if q.kind == kind]
            assert recall_at([got[mode][i] for i in mine], [qs[i] for i in mine]) >= \
                recall_at([want[mode][i] for i in mine], [qs[i] for i in mine]) - 1 / len(mine), (mode, kind)


# --- the HTTP embeddings client -------------------------------------------------------------------

@pytest.fixture(scope="module")
def server():
    with FakeServer() as srv:
        yield srv


@pytest.fixture
def srv(server):
    server.replies.clear()
    server.requests.clear()
    return server


def vectors(*rows, shuffle=False) -> Reply:
    data = [{"object": "embedding", "index": i, "embedding": list(r)} for i, r in enumerate(rows)]
    return json_body(200, {"object": "list", "data": data[::-1] if shuffle else data, "model": "m"})


def client(srv, **kw) -> HttpEmbedder:
    kw.setdefault("retry", RetryPolicy(attempts=3, base=0.01))
    return HttpEmbedder(base_url=srv.url + "/v1", model="nomic-embed-text", api_key=KEY, name="local/nomic-embed-text",
                        **kw)


async def test_embeddings_in_batches_in_input_order(srv):
    srv.replies.extend([vectors([1, 0], [0, 1], shuffle=True), vectors([1, 1])])
    async with client(srv, batch=2, dimensions=2) as emb:
        out = await emb.embed(["a", "b", "c"])
    assert out.dtype == np.float32 and out.tolist() == [[1, 0], [0, 1], [1, 1]]
    assert [r["json"] for r in srv.requests] == [
        {"model": "nomic-embed-text", "input": ["a", "b"], "dimensions": 2},
        {"model": "nomic-embed-text", "input": ["c"], "dimensions": 2}]
    assert srv.requests[0]["path"] == "/v1/embeddings"
    assert {k.lower(): v for k, v in srv.requests[0]["headers"].items()}["authorization"] == f"Bearer {KEY}"
    assert emb.model == "local/nomic-embed-text"


@pytest.mark.parametrize("reply, cls", [
    (json_body(401, {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}}),
     E.AuthError),
    (json_body(404, {"error": "model \"nomic-embed-text\" not found, try pulling it first"}), E.ModelNotFoundError),
    (json_body(400, {"error": {"message": "This model's maximum context length is 8192 tokens"}}),
     E.ContextOverflowError),
    (Reply(200, [b"not json"], content_type="application/json"), E.ProtocolError),
    (json_body(200, {"data": [{"embedding": [1.0], "index": 0}, {"embedding": [1.0], "index": 1}]}), E.ProtocolError),
    (json_body(200, {"data": [{"embedding": [], "index": 0}]}), E.ProtocolError),
])
async def test_embedding_errors_by_class_with_the_key_redacted(srv, reply, cls):
    srv.replies.append(reply)
    async with client(srv, retry=RetryPolicy(attempts=1)) as emb:  # a protocol error is retryable
        with pytest.raises(E.ProviderError) as info:
            await emb.embed(["only one"])
    assert type(info.value) is cls
    assert KEY not in str(info.value)


async def test_rate_limits_and_server_errors_are_retried(srv):
    srv.replies.extend([json_body(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "10"}),
                        json_body(503, {"error": "overloaded"}), vectors([0.5, 0.5])])
    async with client(srv) as emb:
        assert (await emb.embed(["x"])).tolist() == [[0.5, 0.5]]
    assert len(srv.requests) == 3


async def test_an_unreachable_endpoint_is_a_connection_error():
    sock = __import__("socket").socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    async with HttpEmbedder(base_url=f"http://127.0.0.1:{port}/v1", model="m",
                            retry=RetryPolicy(attempts=1)) as emb:
        with pytest.raises(E.ProviderConnectionError):
            await emb.embed(["x"])


async def test_knowledge_base_search_through_the_real_client(srv):
    srv.replies.extend([vectors([1, 0, 0]), vectors([0, 1, 0]), vectors([0.1, 0.9, 0])])
    async with client(srv) as emb, await MemoryKnowledgeBase.open(embedder=emb) as kb:
        await kb.add_document("a.md", "alpha\n")
        await kb.add_document("b.md", "beta\n")
        [hit] = await kb.search("second letter", k=1, mode="vector")
    assert hit.path == "b.md" and hit.similarity == pytest.approx(0.9 / np.hypot(0.1, 0.9), rel=1e-5)
    assert [r["json"]["input"] for r in srv.requests] == [["a.md\nalpha"], ["b.md\nbeta"], ["second letter"]]


def test_embedder_from_the_provider_config(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[endpoints.local]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "k-123"\n'
                   '[endpoints.claude]\nkind = "anthropic"\nbase_url = "http://127.0.0.1:9"\n')
    config = load_config({"ORCHESTRATOR_CONFIG": str(cfg)})
    emb = embedder_from_config("local/bge-m3", config)
    assert (emb.base_url, emb.model) == ("http://127.0.0.1:9/v1", "local/bge-m3")
    assert embedder_from_config("ollama/nomic-embed-text", config).base_url == "http://localhost:11434/v1"
    for bad, says in [("bge-m3", "PROVIDER/MODEL"), ("nowhere/x", "unknown provider"),
                      ("claude/x", "no embeddings API"), ("openai/text-embedding-3-small", "not configured")]:
        with pytest.raises(InputError, match=says):
            embedder_from_config(bad, config)


# --- the tool -------------------------------------------------------------------------------------

async def test_search_knowledge_tool(where, tmp_path):
    ctx = ToolContext(agent="a", call_id="c1", session=ToolSession(tmp_path))
    async with backend(where) as kb:
        tool = kb_tool(kb)
        assert tool.read_only and tool.name == "search_knowledge"
        assert set(tool.spec().input_schema["properties"]) == {"query", "k", "mode"}
        assert "empty: no documents" in await tool.run(tool.parse({"query": "x"}), ctx)
        await kb.add_document("/docs/orchard.md", DOC)
        out = await tool.run(tool.parse({"query": "pomegranate", "k": 2}), ctx)
        assert out.startswith("1 passage for 'pomegranate' (hybrid):")
        assert "[1] /docs/orchard.md lines 36-61 (score 1.00)" in out
        assert "    61\tthe word pomegranate ends it" in out
        assert "No passage matches" in await tool.run(tool.parse({"query": "zebra"}), ctx)
        for raw, says in [({"query": "  "}, "empty"), ({"query": "x", "mode": "vector"}, "embedding model")]:
            with pytest.raises(ToolError, match=says):
                await tool.run(tool.parse(raw), ctx)
        with pytest.raises(ToolError, match="k"):
            tool.parse({"query": "x", "k": 50})


async def test_agents_search_the_index_of_the_store_their_room_is_in(stored, tmp_path):
    """A room on either store gives its agents that store's knowledge base (a scripted scenario run on it)."""
    store = await open_store(stored)
    try:
        await (await StoreKnowledgeBase.open(store)).add_document("/docs/orchard.md", DOC)
    finally:
        await store.close()
    (tmp_path / "kb.yaml").write_text("""
name: kb-in-a-room
team:
  commander:
    tools: [search_knowledge]
models:
  commander:
    - call: {search_knowledge: {query: which fruit ends the manual, mode: fts}}
    - say: A pomegranate.
      sees: "61\tthe word pomegranate ends it"
turns:
  - user: Which fruit ends the orchard manual?
expect:
  transcript:
    - {from: commander, contains: pomegranate}
""")
    result = await run_scenario(load_scenario(tmp_path / "kb.yaml"), db=stored)
    assert result.check.ok and not result.failed_run, result.check.failures


# --- files and the command line ------------------------------------------------------------------

def make_tree(root: Path) -> Path:
    (root / "docs" / "sub").mkdir(parents=True)
    (root / "docs" / "guide.md").write_text("# Guide\nThe walnut setting lives here.\n")
    (root / "docs" / "sub" / "code.py").write_text("def crack_walnut():\n    return 1\n")
    (root / "docs" / "image.png").write_bytes(b"\x89PNG\0\0")
    (root / "docs" / ".hidden").mkdir()
    (root / "docs" / ".hidden" / "secret.md").write_text("walnut")
    (root / "docs" / "node_modules").mkdir()
    (root / "docs" / "node_modules" / "dep.js").write_text("walnut")
    (root / "blob.txt").write_bytes(b"abc\0def")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    return root


async def test_files_are_found_read_and_skipped_with_reasons(tmp_path):
    root = make_tree(tmp_path)
    files, problems = find_files([str(root / "docs"), str(root / "blob.txt"), str(root / "broken.pdf"),
                                  str(root / "missing.md")], disk=CheckedDisk())
    assert [f.name for f in files] == ["guide.md", "code.py", "blob.txt", "broken.pdf"]
    assert [(Path(p.path).name, p.message) for p in problems] == [("missing.md", "no such file or folder")]
    emb = HashEmbedder()
    async with await MemoryKnowledgeBase.open(embedder=emb) as kb:
        results = {Path(r.path).name: r async for r in add_files(kb, files, disk=CheckedDisk())}
        assert results["guide.md"].status == results["code.py"].status == "added"
        assert results["blob.txt"].status == "skipped" and "binary" in results["blob.txt"].message
        # Without the `docs` extra it says what to install; with it, that this file is damaged.
        assert results["broken.pdf"].status == "skipped" and results["broken.pdf"].message
        calls = emb.calls
        (root / "docs" / "guide.md").write_text("# Guide\nThe pecan setting lives here.\n")
        again = {Path(r.path).name: r.status async for r in add_files(kb, files[:2], disk=CheckedDisk())}
        assert again == {"guide.md": "replaced", "code.py": "unchanged"}
        assert emb.calls == calls + 1
        assert [h.path for h in await kb.search("crack_walnut", mode="fts")] == [str(files[1])]


async def test_docx_text_comes_through_the_file_tools_extractor(tmp_path, monkeypatch):
    docx = pytest.importorskip("docx")
    document = docx.Document()
    document.add_paragraph("The hazelnut roasting schedule")
    document.save(tmp_path / "notes.docx")
    async with await MemoryKnowledgeBase.open() as kb:
        [r] = [r async for r in add_files(kb, [tmp_path / "notes.docx"], disk=CheckedDisk())]
        assert (r.status, r.chunks) == ("added", 1)
        assert [h.path for h in await kb.search("hazelnut")] == [str(tmp_path / "notes.docx")]
        monkeypatch.setitem(__import__("sys").modules, "docx", None)  # as if the `docs` extra were missing
        (tmp_path / "notes.docx").write_bytes(b"PK\x03\x04 changed")
        [r] = [r async for r in add_files(kb, [tmp_path / "notes.docx"], disk=CheckedDisk())]
        assert r.status == "skipped" and "needs the `docs` extra: `pip install -e '.[docs]'`" in r.message


def cli_args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="orchestrator")
    kb_cli.add_parser(p.add_subparsers(dest="command", required=True))
    return p.parse_args(argv)


async def test_space_less_scripts_are_found_with_their_matching_lines(stored, tmp_path, capsys):
    (tmp_path / "ops.md").write_text("\n".join(
        ["# Operations", *[f"routine step {i}" for i in range(1, 12)],
         "วิธีรีสตาร์ทเซิร์ฟเวอร์ ใช้ systemctl", "ວິທີເປີດເຊີບເວີ", "ចាប់ផ្ដើមម៉ាស៊ីនមេឡើងវិញ",
         "ဆာဗာကို ပြန်စတင်ပါ", "重启服务器的方法", "サーバーを再起動する", "서버를 다시 시작하려면"]) + "\n")
    db = str(stored)
    args = cli_args("kb", "add", str(tmp_path / "ops.md"), "--db", db)
    assert await args.fn(args) == 0
    capsys.readouterr()
    for query, line in (("เซิร์ฟเวอร์", 13), ("ເຊີບເວີ", 14), ("ម៉ាស៊ីនមេ", 15), ("ဆာဗာ", 16), ("服务器", 17),
                        ("サーバー", 18), ("서버", 19), ("服务", 17)):
        args = cli_args("kb", "search", query, "--db", db)
        assert await args.fn(args) == 0
        out = capsys.readouterr().out
        assert f"   {line}: " in out and "routine step" not in out, (query, out)


async def test_kb_command_add_search_list_remove(stored, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ORCHESTRATOR_EMBED_MODEL", raising=False)
    root = make_tree(tmp_path)
    db = str(tmp_path / "data" / "o.db") if isinstance(stored, Path) else stored
    with pytest.raises(InputError, match="no such database" if isinstance(stored, Path) else "holds no orchestrator"):
        await kb_cli.cmd_list(cli_args("kb", "list", "--db", db))

    args = cli_args("kb", "add", str(root / "docs"), str(root / "blob.txt"), "--db", db)
    assert await args.fn(args) == 1  # blob.txt was skipped
    out = capsys.readouterr().out
    assert "added     " + str(root / "docs" / "guide.md") + " (1 chunk)" in out
    assert "\n2 added, 1 skipped\n" in out
    assert out.strip().endswith("not indexed: 1 file of types the knowledge base does not read in the folders "
                                "given (1 .png); name a text file itself to add it anyway")
    args = cli_args("kb", "add", str(root / "docs" / "sub"), "--db", db)
    assert await args.fn(args) == 0
    assert capsys.readouterr().out.strip().endswith("1 unchanged")

    args = cli_args("kb", "search", "walnut setting", "--db", db, "--json")
    assert await args.fn(args) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert hits[0]["path"] == str(root / "docs" / "guide.md") and hits[0]["fts_rank"] == 1
    args = cli_args("kb", "search", "crack_walnut", "--db", db)
    await args.fn(args)
    assert f"1. {root / 'docs' / 'sub' / 'code.py'}:1-2  score 1.00  (fts #1)" in capsys.readouterr().out
    with pytest.raises(InputError, match="pass --embed PROVIDER/MODEL .* or set ORCHESTRATOR_EMBED_MODEL"):
        args = cli_args("kb", "search", "x", "--db", db, "--mode", "vector")
        await args.fn(args)

    args = cli_args("kb", "list", "--db", db)
    await args.fn(args)
    assert capsys.readouterr().out.strip().endswith("2 documents")
    args = cli_args("kb", "remove", str(root / "docs" / "sub"), str(root / "nothing"), "--db", db)
    assert await args.fn(args) == 1
    assert capsys.readouterr().out.splitlines() == [f"removed {root / 'docs' / 'sub' / 'code.py'}",
                                                    f"not in the knowledge base: {root / 'nothing'}"]
    args = cli_args("kb", "list", "--db", db, "--json")
    await args.fn(args)
    assert [json.loads(line)["path"] for line in capsys.readouterr().out.splitlines()] == [
        str(root / "docs" / "guide.md")]


def test_kb_commands_end_to_end_on_postgresql(pg_server, tmp_path):
    """`orchestrator kb add/search/list/remove --db postgresql://…` as a user runs them, in a new process each."""
    url = pg_server.fresh("kb_cli_end_to_end")
    root = make_tree(tmp_path)

    def kb(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "orchestrator", "kb", *argv, "--db", url], capture_output=True,
                              text=True, timeout=120, env={**os.environ, "ORCHESTRATOR_EMBED_MODEL": ""})

    added = kb("add", str(root / "docs"))
    assert added.returncode == 0, added.stderr
    assert added.stdout.splitlines()[-2:] == ["2 added", "not indexed: 1 file of types the knowledge base does "
                                              "not read in the folders given (1 .png); name a text file itself to "
                                              "add it anyway"]
    found = kb("search", "crack_walnut")
    assert found.returncode == 0, found.stderr
    assert found.stdout.startswith(f"1. {root / 'docs' / 'sub' / 'code.py'}:1-2  score 1.00  (fts #1)\n")
    assert kb("add", str(root / "docs" / "guide.md")).stdout.strip().endswith("1 unchanged")
    assert kb("list").stdout.strip().endswith("2 documents")
    assert kb("remove", str(root / "docs" / "sub")).stdout == f"removed {root / 'docs' / 'sub' / 'code.py'}\n"
    assert kb("search", "crack_walnut").stdout == "no results\n"
    bad = subprocess.run([sys.executable, "-m", "orchestrator", "kb", "list", "--db",
                          url.rsplit(":", 1)[0] + ":1/orch"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "cannot connect" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
