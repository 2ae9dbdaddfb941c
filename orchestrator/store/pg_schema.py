"""The PostgreSQL store's tables and its explicit migrations, numbered like the SQLite file's versions.

The version lives in `orchestrator_schema`; migrations run under a transaction-level advisory lock, so hosts
starting at once migrate a database exactly once, and a database newer than this release is refused.
"""
from __future__ import annotations

VERSION = 3
MIGRATION_LOCK = 0x4F524348  # "ORCH": the advisory lock key that serialises migrations

# MIGRATIONS[n] takes a database from version n to n + 1 (0: an empty database). Texts are stored as text,
# not jsonb: jsonb reorders keys, and a tool call's input must come back byte for byte as the model sent it.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    0: (
        """CREATE TABLE rooms (
            id text PRIMARY KEY, name text NOT NULL, floor text NOT NULL, created double precision NOT NULL,
            meta text NOT NULL, last_seq bigint NOT NULL, last_ts double precision NOT NULL)""",
        """CREATE TABLE messages (
            id text PRIMARY KEY, room text NOT NULL REFERENCES rooms (id), seq bigint NOT NULL,
            ts double precision NOT NULL, author text NOT NULL, kind text NOT NULL, visible_to text NOT NULL,
            provider text NOT NULL, model text NOT NULL, blocks text NOT NULL, replaces text NOT NULL,
            UNIQUE (room, seq))""",
        """CREATE TABLE tasks (
            id text PRIMARY KEY, room text NOT NULL, agent text NOT NULL, kind text NOT NULL,
            status text NOT NULL, task text NOT NULL, result text NOT NULL, background boolean NOT NULL,
            read boolean NOT NULL, created double precision NOT NULL, updated double precision NOT NULL)""",
        "CREATE INDEX tasks_room ON tasks (room, created)",
        "CREATE TABLE memory (id bigserial PRIMARY KEY, target text NOT NULL, text text NOT NULL)",
    ),
    1: (
        # Expiries are on the server's clock (clock_timestamp()), so hosts need not agree on the time.
        """CREATE TABLE leases (
            room text PRIMARY KEY REFERENCES rooms (id), host text NOT NULL, epoch bigint NOT NULL,
            expires double precision NOT NULL)""",
        """CREATE TABLE inbox (
            id text PRIMARY KEY, room text NOT NULL REFERENCES rooms (id), author text NOT NULL,
            text text NOT NULL, posted double precision NOT NULL)""",
        "CREATE INDEX inbox_room ON inbox (room, posted)",
        # The epoch of the lease each message was written under (NULL: no lease), so a takeover can be audited.
        "ALTER TABLE messages ADD COLUMN epoch bigint",
    ),
    2: (
        # What each model call and tool run spent (store/usage.py), as the SQLite store keeps it.
        """CREATE TABLE usage (
            id bigserial PRIMARY KEY, room text NOT NULL, ts double precision NOT NULL, agent text NOT NULL,
            provider text NOT NULL, model text NOT NULL, kind text NOT NULL, name text NOT NULL,
            input_tokens integer NOT NULL, output_tokens integer NOT NULL, cached_tokens integer NOT NULL,
            estimated boolean NOT NULL, seconds double precision NOT NULL)""",
        "CREATE INDEX usage_room ON usage (room)",
    ),
}
