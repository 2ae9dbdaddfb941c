"""Fixtures of the live lane: one llama-server for the session, and the CLI configured to reach it.

Collected only when named (`make test-live`, `pytest tests/live`): pyproject's norecursedirs keeps it out of `pytest`.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.live import build, llama
from tests.live.lab import Lab


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[llama.Server]:
    hit = build.cached()
    if hit is None:
        pytest.skip(build.why_not_cached())
    running = llama.start(hit.server, hit.model, tmp_path_factory.mktemp("llama"))
    try:
        yield running
    finally:
        running.stop()
        print(f"\nllama-server log: {running.log}")


@pytest.fixture
def lab(server: llama.Server, tmp_path) -> Lab:
    """A fresh HOME and config per test: what one run learns never helps the next one pass."""
    return Lab(tmp_path, server.url)
