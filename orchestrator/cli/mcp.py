"""`orchestrator mcp list` (each configured MCP server: does it start, its tools and their annotations)
and `orchestrator mcp serve` (the team as an MCP server over stdio; mcp_serve.py holds it)."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import msgspec
import trio

from orchestrator.cli.paths import add_actions, add_trust_flag, database, mcp_serve_db
from orchestrator.core.errors import InputError
from orchestrator.mcplink.config import ServerConfig, configured
from orchestrator.core.extras import install_hint


def _servers(team_file: Path | None) -> dict[str, ServerConfig]:
    from orchestrator.team.loader import default_team, load_team

    team = load_team(team_file, trusted=True) if team_file else default_team()
    return {**configured(os.environ), **team.mcp_servers}


def _need_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise InputError(f"MCP support needs the `mcp` extra: {install_hint('mcp')}") from None


async def cmd_list(args: argparse.Namespace) -> int:
    servers = _servers(args.team)
    if not servers:
        print("no MCP servers configured: add `mcp_servers:` to a team file or [mcp_servers.NAME] to config.toml")
        return 0
    _need_sdk()
    from orchestrator.mcplink.servers import ServerUnavailable, default_log_dir, open_hub

    found: dict[str, dict[str, Any]] = {}

    async def probe(name: str, cfg: ServerConfig) -> None:
        entry: dict[str, Any] = {"server": name, "transport": "http" if cfg.url else "stdio", "target": cfg.shown()}
        try:
            tools = await hub.connection(name, cfg).tools()
        except ServerUnavailable as exc:
            entry |= {"starts": False, "error": str(exc)}
        else:
            entry |= {"starts": True, "tools": [
                {"name": t.name, "description": t.description, "annotations": t.annotations,
                 "approval": cfg.policy(t.name)} for t in tools]}
        found[name] = entry

    async with open_hub(default_log_dir()) as hub, trio.open_nursery() as nursery:
        for name, cfg in servers.items():
            nursery.start_soon(probe, name, cfg)
    for name in servers:
        entry = found[name]
        if args.json:
            print(msgspec.json.encode(entry).decode())
            continue
        print(f"{name}  ({entry['transport']}: {entry['target']})")
        if not entry["starts"]:
            print(f"  does not start: {entry['error']}")
            continue
        for t in entry["tools"]:
            notes = ", ".join(f"{k}={v}" for k, v in t["annotations"].items() if k.endswith("Hint"))
            print(f"  mcp__{name}__{t['name']}  approval={t['approval']}" + (f"  [{notes}]" if notes else ""))
            if t["description"]:
                print(f"      {t['description'].strip().splitlines()[0][:100]}")
    return 1 if any(not entry["starts"] for entry in found.values()) else 0  # as `models` when a key fails


async def cmd_serve(args: argparse.Namespace) -> int:
    _need_sdk()
    from orchestrator.cli.chat.command import load_setup
    from orchestrator.cli.mcp_serve import serve

    args.name, args.resume = None, None
    return await serve(args, load_setup)


def add_parser(sub: Any) -> None:
    m = sub.add_parser("mcp", help="MCP: list the configured servers, or serve the team as an MCP server")
    verbs = add_actions(m, "mcp_command")
    ls = verbs.add_parser("list", help="each configured MCP server: whether it starts, its tools, their annotations",
                          description="Start each configured MCP server (config.toml's and the team's) and print "
                                      "whether it starts (or why not), its tools, their annotations and approval. "
                                      "Exit code 1 when a server does not start.")
    ls.add_argument("--team", type=Path, help="a team file whose mcp_servers to list (besides config.toml's)")
    ls.add_argument("--json", action="store_true", help="one JSON object per server")
    ls.set_defaults(fn=cmd_list)
    s = verbs.add_parser("serve", help="serve the team over stdio as an MCP server (ask_team, list_rooms, "
                                       "read_room)")
    s.add_argument("--team", type=Path, help="a team file (default: the agents/ folder's team if you trust it, "
                                             "see --trust, else the shipped team)")
    s.add_argument("--model", default=os.environ.get("ORCHESTRATOR_MODEL") or None, metavar="PROVIDER/MODEL",
                   help="run every agent on this model (default: $ORCHESTRATOR_MODEL)")
    s.add_argument("--scripted", type=Path, metavar="SCENARIO.yaml",
                   help="play a scenario's team and scripted models instead of a real model")
    s.add_argument("--db", type=database, default=mcp_serve_db(),
                   help="the SQLite file or postgresql:// URL (default: %(default)s, a database of its own: any MCP "
                        "client can read every room in it, so pass chat's database only to share those rooms)")
    s.add_argument("--workspace", type=Path, help="the agents' workspace folder (default: a folder of the "
                                                  "server's own, workspaces/mcp-serve in the data folder; never the "
                                                  "current folder, which a desktop client may set to / or home)")
    add_trust_flag(s)
    s.set_defaults(fn=cmd_serve, own_workspace="mcp-serve", stdio=True)
