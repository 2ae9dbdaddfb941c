"""Test helpers for tracing: an SDK provider with the in-memory exporter bridged to our tracer,
and span trees as nested (name, children) tuples, children in start order."""
from __future__ import annotations

import contextlib
from typing import Iterator

import pytest

from orchestrator.trace.spans import TRACER


@contextlib.contextmanager
def in_memory() -> Iterator:
    """Yields the InMemorySpanExporter that receives every span our tracer ends meanwhile."""
    pytest.importorskip("opentelemetry.sdk", reason="the `otel` extra is not installed")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from orchestrator.trace.otel import OtelBridge

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    bridge = OtelBridge(provider)
    TRACER.add(bridge)
    try:
        yield exporter
    finally:
        TRACER.remove(bridge)


def tree(spans, *, ids=lambda s: (s.context.span_id, s.parent.span_id if s.parent else None),
         name=lambda s: s.name, start=lambda s: s.start_time) -> list[tuple]:
    """Nested (name, [children]) from SDK spans (or anything, given the accessors); roots in start order."""
    by_parent: dict = {}
    for s in spans:
        by_parent.setdefault(ids(s)[1], []).append(s)
    known = {ids(s)[0] for s in spans}

    def build(s) -> tuple:
        kids = sorted(by_parent.get(ids(s)[0], []), key=start)
        return (name(s), [build(k) for k in kids])

    roots = [s for s in spans if ids(s)[1] is None or ids(s)[1] not in known]
    return [build(s) for s in sorted(roots, key=start)]


def jsonl_tree(records: list[dict]) -> list[tuple]:
    return tree(records, ids=lambda r: (r["span_id"], r["parent_id"]), name=lambda r: r["name"],
                start=lambda r: r["start"])
