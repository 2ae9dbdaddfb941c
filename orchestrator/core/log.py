"""Logging through structlog: readable warnings on stderr by default, detail with --debug, JSON lines to a file.

Tracebacks are plain (never rich's show_locals, which would print API keys held in locals), and every value a
`${secret:NAME}` or credential `${VAR}` filled in is masked in each line, its traceback included. Modules take
their logger from `logger`, which imports structlog (and the asyncio it loads) at the first log line.
"""
from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any, TextIO

from orchestrator.core.secrets import redacted

if TYPE_CHECKING:
    from structlog.typing import EventDict, Processor


class logger:  # noqa: N801 - used as a function: log = logger(__name__)
    """structlog's logger for `name`, made when something is first logged."""

    def __init__(self, name: str | None = None):
        self._name = name
        self._log: Any = None

    def __getattr__(self, method: str) -> Any:
        if self._log is None:
            import structlog
            self._log = structlog.get_logger(self._name)
        return getattr(self._log, method)


def configure(*, debug: bool = False, json_file: str | None = None) -> None:
    import structlog

    shared: list[Processor] = [structlog.contextvars.merge_contextvars, structlog.processors.add_log_level,
              structlog.processors.TimeStamper(fmt="iso", utc=True)]
    out: TextIO
    if json_file:
        out = open(json_file, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives as long as the process
        # Frames without their locals: a local may hold a key no mask knows of.
        tracebacks = structlog.processors.ExceptionRenderer(
            structlog.tracebacks.ExceptionDictTransformer(show_locals=False))
        processors = shared + [tracebacks, _masked, structlog.processors.JSONRenderer()]
    else:
        out = sys.stderr
        # The traceback is text before the mask runs, so a secret in an exception's message is masked too.
        processors = shared + [structlog.processors.ExceptionRenderer(_plain_traceback), _masked,
                               structlog.dev.ConsoleRenderer(colors=out.isatty())]
    structlog.configure(
        processors=processors, logger_factory=structlog.WriteLoggerFactory(file=out),
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG if debug or json_file else logging.WARNING),
        cache_logger_on_first_use=False,
    )


def _masked(_logger: Any, _method: str, event: EventDict) -> EventDict:
    """The last step before a line is written: the secrets filled in so far become `[secret]`."""
    return redacted(event)


def _plain_traceback(exc_info: Any) -> str:
    import io

    import structlog

    text = io.StringIO()
    structlog.dev.plain_traceback(text, exc_info)
    return text.getvalue()
