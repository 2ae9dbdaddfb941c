"""`orchestrator serve`: every room of the store on a web page; its flags, the address and token it prints,
and a clean stop on Ctrl-C or SIGTERM. `--workers N` runs N worker processes over one database, each with
the rooms and the web server in one trio loop, the rooms spread over them by lease (room/leased.py).

The workers share the one listening socket this process opened (inherited, not SO_REUSEPORT): a worker that
dies takes no queued connection with it, --port 0 is known before anything starts, and the printed address is
the one every worker serves. This process only supervises: it replaces a worker killed by a signal (its rooms
move to the others once their leases run out) and stops them all on Ctrl-C or SIGTERM.

Each worker learns the token through a pipe it inherits (--token-fd), read once at its start and closed: never
through its environment or command line, which its children and `ps` could see. The token is new each start
unless `[serve] token_file` in the config file names a file of the user's alone that keeps it.

Each worker also listens on a Unix socket of its own in a folder this process makes for them (--peers, mode
0700, removed at the end), so that a request for a room another worker runs is answered by that worker
(web/peers.py): the browser never notices which worker its connection landed on.

The pages and the API are orchestrator/web; the team, models and workspace come from chat's set-up
(`load_setup`), the workspace being a folder of the server's own unless --workspace names one.
"""
from __future__ import annotations

import argparse
import ipaddress
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Mapping

import msgspec
import trio

from orchestrator.cli.chat.command import Setup, load_setup
from orchestrator.cli.paths import add_trust_flag, database, default_db, open_db
from orchestrator.core.errors import InputError
from orchestrator.store.backends import is_url
from orchestrator.store.lease import LEASE_SECONDS
from orchestrator.store.postgres import shown
from orchestrator.core.extras import install_hint

EXTRA = install_hint("serve")
STOP_WAIT = 15.0  # seconds workers get to stop before they are killed


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    s = subparsers.add_parser("serve", help="host every room of the store on a web page",
                              description="Host every room of the store, spread over --workers processes, and "
                                          "show them in the browser: live transcript, timeline, floor, ledger and what "
                                          "each agent sees.")
    s.add_argument("--db", type=database, default=default_db(),
                   help="the SQLite file or postgresql:// URL (default: %(default)s)")
    s.add_argument("--workers", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="worker processes over the one database, rooms spread over them (default: the number of "
                        "cores, %(default)s); 1 runs everything in this process")
    s.add_argument("--lease", type=float, default=LEASE_SECONDS, metavar="SECONDS",
                   help="how long a dead worker's rooms wait before another takes them (default: %(default)s)")
    s.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # a worker: the listening socket's descriptor
    s.add_argument("--token-fd", type=int, help=argparse.SUPPRESS)  # a worker: the pipe the token comes through
    s.add_argument("--peers", type=Path, help=argparse.SUPPRESS)  # a worker: the folder of the workers' sockets
    s.add_argument("--team", type=Path, metavar="TEAM.yaml",
                   help="the team of new rooms (default: the agents/ folder if you trust it, see --trust, else "
                        "the shipped team); stored rooms keep theirs")
    s.add_argument("--model", default=os.environ.get("ORCHESTRATOR_MODEL") or None, metavar="PROVIDER/MODEL",
                   help="run every agent on this model (default: $ORCHESTRATOR_MODEL)")
    s.add_argument("--scripted", type=Path, metavar="SCENARIO.yaml",
                   help="play a scenario's team and scripted models, each room from the script's start")
    s.add_argument("--workspace", type=Path, help="the agents' workspace folder for new rooms (default: a folder "
                                                  "of the server's own, workspaces/serve in the data folder; never "
                                                  "the current folder)")
    add_trust_flag(s)
    s.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on (default: %(default)s, this machine only)")
    s.add_argument("--port", type=int, default=8765, help="the port (default: %(default)s; 0 picks a free one)")
    s.add_argument("--json", action="store_true",
                   help='print {"url", "token"} as the first line, for scripts (the url carries the token in its '
                        '#token= fragment, for a browser; scripts send `Authorization: Bearer TOKEN`)')
    s.set_defaults(fn=cmd_serve, resume=None, name=None, own_workspace="serve")
    return s


async def cmd_serve(args: argparse.Namespace) -> int:
    try:
        import hypercorn.trio  # noqa: F401 (checked here, used by each worker)
        import starlette  # noqa: F401
    except ImportError as exc:
        missing = (exc.name or "a module").split(".")[0]
        raise InputError(f"`orchestrator serve` needs the `serve` extra ({missing} is missing): {EXTRA}") from None
    if args.worker is not None:
        return await _work(args, socket.socket(fileno=args.worker), _read_token(args.token_fd), announce=None)
    if args.workers < 1:
        raise InputError(f"--workers {args.workers}: give 1 or more")
    if args.lease <= 0:
        raise InputError(f"--lease {args.lease}: give a number of seconds above 0")
    token, kept = server_token(os.environ)
    sock = listen(args.host, args.port)
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    # In the fragment: a browser never sends it to a server (this one or another) nor puts it in a Referer.
    url = f"http://{shown}:{port}/#token={token}"
    if args.workers == 1:
        return await _work(args, sock, token, announce=lambda workspace: _announce(args, url, token, workspace, kept))
    try:
        await (await open_db(args.db)).close()  # created or migrated once, and a bad --db said in one line, here
        _announce(args, url, token, await _check_start(args), kept)
        return await _supervise(args, sock, token)
    finally:
        sock.close()


async def _work(args: argparse.Namespace, sock: socket.socket, token: str, announce) -> int:
    """One worker: its own connection to the store, the rooms it leases and the web server on the shared
    socket, until SIGINT or SIGTERM. `announce(workspace)` (None in a worker process) prints the address once
    ready."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from orchestrator.web.app import build_app
    from orchestrator.web.guard import Hosts
    from orchestrator.web.host import Host
    from orchestrator.web.peers import Peers

    name = f"{socket.gethostname()}:{os.getpid()}"  # this worker in the rooms' leases
    async with AsyncExitStack() as stack:
        stack.callback(sock.close)
        peers = Peers.joined(args.peers, name) if args.peers else None
        private = None
        if peers is not None:  # listening before any room is leased here, so no request for one finds it shut
            private = peers.listen()
            stack.callback(peers.close)
            stack.callback(private.close)
        bound, port = sock.getsockname()[:2]
        hosts = Hosts.bound(args.host, port, bound)
        store = await open_db(args.db)
        stack.push_async_callback(store.close)
        setup = await load_setup(args, store, stack)
        if announce:
            announce(setup.workspace)
        configs = []
        for listening in (sock, *([private] if private else [])):
            config = Config()
            config.bind = [f"fd://{listening.detach()}"]
            config.loglevel = "WARNING"
            config.graceful_timeout = 1.0
            configs.append(config)
        stops: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
        if announce is None:  # a worker: Ctrl-C reaches the whole process group, and the supervisor stops it
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            stops = (signal.SIGTERM,)
        with trio.open_signal_receiver(*stops) as signals:
            async with trio.open_nursery() as nursery:
                async with Host.open(store, room_models(args, setup), name=name, seconds=args.lease) as host:
                    # Guard takes `scope: dict` (web/guard.py), hypercorn's Scope is a union of TypedDicts.
                    app = build_app(host, token, hosts, peers=peers)
                    nursery.start_soon(serve, app, configs[0])
                    if peers is not None:  # the same app: the same guard, the same token, the same stream limits
                        nursery.start_soon(serve, peers.private(app), configs[1])
                    async for _ in signals:
                        break
                    if announce:
                        print("stopping: every room's work is cancelled; its history is stored", file=sys.stderr)
                    nursery.cancel_scope.cancel()
    return 0


async def _supervise(args: argparse.Namespace, sock: socket.socket, token: str) -> int:
    """Run `args.workers` worker processes on `sock` until SIGINT or SIGTERM. A worker killed by a signal is
    replaced; one that ends by itself (an error it printed) stops the server with its exit status."""
    folder = _peer_folder()
    try:
        return await _run_workers(args, sock, token, folder)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


async def _run_workers(args: argparse.Namespace, sock: socket.socket, token: str, folder: Path | None) -> int:
    """`_supervise`'s work, the workers' sockets in `folder` (None: they have none)."""
    command = [sys.executable, "-m", "orchestrator", "serve", *_worker_args(args), "--worker", str(sock.fileno()),
               *(["--peers", str(folder)] if folder else [])]
    # The database by environment: a PostgreSQL URL may hold a password, which `ps` would show.
    env = os.environ | {"ORCHESTRATOR_DB": str(args.db)}
    failed: list[int] = []

    async def keep(nursery: trio.Nursery, slot: int) -> None:
        while True:
            read = _token_pipe(token)
            try:
                proc = await trio.lowlevel.open_process([*command, "--token-fd", str(read)], env=env,
                                                        pass_fds=(sock.fileno(), read), stdin=subprocess.DEVNULL)
            finally:
                os.close(read)
            try:
                code = await proc.wait()
            finally:
                with trio.CancelScope(shield=True):  # stopping: SIGTERM, then a kill for one that hangs
                    if proc.returncode is None:
                        proc.send_signal(signal.SIGTERM)
                        with trio.move_on_after(STOP_WAIT):
                            await proc.wait()
                        if proc.returncode is None:
                            proc.kill()
                            await proc.wait()
            if folder is not None:  # a killed worker leaves its socket behind
                (folder / f"{proc.pid}.sock").unlink(missing_ok=True)
            if code >= 0:
                failed.append(code)
                nursery.cancel_scope.cancel()
                return
            print(f"worker {slot + 1} (pid {proc.pid}) was killed by signal {-code}; its rooms move to the other "
                  f"workers within {args.lease:g} s; starting a new one", file=sys.stderr, flush=True)
            await trio.sleep(1.0)  # a worker killed over and over is not restarted in a tight loop

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            for slot in range(args.workers):
                nursery.start_soon(keep, nursery, slot)

            async def stop_on_signal() -> None:
                async for _ in signals:
                    print("stopping: every room's work is cancelled; its history is stored", file=sys.stderr)
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(stop_on_signal)
    if failed:
        print(f"a worker ended with status {failed[0]} (said above); the server stopped", file=sys.stderr)
        return failed[0] or 1
    return 0


async def _check_start(args: argparse.Namespace) -> Path | None:
    """A scenario or team file every worker would refuse, and what the workers would say about the files and
    folders they use, said once here, before the address is printed. A --trust is remembered here, so the
    workers find the folders trusted. Returns the workspace of new rooms (None: a temporary one each)."""
    from orchestrator.cli.chat.command import default_workspace, named_workspace, settle_trust, show_widening

    workspace, team = named_workspace(args), None
    if args.scripted:
        from orchestrator.scenario.loader import load_scenario
        from orchestrator.scenario.shipped import find_scenario

        team = load_scenario(find_scenario(args.scripted, folder_hint="--scripted plays one scenario file")).team
    if args.team:
        from orchestrator.team.loader import load_team

        team = load_team(args.team)
    if team is not None:
        show_widening(args, team, args.team or args.scripted, workspace)
    if workspace is None and not args.scripted:
        workspace, _ = default_workspace(args)
    await settle_trust(args, team is None, workspace)
    return workspace


def _peer_folder() -> Path | None:
    """A new folder only this user may enter, for the workers' sockets: in the user's runtime folder or the
    temporary one, wherever its sockets' paths fit a Unix socket's address (about 100 bytes). None: nowhere
    (each worker then answers for the rooms others run from the store)."""
    if not hasattr(socket, "SO_PEERCRED"):  # the check of who listens on a socket (web/peers.py): Linux's
        print("warning: this system cannot tell who listens on a Unix socket: a room's agent view, busy mark and "
              "full event stream show only on the worker that runs it", file=sys.stderr, flush=True)
        return None
    for base in (os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir(), "/tmp"):
        if base and len(base) < 64 and os.path.isdir(base):
            try:
                return Path(tempfile.mkdtemp(prefix="orchestrator-serve-", dir=base))  # made 0700
            except OSError:
                continue
    print("warning: no folder for the workers' sockets: a room's agent view, busy mark and full event stream "
          "show only on the worker that runs it", file=sys.stderr, flush=True)
    return None


_TOKEN = re.compile(r"[A-Za-z0-9._~-]{16,512}")  # what can stand in a URL's fragment as it is


def server_token(env: Mapping[str, str]) -> tuple[str, Path | None]:
    """A new token for this start, or the one kept in the file `[serve] token_file` of the config file names
    (made there on first use), so that a bookmarked address keeps working across restarts; and that file. The
    file is the user's alone: one that others may read or write, or that another user owns, is refused."""
    from orchestrator.providers.config import config_file

    config, raw = config_file(env)
    table = raw.get("serve", {})
    if not isinstance(table, dict) or set(table) - {"token_file"}:
        raise InputError(f"{config}: [serve] takes token_file = \"PATH\" only (a file that keeps the server's "
                         "token across restarts)")
    named = table.get("token_file")
    if named is None:
        return secrets.token_urlsafe(24), None
    if not isinstance(named, str) or not named.strip():
        raise InputError(f"{config}: [serve] token_file must be a path")
    path = Path(named).expanduser()
    path = path if path.is_absolute() else config.parent / path
    where = f"(named by [serve] token_file in {config})"
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return _new_token_file(path, where), path
    except OSError as exc:
        raise InputError(f"{path}: cannot read the token file: {exc.strerror} {where}") from None
    with os.fdopen(fd, encoding="utf-8", errors="replace") as file:
        st = os.fstat(file.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise InputError(f"{path}: the token file must be a file of your own {where}")
        if st.st_mode & 0o077:
            raise InputError(f"{path}: others may read the token file (mode {stat.S_IMODE(st.st_mode):o}): "
                             f"`chmod 600 {path}`, or delete it and a new token is made {where}")
        token = file.read(1024).strip()
    if not _TOKEN.fullmatch(token):
        raise InputError(f"{path}: the token file holds no usable token (16 or more letters, digits or -._~): "
                         f"delete it and a new one is made {where}")
    return token, path


def _new_token_file(path: Path, where: str) -> str:
    """A new token, written to a new file only this user may read (never over one that appeared meanwhile)."""
    token = secrets.token_urlsafe(24)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise InputError(f"{path}: cannot make the token file: {exc.strerror} {where}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(token + "\n")
    return token


def _token_pipe(token: str) -> int:
    """A pipe holding the token and then its end: the read end, for one worker to inherit. The token is far
    smaller than a pipe's buffer, so the write never waits for the reader."""
    read, write = os.pipe()
    try:
        os.write(write, token.encode())
    finally:
        os.close(write)
    return read


def _read_token(fd: int | None) -> str:
    """A worker's token, read once from the pipe the supervisor gave it, which is closed then."""
    if fd is None:
        raise InputError("a worker needs --token-fd (`orchestrator serve` starts its workers itself)")
    chunks = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    finally:
        os.close(fd)
    if not (token := b"".join(chunks).decode()):
        raise InputError("the token pipe was empty")
    return token


def _worker_args(args: argparse.Namespace) -> list[str]:
    """The flags a worker process needs: what chooses the rooms' team and models, and the address it was
    asked to serve, whose names it answers to (the store comes by environment, the token by pipe)."""
    out = ["--lease", str(args.lease), "--host", args.host]
    for flag, value in (("--team", args.team), ("--model", args.model), ("--scripted", args.scripted),
                        ("--workspace", args.workspace)):
        if value:
            out += [flag, str(value)]
    return out


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
    assert setup.team is not None  # serve resumes no room (resume=None), so its set-up always has a team
    return Models(team=explicit, new_team=setup.team, resolver=resolver, catalog=setup.models,
                  workspace=setup.workspace, mcp=setup.mcp, config=setup.config, prices=setup.prices)


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


def _announce(args: argparse.Namespace, url: str, token: str, workspace: Path | None = None,
              kept: Path | None = None) -> None:
    """The address and token, and where the token is kept when it is; and the workspace of new rooms when there
    is one (not a temporary one each)."""
    if args.json:
        said = {"url": url, "token": token} | ({"workspace": str(workspace)} if workspace else {}) | \
            ({"token_file": str(kept)} if kept else {})
        print(msgspec.json.encode(said).decode(), flush=True)
    else:
        db = shown(str(args.db)) if is_url(str(args.db)) else args.db
        print(f"Rooms of {db} at {url}", flush=True)
        if workspace:
            print(f"New rooms work in {workspace}", flush=True)
        print(f"Token: {token}", flush=True)
        if kept:
            print(f"The token is kept in {kept}, so the address stays the same across restarts (a bookmark "
                  "keeps working); delete the file for a new one.", flush=True)
        else:
            print("A new token each start: `token_file = \"serve-token\"` under [serve] in the config file keeps "
                  "one, for bookmarks.", flush=True)
        print("The address carries the token after its #, which the browser never sends to any server: open it "
              "as it is. Scripts send `Authorization: Bearer TOKEN`. Ctrl-C stops the server.", flush=True)
    if not _loopback(args.host):
        print(f"warning: serving on {args.host}, not only this machine: anyone who can reach it and learns "
              "the token can read your rooms and post in them", file=sys.stderr, flush=True)
