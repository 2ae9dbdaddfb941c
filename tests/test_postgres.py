"""The PostgreSQL store's own parts: its explicit migrations, its refusals, and every scenario run on it.

The store's behaviour shared with SQLite is tested on both in test_store.py and test_crash.py.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio

from orchestrator.memory.knowledge import StoreKnowledgeBase
from orchestrator.store import pg_schema
from orchestrator.store.postgres import PgStore
from orchestrator.store.schema import UnusableDatabase

psycopg = pytest.importorskip("psycopg", reason="PostgreSQL lane skipped: pip install -e '.[postgres]'")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def url(pg_server, request) -> str:
    return pg_server.fresh(f"pg_{request.node.name.lower()[:40]}")


def sql(url: str, *statements: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows: list[tuple] = []
        for s in statements:
            cur = conn.execute(s)
            rows = cur.fetchall() if cur.description else []
        return rows


async def test_every_migration_step_exists():
    assert sorted(pg_schema.MIGRATIONS) == list(range(pg_schema.VERSION))


async def test_a_version_1_database_migrates_with_its_rooms(url):
    sql(url, *pg_schema.MIGRATIONS[0], "CREATE TABLE orchestrator_schema (version integer NOT NULL)",
        "INSERT INTO orchestrator_schema VALUES (1)",
        "INSERT INTO rooms VALUES ('r1', 'old', 'commander', 1.0, '{}', 0, 0)")
    store = await PgStore.open(url)
    try:
        assert [r.id for r in await store.rooms()] == ["r1"]
        assert (await store.acquire("r1", "h", 5)).epoch == 1
    finally:
        await store.close()
    assert sql(url, "SELECT version FROM orchestrator_schema") == [(pg_schema.VERSION,)]


async def test_a_version_3_database_gains_the_knowledge_base(url):
    sql(url, *[s for v in range(3) for s in pg_schema.MIGRATIONS[v]],
        "CREATE TABLE orchestrator_schema (version integer NOT NULL)", "INSERT INTO orchestrator_schema VALUES (3)",
        "INSERT INTO rooms VALUES ('r1', 'old', 'commander', 1.0, '{}', 0, 0)")
    store = await PgStore.open(url, readonly=True)
    try:  # not migrated yet: a read-only open sees an empty knowledge base, not an error
        kb = await StoreKnowledgeBase.open(store)
        assert await kb.list_documents() == [] and await kb.search("walnut") == []
    finally:
        await store.close()
    store = await PgStore.open(url)
    try:
        assert [r.id for r in await store.rooms()] == ["r1"]
        kb = await StoreKnowledgeBase.open(store)
        await kb.add_document("nuts.md", "the walnut harvest\nクルミの収穫\n")
        assert [h.path for h in await kb.search("walnuts")] == ["nuts.md"]  # stemmed
        assert [h.start for h in await kb.search("収穫")] == [1]
    finally:
        await store.close()
    assert sql(url, "SELECT version FROM orchestrator_schema") == [(pg_schema.VERSION,)]
    assert sql(url, "SELECT count(*) FROM pg_indexes WHERE indexname = 'kb_chunks_trigrams'") == [(1,)]


async def test_without_pg_trgm_space_less_scripts_are_still_found(url):
    """A user who may not create the extension (or a server without it): the migration goes on without the
    trigram index, and LIKE reads every chunk instead."""
    sql(url, "DO $$ BEGIN CREATE ROLE kb_weak LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
        "CREATE SCHEMA weak AUTHORIZATION kb_weak", f"REVOKE CREATE ON DATABASE {url.rsplit('/', 1)[1]} FROM PUBLIC")
    weak = url.replace("://orch@", "://kb_weak@") + "?options=-csearch_path%3Dweak"
    try:
        psycopg.connect(weak).close()
    except psycopg.Error as exc:
        pytest.skip(f"cannot log in as a second role on this server: {exc}")
    store = await PgStore.open(weak)
    try:
        kb = await StoreKnowledgeBase.open(store)
        await kb.add_document("ops.md", "restart it\n重启服务器的方法\nサーバーを再起動する\n")
        assert [h.path for h in await kb.search("服务器")] == ["ops.md"]
        assert [h.path for h in await kb.search("再起動")] == ["ops.md"]
    finally:
        await store.close()
    assert sql(url, "SELECT count(*) FROM pg_indexes WHERE indexname = 'kb_chunks_trigrams'") == [(0,)]
    assert sql(url, "SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'") == [(0,)]


async def test_a_version_4_database_learns_what_each_reply_answers(url):
    """4 → 5: the answers column; a reply stored before it is taken to answer everything before it."""
    sql(url, *[s for v in range(4) for s in pg_schema.MIGRATIONS[v]],
        "CREATE TABLE orchestrator_schema (version integer NOT NULL)", "INSERT INTO orchestrator_schema VALUES (4)",
        "INSERT INTO rooms VALUES ('r1', 'old', 'commander', 1.0, '{}', 3, 3.0)",
        *(f"INSERT INTO messages VALUES ('m{seq}', 'r1', {seq}, {seq}.0, '{author}', '{kind}', '[\"*\"]', '', '', "
          f"'[]', '[]', 1)" for seq, author, kind in ((1, "user", "user"), (2, "commander", "text"),
                                                      (3, "user", "user"))))
    store = await PgStore.open(url)
    try:
        assert await store.answered("r1") == {"commander": 1}
        assert [m.seq for m in await store.read("r1")] == [1, 2, 3]
    finally:
        await store.close()
    assert sql(url, "SELECT version FROM orchestrator_schema") == [(pg_schema.VERSION,)] == [(5,)]
    assert sql(url, "SELECT seq, answers FROM messages ORDER BY seq") == [(1, None), (2, 1), (3, None)]


async def test_hosts_starting_at_once_migrate_once(url):
    stores: list[PgStore] = []

    async def open_one() -> None:
        stores.append(await PgStore.open(url))

    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(open_one)
    for s in stores:
        await s.close()
    assert sql(url, "SELECT version FROM orchestrator_schema") == [(pg_schema.VERSION,)]


async def test_a_newer_database_is_refused(url):
    await (await PgStore.open(url)).close()
    sql(url, f"UPDATE orchestrator_schema SET version = {pg_schema.VERSION + 1}")
    with pytest.raises(UnusableDatabase, match="newer release"):
        await PgStore.open(url)


async def test_an_unreachable_server_is_one_line_without_the_password(pg_server):
    dead = pg_server.url.replace("orch@", "orch:secret@").rsplit(":", 1)[0] + ":1/orch"
    with pytest.raises(UnusableDatabase) as refused:
        await PgStore.open(dead)
    assert "cannot connect" in str(refused.value) and "secret" not in str(refused.value)
    assert "\n" not in str(refused.value)


def test_every_scenario_holds_on_postgresql(pg_server):
    done = subprocess.run([sys.executable, "-m", "orchestrator", "check", str(ROOT / "scenarios"),
                           "--db", pg_server.url], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " 0 failed" in done.stdout
    assert sql(pg_server.url, "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'scratch_%'") == []
