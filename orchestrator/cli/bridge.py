"""`orchestrator bridge SOCKET`: the MCP server command an external agent runs to reach its room (internal: the
room passes it in session/new). The credential comes in the environment; all of it is in acp/relay.py."""
from __future__ import annotations

import argparse
import os


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bridge", help="the reverse bridge an external agent runs (internal)",
                       description="Relay an external agent's MCP client (stdin/stdout) to its room's bridge socket. "
                                   "The room starts it through the agent, with the credential in "
                                   "$ORCHESTRATOR_BRIDGE_TOKEN; it is not meant to be run by hand.")
    p.add_argument("socket", help="the room's bridge socket")
    p.set_defaults(fn=cmd_bridge, stdio=True)


async def cmd_bridge(args: argparse.Namespace) -> int:
    from orchestrator.acp.relay import TOKEN_ENV, relay

    return await relay(args.socket, os.environ.get(TOKEN_ENV))
