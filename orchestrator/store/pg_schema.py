"""The PostgreSQL store's tables and its explicit migrations, numbered like the SQLite file's versions.

The version lives in `orchestrator_schema`; migrations run under a transaction-level advisory lock, so hosts
starting at once migrate a database exactly once, and a database newer than this release is refused.
"""
from __future__ import annotations

VERSION = 5
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
    3: (
        # The knowledge base (memory/knowledge.py), as the SQLite file keeps it; `words` stands in for FTS5:
        # the file name (weight A) and the text as stemmed words (memory/fulltext.py fills and queries it).
        """CREATE TABLE kb_documents (
            path text PRIMARY KEY, sha256 text NOT NULL, chunking text NOT NULL, bytes bigint NOT NULL,
            lines integer NOT NULL, chunks integer NOT NULL, vectors integer NOT NULL, model text,
            added double precision NOT NULL)""",
        """CREATE TABLE kb_chunks (
            id bigserial PRIMARY KEY, path text NOT NULL, first_line integer NOT NULL, last_line integer NOT NULL,
            name text NOT NULL, text text NOT NULL, words tsvector NOT NULL)""",
        "CREATE INDEX kb_chunks_path ON kb_chunks (path)",
        # fastupdate off: a pending list would be read linearly by every search until a vacuum merged it.
        "CREATE INDEX kb_chunks_words ON kb_chunks USING gin (words) WITH (fastupdate = off)",
        # Vectors are float32 bytes, as in SQLite, scored in Python: no extension needed.
        "CREATE TABLE kb_vectors (chunk bigint PRIMARY KEY, model text NOT NULL, vector bytea NOT NULL)",
        # Floats hardly compress: stored out of line as they are, never tried (a vector is kilobytes, and every write would try).
        "ALTER TABLE kb_vectors ALTER COLUMN vector SET STORAGE EXTERNAL",
        "CREATE TABLE kb_meta (key text PRIMARY KEY, value bigint NOT NULL)",
        # Runs of Thai, Chinese, Japanese... are found with LIKE, which pg_trgm's index serves. pg_trgm ships with
        # PostgreSQL (Debian's postgresql package; postgresql-contrib elsewhere) and is a trusted extension; a
        # server without it, or a user who may not create it, still works: those searches then read every chunk.
        """DO $$
        BEGIN
            CREATE EXTENSION IF NOT EXISTS pg_trgm;
            EXECUTE format('CREATE INDEX kb_chunks_trigrams ON kb_chunks USING gin (text %I.gin_trgm_ops)',
                           (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                            WHERE e.extname = 'pg_trgm'));
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'knowledge base without a trigram index (%)', SQLERRM;
        END $$""",
    ),
    4: (
        # What each agent reply answers (the newest seq its author had read), as in the SQLite file's version 3;
        # a reply stored before is taken to answer everything before it.
        "ALTER TABLE messages ADD COLUMN answers bigint",
        "UPDATE messages SET answers = seq - 1 WHERE kind = 'text'",
    ),
}
