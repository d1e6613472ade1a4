"""PostgreSQL persistence of reconciliation, consolidation and the job queue.

A mixin of PostgresStore, the port of store/sqlite_reconcile.py,
sqlite_consolidate.py and sqlite_jobs.py (people live in postgres_people.py)
with the same semantics: reconciliation only sets status, ``replaced_by`` and
``closed_at`` and appends events, conflicts and entity mentions; every write is
one transaction. Row converters are the SQLite modules' own, since columns
hold the same TEXT (ISO timestamps, JSON). Jobs are taken with
``FOR UPDATE SKIP LOCKED`` so two workers never lease the same job.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from ..model import Claim, ClaimEvent, Conflict, Entity, Job, Scene, Summary
from . import sql as q
from . import sql_pg as pq
from .base import ReconcileBatch
from .postgres_people import C, PostgresPeopleMixin
from .sqlite_consolidate import (
    _SUMMARY_COLS,
    _row_to_summary,
    _unpack,
    conversations_of,
    rank_centroids,
)
from .sqlite_derived import _CLAIM_COLS, _row_to_claim, claim_cols
from .sqlite_jobs import _JOB_COLS, _row_to_job
from .sqlite_people import _now
from .sqlite_reconcile import (
    _CONFLICT_COLS,
    _ENTITY_COLS,
    _row_to_conflict,
    _row_to_entity,
    entity_brief,
)
from .vecindex import pack

if TYPE_CHECKING:
    import psycopg


def _where(parts: list[str]) -> str:
    return f"WHERE {' AND '.join(parts)}" if parts else ""


class PostgresMemoryMixin(PostgresPeopleMixin):
    """Reconciliation, people, consolidation and jobs for PostgresStore (module docstring)."""

    # -- vectors -------------------------------------------------------------------------

    def _vectors_of(self, table: str, model: str, ids: Iterable[int]) -> dict[int, np.ndarray]:
        unique = list(dict.fromkeys(int(i) for i in ids))
        if not unique:
            return {}
        rows = self._read(
            f"SELECT t.id, v.vec::real[] FROM {table} t JOIN vectors v ON v.id = t.vec_id "
            "WHERE v.model = %s AND t.id = ANY(%s)",
            (model, unique),
        )
        return {i: np.asarray(v, dtype=np.float32) for i, v in rows}

    # -- reconciliation: writes ------------------------------------------------------------

    def claims_to_reconcile(self, conversation: str) -> tuple[list[Claim], list[Claim]]:
        """(claims already reconciled, claims not yet), each oldest first."""
        rows = self._read(
            f"SELECT {_CLAIM_COLS}, reconciled FROM claims WHERE conversation = %s "
            "ORDER BY said_epoch, id",
            (conversation,),
        )
        done = [_row_to_claim(r[:-1]) for r in rows if r[-1]]
        todo = [_row_to_claim(r[:-1]) for r in rows if not r[-1]]
        return done, todo

    def claim_vectors(self, model: str, ids: Iterable[int]) -> dict[int, np.ndarray]:
        """claim id -> its stored vector (claims whose vector is missing are left out)."""
        return self._vectors_of("claims", model, ids)

    def save_reconciliation(self, batch: ReconcileBatch) -> None:
        """Write one conversation's reconciliation atomically (all of it or none)."""
        now = _now()
        with self._write() as cur:
            cur.executemany(
                "UPDATE claims SET status = %s, replaced_by = %s, closed_at = %s WHERE id = %s",
                [
                    (st, by, closed.isoformat() if closed else None, cid)
                    for cid, (st, by, closed) in batch.updates.items()
                ],
            )
            cur.executemany(
                "INSERT INTO claim_events(claim_id, conversation, action, other_claim, at, "
                "detail, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        e.claim,
                        batch.conversation,
                        e.action,
                        e.other,
                        e.at.isoformat(),
                        json.dumps(e.detail),
                        now,
                    )
                    for e in batch.events
                ],
            )
            cur.executemany(
                f"INSERT INTO conflicts({_CONFLICT_COLS.replace('id, ', '', 1)}, created_at) "
                f"VALUES ({', '.join(['%s'] * 13)}) ON CONFLICT DO NOTHING",
                [
                    (
                        c.conversation,
                        c.subject,
                        c.attribute,
                        c.old_claim,
                        c.new_claim,
                        c.old_value,
                        c.new_value,
                        c.old_time.isoformat(),
                        c.new_time.isoformat(),
                        c.kind,
                        c.resolution,
                        c.method,
                        now,
                    )
                    for c in batch.conflicts
                ],
            )
            self._put_vectors_pg(cur, batch.model, batch.vectors)
            for entity, claim_ids, search_text, embed_hash in batch.entities:
                _save_entity(cur, entity, claim_ids, search_text, embed_hash, batch.model, now)
            cur.executemany(
                "UPDATE claims SET reconciled = 1 WHERE id = %s", [(i,) for i in batch.reconciled]
            )

    def reset_reconciliation(self, conversation: str) -> None:
        """Forget a conversation's reconciliation (claims back to as-extracted)."""
        with self._write() as cur:
            self._reset_reconciliation(cur, conversation)

    @staticmethod
    def _reset_reconciliation(cur: psycopg.Cursor, conversation: str) -> None:
        """The reset inside the caller's transaction (used when a session is re-extracted)."""
        for table in ("claim_events", "conflicts", "entities"):
            cur.execute(f"DELETE FROM {table} WHERE conversation = %s", (conversation,))
        cur.execute(
            "UPDATE claims SET status = 'current', replaced_by = NULL, closed_at = NULL, "
            "reconciled = 0 WHERE conversation = %s",
            (conversation,),
        )

    # -- reconciliation: reads -------------------------------------------------------------

    def list_entities(
        self,
        conversation: str | None = None,
        owner: str | None = None,
        name: str | None = None,
        limit: int = 1000,
    ) -> list[Entity]:
        """Entities, most mentioned first; ``name`` matches the name or any alias."""
        parts: list[str] = []
        params: list = []
        if conversation is not None:
            parts.append("conversation = %s")
            params.append(conversation)
        if owner is not None:
            parts.append("owner_key = %s")
            params.append(q.person_key(owner))
        if name is not None:
            parts.append(
                "(name_key = %s OR EXISTS (SELECT 1 FROM "
                "jsonb_array_elements_text(entities.aliases::jsonb) a(v) WHERE lower(a.v) = %s))"
            )
            params += [q.person_key(name), q.person_key(name)]
        rows = self._read(
            f"SELECT {_ENTITY_COLS} FROM entities {_where(parts)} "
            "ORDER BY mentions DESC, id LIMIT %s",
            (*params, int(limit)),
        )
        return [_row_to_entity(r) for r in rows]

    def entity_claims(self, entity_id: int, current_only: bool = True) -> list[Claim]:
        """Claims mentioning the entity, oldest first (only current ones by default)."""
        status = "AND c.status = 'current'" if current_only else ""
        rows = self._read(
            f"SELECT {claim_cols('c')} FROM claims c JOIN claim_entities ce ON ce.claim_id = c.id "
            f"WHERE ce.entity_id = %s {status} ORDER BY c.said_epoch, c.id",
            (int(entity_id),),
        )
        return [_row_to_claim(r) for r in rows]

    def claim_history(self, claim_id: int) -> list[ClaimEvent]:
        """Every event of a claim, in the order reconciliation recorded them."""
        return self.claim_histories([claim_id]).get(int(claim_id), [])

    def claim_histories(self, claim_ids: Iterable[int]) -> dict[int, list[ClaimEvent]]:
        """Claim id -> its events in recorded order (claims without events are absent)."""
        ids = list(dict.fromkeys(int(i) for i in claim_ids))
        if not ids:
            return {}
        rows = self._read(
            "SELECT id, claim_id, action, other_claim, at, detail FROM claim_events "
            "WHERE claim_id = ANY(%s) ORDER BY id",
            (ids,),
        )
        out: dict[int, list[ClaimEvent]] = {}
        for i, c, a, o, at, d in rows:
            out.setdefault(c, []).append(
                ClaimEvent(
                    id=i,
                    claim=c,
                    action=a,
                    other=o,
                    at=datetime.fromisoformat(at),
                    detail=json.loads(d),
                )
            )
        return out

    def list_conflicts(
        self, conversation: str | None = None, subject: str | None = None, limit: int = 1000
    ) -> list[Conflict]:
        """Conflicts in the order their newer claims start."""
        parts: list[str] = []
        params: list = []
        if conversation is not None:
            parts.append("conversation = %s")
            params.append(conversation)
        if subject is not None:
            parts.append("lower(subject) = %s")
            params.append(q.person_key(subject))
        rows = self._read(
            f"SELECT {_CONFLICT_COLS} FROM conflicts {_where(parts)} "
            f"ORDER BY new_time {C}, id LIMIT %s",
            (*params, int(limit)),
        )
        return [_row_to_conflict(r) for r in rows]

    def reconcile_stats(self) -> dict:
        """Counts for stats and benchmarks."""

        def one(sql: str) -> int:
            row = self._read_one(sql)
            return int(row[0]) if row else 0

        return {
            "entities": one("SELECT count(*) FROM entities"),
            "entity_mentions": one("SELECT count(*) FROM claim_entities"),
            "claims_by_status": dict(
                self._read("SELECT status, count(*) FROM claims GROUP BY status")  # type: ignore[arg-type]
            ),
            "conflicts": one("SELECT count(*) FROM conflicts"),
            "claims_unreconciled": one("SELECT count(*) FROM claims WHERE reconciled = 0"),
        }

    # -- scenes ----------------------------------------------------------------------------

    def scene_rows(self, conversation: str) -> list[tuple[Scene, np.ndarray | None, str]]:
        """A conversation's scenes with their centroids and summary hashes (for clustering)."""
        return self._scenes("WHERE s.conversation = %s", (conversation,), centroids=True)

    def list_scenes(self, conversation: str | None = None) -> list[Scene]:
        """Scenes (all, or one conversation's) in time order, members oldest first."""
        where, params = ("WHERE s.conversation = %s", (conversation,)) if conversation else ("", ())
        return [s for s, _, _ in self._scenes(where, params, centroids=False)]

    def _scenes(
        self, where: str, params: tuple, *, centroids: bool
    ) -> list[tuple[Scene, np.ndarray | None, str]]:
        members: dict[int, list[int]] = {}
        for sid, eid in self._read(
            "SELECT se.scene_id, se.episode_id FROM scene_episodes se "
            "JOIN episodes e ON e.id = se.episode_id JOIN scenes s ON s.id = se.scene_id "
            f"{where} ORDER BY e.start_ts {C}, e.id",
            params,
        ):
            members.setdefault(sid, []).append(eid)
        centroid = "s.centroid" if centroids else "NULL"
        rows = self._read(
            "SELECT s.id, s.conversation, s.title, s.summary, s.summary_hash, s.start_ts, "
            f"s.end_ts, s.method, {centroid} FROM scenes s {where} "
            f"ORDER BY s.conversation {C}, s.start_ts {C}, s.id",
            params,
        )
        out = []
        for sid, conv, title, summary, h, a, b, method, blob in rows:
            scene = Scene(
                conversation=conv,
                title=title,
                summary=summary,
                episode_ids=tuple(members.get(sid, ())),
                start=datetime.fromisoformat(a),
                end=datetime.fromisoformat(b),
                method=method,
                id=sid,
            )
            out.append((scene, _unpack(None if blob is None else bytes(blob)), h))
        return out

    def episode_vectors(self, model: str, episode_ids: Iterable[int]) -> dict[int, np.ndarray]:
        """Stored narrative vectors of episodes under ``model`` (episodes without one left out)."""
        return self._vectors_of("episodes", model, episode_ids)

    def scene_search(
        self, query: np.ndarray, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """Scene ids by cosine of their centroid to ``query``, best first (as SQLite's)."""
        parts, params = ["centroid IS NOT NULL"], []
        convs = conversations_of(filters)
        if convs is not None:
            parts.append("conversation = ANY(%s)")
            params.append(list(convs))
        if filters.since is not None:
            parts.append("extract(epoch FROM end_ts::timestamptz) >= %s")
            params.append(filters.since.timestamp())
        if filters.until is not None:
            parts.append("extract(epoch FROM start_ts::timestamptz) <= %s")
            params.append(filters.until.timestamp())
        rows = self._read(f"SELECT id, centroid FROM scenes {_where(parts)}", params)
        return rank_centroids(rows, query, limit)

    def scene_message_rowids(self, scene_ids: Iterable[int]) -> dict[int, list[int]]:
        """scene id -> the rowids of its episodes' messages, in conversation order."""
        out: dict[int, list[int]] = {}
        for sid, rid in self._read(
            "SELECT se.scene_id, em.msg_rowid FROM scene_episodes se "
            "JOIN episode_messages em ON em.episode_id = se.episode_id "
            "JOIN messages m ON m.rowid = em.msg_rowid WHERE se.scene_id = ANY(%s) "
            "ORDER BY m.seq, m.rowid",
            (list(dict.fromkeys(int(i) for i in scene_ids)),),
        ):
            out.setdefault(sid, []).append(rid)
        return out

    def save_scenes(
        self,
        conversation: str,
        scenes: Sequence[tuple[Scene, np.ndarray, str]],
        delete: Iterable[int] = (),
    ) -> list[int]:
        """Insert or update scenes with their members, and drop emptied ones, atomically."""
        now = _now()
        ids: list[int] = []
        with self._write() as cur:
            cur.executemany(
                "DELETE FROM scenes WHERE id = %s AND conversation = %s",
                [(i, conversation) for i in delete],
            )
            for scene, centroid, summary_hash in scenes:
                values = (
                    scene.title,
                    scene.summary,
                    summary_hash,
                    pack(centroid),
                    len(scene.episode_ids),
                    scene.start.isoformat(),
                    scene.end.isoformat(),
                    scene.method,
                    now,
                )
                if scene.id is None:
                    row = cur.execute(
                        "INSERT INTO scenes(title, summary, summary_hash, centroid, n_episodes, "
                        "start_ts, end_ts, method, updated_at, conversation) "
                        f"VALUES ({', '.join(['%s'] * 10)}) RETURNING id",
                        (*values, conversation),
                    ).fetchone()
                    sid = int(row[0])  # type: ignore[index]
                else:
                    sid = scene.id
                    cur.execute(
                        "UPDATE scenes SET title = %s, summary = %s, summary_hash = %s, "
                        "centroid = %s, n_episodes = %s, start_ts = %s, end_ts = %s, "
                        "method = %s, updated_at = %s WHERE id = %s",
                        (*values, sid),
                    )
                cur.executemany(
                    "INSERT INTO scene_episodes(scene_id, episode_id) "  # skip re-extracted
                    "SELECT %s, id FROM episodes WHERE id = %s ON CONFLICT DO NOTHING",
                    [(sid, e) for e in scene.episode_ids],
                )
                ids.append(sid)
        return ids

    # -- message summaries -----------------------------------------------------------------

    def list_summaries(
        self, conversation: str | None = None, level: int | None = None
    ) -> list[Summary]:
        """Summaries, by conversation, then level, then time."""
        return [s for s, _ in self.summary_rows(conversation, level)]

    def summary_rows(
        self, conversation: str | None = None, level: int | None = None
    ) -> list[tuple[Summary, str]]:
        """Summaries with their covers_hash (what makes a re-run idempotent)."""
        parts: list[str] = []
        params: list = []
        if conversation is not None:
            parts.append("conversation = %s")
            params.append(conversation)
        if level is not None:
            parts.append("level = %s")
            params.append(int(level))
        rows = self._read(
            f"SELECT {_SUMMARY_COLS}, covers_hash FROM summaries {_where(parts)} "
            f"ORDER BY conversation {C}, level, start_ts {C}, id",
            params,
        )
        return [(_row_to_summary(r[:-1]), r[-1]) for r in rows]

    def replace_summaries(
        self,
        conversation: str,
        level: int,
        delete: Iterable[int],
        add: Sequence[tuple[Summary, str]],
    ) -> list[int]:
        """Drop stale summaries of one level and insert new ones, in one transaction."""
        now = _now()
        ids = []
        with self._write() as cur:
            cur.executemany(
                "DELETE FROM summaries WHERE id = %s AND conversation = %s AND level = %s",
                [(i, conversation, level) for i in delete],
            )
            for s, covers_hash in add:
                row = cur.execute(
                    "INSERT INTO summaries(conversation, level, start_ts, end_ts, covers, "
                    f"covers_hash, text, method, created_at) VALUES ({', '.join(['%s'] * 9)}) "
                    "RETURNING id",
                    (
                        conversation,
                        level,
                        s.start.isoformat(),
                        s.end.isoformat(),
                        json.dumps(list(s.covers)),
                        covers_hash,
                        s.text,
                        s.method,
                        now,
                    ),
                ).fetchone()
                ids.append(int(row[0]))  # type: ignore[index]
        return ids

    # -- entity dossiers -------------------------------------------------------------------

    def dossier_states(self, conversation: str | None = None) -> list[tuple[int, str, str]]:
        """(entity id, name, dossier_hash) of every entity (of one conversation)."""
        where, params = ("WHERE conversation = %s", (conversation,)) if conversation else ("", ())
        rows = self._read(
            f"SELECT id, name, dossier_hash FROM entities {where} ORDER BY id", params
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]

    def current_entity_claims(self, entity_ids: Iterable[int]) -> dict[int, list[Claim]]:
        """entity id -> its current claims (status 'current'), oldest first."""
        ids = list(dict.fromkeys(int(i) for i in entity_ids))
        out: dict[int, list[Claim]] = {i: [] for i in ids}
        if not ids:
            return out
        rows = self._read(
            f"SELECT ce.entity_id, {claim_cols('c')} FROM claim_entities ce "
            "JOIN claims c ON c.id = ce.claim_id WHERE c.status = 'current' "
            "AND ce.entity_id = ANY(%s)",
            (ids,),
        )
        for r in rows:
            out[r[0]].append(_row_to_claim(r[1:]))
        return {e: sorted(cs, key=lambda c: (c.said_at, c.id)) for e, cs in out.items()}

    def save_dossiers(self, rows: Iterable[tuple[int, str, str]]) -> int:
        """Write (entity id, dossier, dossier_hash) rows; returns how many were written."""
        with self._write() as cur:
            cur.executemany(
                "UPDATE entities SET dossier = %s, dossier_hash = %s WHERE id = %s",
                [(d, h, i) for i, d, h in rows],
            )
            return max(cur.rowcount, 0)

    def entity_dossier(self, entity_id: int) -> str | None:
        """An entity's dossier ('' before consolidation), or None if there is no such entity."""
        row = self._read_one("SELECT dossier FROM entities WHERE id = %s", (int(entity_id),))
        return row[0] if row else None

    def dossier_texts(self, filters: q.Filters, limit: int) -> list[tuple[int, str]]:
        """(entity id, dossier) of written dossiers in the filters' conversations, most
        mentioned entities first (as SQLite's)."""
        parts, params = ["dossier <> ''"], []
        convs = conversations_of(filters)
        if convs is not None:
            parts.append("conversation = ANY(%s)")
            params.append(list(convs))
        rows = self._read(
            f"SELECT id, dossier FROM entities {_where(parts)} ORDER BY mentions DESC, id LIMIT %s",
            (*params, int(limit)),
        )
        return [(int(i), d) for i, d in rows]

    # -- entity links (recall) -------------------------------------------------------------

    def entity_search(self, text: str, filters: q.Filters, limit: int) -> list[Entity]:
        """Entities of the filters' conversations whose name, aliases, roles or kind share a
        word with ``text``, most mentioned first (as SQLite's, through the GIN index)."""
        terms = q.query_terms(text) or q.query_terms(text, keep_stopwords=True)
        if not terms:
            return []
        lexemes = [r[0] for r in self._read(*pq.lexemes_sql(terms))][: pq.MAX_QUERY_LEXEMES]
        if not lexemes:
            return []
        parts = ["search_tsv @@ %s::tsquery"]
        params: list = [" | ".join(pq.quote_lexeme(x, "A") for x in lexemes)]
        convs = conversations_of(filters)
        if convs is not None:
            parts.append("conversation = ANY(%s)")
            params.append(list(convs))
        rows = self._read(
            f"SELECT {_ENTITY_COLS} FROM entities {_where(parts)} "
            "ORDER BY mentions DESC, id LIMIT %s",
            (*params, int(limit)),
        )
        return [_row_to_entity(r) for r in rows]

    def entity_claim_ids(self, entity_ids: Iterable[int], per_entity: int) -> dict[int, list[int]]:
        """entity id -> up to ``per_entity`` ids of the claims that mention it (any status),
        more important first, then newer."""
        ids = list(dict.fromkeys(int(i) for i in entity_ids))
        out: dict[int, list[int]] = {i: [] for i in ids}
        if not ids:
            return out
        rows = self._read(
            "SELECT entity_id, claim_id FROM (SELECT ce.entity_id, ce.claim_id, "
            "row_number() OVER (PARTITION BY ce.entity_id ORDER BY c.importance DESC, "
            "c.said_epoch DESC, c.id DESC) AS n FROM claim_entities ce "
            "JOIN claims c ON c.id = ce.claim_id WHERE ce.entity_id = ANY(%s)) ranked "
            "WHERE n <= %s ORDER BY entity_id, n",
            (ids, int(per_entity)),
        )
        for eid, cid in rows:
            out[eid].append(cid)
        return out

    def claim_entity_ids(self, claim_ids: Iterable[int]) -> dict[int, list[int]]:
        """claim id -> ids of the entities it mentions (claims mentioning none left out)."""
        out: dict[int, list[int]] = {}
        for cid, eid in self._read(
            "SELECT claim_id, entity_id FROM claim_entities WHERE claim_id = ANY(%s) "
            "ORDER BY claim_id, entity_id",
            (list(dict.fromkeys(int(i) for i in claim_ids)),),
        ):
            out.setdefault(cid, []).append(eid)
        return out

    # -- context log and usefulness --------------------------------------------------------

    def log_context(
        self,
        person: str | None,
        conversation: str | None,
        items: Sequence[tuple[str, str | int, str]],
        reply: str,
    ) -> int:
        """Record what was shown for one assistant turn and the reply it got."""
        payload = json.dumps([[k, str(i), t] for k, i, t in items], ensure_ascii=False)
        with self._write() as cur:
            row = cur.execute(
                "INSERT INTO context_log(person, conversation, items, reply, at) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING id",
                (person, conversation, payload, reply, _now()),
            ).fetchone()
        return int(row[0])  # type: ignore[index]

    def unreviewed_context(
        self, conversation: str | None = None, limit: int = 200
    ) -> list[tuple[int, list[tuple[str, str, str]], str]]:
        """The oldest context logs not yet scored: (log id, items, reply)."""
        where, params = ("AND conversation = %s", (conversation,)) if conversation else ("", ())
        rows = self._read(
            f"SELECT id, items, reply FROM context_log WHERE reviewed = 0 {where} "
            "ORDER BY id LIMIT %s",
            (*params, int(limit)),
        )
        return [(i, [tuple(x) for x in json.loads(items)], reply) for i, items, reply in rows]  # type: ignore[misc]

    def record_usefulness(
        self, log_ids: Iterable[int], outcomes: Iterable[tuple[str, str, bool]]
    ) -> None:
        """Count each (kind, id, used) outcome and mark the logs reviewed, atomically.

        score = (used + 1) / (shown + 2): Laplace's rule, 0.5 for an item never shown.
        """
        now = _now()
        with self._write() as cur:
            cur.executemany(
                "INSERT INTO usefulness AS u(item_kind, item_id, shown, used, score, updated_at) "
                "VALUES (%s, %s, 1, %s, (%s + 1.0) / 3.0, %s) "
                "ON CONFLICT (item_kind, item_id) DO UPDATE SET shown = u.shown + 1, "
                "used = u.used + excluded.used, "
                "score = (u.used + excluded.used + 1.0) / (u.shown + 1 + 2.0), "
                "updated_at = excluded.updated_at",
                [(k, str(i), int(u), int(u), now) for k, i, u in outcomes],
            )
            cur.executemany(
                "UPDATE context_log SET reviewed = 1 WHERE id = %s", [(i,) for i in log_ids]
            )

    def usefulness_scores(self, kind: str, ids: Iterable[str | int]) -> dict[str | int, float]:
        """item id (as given) -> its usefulness score; items never reviewed are left out."""
        wanted = {str(i): i for i in ids}
        if not wanted:
            return {}
        rows = self._read(
            "SELECT item_id, score FROM usefulness WHERE item_kind = %s AND item_id = ANY(%s)",
            (kind, list(wanted)),
        )
        return {wanted[item]: float(score) for item, score in rows}

    # -- the job queue ---------------------------------------------------------------------

    def enqueue_job(
        self, kind: str, key: str, payload: dict, not_before: float | None = None
    ) -> int | None:
        """Queue a job unless (kind, key) was queued before; its id, or None if it was.

        ``not_before`` (epoch seconds): no worker takes it earlier (its lease until then).
        """
        now = _now()
        with self._write() as cur:
            row = cur.execute(
                "INSERT INTO jobs(kind, key, payload, created_at, updated_at, lease_until) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (kind, key) DO NOTHING RETURNING id",
                (kind, key, json.dumps(payload, sort_keys=True), now, now, not_before),
            ).fetchone()
        return int(row[0]) if row else None

    def take_job(self, now: float, lease_s: float, max_attempts: int) -> Job | None:
        """The oldest runnable job (queued, or running with an expired lease), now leased.

        Rows another worker holds are skipped, never waited on.
        """
        with self._write() as cur:
            cur.execute(  # leases that ran out on the last allowed attempt: give up
                "UPDATE jobs SET status = 'failed', error = 'lease expired (worker died?) "
                "on the last attempt', lease_until = NULL WHERE id IN (SELECT id FROM jobs "
                "WHERE status = 'running' AND lease_until < %s AND attempts >= %s "
                "FOR UPDATE SKIP LOCKED)",
                (now, max_attempts),
            )
            row = cur.execute(
                f"SELECT {_JOB_COLS} FROM jobs WHERE status IN ('queued', 'running') "
                "AND (lease_until IS NULL OR lease_until < %s) AND attempts < %s "
                "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED",
                (now, max_attempts),
            ).fetchone()
            if row is None:
                return None
            cur.execute(
                "UPDATE jobs SET status = 'running', attempts = attempts + 1, "
                "lease_until = %s, updated_at = %s WHERE id = %s",
                (now + lease_s, _now(), row[0]),
            )
        job = _row_to_job(row)
        return Job(**{**job.__dict__, "status": "running", "attempts": job.attempts + 1})

    def finish_job(
        self,
        job_id: int,
        status: str,
        result: dict,
        error: str = "",
        retry_at: float | None = None,
    ) -> None:
        """Record a job's end: done, skipped, failed, or queued again (not before ``retry_at``)."""
        with self._write() as cur:
            cur.execute(
                "UPDATE jobs SET status = %s, result = %s, error = %s, lease_until = %s, "
                "updated_at = %s WHERE id = %s",
                (status, json.dumps(result, default=str), error, retry_at, _now(), job_id),
            )

    def list_jobs(self, status: str | None = None, limit: int = 100) -> list[Job]:
        """Jobs, newest first."""
        where, params = ("WHERE status = %s", (status,)) if status else ("", ())
        rows = self._read(
            f"SELECT {_JOB_COLS} FROM jobs {where} ORDER BY id DESC LIMIT %s",
            (*params, int(limit)),
        )
        return [_row_to_job(r) for r in rows]

    def job_counts(self) -> dict[str, int]:
        """status -> number of jobs."""
        return {
            s: int(n) for s, n in self._read("SELECT status, count(*) FROM jobs GROUP BY status")
        }


def _save_entity(
    cur: psycopg.Cursor,
    e: Entity,
    claim_ids: tuple[int, ...],
    search_text: str,
    embed_hash: str,
    model: str,
    now: str,
) -> None:
    """Insert or update one entity and file the claims that mention it."""
    vec = cur.execute(
        "SELECT id FROM vectors WHERE model = %s AND hash = %s", (model, embed_hash)
    ).fetchone()
    values = (
        e.owner,
        q.person_key(e.owner),
        e.name,
        q.person_key(e.name),
        e.kind,
        json.dumps(list(e.aliases)),
        json.dumps(list(e.roles)),
        json.dumps([list(s) for s in e.states]),
        e.brief or entity_brief(e),
        e.first_seen.isoformat() if e.first_seen else None,
        e.last_seen.isoformat() if e.last_seen else None,
        e.mentions,
        e.method,
        search_text,
        q.scope_text(e.conversation, (e.owner,)),
        embed_hash,
        vec[0] if vec else None,
    )
    if e.id is None:
        row = cur.execute(
            "INSERT INTO entities(owner, owner_key, name, name_key, kind, aliases, roles, "
            "states, brief, first_seen, last_seen, mentions, method, search_text, scope, "
            f"embed_hash, vec_id, conversation, created_at) VALUES ({', '.join(['%s'] * 19)}) "
            "RETURNING id",
            (*values, e.conversation, now),
        ).fetchone()
        eid = int(row[0])  # type: ignore[index]
    else:
        cur.execute(
            "UPDATE entities SET owner = %s, owner_key = %s, name = %s, name_key = %s, "
            "kind = %s, aliases = %s, roles = %s, states = %s, brief = %s, first_seen = %s, "
            "last_seen = %s, mentions = %s, method = %s, search_text = %s, scope = %s, "
            "embed_hash = %s, vec_id = %s WHERE id = %s",
            (*values, e.id),
        )
        eid = e.id
    cur.executemany(
        "INSERT INTO claim_entities(claim_id, entity_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
        [(c, eid) for c in claim_ids],
    )
