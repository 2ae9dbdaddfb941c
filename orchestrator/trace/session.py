"""Turning tracing on for one CLI session: `--trace FILE.jsonl` and, with the `otel` extra, OTLP.

OTLP export starts only when `OTEL_EXPORTER_OTLP_ENDPOINT` (or its traces variant) is set; with neither,
no sink is added and every instrumented call site returns at its first check.
"""
from __future__ import annotations

import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator, Mapping

import trio

from orchestrator.core.errors import InputError
from orchestrator.core.log import logger
from orchestrator.trace.jsonl import JsonlSink
from orchestrator.trace.spans import TRACER, Sink
from orchestrator.core.extras import install_hint

log = logger(__name__)

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
MISSING_EXTRA = ("OTEL_EXPORTER_OTLP_ENDPOINT is set but the `otel` extra is not installed, so no spans are "
                 f"sent; it needs the `otel` extra: {install_hint('otel')}")


def otlp_wanted(environ: Mapping[str, str] = os.environ) -> bool:
    return any(environ.get(v) for v in ENDPOINT_VARS) and environ.get("OTEL_SDK_DISABLED", "").lower() != "true"


@asynccontextmanager
async def tracing(trace_file: Path | None, environ: Mapping[str, str] = os.environ) -> AsyncIterator[list[str]]:
    """Yields what is on (e.g. ["trace.jsonl", "otlp"]); on exit every span that ended is written or sent."""
    sinks: list[Sink] = []
    on: list[str] = []
    provider = processor = None
    if trace_file is not None:
        try:
            sinks.append(JsonlSink(trace_file))
        except OSError as exc:
            raise InputError(f"cannot write the trace file {trace_file}: {exc.strerror}") from None
        on.append(str(trace_file))
    if otlp_wanted(environ):
        try:
            from orchestrator.trace.otel import OtelBridge, otlp_provider
        except ImportError:
            log.warning(MISSING_EXTRA)
        else:
            provider, processor = otlp_provider()
            sinks.append(OtelBridge(provider))
            on.append("otlp")
    for sink in sinks:
        TRACER.add(sink)
    try:
        async with trio.open_nursery() as nursery:
            if processor is not None:
                nursery.start_soon(processor.run)
            try:
                yield on
            finally:
                nursery.cancel_scope.cancel()
    finally:
        for sink in sinks:
            TRACER.remove(sink)
        if provider is not None and processor is not None:  # both set, or neither
            with trio.CancelScope(shield=True):
                await processor.flush()
            provider.shutdown()
        for sink in sinks:
            if isinstance(sink, JsonlSink):
                sink.close()
