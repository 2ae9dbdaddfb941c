"""Logging through structlog: readable warnings on stderr by default, detail with --debug, JSON lines to a file.

Tracebacks are plain (never rich's show_locals, which would print API keys held in locals).
"""
from __future__ import annotations

import logging
import sys

import structlog


def configure(*, debug: bool = False, json_file: str | None = None) -> None:
    shared = [structlog.contextvars.merge_contextvars, structlog.processors.add_log_level,
              structlog.processors.TimeStamper(fmt="iso", utc=True)]
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
