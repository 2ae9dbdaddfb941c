"""`orchestrator run` (one scenario, streamed) and `orchestrator check` (every scenario, pass/fail).

Exit codes (scenario-format.md): 0 ran and held, 1 an expectation failed, 2 bad input, 3 the run failed.
"""
from __future__ import annotations

import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.core.errors import InputError

if TYPE_CHECKING:
    from orchestrator.providers.registry import Resolver

# The room, the scenario runner and the providers are imported by the commands, not by `orchestrator --help`.


async def cmd_run(args) -> int:
    from orchestrator.cli.transcript import Printer, json_out, reader_may_leave
    from orchestrator.providers.registry import Registry
    from orchestrator.scenario.loader import load_scenario
    from orchestrator.scenario.runner import run_scenario

    scn = load_scenario(args.file)
    sink = reader_may_leave(json_out if args.json else Printer())
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
            found = sorted(p.glob("*.yaml")) + sorted(p.glob("*.yml"))
            if not found:  # a wrong folder must not pass as "0 passed, 0 failed"
                raise InputError(f"{p}: no scenario files (*.yaml, *.yml) in this folder")
            files += found
        elif p.exists():
            files.append(p)
        else:
            raise InputError(f"{p}: no such file or folder")
    return files


async def cmd_check(args) -> int:
    from orchestrator.scenario.loader import load_scenario
    from orchestrator.scenario.runner import run_scenario

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


def add_parsers(sub: Any) -> None:
    r = sub.add_parser("run", help="run a scenario file and check its expectations")
    r.add_argument("file")
    r.add_argument("--json", action="store_true", help="print the event stream as JSON lines")
    r.add_argument("--model", help="run every agent on this real model (provider/model)")
    r.add_argument("--db", type=Path, help="keep the room in this SQLite file (default: a temporary one)")
    r.add_argument("--workspace", type=Path, help="the agents' workspace folder")
    r.set_defaults(fn=cmd_run)

    c = sub.add_parser("check", help="run every scenario and report pass/fail per file")
    c.add_argument("paths", nargs="+", metavar="FILE_OR_FOLDER")
    c.set_defaults(fn=cmd_check)
