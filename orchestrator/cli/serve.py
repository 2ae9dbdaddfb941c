"""`orchestrator serve`: every room of the store on a web page, the rooms and the web server in one trio
loop; its flags, the address and token it prints, and a clean stop on Ctrl-C or SIGTERM.

The pages and the API are orchestrator/web; the team and models come from chat's set-up (`load_setup`).
"""
from __future__ import annotations

import argparse
import ipaddress
import os
import secrets
import signal
import socket
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import msgspec
import trio

from orchestrator.cli.chat.command import Setup, load_setup
from orchestrator.cli.paths import default_db
from orchestrator.core.errors import InputError
from orchestrator.store.db import Store

EXTRA = "pip install 'groupchat-orchestrator[serve]'"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    s = subparsers.add_parser("serve", help="host every room of the store on a web page",
                              description="Host every room of the store in one process and show them in "
                                          "the browser: live transcript, timeline, floor, ledger and what "
                                          "each agent sees.")
    s.add_argument("--db", type=Path, default=default_db(), help="the SQLite file (default: %(default)s)")
    s.add_argument("--team", type=Path, metavar="TEAM.yaml",
                   help="the team of new rooms (default: the agents/ folder); stored rooms keep theirs")
    s.add_argument("--model", default=os.environ.get("ORCHESTRATOR_MODEL") or None, metavar="PROVIDER/MODEL",
                   help="run every agent on this model (default: $ORCHESTRATOR_MODEL)")
    s.add_argument("--scripted", type=Path, metavar="SCENARIO.yaml",
                   help="play a scenario's team and scripted models, each room from the script's start")
    s.add_argument("--workspace", type=Path, help="the agents' workspace folder for new rooms")
    s.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on (default: %(default)s, this machine only)")
    s.add_argument("--port", type=int, default=8765, help="the port (default: %(default)s; 0 picks a free one)")
    s.add_argument("--json", action="store_true", help='print {"url", "token"} as the first line, for scripts')
    s.set_defaults(fn=cmd_serve, resume=None, name=None)
    return s


async def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from hypercorn.config import Config
        from hypercorn.trio import serve

        from orchestrator.web.app import build_app
        from orchestrator.web.host import Host
    except ImportError as exc:
        missing = (exc.name or "a module").split(".")[0]
        raise InputError(f"`orchestrator serve` needs the web extra ({missing} is missing): {EXTRA}") from None
    sock = listen(args.host, args.port)
    async with AsyncExitStack() as stack:
        stack.callback(sock.close)
        db = Path(args.db)
        db.parent.mkdir(parents=True, exist_ok=True)
        store = await Store.open(db)
        stack.push_async_callback(store.close)
        setup = await load_setup(args, store, stack)
        token = secrets.token_urlsafe(24)
        port = sock.getsockname()[1]
        shown = f"[{args.host}]" if ":" in args.host else args.host
        url = f"http://{shown}:{port}/?token={token}"
        _announce(args, url, token)

        config = Config()
        config.bind = [f"fd://{sock.detach()}"]
        config.loglevel = "WARNING"
        config.graceful_timeout = 1.0
        async with trio.open_nursery() as nursery:
            host = Host(store, room_models(args, setup), nursery)
            nursery.start_soon(serve, build_app(host, token), config)
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    break
            print("stopping: every room's work is cancelled; its history is stored", file=sys.stderr)
            nursery.cancel_scope.cancel()
    return 0


def room_models(args: argparse.Namespace, setup: Setup) -> Any:
    from orchestrator.web.host import Models

    def resolver():
        if setup.replay is None:
            return setup.resolve
        own = setup.replay()  # this room's own copy of the script

        def resolve(model_string: str):
            provider, model = setup.resolve(model_string)
            return (own if provider is setup.scripted else provider), model

        return resolve

    explicit = setup.team if (args.team or args.scripted) else None
    return Models(team=explicit, new_team=setup.team, resolver=resolver, catalog=setup.models,
                  workspace=setup.workspace, mcp=setup.mcp)


def listen(host: str, port: int) -> socket.socket:
    """Bound and listening before anything prints, so the address printed is the one that works."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise InputError(f"--host {host}: {exc.strerror}") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        hint = " (another server is there: pick one with --port, or --port 0 for any)" if exc.errno == 98 else ""
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror}{hint}") from None
    sock.set_inheritable(False)
    return sock


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _announce(args: argparse.Namespace, url: str, token: str) -> None:
    if args.json:
        print(msgspec.json.encode({"url": url, "token": token}).decode(), flush=True)
    else:
        print(f"Rooms of {args.db} at {url}", flush=True)
        print("The token in the address lets a browser post, stop and answer; Ctrl-C stops the server.",
              flush=True)
    if not _loopback(args.host):
        print(f"warning: serving on {args.host}, not only this machine: anyone who can reach it and learns "
              "the token can read your rooms and post in them", file=sys.stderr, flush=True)
