"""The OpenTelemetry bridge (the `otel` extra): our spans mirrored as SDK spans, and OTLP export.

Parents are passed explicitly and no OpenTelemetry context is ever attached, so nothing can be left
current or detached in the wrong context; the blocking OTLP exporter runs in a worker thread, in batches.
"""
from __future__ import annotations

import logging
import os
from importlib.metadata import version

import trio
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from orchestrator.core.log import logger
from orchestrator.trace.spans import Span

log = logger(__name__)

_KIND = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT, "server": SpanKind.SERVER,
         "producer": SpanKind.PRODUCER, "consumer": SpanKind.CONSUMER}
_ROOT = Context()  # an empty context: a span without our parent starts a trace, whatever is current


class OtelBridge:
    """A sink that opens an SDK span for each of ours, under the mirror of its parent, with the same ids."""

    def __init__(self, provider: trace.TracerProvider):
        self._tracer = provider.get_tracer("orchestrator", _version())

    def on_start(self, span: Span) -> None:
        parent = span.parent.bridged if span.parent is not None else None
        ctx = trace.set_span_in_context(parent, _ROOT) if parent is not None else _ROOT
        links = [Link(s.bridged.get_span_context()) for s in span.links if s.bridged is not None]
        mirror = self._tracer.start_span(span.name, context=ctx, kind=_KIND[span.kind], attributes=span.attributes,
                                         links=links, start_time=span.start_ns)
        span.bridged = mirror
        ids = mirror.get_span_context()
        if ids.is_valid:
            span.trace_id, span.span_id = ids.trace_id, ids.span_id

    def on_end(self, span: Span) -> None:
        mirror = span.bridged
        if mirror is None:
            return
        mirror.set_attributes(span.attributes)
        for ev in span.events:
            mirror.add_event(ev.name, ev.attributes, timestamp=ev.ts_ns)
        if span.status == "error":
            mirror.set_status(Status(StatusCode.ERROR, span.message))
        mirror.end(end_time=span.end_ns)


class TrioBatchProcessor(SpanProcessor):
    """Collects ended spans; `run` exports them in batches from a worker thread (no free-running thread)."""

    def __init__(self, exporter: SpanExporter, *, interval: float = 2.0, batch: int = 512):
        self.exporter, self.interval, self.batch = exporter, interval, batch
        self._queue: list[ReadableSpan] = []
        self._full = trio.Event()
        self._limiter = trio.CapacityLimiter(1)
        self.failures = 0

    def on_start(self, span, parent_context=None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if not span.context.trace_flags.sampled:
            return
        self._queue.append(span)
        if len(self._queue) >= self.batch:
            self._full.set()

    async def run(self) -> None:
        """Export every `interval` seconds, or sooner when a batch is full; cancel it, then `flush`."""
        while True:
            with trio.move_on_after(self.interval):
                await self._full.wait()
            self._full = trio.Event()
            await self.flush()

    async def flush(self) -> None:
        while self._queue:
            spans, self._queue = self._queue[:self.batch], self._queue[self.batch:]
            result = await trio.to_thread.run_sync(self.exporter.export, spans, limiter=self._limiter)
            if result.name != "SUCCESS":
                self.failures += 1
                if self.failures == 1:  # once: a collector that is down must not flood the log
                    log.warning("OTLP export failed; spans were dropped", endpoint=_endpoint(), spans=len(spans))

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # flushing needs trio: `flush` is awaited by whoever runs the processor


def otlp_provider() -> tuple[TracerProvider, TrioBatchProcessor]:
    """An SDK provider that sends to the OTLP/HTTP endpoint named by the standard environment variables."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    # It logs every retry of a collector that is down; TrioBatchProcessor says it once, in one line.
    logging.getLogger("opentelemetry.exporter.otlp").setLevel(logging.CRITICAL)
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "orchestrator"),
                                "service.version": _version()})
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)  # the session shuts it down
    processor = TrioBatchProcessor(OTLPSpanExporter())
    provider.add_span_processor(processor)
    return provider, processor


def _endpoint() -> str:
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")


def _version() -> str:
    try:
        return version("groupchat-orchestrator")
    except Exception:
        return "0"
