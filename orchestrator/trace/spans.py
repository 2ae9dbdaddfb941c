"""Spans: a small recorder of timed, nested operations; off, and free, unless a sink listens.

The current span lives in a ContextVar that is set only around a plain `await` (`with active(span)`),
never across a `yield`: an async generator abandoned by its consumer leaves nothing current there.
"""
from __future__ import annotations

import random
import time
from contextvars import ContextVar, Token
from typing import Any, Literal, Protocol

import trio

from orchestrator.trace import semconv as sc

Kind = Literal["internal", "client", "server", "producer", "consumer"]
Attributes = dict[str, Any]

_current: ContextVar[Span | None] = ContextVar("orchestrator_span", default=None)
_ids = random.SystemRandom()


class Sink(Protocol):
    """Where spans go. `on_start` may replace the span's ids (the OpenTelemetry bridge does)."""

    def on_start(self, span: Span) -> None: ...

    def on_end(self, span: Span) -> None: ...


class SpanEvent:
    __slots__ = ("name", "ts_ns", "attributes")

    def __init__(self, name: str, ts_ns: int, attributes: Attributes):
        self.name, self.ts_ns, self.attributes = name, ts_ns, attributes


class Span:
    """One operation: started by `Tracer.start`, ended exactly once by `end` (later calls do nothing)."""

    __slots__ = ("tracer", "name", "kind", "parent", "trace_id", "span_id", "start_ns", "end_ns",
                 "status", "message", "attributes", "events", "links", "bridged")
    recording = True

    def __init__(self, tracer: Tracer, name: str, kind: Kind, parent: Span | None, attributes: Attributes,
                 links: list[Span]):
        self.tracer, self.name, self.kind, self.parent = tracer, name, kind, parent
        self.trace_id: int = parent.trace_id if parent else _ids.getrandbits(128)
        self.span_id: int = _ids.getrandbits(64)
        self.start_ns, self.end_ns = time.time_ns(), 0
        self.status: Literal["unset", "ok", "error"] = "unset"
        self.message = ""
        self.attributes = attributes
        self.events: list[SpanEvent] = []
        self.links = links
        self.bridged: Any = None  # the OpenTelemetry span that mirrors this one, when bridged

    @property
    def parent_id(self) -> int | None:
        return self.parent.span_id if self.parent else None

    @property
    def is_open(self) -> bool:
        return not self.end_ns

    def set(self, key: str, value: Any) -> None:
        self.attributes[key] = value

    def update(self, attributes: Attributes) -> None:
        self.attributes.update(attributes)

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        self.events.append(SpanEvent(name, time.time_ns(), attributes or {}))

    def end(self, error: BaseException | str | None = None) -> None:
        if self.end_ns:
            return
        self.end_ns = time.time_ns()
        if error is not None:
            self.status = "error"
            kind, self.message = _describe(error)
            self.attributes[sc.ERROR_TYPE] = kind
        for sink in self.tracer.sinks:
            sink.on_end(self)


class _Off(Span):
    """What `start` returns while nobody listens: every method does nothing."""

    __slots__ = ()
    recording = False

    def __init__(self) -> None:
        pass

    def set(self, key: str, value: Any) -> None:
        pass

    def update(self, attributes: Attributes) -> None:
        pass

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        pass

    def end(self, error: BaseException | str | None = None) -> None:
        pass


OFF = _Off()


class Tracer:
    """Starts spans for its sinks; `on` is the one check instrumented code makes before doing work."""

    def __init__(self) -> None:
        self.sinks: list[Sink] = []
        self.on = False

    def add(self, sink: Sink) -> None:
        self.sinks.append(sink)
        self.on = True

    def remove(self, sink: Sink) -> None:
        self.sinks.remove(sink)
        self.on = bool(self.sinks)

    def start(self, name: str, kind: Kind = "internal", *, parent: Span | None | Literal["current"] = "current",
              attributes: Attributes | None = None, links: list[Span] | tuple = ()) -> Span:
        """A new span under `parent` (the current span unless given; None starts a new trace)."""
        if not self.on:
            return OFF
        if parent == "current":
            parent = _current.get()
        if parent is not None and not parent.recording:
            parent = None
        attrs = dict(attributes or ())
        if parent is not None and sc.CONVERSATION_ID in parent.attributes:
            attrs.setdefault(sc.CONVERSATION_ID, parent.attributes[sc.CONVERSATION_ID])
        span = Span(self, name, kind, parent, attrs, [s for s in links if s.recording])
        for sink in self.sinks:
            sink.on_start(span)
        return span


TRACER = Tracer()


def current() -> Span | None:
    return _current.get()


def root(span: Span | None) -> Span | None:
    """The first span of `span`'s trace that we recorded (for a room: the user line's)."""
    while span is not None and span.parent is not None:
        span = span.parent
    return span


class active:
    """`with active(span):` makes `span` current for the block; the block must not `yield`."""

    __slots__ = ("span", "token")

    def __init__(self, span: Span):
        self.span = span
        self.token: Token[Span | None] | None = None

    def __enter__(self) -> Span:
        if self.span.recording:
            self.token = _current.set(self.span)
        return self.span

    def __exit__(self, *exc) -> None:
        if self.token is not None:
            _current.reset(self.token)


def _describe(error: BaseException | str) -> tuple[str, str]:
    if isinstance(error, str):
        return "error", error
    if isinstance(error, trio.Cancelled):
        return "cancelled", "cancelled: the group was stopped"
    if isinstance(error, GeneratorExit):
        return "abandoned", "abandoned: the consumer stopped reading"
    return getattr(error, "kind", None) or type(error).__name__, str(error)[:300]
