"""A throwaway PostgreSQL cluster for the PostgreSQL lane: Debian's `postgresql` binaries, initdb into a
temporary folder, listening on 127.0.0.1 only, stopped and deleted at the end of the session.

ORCHESTRATOR_TEST_PG=postgresql://… uses a server you started instead. As root, the cluster runs as the
`postgres` user (the server refuses to run as root). `python tests/pgcluster.py` says which lane will run.
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = "ORCHESTRATOR_TEST_PG"


def _bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return candidates[-1] if candidates else None


def _as_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    try:
        import pwd
        pwd.getpwnam("postgres")
    except KeyError:
        return []
    return [runuser, "-u", "postgres", "--"] if runuser else []


def unavailable() -> str:
    """Why the PostgreSQL lane cannot run here, or "" when it can."""
    if os.environ.get(ENV):
        return ""
    if _bin("initdb") is None or _bin("pg_ctl") is None:
        return "PostgreSQL lane skipped: initdb/pg_ctl not found (apt-get install postgresql, or set " + ENV + ")"
    if os.geteuid() == 0 and not _as_user():
        return "PostgreSQL lane skipped: running as root and there is no `postgres` user to run the server as"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "PostgreSQL lane skipped: psycopg is not installed (pip install -e '.[postgres]')"
    return ""


def start() -> Server:
    return Server(url) if (url := os.environ.get(ENV)) else Cluster()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server someone else started (ORCHESTRATOR_TEST_PG): fresh databases on it, nothing to stop."""

    def __init__(self, url: str) -> None:
        self.url = url

    def fresh(self, name: str) -> str:
        """A new empty database on the server: one per test, so tests never see each other's rooms."""
        import psycopg
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url.rsplit("/", 1)[0] + f"/{name}"

    def stop(self) -> None:
        pass


class Cluster(Server):
    """`url` of a database `orch` on a fresh cluster; `stop()` removes every trace of it."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="orch-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self.url = f"postgresql://orch@127.0.0.1:{self.port}/orch"
        self._user = _as_user()
        if self._user:
            shutil.chown(self.folder, "postgres", "postgres")
        try:
            self._run(_bin("initdb"), "-D", self.data, "-U", "orch", "--auth=trust", "-E", "UTF8",
                      "--no-sync", "--locale=C")
            # fsync off: a test cluster is thrown away; a crash test kills clients, never this server.
            self._run(_bin("pg_ctl"), "-D", self.data, "-l", self.folder / "server.log", "-w", "-t", "60",
                      "-o", f"-c listen_addresses=127.0.0.1 -c port={self.port} -c fsync=off "
                      f"-c unix_socket_directories={self.folder} -c max_connections=200", "start")
            self._run(_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "orch", "orch")
        except BaseException:
            self.stop()
            raise

    def _run(self, *argv: object) -> None:
        done = subprocess.run([*self._user, *map(str, argv)], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{argv[0]} failed: {done.stderr.strip() or done.stdout.strip()}")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run([*self._user, _bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"],
                           capture_output=True)
        shutil.rmtree(self.folder, ignore_errors=True)


if __name__ == "__main__":
    reason = unavailable()
    print(reason or "PostgreSQL lane: runs (a throwaway cluster on 127.0.0.1"
          + (f", or {ENV})" if not os.environ.get(ENV) else f": {ENV} is set)"))
    if len(sys.argv) > 1 and sys.argv[1] == "--try" and not reason:
        started = time.monotonic()
        c = Cluster()
        print(f"started {c.url} in {time.monotonic() - started:.1f}s")
        c.stop()
