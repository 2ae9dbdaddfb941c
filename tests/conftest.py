"""Fixtures shared by the tests: the store's run on SQLite and, when a server can be started, PostgreSQL; the
browser tests share one way to start chromium.

The PostgreSQL lane is one throwaway cluster per session (tests/pgcluster.py) and a fresh database per test.
"""
from __future__ import annotations

import os
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


@pytest.fixture(scope="module")
def browser():  # noqa: ANN201 (Playwright's Browser, imported only where a test asks for it)
    """Debian's chromium under Playwright, one per test module (tests/test_serve_browser.py says why not
    Playwright's own browser); skips when it will not start."""
    from playwright.sync_api import Error, sync_playwright

    chromium = os.environ.get("ORCHESTRATOR_CHROMIUM", "/usr/bin/chromium")
    with sync_playwright() as p:
        try:
            b = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        except Error as exc:
            pytest.skip(f"{chromium} would not start under Playwright: {str(exc).splitlines()[0]}")
        yield b
        b.close()
