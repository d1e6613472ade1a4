"""PostgreSQL persistence of derived memory: episodes, claims, extraction state, LLM cache.

A mixin of PostgresStore, the port of store/sqlite_derived.py with the same
semantics and the same row converters: each session's extraction is written
in one transaction with its progress marker, so an interrupted extraction
resumes at the first unfinished session.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np

from ..errors import StaleExtraction
from ..model import Claim, Episode
from . import sql as q
from .base import ExtractionMark, IndexedClaim, IndexedEpisode
from .sql_pg import where
from .sqlite_derived import (
    _CLAIM_COLS,
    _EPISODE_COLS,
    _entity_dict,
    _iso,
    _row_to_claim,
    _row_to_episode,
    claim_cols,
)

if TYPE_CHECKING:
    import psycopg

_USAGE = ("calls", "cache_hits", "input_tokens", "output_tokens", "seconds", "failures", "retries")


class PostgresDerivedMixin:
    """Claims, episodes and extraction bookkeeping for PostgresStore."""

    if TYPE_CHECKING:
        from contextlib import AbstractContextManager

        def _write(self) -> AbstractContextManager[psycopg.Cursor]: ...

        def _read(self, sql: str, params: Sequence = ()) -> list[tuple]: ...

        def _read_one(self, sql: str, params: Sequence = ()) -> tuple | None: ...

        def _bm25(
            self, table: str, text: str, filters: q.Filters, limit: int
        ) -> list[tuple[int, float]]: ...

        def _vector_search(
            self, table: str, model: str, query: np.ndarray, filters: q.Filters, limit: int
        ) -> list[tuple[int, float]]: ...

        @staticmethod
        def _put_vectors_pg(
            cur: psycopg.Cursor, model: str, vectors: dict[str, np.ndarray]
        ) -> int: ...

    # -- LLM response cache and usage ------------------------------------------------------

    def llm_cache_get(self, key: str) -> str | None:
        row = self._read_one("SELECT value FROM llm_cache WHERE key = %s", (key,))
        return row[0] if row else None

    def llm_cache_put(self, key: str, task: str, model: str, value: str) -> None:
        with self._write() as cur:
            cur.execute(
                "INSERT INTO llm_cache(key, task, model, value, created_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (key) DO UPDATE SET "
                "task = excluded.task, model = excluded.model, value = excluded.value, "
                "created_at = excluded.created_at",
                (key, task, model, value, datetime.now(UTC).isoformat()),
            )

    def add_llm_usage(self, model: str, usage: dict[str, dict]) -> None:
        """Add per-task counters (llm.accounting summaries) to the lifetime totals."""
        cols = ", ".join(_USAGE)
        updates = ", ".join(f"{c} = u.{c} + excluded.{c}" for c in _USAGE)
        with self._write() as cur:
            cur.executemany(
                f"INSERT INTO llm_usage AS u (model, task, {cols}) "
                f"VALUES ({', '.join(['%s'] * (len(_USAGE) + 2))}) "
                f"ON CONFLICT (model, task) DO UPDATE SET {updates}",
                [(model, task, *(row.get(c, 0) for c in _USAGE)) for task, row in usage.items()],
            )

    def llm_usage(self) -> dict[str, dict[str, dict]]:
        """model -> task -> lifetime counters."""
        out: dict[str, dict[str, dict]] = {}
        for model, task, *vals in self._read(
            f"SELECT model, task, {', '.join(_USAGE)} FROM llm_usage"
        ):
            row = {
                c: (float(v) if c == "seconds" else int(v))
                for c, v in zip(_USAGE, vals, strict=True)
            }
            out.setdefault(model, {})[task] = row
        return out

    # -- extraction ------------------------------------------------------------------------

    def extraction_state(self, conversation: str) -> dict[int, int]:
        """session -> number of messages it had when the archivist last processed it."""
        return {s: m.n_messages for s, m in self.extraction_marks(conversation).items()}

    def extraction_marks(self, conversation: str) -> dict[int, ExtractionMark]:
        """session -> how far the archivist read it (count, last message id, method)."""
        rows = self._read(
            "SELECT session, n_messages, last_msg_id, method FROM extraction_state "
            "WHERE conversation = %s",
            (conversation,),
        )
        return {int(s): ExtractionMark(int(n), last, method) for s, n, last, method in rows}

    def save_extraction(
        self,
        conversation: str,
        session: int,
        episodes: Sequence[IndexedEpisode],
        claims: Sequence[IndexedClaim],
        model: str,
        vectors: dict[str, np.ndarray],
        *,
        n_messages: int,
        method: str,
        rejected: int = 0,
        last_message: str | None = None,
        append_after: ExtractionMark | None = None,
    ) -> list[int]:
        """Replace one session's episodes and claims and mark it done, atomically.

        With ``append_after`` nothing is deleted: the episodes and claims of the
        messages after that mark are added (see the SQLite twin). Raises
        StaleExtraction, writing nothing, when the mark moved on meanwhile.
        """
        if append_after is not None and append_after.method != method:
            raise ValueError(f"cannot append {method} extraction to {append_after.method}'s")
        now = datetime.now(UTC).isoformat()
        with self._write() as cur:
            if append_after is None:
                self._delete_session_derived(cur, conversation, session)
                cur.execute(
                    "INSERT INTO extraction_state(conversation, session, n_messages, "
                    "last_msg_id, method, rejected, done_at) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (conversation, session) DO UPDATE SET n_messages = "
                    "excluded.n_messages, last_msg_id = excluded.last_msg_id, "
                    "method = excluded.method, rejected = excluded.rejected, "
                    "done_at = excluded.done_at",
                    (conversation, session, n_messages, last_message, method, rejected, now),
                )
            else:
                # The row lock taken here makes a concurrent append wait, then miss.
                moved = cur.execute(
                    "UPDATE extraction_state SET n_messages = %s, last_msg_id = %s, "
                    "rejected = rejected + %s, done_at = %s WHERE conversation = %s "
                    "AND session = %s AND n_messages = %s AND last_msg_id = %s AND method = %s",
                    (n_messages, last_message, rejected, now, conversation, session)
                    + (append_after.n_messages, append_after.last_message, append_after.method),
                )
                if moved.rowcount != 1:
                    raise StaleExtraction(
                        f"{conversation!r} session {session} was extracted past "
                        f"{append_after.n_messages} messages meanwhile"
                    )
            msg_rowids = dict(
                cur.execute(
                    "SELECT msg_id, rowid FROM messages WHERE conversation = %s", (conversation,)
                ).fetchall()
            )
            self._put_vectors_pg(cur, model, vectors)
            vec_ids = dict(
                cur.execute(
                    "SELECT hash, id FROM vectors WHERE model = %s AND hash = ANY(%s)",
                    (model, [x.embed_hash for x in (*episodes, *claims)]),
                ).fetchall()
            )
            episode_ids = [_insert_episode(cur, e, msg_rowids, vec_ids, now) for e in episodes]
            claim_ids = [
                _insert_claim(cur, c, episode_ids, msg_rowids, vec_ids, now) for c in claims
            ]
            # A theory's supporting claims are positions in ``claims``: now ids.
            cur.executemany(
                "UPDATE claims SET supports = %s WHERE id = %s",
                [
                    (json.dumps([claim_ids[i] for i in c.claim.evidence_claims]), cid)
                    for c, cid in zip(claims, claim_ids, strict=True)
                    if c.claim.evidence_claims
                ],
            )
        return claim_ids

    def _delete_session_derived(self, cur: psycopg.Cursor, conv: str, session: int) -> None:
        n = cur.execute(
            "DELETE FROM claims WHERE episode_id IN "
            "(SELECT id FROM episodes WHERE conversation = %s AND session = %s)",
            (conv, session),
        ).rowcount
        m = cur.execute(
            "DELETE FROM episodes WHERE conversation = %s AND session = %s", (conv, session)
        ).rowcount
        if n > 0 or m > 0:
            # Claims that replaced or absorbed the deleted ones are gone: the
            # conversation is reconciled again from what the archivist said.
            self._reset_reconciliation(cur, conv)  # type: ignore[attr-defined]

    def clear_derived(self, conversation: str | None = None) -> None:
        """Forget derived memory (all, or one conversation's) so it can be rebuilt."""
        where, params = ("WHERE conversation = %s", (conversation,)) if conversation else ("", ())
        with self._write() as cur:
            # What reconciliation and consolidation built goes too: it is derived
            # from these claims and episodes and is rebuilt with them.
            for table in (
                "claims",
                "episodes",
                "extraction_state",
                "entities",
                "scenes",
                "summaries",
            ):
                cur.execute(f"DELETE FROM {table} {where}", params)  # type: ignore[arg-type]

    # -- search ----------------------------------------------------------------------------

    def claim_keyword_search(
        self, text: str, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """BM25 over claim texts; higher is better."""
        return self._bm25("claims", text, filters, limit)

    def claim_vector_search(
        self, model: str, query: np.ndarray, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """Exact cosine search over the filtered claims."""
        return self._vector_search("claims", model, query, filters, limit)

    def episode_keyword_search(
        self, text: str, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """BM25 over episode titles and narratives; higher is better."""
        return self._bm25("episodes", text, filters, limit)

    def episode_vector_search(
        self, model: str, query: np.ndarray, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """Exact cosine search over the filtered episodes' narratives."""
        return self._vector_search("episodes", model, query, filters, limit)

    # -- reads -----------------------------------------------------------------------------

    def episode_message_rowids(self, episode_ids: Iterable[int]) -> dict[int, list[int]]:
        """episode id -> its message rowids in conversation order."""
        out: dict[int, list[int]] = {}
        for eid, rid in self._read(
            "SELECT em.episode_id, em.msg_rowid FROM episode_messages em JOIN messages m "
            "ON m.rowid = em.msg_rowid WHERE em.episode_id = ANY(%s) ORDER BY m.seq",
            (_ids(episode_ids),),
        ):
            out.setdefault(eid, []).append(rid)
        return out

    def claims_by_id(self, ids: Iterable[int]) -> dict[int, Claim]:
        rows = self._read(f"SELECT {_CLAIM_COLS} FROM claims WHERE id = ANY(%s)", (_ids(ids),))
        return {r[0]: _row_to_claim(r) for r in rows}

    def claim_evidence_rowids(self, claim_ids: Iterable[int]) -> dict[int, list[int]]:
        """claim id -> message rowids of its evidence, in conversation order."""
        ids = _ids(claim_ids)
        out: dict[int, list[int]] = {i: [] for i in ids}
        for cid, rid in self._read(
            "SELECT ce.claim_id, ce.msg_rowid FROM claim_evidence ce JOIN messages m "
            "ON m.rowid = ce.msg_rowid WHERE ce.claim_id = ANY(%s) ORDER BY m.seq",
            (ids,),
        ):
            out[cid].append(rid)
        return out

    def claims_for_messages(self, rowids: Iterable[int]) -> dict[int, list[Claim]]:
        """message rowid -> the claims it is evidence of (any status), for as-of recall."""
        out: dict[int, list[Claim]] = {}
        for r in self._read(
            f"SELECT ce.msg_rowid, {claim_cols('c')} FROM claim_evidence ce "
            "JOIN claims c ON c.id = ce.claim_id WHERE ce.msg_rowid = ANY(%s) ORDER BY c.id",
            (_ids(rowids),),
        ):
            out.setdefault(r[0], []).append(_row_to_claim(r[1:]))
        return out

    def list_claims(self, filters: q.Filters, limit: int = 100, offset: int = 0) -> list[Claim]:
        cond, params = where(filters, "claims", "c")
        rows = self._read(
            f"SELECT {claim_cols('c')} FROM claims c WHERE {cond} "
            "ORDER BY c.said_epoch, c.id LIMIT %s OFFSET %s",
            (*params, int(limit), int(offset)),
        )
        return [_row_to_claim(r) for r in rows]

    def list_episodes(
        self, conversation: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Episode]:
        where, params = ("WHERE conversation = %s", (conversation,)) if conversation else ("", ())
        rows = self._read(
            f"SELECT {_EPISODE_COLS} FROM episodes {where} "
            'ORDER BY conversation COLLATE "C", start_ts COLLATE "C", id LIMIT %s OFFSET %s',
            (*params, int(limit), int(offset)),
        )
        return [_row_to_episode(r) for r in rows]

    def episodes_for_messages(self, rowids: Iterable[int]) -> dict[int, Episode]:
        """message rowid -> the episode it belongs to (index fine, return coarse)."""
        rows = self._read(
            f"SELECT em.msg_rowid, {_EPISODE_COLS.replace('id,', 'e.id,', 1)} "
            "FROM episode_messages em JOIN episodes e ON e.id = em.episode_id "
            "WHERE em.msg_rowid = ANY(%s)",
            (_ids(rowids),),
        )
        return {r[0]: _row_to_episode(r[1:]) for r in rows}

    def derived_stats(self) -> dict:
        def one(sql: str) -> int:
            return int(self._read_one(sql)[0])  # type: ignore[index]

        return {
            "episodes": one("SELECT count(*) FROM episodes"),
            "claims": one("SELECT count(*) FROM claims"),
            "claims_by_kind": {
                k: int(n) for k, n in self._read("SELECT kind, count(*) FROM claims GROUP BY kind")
            },
            "sessions_extracted": one("SELECT count(*) FROM extraction_state"),
            "claims_rejected": one("SELECT coalesce(sum(rejected), 0) FROM extraction_state"),
            "llm_cache_entries": one("SELECT count(*) FROM llm_cache"),
        }


def _ids(ids: Iterable[int]) -> list[int]:
    return list(dict.fromkeys(int(i) for i in ids))


def _insert_episode(
    cur: psycopg.Cursor,
    ie: IndexedEpisode,
    msg_rowids: dict[str, int],
    vec_ids: dict[str, int],
    now: str,
) -> int:
    e = ie.episode
    rowids = [msg_rowids[m] for m in e.message_ids if m in msg_rowids]
    people = [
        p
        for (p,) in cur.execute(
            "SELECT DISTINCT person FROM message_people WHERE msg_rowid = ANY(%s)", (rowids,)
        ).fetchall()
    ]
    (eid,) = cur.execute(
        "INSERT INTO episodes(conversation, session, message_ids, n_messages, start_ts, "
        "end_ts, title, narrative, qa, method, search_text, scope, embed_hash, vec_id, "
        f"created_at) VALUES ({', '.join(['%s'] * 15)}) RETURNING id",
        (
            e.conversation,
            e.session,
            json.dumps(list(e.message_ids)),
            len(rowids),
            e.start.isoformat(),
            e.end.isoformat(),
            e.title,
            e.narrative,
            json.dumps([list(p) for p in e.qa]),
            e.method,
            ie.search_text,
            q.scope_text(e.conversation, people),
            ie.embed_hash,
            vec_ids.get(ie.embed_hash),
            now,
        ),
    ).fetchone()  # type: ignore[misc]
    cur.executemany(
        "INSERT INTO episode_messages(episode_id, msg_rowid) VALUES (%s, %s) "
        "ON CONFLICT DO NOTHING",
        [(eid, r) for r in rowids],
    )
    return int(eid)


def _insert_claim(
    cur: psycopg.Cursor,
    ic: IndexedClaim,
    episode_ids: list[int],
    msg_rowids: dict[str, int],
    vec_ids: dict[str, int],
    now: str,
) -> int:
    c = ic.claim
    rowids = sorted({msg_rowids[m] for m in c.evidence if m in msg_rowids})
    if not c.speaker or not rowids:
        raise ValueError(f"claim {c.text[:60]!r} has no speaker or no stored evidence")
    (cid,) = cur.execute(
        "INSERT INTO claims(conversation, episode_id, text, speaker, speaker_key, subject, "
        "subject_key, kind, source, importance, salience, said_at, said_epoch, valid_from, "
        "valid_to, evidence, n_evidence, entities, method, search_text, scope, embed_hash, "
        f"vec_id, created_at) VALUES ({', '.join(['%s'] * 24)}) RETURNING id",
        (
            c.conversation,
            episode_ids[ic.episode_index],
            c.text,
            c.speaker,
            q.person_key(c.speaker),
            c.subject,
            q.person_key(c.subject),
            c.kind,
            c.source,
            c.importance,
            c.salience,
            c.said_at.isoformat(),
            c.said_at.timestamp(),
            _iso(c.valid_from),
            _iso(c.valid_to),
            json.dumps(list(c.evidence)),
            len(rowids),
            json.dumps([_entity_dict(e) for e in c.entities]),
            c.method,
            ic.search_text,
            q.scope_text(c.conversation, (c.speaker, c.subject)),
            ic.embed_hash,
            vec_ids.get(ic.embed_hash),
            now,
        ),
    ).fetchone()  # type: ignore[misc]
    cur.executemany(
        "INSERT INTO claim_evidence(claim_id, msg_rowid) VALUES (%s, %s)",
        [(cid, r) for r in rowids],
    )
    return int(cid)
