"""`orchestrator agents check`: each external agent (an `acp:` member) of a team is started in its sandbox and
asked to initialize; it reports its name, version and capabilities, or one line saying why it would not.
`orchestrator agents prune`: the agents' private HOMEs whose room is in no database any more are removed.

Nothing is sent to the agent beyond `initialize`, so no session is opened and no model is called.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from orchestrator.core.errors import InputError
from orchestrator.cli.words import count

if TYPE_CHECKING:  # the team modules are imported by the command, not by `--help`
    from orchestrator.team.schema import Team


def _team(path: Path | None) -> Team:
    """The team of `--team` (a team file, or a scenario whose `team:` it is), else the default team."""
    from orchestrator.core.document import Document
    from orchestrator.team.loader import default_team, load_team

    if path is None:
        return default_team()
    doc = Document.read(path)
    if isinstance(doc.data, dict) and "team" in doc.data:
        from orchestrator.scenario.loader import load_scenario

        return load_scenario(path, trusted=True).team
    return load_team(path, trusted=True)


async def cmd_check(args: argparse.Namespace) -> int:
    from orchestrator.acp.member import MemberHost
    from orchestrator.room.sandboxes import sandboxes
    from orchestrator.tools.session import ToolSession

    team = _team(args.team)
    members = [a for a in team.agents if a.acp is not None]
    if not members:
        where = args.team or "the default team (agents/)"
        print(f"no external agents in {where}: give a member `acp: {{command: [...]}}` (docs: External agents)")
        return 0
    workspace = (args.workspace or Path.cwd()).expanduser().resolve()
    if not workspace.is_dir():
        raise InputError(f"--workspace {workspace} is not a folder")
    room_sandbox, own = await trio.to_thread.run_sync(sandboxes, team, workspace)
    session = ToolSession(workspace, sandbox=room_sandbox, agent_sandbox=own)
    found: dict[str, dict[str, Any]] = {}

    async def probe(name: str) -> None:
        from orchestrator.acp.client import connect

        spec = next(a for a in members if a.name == name)
        assert spec.acp is not None
        entry: dict[str, Any] = {"agent": name, "command": spec.acp.command}
        try:
            async with connect(spec.acp, MemberHost(name, session), cwd=workspace,
                               sandbox=session.sandbox_for(name)) as conn:
                info = conn.info
                entry |= {"ok": True, "name": info.name, "version": info.version,
                          "protocol_version": info.protocol_version, "load_session": info.load_session,
                          "capabilities": info.capabilities}
        except InputError as exc:  # AcpStartError: the one line that says why
            entry |= {"ok": False, "error": str(exc)}
        found[name] = entry

    async with trio.open_nursery() as nursery:
        for spec in members:
            nursery.start_soon(probe, spec.name)
    failed = 0
    for spec in members:
        entry = found[spec.name]
        failed += not entry["ok"]
        if args.json:
            print(msgspec.json.encode(entry).decode())
        elif entry["ok"]:
            caps = ", ".join(_capabilities(entry["capabilities"])) or "none"
            print(f"ok    {spec.name}: {entry['name']} {entry['version']} (ACP {entry['protocol_version']}); "
                  f"capabilities: {caps}")
        else:
            print(f"FAIL  {spec.name}: {entry['error']}")
    if not args.json:
        print(f"{len(members) - failed} of {count(len(members), 'external agent')} started")
    return 1 if failed else 0


async def cmd_prune(args: argparse.Namespace) -> int:
    from orchestrator.acp import homes

    # The folders are listed before the rooms are read: a room gets its record before any agent of it its HOME,
    # so a room started meanwhile is either read here or not listed.
    present = await trio.to_thread.run_sync(homes.rooms)
    known = await _known_rooms(args.db or [])
    gone = [r for r in present if r not in known]
    outcomes = await trio.to_thread.run_sync(lambda: homes.remove(gone, dry_run=args.dry_run))
    removed = [o for o in outcomes if not o.kept]
    for o in outcomes:
        what = f"{o.path} (a link: removed as one, what it points to untouched)" if o.link else str(o.path)
        if o.kept:
            print(f"{'FAILED' if o.failed else 'kept':<8} {what}: {o.kept}")
        else:
            print(f"{'would remove' if args.dry_run else 'removed'} {what}")
    rooms = len({o.path.relative_to(homes.root()).parts[0] for o in removed})
    total = f"{count(len(removed), 'agent HOME')} ({count(rooms, 'room')} gone from every database)"
    if not present:
        print(f"no agent HOMEs in {homes.root()}")
    elif not outcomes:
        print(f"nothing to remove in {homes.root()}: the room of each HOME there is in a database")
    elif not removed:
        print("nothing removed")
    elif args.dry_run:
        print(f"would remove {total}; run it without --dry-run to remove them")
    else:
        print(f"removed {total}")
    return 1 if any(o.failed for o in outcomes) else 0


async def _known_rooms(named: list[Path | str]) -> set[str]:
    """The ids of every room of the databases the project keeps rooms in (`rooms`' own, `mcp serve`'s) and of
    those named with --db. One that cannot be read stops the prune: its rooms' HOMEs would go with the rest."""
    from orchestrator.cli.paths import mcp_serve_db, open_db, room_dbs
    from orchestrator.store.backends import is_url

    for db in named:
        if not is_url(db) and not Path(db).exists():
            raise InputError(f"{db}: no such database; name the databases whose rooms' agents keep their HOMEs")
    serve = mcp_serve_db()
    dbs = dict.fromkeys([*room_dbs(), *([serve] if serve.exists() else []), *named])
    known: set[str] = set()
    for db in dbs:
        try:
            store = await open_db(db, create=False, readonly=True)
            try:
                known.update(r.id for r in await store.rooms())
            finally:
                await store.close()
        except InputError as exc:
            raise InputError(f"{exc}; nothing was removed, since which rooms it holds is not known") from None
        except Exception as exc:  # a broken file or a server that is down: which rooms it holds is unknown
            raise InputError(f"{db}: its rooms could not be read ({type(exc).__name__}: {exc}); nothing was "
                             f"removed (fix it, or move it out of the way)") from None
    return known


def _capabilities(caps: dict[str, Any], prefix: str = "") -> list[str]:
    """The capabilities an agent declared, flattened to the names of those it has (`promptCapabilities.image`)."""
    names: list[str] = []
    for key, value in caps.items():
        if isinstance(value, dict):
            names += _capabilities(value, f"{prefix}{key}.")
        elif value:
            names.append(f"{prefix}{key}")
    return names


def add_parser(sub: Any) -> None:
    from orchestrator.cli.paths import add_actions, database

    agents = sub.add_parser("agents", help="external agents (ACP members): check that each starts, prune their "
                                            "HOMEs")
    actions = add_actions(agents, "agents_command")
    check = actions.add_parser("check", help="start each external agent, initialize it, report what it is",
                               description="Start each `acp:` member of the team in its sandbox and ask it to "
                                           "initialize: its name, version and capabilities, or one line saying why "
                                           "not. Exit 1 if any failed.")
    check.add_argument("--team", type=Path, metavar="FILE", help="a team file, or a scenario whose team to check "
                       "(default: the agents/ folder's team)")
    check.add_argument("--workspace", type=Path, default=None,
                       help="the folder the agents start in (default: the current folder)")
    check.add_argument("--json", action="store_true", help="one JSON object per agent")
    check.set_defaults(fn=cmd_check)
    prune = actions.add_parser("prune", help="remove the private HOMEs of agents whose room is gone",
                               description="Remove each external agent's private HOME (its settings, caches and "
                                           "sessions, kept per room and member in the state folder) whose room is "
                                           "in none of the databases: the chat one, `mcp serve`'s, the kept "
                                           "scenario runs and those --db names. A HOME whose agent is running is "
                                           "kept. Links inside a HOME are removed as links, never followed.")
    prune.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    prune.add_argument("--db", type=database, action="append", metavar="DB",
                       help="also keep the HOMEs of the rooms of this SQLite file or postgresql:// database (one "
                            "`chat --db` or `serve --db` uses); may be repeated")
    prune.set_defaults(fn=cmd_prune)
