"""Named migrations, applied in order and recorded in the ``_migrations`` ledger.

Each migration is a name and a list of SQL statements, run in one transaction
with its ledger row, so a crash mid-migration leaves the previous schema. New
schema goes into new migrations; shipped ones are never edited.
"""

from __future__ import annotations

from typing import NamedTuple


class Migration(NamedTuple):
    name: str
    statements: tuple[str, ...]


LEDGER_DDL = """CREATE TABLE IF NOT EXISTS _migrations (
    name TEXT PRIMARY KEY,
    applied_at TEXT NOT NULL
)"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "0001_message_log",
        (
            """CREATE TABLE meta (
                key TEXT PRIMARY KEY,
                value TEXT NOT NULL
            )""",
            """CREATE TABLE conversations (
                id TEXT PRIMARY KEY,
                participants TEXT NOT NULL DEFAULT '[]',
                source TEXT NOT NULL DEFAULT '',
                created_at TEXT NOT NULL
            )""",
            """CREATE TABLE sessions (
                conversation TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                number INTEGER NOT NULL,
                started_at TEXT,
                PRIMARY KEY (conversation, number)
            )""",
            # rowid is the internal key every index points at; (conversation, msg_id)
            # is the caller's identity and makes re-ingestion idempotent.
            """CREATE TABLE messages (
                rowid INTEGER PRIMARY KEY,
                conversation TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                msg_id TEXT NOT NULL,
                session INTEGER NOT NULL,
                seq INTEGER NOT NULL,
                speaker TEXT NOT NULL,
                addressees TEXT NOT NULL DEFAULT '[]',
                role TEXT NOT NULL,
                text TEXT NOT NULL,
                attachments TEXT NOT NULL DEFAULT '[]',
                ts TEXT NOT NULL,
                ts_epoch REAL NOT NULL,
                session_start TEXT,
                hash TEXT NOT NULL,
                search_text TEXT NOT NULL,
                scope TEXT NOT NULL,
                embed_hash TEXT NOT NULL,
                vec_id INTEGER,  -- vectors.id of embed_hash under the store's model
                UNIQUE (conversation, msg_id)
            )""",
            "CREATE INDEX messages_conv_seq ON messages (conversation, seq)",
            "CREATE INDEX messages_speaker ON messages (speaker COLLATE NOCASE)",
            "CREATE INDEX messages_ts ON messages (ts_epoch)",
            # One row per (message, person involved): speaker and addressees,
            # lower-cased, so "messages Caroline sent or received" is one index probe.
            """CREATE TABLE message_people (
                msg_rowid INTEGER NOT NULL REFERENCES messages(rowid) ON DELETE CASCADE,
                person TEXT NOT NULL,
                PRIMARY KEY (person, msg_rowid)
            ) WITHOUT ROWID""",
            "CREATE INDEX message_people_msg ON message_people (msg_rowid)",
            # ``scope`` holds opaque tokens for the conversation and the people
            # involved, so a filtered keyword search is one MATCH that intersects
            # short posting lists instead of ranking the whole store then filtering.
            """CREATE VIRTUAL TABLE messages_fts USING fts5(
                search_text,
                scope,
                content='messages',
                content_rowid='rowid',
                tokenize='porter unicode61 remove_diacritics 2'
            )""",
            """CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
                INSERT INTO messages_fts(rowid, search_text, scope)
                VALUES (new.rowid, new.search_text, new.scope);
            END""",
            """CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
                INSERT INTO messages_fts(messages_fts, rowid, search_text, scope)
                VALUES ('delete', old.rowid, old.search_text, old.scope);
            END""",
            """CREATE TRIGGER messages_au AFTER UPDATE OF search_text, scope ON messages BEGIN
                INSERT INTO messages_fts(messages_fts, rowid, search_text, scope)
                VALUES ('delete', old.rowid, old.search_text, old.scope);
                INSERT INTO messages_fts(rowid, search_text, scope)
                VALUES (new.rowid, new.search_text, new.scope);
            END""",
            # Embedding cache keyed by (model, hash of the embedded text): two models'
            # vectors can coexist in the file but an index only ever reads one model.
            # A rowid table: 1.5 kB rows are too wide for WITHOUT ROWID b-trees.
            """CREATE TABLE vectors (
                id INTEGER PRIMARY KEY,
                model TEXT NOT NULL,
                hash TEXT NOT NULL,
                dim INTEGER NOT NULL,
                vec BLOB NOT NULL,
                UNIQUE (model, hash)
            )""",
        ),
    ),
)
