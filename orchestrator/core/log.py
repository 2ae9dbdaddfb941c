"""Logging through structlog: readable warnings on stderr by default, detail with --debug, JSON lines to a file.

Tracebacks are plain (never rich's show_locals, which would print API keys held in locals). Modules take their
logger from `logger`, which imports structlog (and the asyncio it loads, ~45 ms) at the first log line.
"""
from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from structlog.typing import Processor


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
        processors = shared + [structlog.processors.dict_tracebacks, structlog.processors.JSONRenderer()]
    else:
        out = sys.stderr
        processors = shared + [structlog.dev.ConsoleRenderer(
            colors=out.isatty(), exception_formatter=structlog.dev.plain_traceback)]
    structlog.configure(
        processors=processors, logger_factory=structlog.WriteLoggerFactory(file=out),
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG if debug or json_file else logging.WARNING),
        cache_logger_on_first_use=False,
    )
