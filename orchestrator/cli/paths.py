"""Where the command line keeps things by default: the rooms database (XDG data folder, `--db`,
ORCHESTRATOR_DB), the scenario runs beside it and the servers' own workspaces. Every command module reads
its defaults here; nothing here imports them back. What is created here is readable by its owner only."""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.core.errors import InputError
from orchestrator.store.backends import is_url, open_store

if TYPE_CHECKING:
    from orchestrator.store.contract import Store

KEEP_RUNS = 50  # scenario runs kept for `rooms`/`show`; older ones are removed


def database(text: str) -> Path | str:
    """`--db`: a PostgreSQL URL as given (postgresql://…), else an SQLite file's path."""
    return text if is_url(text) else Path(text)


async def open_db(db: Path | str, *, create: bool = True, readonly: bool = False) -> Store:
    """The store `--db` names; a missing file is made (owner-only, its folder too) only when `create`."""
    if not is_url(db):
        db = Path(db)
        if not db.exists():
            if not create:
                raise InputError(f"{db}: no such database; pass --db PATH or set ORCHESTRATOR_DB")
            private_file(db)
    return await open_store(db, readonly=readonly)


def default_db() -> Path | str:
    if env := os.environ.get("ORCHESTRATOR_DB"):
        return database(env)
    return _data_dir() / "orchestrator.db"


def mcp_serve_db() -> Path:
    """`mcp serve`'s own database, beside the chat one: any MCP client can list and read every room of
    the database it serves, so it never sees the user's chat rooms unless `--db` says so."""
    return _home() / "mcp-serve.db"


def _data_dir() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "orchestrator"


def _home() -> Path:
    """The chat database's folder, where the kept runs go too (the data folder when it is on PostgreSQL)."""
    chat = default_db()
    return chat.parent if isinstance(chat, Path) else _data_dir()


def own_workspace(command: str) -> Path:
    """The workspace of `serve` and `mcp serve` without --workspace: a folder of their own under the data
    folder, kept from one start to the next, never the current folder (a desktop client may start
    `mcp serve` in / or the home folder, where agents could write anything)."""
    return private_dir(private_dir(private_dir(_data_dir()) / "workspaces") / command)


def runs_dir() -> Path:
    """Each `orchestrator run` keeps its room in a database of its own here: a run starts from an
    empty memory and never writes into the rooms, notes or knowledge base of `chat`."""
    return _home() / "runs"


def run_dbs() -> list[Path]:
    """The kept runs' databases, oldest first."""
    folder = runs_dir()
    return sorted(folder.glob("*.db")) if folder.is_dir() else []


def old_run_dbs() -> list[Path]:
    """The kept runs' databases the next `new_run_db` removes, so that a caller can see to their rooms first."""
    return run_dbs()[:-(KEEP_RUNS - 1) or None]


def room_dbs() -> list[Path | str]:
    """The databases `rooms` and `show` read without `--db`: the chat one and the kept runs, those that exist."""
    return [db for db in (default_db(), *run_dbs()) if is_url(db) or Path(db).exists()]


def new_run_db(name: str) -> Path:
    """A fresh database file for one run (older runs beyond KEEP_RUNS are removed)."""
    private_dir(_home())
    folder = private_dir(runs_dir())
    for old in old_run_dbs():
        for f in (old, old.with_name(old.name + "-wal"), old.with_name(old.name + "-shm")):
            f.unlink(missing_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:40] or "run"
    path = folder / f"{stamp}-{os.getpid()}-{safe}.db"
    return private_file(path)


def private_dir(path: Path) -> Path:
    """Make the folder (and missing parents) readable by its owner only, as the files in it are."""
    if not path.is_dir():
        path.mkdir(parents=True, mode=0o700)
    return path


def private_file(path: Path) -> Path:
    """Create the file as owner-only before SQLite or a history writer opens it (they follow the umask,
    and SQLite gives its -wal and -shm files the database's mode)."""
    private_dir(path.parent)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    return path


def user_file(text: str) -> Path:
    """A file the user names for the orchestrator to write (`--trace FILE`), taken as written: a symbolic
    link on the way, or a file with other hard links, is refused, since an agent may have planted one in a
    folder it can write to lead the write elsewhere."""
    import argparse

    from orchestrator.tools.base import ToolError
    from orchestrator.tools.sandbox import named

    try:
        return named(text)
    except ToolError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_trust_flag(parser, *, asks: bool = False) -> None:
    """`--trust` of the commands that read a folder's agent files and skills (`asks`: chat, which asks)."""
    parser.add_argument("--trust", action="store_true",
                        help="trust the agent files (agents/*.md) of the current folder and the skills "
                             "(.agents/skills) of the workspace as they are now, and remember it; "
                             + ("without it chat asks in a terminal, and " if asks else "")
                             + "an untrusted folder's files are ignored (one line says so)")


def add_all_flag(parser) -> None:
    """`--all` of the commands that print a transcript (`run`, `show`)."""
    parser.add_argument("--all", action="store_true",
                        help="also print what the user does not see, dim: anonymous workers, the note a handoff "
                             "gives its agent, tool results the transcript leaves out")


def add_actions(group: argparse.ArgumentParser, dest: str) -> argparse._SubParsersAction:
    """The actions of a command group (`memory show|edit|export`). The group alone (`orchestrator memory`)
    is bad input naming the actions there are, where argparse would name `dest`, which is ours."""
    actions = group.add_subparsers(dest=dest)

    async def missing(args: argparse.Namespace) -> int:
        *rest, last = actions.choices
        raise InputError(f"`{group.prog}` needs an action: {', '.join(rest)} or {last} "
                         f"(`{group.prog} --help` says what each does)")

    group.set_defaults(fn=missing)
    return actions
