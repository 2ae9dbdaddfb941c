"""Where the command line keeps things by default: the rooms database (XDG data folder, `--db`,
ORCHESTRATOR_DB) and the scenario runs beside it. Every command module reads its defaults here;
nothing here imports them back. What is created here is readable by its owner only."""
from __future__ import annotations

import os
import time
from pathlib import Path

KEEP_RUNS = 50  # scenario runs kept for `rooms`/`show`; older ones are removed


def default_db() -> Path:
    if env := os.environ.get("ORCHESTRATOR_DB"):
        return Path(env)
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "orchestrator" / "orchestrator.db"


def runs_dir() -> Path:
    """Each `orchestrator run` keeps its room in a database of its own here: a run starts from an
    empty memory and never writes into the rooms, notes or knowledge base of `chat`."""
    return default_db().parent / "runs"


def run_dbs() -> list[Path]:
    """The kept runs' databases, oldest first."""
    folder = runs_dir()
    return sorted(folder.glob("*.db")) if folder.is_dir() else []


def new_run_db(name: str) -> Path:
    """A fresh database file for one run (older runs beyond KEEP_RUNS are removed)."""
    private_dir(default_db().parent)
    folder = private_dir(runs_dir())
    for old in run_dbs()[:-(KEEP_RUNS - 1) or None]:
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
