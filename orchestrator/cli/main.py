"""The `orchestrator` command: one parser over the command groups (run/check, chat, rooms/show/export,
kb, memory, tokens, models, mcp), and the one place errors become exit codes.

Exit codes: 0 ran and held, 1 an expectation failed, 2 bad input, 3 the run failed. A person
sees one or two lines per problem; tracebacks only with --debug.
"""
from __future__ import annotations

import argparse
import os
import sys

import structlog
import trio

from orchestrator.cli import kb, mcp, memory, models, rooms, run, tokens
from orchestrator.cli.chat import command as chat
from orchestrator.core.errors import InputError
from orchestrator.core.log import configure

log = structlog.get_logger(__name__)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orchestrator", description="A multi-agent group-chat orchestrator.")
    p.add_argument("--debug", action="store_true", help="detailed logs and tracebacks")
    p.add_argument("--log-json", metavar="FILE", help="write logs as JSON lines to FILE")
    sub = p.add_subparsers(dest="command", required=True)
    chat.add_parser(sub)
    run.add_parsers(sub)
    models.add_parser(sub)
    rooms.add_parsers(sub)
    for module in (tokens, kb, memory, mcp):
        module.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage line
        return 0 if exc.code == 0 else 2
    configure(debug=args.debug, json_file=args.log_json)
    try:
        return trio.run(args.fn, args)
    except BaseException as raised:  # noqa: BLE001 - sorted into exit codes below
        exc = _single(raised)
        if isinstance(exc, InputError):
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if isinstance(exc, BrokenPipeError):  # `orchestrator run --json | head`: the reader left
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        if isinstance(exc, KeyboardInterrupt):
            print("interrupted", file=sys.stderr)
            return 130
        if args.debug or not isinstance(exc, Exception):
            raise
        log.debug("crash", exc_info=True)
        print(f"error: {type(exc).__name__}: {exc} (run with --debug for details)", file=sys.stderr)
        return 3


def _single(exc: BaseException) -> BaseException:
    """The one error inside nested exception groups (trio's nurseries wrap them), if there is one."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
