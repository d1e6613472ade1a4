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
                speaker_key TEXT NOT NULL,  -- casefolded: filters match beyond ASCII
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
            "CREATE INDEX messages_speaker ON messages (speaker_key)",
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
    Migration(
        "0002_derived_memory",
        (
            # LLM responses keyed by model + prompt name + version + input hash:
            # a re-run of the same extraction costs nothing.
            """CREATE TABLE llm_cache (
                key TEXT PRIMARY KEY,
                task TEXT NOT NULL,
                model TEXT NOT NULL,
                value TEXT NOT NULL,
                created_at TEXT NOT NULL
            )""",
            # Lifetime LLM use per (model, prompt name), so `archivist stats` can show
            # what extraction has cost across processes.
            """CREATE TABLE llm_usage (
                model TEXT NOT NULL,
                task TEXT NOT NULL,
                calls INTEGER NOT NULL DEFAULT 0,
                cache_hits INTEGER NOT NULL DEFAULT 0,
                input_tokens INTEGER NOT NULL DEFAULT 0,
                output_tokens INTEGER NOT NULL DEFAULT 0,
                seconds REAL NOT NULL DEFAULT 0,
                failures INTEGER NOT NULL DEFAULT 0,
                retries INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (model, task)
            )""",
            """CREATE TABLE episodes (
                id INTEGER PRIMARY KEY,
                conversation TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                session INTEGER NOT NULL,
                message_ids TEXT NOT NULL,
                n_messages INTEGER NOT NULL,
                start_ts TEXT NOT NULL,
                end_ts TEXT NOT NULL,
                title TEXT NOT NULL DEFAULT '',
                narrative TEXT NOT NULL DEFAULT '',
                qa TEXT NOT NULL DEFAULT '[]',
                method TEXT NOT NULL,
                search_text TEXT NOT NULL DEFAULT '',
                scope TEXT NOT NULL DEFAULT '',
                embed_hash TEXT,
                vec_id INTEGER,
                created_at TEXT NOT NULL
            )""",
            "CREATE INDEX episodes_conv ON episodes (conversation, session)",
            """CREATE VIRTUAL TABLE episodes_fts USING fts5(
                search_text,
                scope,
                content='episodes',
                content_rowid='id',
                tokenize='porter unicode61 remove_diacritics 2'
            )""",
            """CREATE TRIGGER episodes_ai AFTER INSERT ON episodes BEGIN
                INSERT INTO episodes_fts(rowid, search_text, scope)
                VALUES (new.id, new.search_text, new.scope);
            END""",
            """CREATE TRIGGER episodes_ad AFTER DELETE ON episodes BEGIN
                INSERT INTO episodes_fts(episodes_fts, rowid, search_text, scope)
                VALUES ('delete', old.id, old.search_text, old.scope);
            END""",
            """CREATE TABLE episode_messages (
                episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
                msg_rowid INTEGER NOT NULL REFERENCES messages(rowid) ON DELETE CASCADE,
                PRIMARY KEY (episode_id, msg_rowid)
            ) WITHOUT ROWID""",
            "CREATE INDEX episode_messages_msg ON episode_messages (msg_rowid)",
            """CREATE TABLE claims (
                id INTEGER PRIMARY KEY,
                conversation TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                episode_id INTEGER REFERENCES episodes(id) ON DELETE CASCADE,
                text TEXT NOT NULL,
                speaker TEXT NOT NULL CHECK (speaker <> ''),
                speaker_key TEXT NOT NULL,
                subject TEXT NOT NULL,
                subject_key TEXT NOT NULL,
                kind TEXT NOT NULL,
                source TEXT NOT NULL,
                importance INTEGER NOT NULL,
                salience INTEGER NOT NULL,
                said_at TEXT NOT NULL,
                said_epoch REAL NOT NULL,
                valid_from TEXT,
                valid_to TEXT,
                evidence TEXT NOT NULL,
                n_evidence INTEGER NOT NULL CHECK (n_evidence > 0),
                entities TEXT NOT NULL DEFAULT '[]',
                supports TEXT NOT NULL DEFAULT '[]',  -- a theory's evidence claims (ids)
                method TEXT NOT NULL,
                search_text TEXT NOT NULL,
                scope TEXT NOT NULL,
                embed_hash TEXT NOT NULL,
                vec_id INTEGER,
                created_at TEXT NOT NULL
            )""",
            "CREATE INDEX claims_conv ON claims (conversation)",
            "CREATE INDEX claims_speaker ON claims (speaker_key)",
            "CREATE INDEX claims_subject ON claims (subject_key)",
            """CREATE TABLE claim_evidence (
                claim_id INTEGER NOT NULL REFERENCES claims(id) ON DELETE CASCADE,
                msg_rowid INTEGER NOT NULL REFERENCES messages(rowid) ON DELETE CASCADE,
                PRIMARY KEY (claim_id, msg_rowid)
            ) WITHOUT ROWID""",
            "CREATE INDEX claim_evidence_msg ON claim_evidence (msg_rowid)",
            """CREATE VIRTUAL TABLE claims_fts USING fts5(
                search_text,
                scope,
                content='claims',
                content_rowid='id',
                tokenize='porter unicode61 remove_diacritics 2'
            )""",
            """CREATE TRIGGER claims_ai AFTER INSERT ON claims BEGIN
                INSERT INTO claims_fts(rowid, search_text, scope)
                VALUES (new.id, new.search_text, new.scope);
            END""",
            """CREATE TRIGGER claims_ad AFTER DELETE ON claims BEGIN
                INSERT INTO claims_fts(claims_fts, rowid, search_text, scope)
                VALUES ('delete', old.id, old.search_text, old.scope);
            END""",
            # Which sessions the archivist has processed, with how many messages:
            # an interrupted extraction resumes at the first unfinished session,
            # and a session that grew is re-extracted.
            """CREATE TABLE extraction_state (
                conversation TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                session INTEGER NOT NULL,
                n_messages INTEGER NOT NULL,
                method TEXT NOT NULL,
                rejected INTEGER NOT NULL DEFAULT 0,
                done_at TEXT NOT NULL,
                PRIMARY KEY (conversation, session)
            )""",
        ),
    ),
    Migration(
        "0003_reconcile_consolidate",
        (
            # -- layers 1-2: claim history, entities, conflicts ------------------------
            "ALTER TABLE claims ADD COLUMN status TEXT NOT NULL DEFAULT 'current'",
            "ALTER TABLE claims ADD COLUMN replaced_by INTEGER",
            "ALTER TABLE claims ADD COLUMN reconciled INTEGER NOT NULL DEFAULT 0",
            # Reconciliation closes validity here, never in valid_to, so a reset
            # (a session re-extracted) restores what the archivist said.
            "ALTER TABLE claims ADD COLUMN closed_at TEXT",
            "CREATE INDEX claims_reconcile ON claims (conversation, reconciled)",
            """CREATE TABLE claim_events (
                id INTEGER PRIMARY KEY,
                claim_id INTEGER NOT NULL REFERENCES claims(id) ON DELETE CASCADE,
                conversation TEXT NOT NULL,
                action TEXT NOT NULL,
                other_claim INTEGER,
                at TEXT NOT NULL,
                detail TEXT NOT NULL DEFAULT '{}',
                created_at TEXT NOT NULL
            )""",
            "CREATE INDEX claim_events_claim ON claim_events (claim_id)",
            """CREATE TABLE entities (
                id INTEGER PRIMARY KEY,
                conversation TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                owner TEXT NOT NULL,
                owner_key TEXT NOT NULL,
                name TEXT NOT NULL,
                name_key TEXT NOT NULL,
                kind TEXT NOT NULL DEFAULT 'other',
                aliases TEXT NOT NULL DEFAULT '[]',
                roles TEXT NOT NULL DEFAULT '[]',
                states TEXT NOT NULL DEFAULT '[]',
                brief TEXT NOT NULL DEFAULT '',
                dossier TEXT NOT NULL DEFAULT '',
                dossier_hash TEXT NOT NULL DEFAULT '',
                first_seen TEXT,
                last_seen TEXT,
                mentions INTEGER NOT NULL DEFAULT 0,
                method TEXT NOT NULL DEFAULT 'heuristic',
                search_text TEXT NOT NULL DEFAULT '',
                scope TEXT NOT NULL DEFAULT '',
                embed_hash TEXT,
                vec_id INTEGER,
                created_at TEXT NOT NULL
            )""",
            "CREATE INDEX entities_owner ON entities (conversation, owner_key)",
            "CREATE INDEX entities_name ON entities (name_key)",
            """CREATE VIRTUAL TABLE entities_fts USING fts5(
                search_text,
                scope,
                content='entities',
                content_rowid='id',
                tokenize='porter unicode61 remove_diacritics 2'
            )""",
            """CREATE TRIGGER entities_ai AFTER INSERT ON entities BEGIN
                INSERT INTO entities_fts(rowid, search_text, scope)
                VALUES (new.id, new.search_text, new.scope);
            END""",
            """CREATE TRIGGER entities_ad AFTER DELETE ON entities BEGIN
                INSERT INTO entities_fts(entities_fts, rowid, search_text, scope)
                VALUES ('delete', old.id, old.search_text, old.scope);
            END""",
            """CREATE TRIGGER entities_au AFTER UPDATE OF search_text, scope ON entities BEGIN
                INSERT INTO entities_fts(entities_fts, rowid, search_text, scope)
                VALUES ('delete', old.id, old.search_text, old.scope);
                INSERT INTO entities_fts(rowid, search_text, scope)
                VALUES (new.id, new.search_text, new.scope);
            END""",
            """CREATE TABLE claim_entities (
                claim_id INTEGER NOT NULL REFERENCES claims(id) ON DELETE CASCADE,
                entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
                PRIMARY KEY (claim_id, entity_id)
            ) WITHOUT ROWID""",
            "CREATE INDEX claim_entities_entity ON claim_entities (entity_id)",
            """CREATE TABLE conflicts (
                id INTEGER PRIMARY KEY,
                conversation TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                subject TEXT NOT NULL,
                attribute TEXT NOT NULL,
                old_claim INTEGER NOT NULL REFERENCES claims(id) ON DELETE CASCADE,
                new_claim INTEGER NOT NULL REFERENCES claims(id) ON DELETE CASCADE,
                old_value TEXT NOT NULL,
                new_value TEXT NOT NULL,
                old_time TEXT NOT NULL,
                new_time TEXT NOT NULL,
                kind TEXT NOT NULL,
                resolution TEXT NOT NULL,
                method TEXT NOT NULL,
                created_at TEXT NOT NULL,
                UNIQUE (old_claim, new_claim)
            )""",
            # -- layer 3: people across conversations ---------------------------------
            """CREATE TABLE persons (
                id TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                declared INTEGER NOT NULL DEFAULT 0,
                key_info TEXT NOT NULL DEFAULT '',
                key_info_hash TEXT NOT NULL DEFAULT '',
                created_at TEXT NOT NULL
            )""",
            """CREATE TABLE person_identities (
                person_id TEXT NOT NULL REFERENCES persons(id) ON DELETE CASCADE,
                conversation TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                name TEXT NOT NULL,
                name_key TEXT NOT NULL,
                declared_id TEXT,
                PRIMARY KEY (conversation, name_key)
            )""",
            "CREATE INDEX person_identities_person ON person_identities (person_id)",
            """CREATE TABLE decisions (
                id INTEGER PRIMARY KEY,
                kind TEXT NOT NULL,
                a TEXT NOT NULL,
                b TEXT NOT NULL,
                verdict TEXT NOT NULL CHECK (verdict IN ('MERGE', 'SEPARATE')),
                reasons TEXT NOT NULL,
                evidence TEXT NOT NULL DEFAULT '[]',
                steps TEXT NOT NULL DEFAULT '[]',
                method TEXT NOT NULL,
                created_at TEXT NOT NULL
            )""",
            "CREATE INDEX decisions_pair ON decisions (kind, a, b)",
            # -- consolidation: durable jobs and what they build -------------------------
            """CREATE TABLE jobs (
                id INTEGER PRIMARY KEY,
                kind TEXT NOT NULL,
                key TEXT NOT NULL,
                payload TEXT NOT NULL DEFAULT '{}',
                status TEXT NOT NULL DEFAULT 'queued',
                attempts INTEGER NOT NULL DEFAULT 0,
                error TEXT NOT NULL DEFAULT '',
                result TEXT NOT NULL DEFAULT '{}',
                lease_until REAL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                UNIQUE (kind, key)
            )""",
            "CREATE INDEX jobs_status ON jobs (status, id)",
            """CREATE TABLE scenes (
                id INTEGER PRIMARY KEY,
                conversation TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                title TEXT NOT NULL DEFAULT '',
                summary TEXT NOT NULL DEFAULT '',
                summary_hash TEXT NOT NULL DEFAULT '',
                centroid BLOB,
                n_episodes INTEGER NOT NULL DEFAULT 0,
                start_ts TEXT NOT NULL,
                end_ts TEXT NOT NULL,
                method TEXT NOT NULL DEFAULT 'heuristic',
                updated_at TEXT NOT NULL
            )""",
            """CREATE TABLE scene_episodes (
                scene_id INTEGER NOT NULL REFERENCES scenes(id) ON DELETE CASCADE,
                episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
                PRIMARY KEY (scene_id, episode_id)
            ) WITHOUT ROWID""",
            "CREATE UNIQUE INDEX scene_episodes_episode ON scene_episodes (episode_id)",
            """CREATE TABLE summaries (
                id INTEGER PRIMARY KEY,
                conversation TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                level INTEGER NOT NULL CHECK (level >= 1),
                start_ts TEXT NOT NULL,
                end_ts TEXT NOT NULL,
                covers TEXT NOT NULL,
                covers_hash TEXT NOT NULL,
                text TEXT NOT NULL,
                method TEXT NOT NULL,
                created_at TEXT NOT NULL,
                UNIQUE (conversation, level, covers_hash)
            )""",
            """CREATE TABLE context_log (
                id INTEGER PRIMARY KEY,
                person TEXT,
                conversation TEXT,
                items TEXT NOT NULL,
                reply TEXT NOT NULL DEFAULT '',
                at TEXT NOT NULL,
                reviewed INTEGER NOT NULL DEFAULT 0
            )""",
            """CREATE TABLE usefulness (
                item_kind TEXT NOT NULL,
                item_id TEXT NOT NULL,
                shown INTEGER NOT NULL DEFAULT 0,
                used INTEGER NOT NULL DEFAULT 0,
                score REAL NOT NULL DEFAULT 0.5,
                updated_at TEXT NOT NULL,
                PRIMARY KEY (item_kind, item_id)
            )""",
        ),
    ),
    Migration(
        "0004_extraction_last_message",
        (
            # The id of the last message the archivist read in a session: a session
            # that only grew at its end is extracted from there on (append), one
            # whose earlier messages changed is extracted again. NULL (a row from
            # before this migration): the next growth re-extracts once.
            "ALTER TABLE extraction_state ADD COLUMN last_msg_id TEXT",
        ),
    ),
    Migration(
        "0005_vector_fills",
        (
            # Messages stored before their vector (a server embeds them in its worker)
            # get it later, below rowids a process's cached vector matrix already
            # covers; each fill is logged here so every cache picks it up (pruned).
            """CREATE TABLE vector_fills (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                msg_rowid INTEGER NOT NULL
            )""",
        ),
    ),
)
