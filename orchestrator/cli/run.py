"""`orchestrator run` (one scenario, streamed), `orchestrator check` (every scenario, pass/fail) and
`orchestrator scenarios` (the shipped ones, which the other two also take by name).

Exit codes (scenario-format.md): 0 ran and held, 1 an expectation failed, 2 bad input, 3 the run failed.
"""
from __future__ import annotations

import json
import shutil
import sys
import textwrap
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from orchestrator.cli.paths import add_all_flag, database, new_run_db, old_run_dbs, user_file
from orchestrator.core.errors import InputError
from orchestrator.scenario.shipped import describe, find_scenario, shipped

if TYPE_CHECKING:
    from orchestrator.providers.registry import Resolver

# The room, the scenario runner and the providers are imported by the commands, not by `orchestrator --help`.


async def cmd_run(args) -> int:
    from orchestrator.acp import homes
    from orchestrator.cli.transcript import Printer, json_out, reader_may_leave
    from orchestrator.providers.registry import Registry
    from orchestrator.scenario.loader import load_scenario
    from orchestrator.scenario.runner import run_scenario
    from orchestrator.store.usage import summary
    from orchestrator.trace.session import tracing

    path = find_scenario(args.file, folder_hint=f"`orchestrator check {args.file}` runs every scenario in it")
    scn = load_scenario(path, trusted=True)  # the file the user named
    if args.evolve:
        scn = msgspec.structs.replace(scn, team=msgspec.structs.replace(scn.team, evolve=scn.team.evolve or True))
    _warn(args, path, scn)
    printer = None if args.json else Printer(everything=args.all)
    if printer is not None:
        args.interrupted = lambda: printer.interrupted(args.db)
    sink = reader_may_leave(printer or json_out)
    real = [a.model for a in (scn.team.commander, *scn.team.agents) if a.model not in ("scripted", "")]
    async with AsyncExitStack() as stack:
        model: Resolver | None = None
        models = prices = config = None
        if args.model or real:
            registry = await stack.enter_async_context(await trio.to_thread.run_sync(Registry.load))
            if args.model:
                model = registry.forcing(args.model)
            else:
                for name in real:
                    registry.resolve(name)  # a missing key is bad input, found before any room exists
                model = registry
            models, prices, config = registry.windows(args.model), registry.catalog.price, registry.config
        await stack.enter_async_context(tracing(args.trace))
        if not args.db:  # the oldest kept runs are removed for this one: their rooms' agents' HOMEs first
            await homes.forget_dbs(old_run_dbs())
        db = args.db or new_run_db(scn.name)
        result = await run_scenario(scn, db=db, workspace=args.workspace, model=model, on_event=sink,
                                    models=models, prices=prices, config=config)
    if not args.json:
        show = f"orchestrator show {result.room_id}" + (f" --db {args.db}" if args.db else "")
        print(f"(the room is kept: `{show}` prints it again)")
    # the last line: what the run spent (the JSON stream carries every `usage` event already)
    print(summary(result.usage), file=sys.stderr if args.json else sys.stdout)
    if result.failed_run:
        return 3
    return 0 if result.check.ok else 1


def _warn(args, path: Path, scn) -> None:
    """What the user chose that reaches beyond the usual, said on stderr before the room starts: a
    workspace that is the home folder (or /, or a system folder), and what the scenario lets commands do."""
    from orchestrator.team.trust import unsafe_workspace, widening

    workspace = args.workspace.expanduser().resolve() if args.workspace else None
    if workspace is not None and (why := unsafe_workspace(workspace)):
        print(f"warning: the workspace {workspace} is {why}: agents may change any file in it "
              "(startup files, git and app settings)", file=sys.stderr)
    if sets := widening(scn.team, workspace):
        print(f"{path} widens the shell sandbox: {sets}", file=sys.stderr)


def _postgres(text: str) -> str:
    if not isinstance(database(text), str):
        raise ValueError(text)
    return text


def _scenario_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob("*.yaml")) + sorted(p.glob("*.yml"))
            if not found:  # a wrong folder must not pass as "0 passed, 0 failed"
                raise InputError(f"{p}: no scenario files (*.yaml, *.yml) in this folder")
            files += found
        else:
            files.append(find_scenario(p))
    return files


async def cmd_scenarios(args) -> int:
    width = max(shutil.get_terminal_size().columns, 40)
    for name, path in shipped().items():
        if args.json:
            print(json.dumps({"name": name, "description": describe(path), "path": str(path)}))
        else:
            text = textwrap.fill(describe(path) or "-", width, initial_indent=f"{name:<22} ",
                                 subsequent_indent=" " * 23, break_on_hyphens=False)
            print(text)
    if not args.json:
        print("\nPlay one with `orchestrator run NAME`, or talk to its team: `orchestrator chat --scripted NAME`.")
    return 0


async def cmd_check(args) -> int:
    from orchestrator.acp import homes
    from orchestrator.scenario.loader import load_scenario
    from orchestrator.scenario.runner import run_scenario

    if not args.paths and not args.shipped:
        raise InputError("name the scenarios to check (files, folders or shipped names), or pass --shipped for "
                         "every shipped one")
    passed = failed = bad = skipped = 0
    names: dict[tuple[Path, str], Path] = {}
    files = _scenario_files(args.paths) + (list(shipped().values()) if args.shipped else [])
    for path in files:
        start = time.perf_counter()
        try:
            scn = load_scenario(path, trusted=True)  # the file the user named
            key = (path.parent.resolve(), scn.name)
            if key in names:
                raise InputError(f"{path}:1: name {scn.name!r} is already used by {names[key]}")
            names[key] = path
            if missing := _missing_extra(scn):
                skipped += 1
                print(f"SKIP  {scn.name} ({path}): {missing}")
                continue
            if args.db is None:
                result = await run_scenario(scn)
            else:
                from orchestrator.store.postgres import scratch
                async with scratch(args.db, scn.name) as db:
                    try:
                        # run_scenario's `db: Path | None` (scenario/runner.py) omits the URL it opens as well.
                        result = await run_scenario(scn, db=db)
                    finally:  # the schema is dropped: its rooms' agents' HOMEs go first
                        await homes.forget_dbs([db])
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
    print(f"{passed} passed, {failed + bad} failed" + (f", {skipped} skipped (an extra is missing)" if skipped else ""))
    return 2 if bad else (1 if failed else 0)


def _missing_extra(scn: Any) -> str:
    """Why this environment cannot play the scenario, "" when it can: an extra it needs is not installed."""
    import importlib.util

    from orchestrator.core.extras import install_hint

    if scn.team.mcp_servers and importlib.util.find_spec("mcp") is None:
        return f"its team's MCP servers need the `mcp` extra: {install_hint('mcp')}"
    if any(a.acp is not None for a in scn.team.agents) and importlib.util.find_spec("acp") is None:
        return ("its external agents are the ACP SDK's test agent, which needs `agent-client-protocol` "
                "(`pip install agent-client-protocol`, or the dev extra)")
    return ""


def add_parsers(sub: Any) -> None:
    r = sub.add_parser("run", help="play a scenario and check its expectations",
                       description="Play a scenario (a file, or a shipped one by name: `orchestrator scenarios` "
                                   "lists them), print its transcript, then check its expectations. Exit codes: "
                                   "0 held, 1 an expectation failed, 2 bad input, 3 the run failed.")
    r.add_argument("file", metavar="SCENARIO", help="a scenario file, or a shipped scenario's name")
    r.add_argument("--json", action="store_true", help="print the event stream as JSON lines")
    add_all_flag(r)
    r.add_argument("--model", help="run every agent on this real model (provider/model)")
    r.add_argument("--db", type=database, help="keep the room in this SQLite file or postgresql:// database "
                   "(default: a new file among the kept runs, which `orchestrator rooms` lists)")
    r.add_argument("--workspace", type=Path, help="the agents' workspace folder (default: the scenario's "
                                                  "`workspace:`, else a temporary one)")
    r.add_argument("--trace", type=user_file, metavar="FILE.jsonl",
                   help="write a span (OpenTelemetry GenAI names) per line, agent turn, model call and tool run "
                        "to this file")
    r.add_argument("--evolve", action="store_true", help="turn on the self-improvement pass (as `evolve: true`)")
    r.set_defaults(fn=cmd_run, paints=True)

    c = sub.add_parser("check", help="play scenarios and report pass/fail for each",
                       description="Play every scenario given (files, folders of them, or shipped scenarios by "
                                   "name) on its scripted models and report PASS or FAIL for each. Exit codes: "
                                   "0 all held, 1 one failed, 2 a file is not a valid scenario.")
    c.add_argument("paths", nargs="*", metavar="SCENARIO_OR_FOLDER")
    c.add_argument("--shipped", action="store_true", help="also check every shipped scenario (`orchestrator "
                   "scenarios` lists them); one that needs an extra this environment lacks is skipped, saying which")
    c.add_argument("--db", type=_postgres, help="run every scenario on this PostgreSQL server (postgresql://…), "
                   "each in a schema of its own that is dropped afterwards (default: a temporary SQLite file each)")
    c.set_defaults(fn=cmd_check)

    s = sub.add_parser("scenarios", help="list the shipped scenarios",
                       description="The scenarios that ship with orchestrator, by name, with their descriptions; "
                                   "`run`, `check` and `chat --scripted` take these names from any folder.")
    s.add_argument("--json", action="store_true", help="one JSON object per scenario")
    s.set_defaults(fn=cmd_scenarios)
