"""Fixtures shared by the store's tests: each runs on SQLite and, when a server can be started, PostgreSQL.

The PostgreSQL lane is one throwaway cluster per session (tests/pgcluster.py) and a fresh database per test.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import pgcluster


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pgcluster.Server]:
    if reason := pgcluster.unavailable():
        pytest.skip(reason)
    server = pgcluster.start()
    try:
        yield server
    finally:
        server.stop()


class Backend:
    """Where one test keeps its store: `target` is a path or a URL; `open()` opens it again (a new connection)."""

    def __init__(self, kind: str, target: str | Path):
        self.kind, self.target = kind, target

    async def open(self, *, readonly: bool = False):  # noqa: ANN201 (Store or PgStore)
        from orchestrator.store.backends import open_store
        return await open_store(self.target, readonly=readonly)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", tmp_path / "chat.db")
    server = request.getfixturevalue("pg_server")
    name = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:50] + f"_{id(request) % 10_000}"
    return Backend("postgres", server.fresh(name))
