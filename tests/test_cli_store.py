"""The command line against databases that are not ours, damaged, locked or read-only, and `check` on a
folder without scenarios: exit 2 with one line naming the path, files left as they were, reads that
never take the write lock.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.store.heal import INTERRUPTED
from tests.test_store_file import journal, snapshot, unhealed_room

ROOT = Path(__file__).resolve().parent.parent
ORCHESTRATOR = str(Path(sys.executable).parent / "orchestrator")


def cli(*args: str, env: dict[str, str] | None = None, prefix: list[str] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, ORCHESTRATOR, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def one_line_error(done: subprocess.CompletedProcess, path: Path, *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-1500:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: "), done.stderr
    for w in words:
        assert w in lines[0]


def test_check_on_a_folder_without_scenarios_is_bad_input(tmp_path):
    (tmp_path / "notes.txt").write_text("not a scenario")
    done = cli("check", str(tmp_path))
    assert done.returncode == 2
    assert f"{tmp_path}: no scenario files" in done.stderr and "0 passed" not in done.stdout


def foreign(folder: Path) -> Path:
    path = folder / "contacts.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE contacts (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO contacts (name) VALUES ('Ada')")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize("command", [
    ["rooms"], ["rooms", "--json"], ["show", "abc"], ["export", "abc", "--format", "jsonl"],
    ["run", str(ROOT / "scenarios" / "greeting.yaml")], ["memory", "show"], ["kb", "list"],
])
def test_another_applications_database_is_refused_and_unchanged(tmp_path, command):
    path = foreign(tmp_path)
    before = snapshot(tmp_path)
    done = cli(*command, "--db", str(path))
    one_line_error(done, path, "not an orchestrator database")
    assert snapshot(tmp_path) == before and journal(path) == "rollback"


@pytest.mark.parametrize("damage", ["drop-messages", "drop-rooms", "not-sqlite", "truncated"])
def test_a_damaged_or_unreadable_database_is_exit_2_naming_it(tmp_path, damage):
    path = tmp_path / "room.db"
    shutil.copy(ROOT / "tests" / "data" / "store-v0.db", path)
    if damage.startswith("drop"):
        conn = sqlite3.connect(path)
        conn.execute(f"DROP TABLE {damage.split('-')[1]}")
        conn.commit()
        conn.close()
    elif damage == "not-sqlite":
        path.write_text("hello\n")
    else:
        with path.open("r+b") as f:
            f.truncate(path.stat().st_size // 2)
    before = snapshot(tmp_path)
    for command in (["rooms"], ["show", "flagship"], ["run", str(ROOT / "scenarios" / "greeting.yaml")]):
        one_line_error(cli(*command, "--db", str(path)), path)
    assert snapshot(tmp_path) == before


def test_a_folder_is_not_a_database(tmp_path):
    one_line_error(cli("rooms", "--db", str(tmp_path)), tmp_path, "is a folder")


async def test_show_heals_for_display_only_and_does_not_wait_for_a_writer(tmp_path):
    path = tmp_path / "room.db"
    room_id = await unhealed_room(path)
    before = snapshot(tmp_path)["room.db"]
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE rooms SET name = 'renamed'")  # holds the write lock, uncommitted
        start = time.perf_counter()
        shown = cli("export", room_id, "--db", str(path), "--format", "jsonl")
        listed = cli("rooms", "--db", str(path))
        took = time.perf_counter() - start
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert shown.returncode == 0 and listed.returncode == 0, shown.stderr + listed.stderr
    assert shown.stdout.count(INTERRUPTED) == 2 and " r " in listed.stdout
    assert took < 10, f"{took:.1f} s: the reads waited for the writer"  # a wait would be 5 s per command
    assert snapshot(tmp_path)["room.db"] == before
    assert INTERRUPTED not in sqlite3.connect(path).execute("SELECT group_concat(blocks) FROM messages").fetchone()[0]


async def test_show_reads_a_read_only_copy(tmp_path):
    room_id = await unhealed_room(tmp_path / "room.db")
    folder = tmp_path / "copy"
    folder.mkdir()
    shutil.copy(tmp_path / "room.db", folder / "room.db")
    for p in (folder / "room.db", folder):
        p.chmod(0o555)
    prefix: list[str] = []
    if os.geteuid() == 0:  # root writes anywhere: drop the capabilities that let it
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv (util-linux): cannot make a folder read-only")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    try:
        done = cli("show", room_id, "--db", str(folder / "room.db"), "--json", prefix=prefix)
        written = cli("run", str(ROOT / "scenarios" / "greeting.yaml"), "--db", str(folder / "room.db"),
                      prefix=prefix)
    finally:
        folder.chmod(0o755)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(INTERRUPTED) == 2
    one_line_error(written, folder / "room.db", "cannot write")


async def test_memory_and_knowledge_reads_leave_the_file_as_it_was(tmp_path):
    """On the first release's file they read without migrating it; on a file that never kept a memory or
    indexed a document they read as empty instead of adding the tables."""
    old = tmp_path / "old.db"
    shutil.copy(ROOT / "tests" / "data" / "store-v0.db", old)
    fresh = tmp_path / "fresh.db"
    await unhealed_room(fresh)  # the store's own tables only
    before = snapshot(tmp_path)
    shown, listed = cli("memory", "show", "--db", str(old)), cli("kb", "list", "--db", str(old))
    assert shown.returncode == 0 and "Prefers short answers." in shown.stdout, shown.stderr
    assert listed.returncode == 0 and "notes/plan.md" in listed.stdout, listed.stderr
    empty, nothing = cli("memory", "export", "--db", str(fresh)), cli("kb", "search", "plan", "--db", str(fresh))
    assert empty.returncode == 0 and nothing.returncode == 0, empty.stderr + nothing.stderr
    after = snapshot(tmp_path)
    assert {k: after[k] for k in ("old.db", "fresh.db")} == {k: before[k] for k in ("old.db", "fresh.db")}
    tables = {r[0] for r in sqlite3.connect(fresh).execute("SELECT name FROM sqlite_master")}
    assert "memory" not in tables and "kb_documents" not in tables
