"""The store file's identity and shape: its marks (application_id, user_version), its tables, the checks
that refuse a file that is not ours or is damaged, and the explicit migrations from each earlier version.

Inspection only reads, so a refused file is left exactly as it was (no tables, no journal-mode change).
"""
from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from orchestrator.core.errors import InputError

APPLICATION_ID = 0x4F524348  # "ORCH" in the file header: how another tool (and we) tell the file apart
VERSION = 4
# Versions whose tables this code reads as they are, so a read-only command needs no migration
# (versions 2 and 3 only added the leases, the inbox and two message columns, which reading a room does not need;
# version 4 changed what a room's last_seq means, which a read takes into account for every version).
READABLE = frozenset({0, 1, 2, 3, 4})

# The tables as the first release created them (through sqlite-utils); a new file gets the same text, so
# a migrated file and a new one are alike.
TABLES = {
    "rooms": ('CREATE TABLE "rooms" (\n   "id" TEXT PRIMARY KEY,\n   "name" TEXT,\n   "floor" TEXT,\n'
              '   "created" REAL,\n   "meta" TEXT,\n   "last_seq" INTEGER,\n   "last_ts" REAL\n)'),
    "messages": ('CREATE TABLE "messages" (\n   "id" TEXT PRIMARY KEY,\n   "room" TEXT,\n   "seq" INTEGER,\n'
                 '   "ts" REAL,\n   "author" TEXT,\n   "kind" TEXT,\n   "visible_to" TEXT,\n   "provider" TEXT,\n'
                 '   "model" TEXT,\n   "blocks" TEXT,\n   "replaces" TEXT\n)'),
    "tasks": ('CREATE TABLE "tasks" (\n   "id" TEXT PRIMARY KEY,\n   "room" TEXT,\n   "agent" TEXT,\n'
              '   "kind" TEXT,\n   "status" TEXT,\n   "task" TEXT,\n   "result" TEXT,\n   "background" INTEGER,\n'
              '   "read" INTEGER,\n   "created" REAL,\n   "updated" REAL\n)'),
}
# Version 2: who runs each room (one writer, fenced by epoch) and the lines waiting for a room's owner.
TABLES_V2 = {
    "leases": ('CREATE TABLE "leases" (\n   "room" TEXT PRIMARY KEY,\n   "host" TEXT,\n   "epoch" INTEGER,\n'
               '   "expires" REAL\n)'),
    "inbox": ('CREATE TABLE "inbox" (\n   "id" TEXT PRIMARY KEY,\n   "room" TEXT,\n   "author" TEXT,\n'
              '   "text" TEXT,\n   "posted" REAL\n)'),
}
# The epoch of the lease under which each message was written (NULL: no lease), so a takeover can be audited.
MESSAGE_EPOCH = 'ALTER TABLE "messages" ADD COLUMN "epoch" INTEGER'
# Version 3: what each agent reply answers, the newest seq its author had read (NULL for every other message), so
# a host taking a room over knows exactly which user lines still wait for an answer.
MESSAGE_ANSWERS = 'ALTER TABLE "messages" ADD COLUMN "answers" INTEGER'
# A reply stored before version 3 is taken to answer everything before it: what the host loop assumed then.
ANSWERS_BEFORE_V3 = "UPDATE messages SET answers = seq - 1 WHERE kind = 'text'"
INDEXES = {"idx_messages_room_seq": 'CREATE UNIQUE INDEX "idx_messages_room_seq"\n    ON "messages" ("room", "seq")'}
_COLUMNS = {
    "rooms": ("id", "name", "floor", "created", "meta", "last_seq", "last_ts"),
    "messages": ("id", "room", "seq", "ts", "author", "kind", "visible_to", "provider", "model", "blocks",
                 "replaces"),
    "tasks": ("id", "room", "agent", "kind", "status", "task", "result", "background", "read", "created",
              "updated"),
}
_COLUMNS_V2 = {"leases": ("room", "host", "epoch", "expires"), "inbox": ("id", "room", "author", "text", "posted"),
               "messages": ("epoch",)}
_COLUMNS_V3 = {"messages": ("answers",)}
# Every table the unmarked first release (version 0) could hold: the store's, memory's and the
# knowledge base's (FTS5 keeps its index in the `_data`.. `_config` tables).
_V0_TABLES = frozenset(TABLES) | {
    "memory", "kb_documents", "kb_chunks", "kb_vectors", "kb_meta", "kb_chunks_fts", "kb_chunks_fts_data",
    "kb_chunks_fts_idx", "kb_chunks_fts_docsize", "kb_chunks_fts_config", "kb_chunks_fts_content",
}
_MAGIC = b"SQLite format 3\x00"
_MOVE_ASIDE = "restore it from a backup or move it aside, then try again"


class UnusableDatabase(InputError):
    """The path is not a database this program can use: a folder, another application's file, a damaged
    or newer file. Bad input (exit 2), said in one line that names the path."""


def check_path(path: Path) -> bool:
    """Whether the file holds anything; raises for what SQLite would misreport or half-read.

    A file that is not SQLite, or is shorter than its header says (truncated), is caught here: SQLite
    may open such a file and fail much later, mid-write, with a message that names no file.
    """
    if path.is_dir():
        raise UnusableDatabase(f"{path}: is a folder, not a database file; pass --db a file path")
    if not path.exists():
        if not path.parent.is_dir():
            raise UnusableDatabase(f"{path}: the folder {path.parent} does not exist; create it or pass --db "
                                   "another path")
        return False
    try:
        with path.open("rb") as f:
            header = f.read(100)
            size = f.seek(0, 2)
    except OSError as exc:
        raise UnusableDatabase(f"{path}: cannot be read ({exc.strerror}); check its permissions") from None
    if not header:
        return False
    if not header.startswith(_MAGIC[:len(header)]) or len(header) < len(_MAGIC):
        raise UnusableDatabase(f"{path}: not an SQLite database (another kind of file); pass --db another path")
    page_size = int.from_bytes(header[16:18], "big") if len(header) == 100 else 0
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big") if len(header) == 100 else 0
    # The page count is trusted only when its "valid for" counter matches; while a WAL file holds
    # pages, a checkpoint may have written page 1 before the pages that grow the file.
    counted = len(header) == 100 and header[24:28] == header[92:96]
    wal = Path(f"{path}-wal")
    if len(header) < 100 or (counted and pages * page_size > size and not (wal.exists() and wal.stat().st_size)):
        raise UnusableDatabase(f"{path}: the database is damaged (the file is shorter than its header says: "
                               f"truncated); {_MOVE_ASIDE}")
    return True


def inspect(conn: sqlite3.Connection, path: str) -> int | None:
    """The file's version (0 = the unmarked first release), or None for an empty file; raises for a
    file that is not ours, is damaged or is newer. Reads only."""
    app = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    objects = conn.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall()
    tables = {name for kind, name in objects if kind == "table"}
    if app == APPLICATION_ID:
        if version > VERSION:
            raise UnusableDatabase(f"{path}: written by a newer release of orchestrator (store version {version}, "
                                   f"this one knows up to {VERSION}); upgrade orchestrator")
        if problem := _damage(conn, tables, version):
            raise UnusableDatabase(f"{path}: the database is damaged ({problem}); {_MOVE_ASIDE}")
        return version
    if app != 0 or version != 0 or not tables <= _V0_TABLES:
        raise UnusableDatabase(f"{path}: not an orchestrator database (another application's SQLite file); "
                               "it was left untouched; pass --db another path")
    if not objects:
        return None
    if problem := _damage(conn, tables, 0):
        raise UnusableDatabase(f"{path}: the database is damaged ({problem}); {_MOVE_ASIDE}")
    return 0


def _damage(conn: sqlite3.Connection, tables: set[str], version: int) -> str:
    missing = [t for t in (*TABLES, *(TABLES_V2 if version >= 2 else ())) if t not in tables]
    if missing:
        return f"table {', '.join(missing)} is missing"
    columns = [(t, c) for t, c in _COLUMNS.items()] + (list(_COLUMNS_V2.items()) if version >= 2 else []) + (
        list(_COLUMNS_V3.items()) if version >= 3 else [])
    for table, wanted in columns:
        have = {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}
        if lost := [c for c in wanted if c not in have]:
            return f"table {table} lacks column {', '.join(lost)}"
    indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    if lost := [i for i in INDEXES if i not in indexes]:
        return f"index {', '.join(lost)} is missing"
    return ""


def upgrade(conn: sqlite3.Connection, found: int | None) -> None:
    """Create the tables of an empty file, or run each migration from `found` up; then mark the file.

    The caller holds the write transaction, so the marks and the tables change together.
    """
    if found is None:  # the first release's tables, then every migration: a new file is a migrated one
        for sql in (*TABLES.values(), *INDEXES.values()):
            conn.execute(sql)
        found = 1
    for version in range(found, VERSION):
        MIGRATIONS[version](conn)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {VERSION}")


def _from_unmarked(conn: sqlite3.Connection) -> None:
    """0 → 1: the first release's tables are this version's; only the marks were missing."""


def _leases_and_inbox(conn: sqlite3.Connection) -> None:
    """1 → 2: rooms run by several host processes (leases with epochs, each message's epoch) and the lines
    sent to a room's owner."""
    for sql in TABLES_V2.values():
        conn.execute(sql)
    conn.execute(MESSAGE_EPOCH)


def _answers(conn: sqlite3.Connection) -> None:
    """2 → 3: each agent reply records what it answers."""
    conn.execute(MESSAGE_ANSWERS)
    conn.execute(ANSWERS_BEFORE_V3)


def _seq_from_messages(conn: sqlite3.Connection) -> None:
    """3 → 4: an append no longer rewrites its room's row; a room's last seq and ts are its newest message's, or the
    mark healing left in the row (never lower than what version 3 kept there). The tables stay as they are: the
    mark keeps an earlier release, which would hand out a seq already taken, from writing the file."""


# MIGRATIONS[n] takes a file from version n to n + 1; a schema change adds one and bumps VERSION.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {0: _from_unmarked, 1: _leases_and_inbox,
                                                               2: _answers, 3: _seq_from_messages}


def damage(exc: sqlite3.Error, path: str) -> UnusableDatabase | None:
    """The user-facing error for a failure that means the file, not the program, is at fault."""
    text = str(exc)
    if type(exc) is sqlite3.DatabaseError or "malformed" in text or "no such table" in text:
        return UnusableDatabase(f"{path}: the database is damaged ({text}); {_MOVE_ASIDE}")
    if "readonly database" in text:
        return UnusableDatabase(f"{path}: cannot write to this database ({text}); check its permissions or "
                                "pass --db another path")
    if "unable to open database file" in text:
        return UnusableDatabase(f"{path}: cannot open this database ({text}); check the path and its permissions")
    return None
