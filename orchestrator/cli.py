"""The `orchestrator` command: run, check, models, rooms, show and export (scenario-format.md).

Exit codes: 0 ran and held, 1 an expectation failed, 2 bad input, 3 the run failed. A person
sees one or two lines per problem; tracebacks only with --debug.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Callable

import msgspec
import structlog
import trio

from orchestrator import kb_cli, memory_cli, shell, tokens_cli
from orchestrator.core.errors import InputError
from orchestrator.core.events import EVENT_ENCODER, Event, message_event
from orchestrator.core.log import configure
from orchestrator.providers.config import VENDORS
from orchestrator.providers.registry import Registry, Resolver
from orchestrator.scenario.loader import load_scenario
from orchestrator.scenario.runner import run_scenario
from orchestrator.store.db import Store
from orchestrator.store.export import to_markdown
from orchestrator.transcript import Printer

log = structlog.get_logger(__name__)


def default_db() -> Path:
    if env := os.environ.get("ORCHESTRATOR_DB"):
        return Path(env)
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "orchestrator" / "orchestrator.db"


def _json_out(ev: Event) -> None:
    sys.stdout.buffer.write(EVENT_ENCODER.encode(ev) + b"\n")
    sys.stdout.buffer.flush()


def _reader_may_leave(sink: Callable[[Event], None]) -> Callable[[Event], None]:
    """`orchestrator run --json | head`: once the reader has gone, the run finishes quietly."""
    def write(ev: Event) -> None:
        try:
            sink(ev)
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    return write


async def cmd_run(args) -> int:
    scn = load_scenario(args.file)
    sink = _reader_may_leave(_json_out if args.json else Printer())
    real = [a.model for a in (scn.team.commander, *scn.team.agents) if a.model not in ("scripted", "")]
    async with AsyncExitStack() as stack:
        model: Resolver | None = None
        models = None
        if args.model or real:
            registry = await stack.enter_async_context(Registry.load())
            if args.model:
                model = registry.forcing(args.model)
            else:
                for name in real:
                    registry.resolve(name)  # a missing key is bad input, found before any room exists
                model = registry
            models = registry.windows(args.model)
        result = await run_scenario(scn, db=args.db, workspace=args.workspace, model=model, on_event=sink,
                                    models=models)
    if result.failed_run:
        return 3
    return 0 if result.check.ok else 1


def _scenario_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(p.glob("*.yaml")) + sorted(p.glob("*.yml"))
        elif p.exists():
            files.append(p)
        else:
            raise InputError(f"{p}: no such file or folder")
    return files


async def cmd_check(args) -> int:
    passed = failed = bad = 0
    names: dict[tuple[Path, str], Path] = {}
    for path in _scenario_files(args.paths):
        start = time.perf_counter()
        try:
            scn = load_scenario(path)
            key = (path.parent.resolve(), scn.name)
            if key in names:
                raise InputError(f"{path}:1: name {scn.name!r} is already used by {names[key]}")
            names[key] = path
            result = await run_scenario(scn)
        except InputError as exc:
            bad += 1
            print(f"BAD   {path}: {exc}")
            continue
        took = time.perf_counter() - start
        if result.check.ok and not result.failed_run:
            passed += 1
            print(f"PASS  {scn.name} ({path}) {took:.2f}s")
        else:
            failed += 1
            print(f"FAIL  {scn.name} ({path}) {took:.2f}s")
            for f in result.check.failures:
                print(f"      - {f}")
    print(f"{passed} passed, {failed + bad} failed")
    return 2 if bad else (1 if failed else 0)


async def _open_store(db: Path) -> Store:
    if not db.exists():
        raise InputError(f"{db}: no such database; pass --db PATH or set ORCHESTRATOR_DB")
    return await Store.open(db)


async def cmd_rooms(args) -> int:
    store = await _open_store(args.db)
    try:
        rooms = await store.rooms()
    finally:
        await store.close()
    for r in rooms:
        if args.json:
            print(msgspec.json.encode({"id": r.id, "name": r.name, "floor": r.floor, "messages": r.messages}).decode())
        else:
            print(f"{r.id}  {r.name:<24} floor={r.floor:<12} {r.messages} messages")
    return 0


async def _load(args):
    store = await _open_store(args.db)
    try:
        record = await store.room(args.room)
        if record is None:
            raise InputError(f"no room {args.room!r} in {args.db}; `orchestrator rooms --db {args.db}` lists them")
        return record, await store.load(record.id)
    finally:
        await store.close()


async def cmd_show(args) -> int:
    record, messages = await _load(args)
    sink = _reader_may_leave(_json_out if args.json else Printer())
    for m in messages:
        sink(message_event(m))
    if not args.json:
        print(f"* floor: {record.floor}")
    return 0


async def cmd_export(args) -> int:
    record, messages = await _load(args)
    if args.format == "jsonl":
        for m in messages:
            _reader_may_leave(_json_out)(message_event(m))
    else:
        sys.stdout.write(to_markdown(record, messages))
    return 0


_PROTOCOL = {"openai": "OpenAI-compatible", "anthropic": "Anthropic messages"}


async def cmd_models(args) -> int:
    """Every provider and endpoint, its candidates (keys masked) checked at once, and what to set."""
    async with Registry.load() as registry:
        checks = await registry.check(timeout=args.timeout)
    for c in checks:
        if args.json:
            print(msgspec.json.encode(c).decode())
            continue
        if not c.configured:
            print(c.hint)
            continue
        endpoint = "" if c.name in VENDORS else ", endpoint"
        print(f"{c.name} ({_PROTOCOL[c.kind]}{endpoint})")
        for cand in c.candidates:
            state = "ok     " if cand.ok else "FAILED "
            problem = f" — {cand.error_class}: {cand.error}" if not cand.ok else ""
            print(f"  {state} {cand.key} at {cand.base_url}{problem}")
        if c.hint:
            print(f"  {c.hint}")
    # Only what the user set up counts as a failure: an absent default Ollama is information.
    return 1 if any(not cand.ok for c in checks if c.explicit for cand in c.candidates) else 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orchestrator", description="A multi-agent group-chat orchestrator.")
    p.add_argument("--debug", action="store_true", help="detailed logs and tracebacks")
    p.add_argument("--log-json", metavar="FILE", help="write logs as JSON lines to FILE")
    sub = p.add_subparsers(dest="command", required=True)
    shell.add_parser(sub)

    r = sub.add_parser("run", help="run a scenario file and check its expectations")
    r.add_argument("file")
    r.add_argument("--json", action="store_true", help="print the event stream as JSON lines")
    r.add_argument("--model", help="run every agent on this real model (provider/model)")
    r.add_argument("--db", type=Path, help="keep the room in this SQLite file (default: a temporary one)")
    r.add_argument("--workspace", type=Path, help="the agents' workspace folder")
    r.set_defaults(fn=cmd_run)

    m = sub.add_parser("models", help="list configured providers and endpoints and check their keys")
    m.add_argument("--json", action="store_true", help="one JSON object per provider")
    m.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each check (default: %(default)s)")
    m.set_defaults(fn=cmd_models)

    c = sub.add_parser("check", help="run every scenario and report pass/fail per file")
    c.add_argument("paths", nargs="+", metavar="FILE_OR_FOLDER")
    c.set_defaults(fn=cmd_check)

    for name, fn, help_ in (("rooms", cmd_rooms, "list stored rooms"),
                            ("show", cmd_show, "print a stored room's transcript (healing it)"),
                            ("export", cmd_export, "write a stored room's transcript")):
        s = sub.add_parser(name, help=help_)
        if name != "rooms":
            s.add_argument("room", help="room id (or a unique prefix, or its name)")
        s.add_argument("--db", type=Path, default=default_db(), help="the SQLite file (default: %(default)s)")
        if name == "export":
            s.add_argument("--format", choices=["jsonl", "md"], default="md")
        else:
            s.add_argument("--json", action="store_true")
        s.set_defaults(fn=fn)
    for module in (tokens_cli, kb_cli, memory_cli):
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
