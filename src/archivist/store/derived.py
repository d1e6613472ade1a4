"""Derived memory, written once for both backends: episodes, claims, extraction
state, LLM cache and usage.

Everything here is rebuildable from the message log; each session's
extraction is written in one transaction together with its progress marker,
so an interrupted extraction resumes at the first unfinished session.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Literal

import numpy as np

from ..errors import StaleExtraction
from ..model import Claim, EntityMention, Episode
from . import sql as q
from .audit import Audit
from .common import Connection, dt, iso, retried
from .records import ExtractionMark, IndexedClaim, IndexedEpisode


def claim_cols(alias: str = "") -> str:
    """The claim columns ``row_to_claim`` reads; validity closed by reconciliation wins."""
    a = f"{alias}." if alias else ""
    names = (
        "id, conversation, episode_id, text, speaker, subject, kind, source, importance, "
        "salience, said_at, valid_from"
    ).split(", ")
    tail = "evidence, entities, supports, method, status, replaced_by, facet".split(", ")
    return ", ".join(
        [*(a + n for n in names), f"coalesce({a}closed_at, {a}valid_to)", *(a + n for n in tail)]
    )


CLAIM_COLS = claim_cols()


def row_to_claim(r: tuple) -> Claim:
    (
        cid,
        conv,
        ep,
        text,
        speaker,
        subject,
        kind,
        source,
        imp,
        sal,
        said,
        vf,
        vt,
        ev,
        ents,
        sup,
        meth,
        status,
        replaced_by,
        facet,
    ) = r
    return Claim(
        id=cid,
        conversation=conv,
        episode=ep,
        text=text,
        speaker=speaker,
        subject=subject,
        kind=kind,
        source=source,
        importance=imp,
        salience=sal,
        said_at=datetime.fromisoformat(said),
        valid_from=dt(vf),
        valid_to=dt(vt),
        evidence=tuple(json.loads(ev)),
        entities=tuple(
            EntityMention(**{**e, "aliases": tuple(e.get("aliases", ()))}) for e in json.loads(ents)
        ),
        evidence_claims=tuple(json.loads(sup)),
        method=meth,
        status=status,
        replaced_by=replaced_by,
        facet=facet,
    )


@lru_cache(maxsize=1 << 14)
def _cached_claim(r: tuple) -> Claim:
    return row_to_claim(r)


def decoded_claim(r: tuple) -> Claim:
    """``row_to_claim``, remembered per process by the whole row: reconciling an add reads
    its speakers' claims back each time, and a row decodes to the same frozen Claim (a
    claim reconciled since is another row, so another key)."""
    try:
        return _cached_claim(tuple(r))
    except TypeError:  # a value that does not hash: decode it as it is
        return row_to_claim(r)


_EPISODE_COLS = (
    "id, conversation, session, message_ids, start_ts, end_ts, narrative, title, method, qa"
)


def _row_to_episode(r: tuple) -> Episode:
    i, c, s, ids, a, b, n, t, m, qa = r
    return Episode(
        id=i,
        conversation=c,
        session=s,
        message_ids=tuple(json.loads(ids)),
        start=datetime.fromisoformat(a),
        end=datetime.fromisoformat(b),
        narrative=n,
        title=t,
        method=m,
        qa=tuple(tuple(p) for p in json.loads(qa)),
    )


def _entity_dict(e: EntityMention) -> dict:
    return {
        "name": e.name,
        "kind": e.kind,
        "aliases": list(e.aliases),
        "role": e.role,
        "state": e.state,
    }


class DerivedMemory(Audit):
    """Claims, episodes and extraction bookkeeping (the Store protocol's derived part)."""

    # -- LLM response cache (the llm.cache.ResponseCache protocol, via llm_cache()) ------

    def llm_cache_get(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM llm_cache WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    @retried
    def llm_cache_put(self, key: str, task: str, model: str, value: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO llm_cache(key, task, model, value, created_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET task = excluded.task, "
                "model = excluded.model, value = excluded.value, created_at = excluded.created_at",
                (key, task, model, value, self._now_iso()),
            )

    _USAGE = (
        "calls",
        "cache_hits",
        "input_tokens",
        "output_tokens",
        "seconds",
        "failures",
        "retries",
    )

    @retried
    def add_llm_usage(self, model: str, usage: dict[str, dict]) -> None:
        """Add per-task counters (llm.accounting summaries) to the lifetime totals."""
        cols = ", ".join(self._USAGE)
        updates = ", ".join(f"{c} = u.{c} + excluded.{c}" for c in self._USAGE)
        with self._write() as db:
            db.executemany(
                f"INSERT INTO llm_usage AS u (model, task, {cols}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                f"ON CONFLICT(model, task) DO UPDATE SET {updates}",
                [
                    (model, task, *(row.get(c, 0) for c in self._USAGE))
                    for task, row in usage.items()
                ],
            )

    def llm_usage(self) -> dict[str, dict[str, dict]]:
        """model -> task -> lifetime counters."""
        out: dict[str, dict[str, dict]] = {}
        rows = self._db.execute(f"SELECT model, task, {', '.join(self._USAGE)} FROM llm_usage")
        for model, task, *vals in rows:
            out.setdefault(model, {})[task] = {
                c: (float(v) if c == "seconds" else int(v))
                for c, v in zip(self._USAGE, vals, strict=True)
            }
        return out

    # -- extraction ------------------------------------------------------------------------

    def extraction_state(self, conversation: str) -> dict[int, int]:
        """session -> number of messages it had when the archivist last processed it."""
        return {s: m.n_messages for s, m in self.extraction_marks(conversation).items()}

    def extraction_marks(self, conversation: str) -> dict[int, ExtractionMark]:
        """session -> how far the archivist read it (count, last message id, method)."""
        rows = self._db.execute(
            "SELECT session, n_messages, last_msg_id, method FROM extraction_state "
            "WHERE conversation = ?",
            (conversation,),
        )
        return {s: ExtractionMark(n, last, method) for s, n, last, method in rows.fetchall()}

    @retried
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
        if_mark: ExtractionMark | Literal["none", "any"] = "any",
    ) -> list[int]:
        """Replace one session's episodes and claims and mark it done, atomically.

        With ``append_after`` (the session's mark as the caller read it) nothing is
        deleted: the episodes and claims of the messages after that mark are added,
        so cached vector indexes and reconciliation stay valid. Without it, ``if_mark``
        is the mark the caller planned from ("none": never extracted; "any": unchecked).
        Raises StaleExtraction, writing nothing, when the mark moved on meanwhile
        (another process extracted the session first).
        """
        if append_after is not None and append_after.method != method:
            raise ValueError(f"cannot append {method} extraction to {append_after.method}'s")
        now = self._now_iso()
        with self._write() as db:
            if append_after is None:
                self._check_mark(db, conversation, session, if_mark)
                self._delete_session_derived(db, conversation, session)
                db.execute(
                    "INSERT INTO extraction_state(conversation, session, n_messages, "
                    "last_msg_id, method, rejected, done_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (conversation, session) DO UPDATE SET n_messages = "
                    "excluded.n_messages, last_msg_id = excluded.last_msg_id, method = "
                    "excluded.method, rejected = excluded.rejected, done_at = excluded.done_at",
                    (conversation, session, n_messages, last_message, method, rejected, now),
                )
            else:
                moved = db.execute(
                    "UPDATE extraction_state SET n_messages = ?, last_msg_id = ?, "
                    "rejected = rejected + ?, done_at = ? WHERE conversation = ? AND session = ? "
                    "AND n_messages = ? AND last_msg_id = ? AND method = ?",
                    (n_messages, last_message, rejected, now, conversation, session)
                    + (append_after.n_messages, append_after.last_message, append_after.method),
                )
                if moved.rowcount != 1:
                    raise StaleExtraction(
                        f"{conversation!r} session {session} was extracted past "
                        f"{append_after.n_messages} messages meanwhile"
                    )
            msg_rowids = dict(
                db.execute(
                    "SELECT msg_id, rowid FROM messages WHERE conversation = ?", (conversation,)
                ).fetchall()
            )
            self._put_vectors(db, model, vectors)
            episode_ids = [self._insert_episode(db, e, msg_rowids, model, now) for e in episodes]
            claim_ids = [
                self._insert_claim(db, c, episode_ids, msg_rowids, model, now) for c in claims
            ]
            # A theory's supporting claims are positions in ``claims``: now ids.
            db.executemany(
                "UPDATE claims SET supports = ? WHERE id = ?",
                [
                    (json.dumps([claim_ids[i] for i in c.claim.evidence_claims]), cid)
                    for c, cid in zip(claims, claim_ids, strict=True)
                    if c.claim.evidence_claims
                ],
            )
            self._apply_edits(db, conversation, claim_ids)  # type: ignore[attr-defined]
        return claim_ids

    def _check_mark(
        self, db: Connection, conv: str, session: int, want: ExtractionMark | Literal["none", "any"]
    ) -> None:
        """StaleExtraction unless the session's mark is still ``want`` (row locked on
        PostgreSQL; a mark another transaction is inserting is waited for there)."""
        if want == "any":
            return
        if want == "none":  # claims the session: a second writer finds the row taken
            got = db.execute(
                "INSERT INTO extraction_state(conversation, session, n_messages, method, "
                "done_at) VALUES (?, ?, 0, '', ?) ON CONFLICT DO NOTHING RETURNING session",
                (conv, session, self._now_iso()),
            ).fetchall()
            stale = not got
        else:
            row = db.execute(
                "SELECT n_messages, last_msg_id, method FROM extraction_state "
                f"WHERE conversation = ? AND session = ?{self._d.lock_rows}",
                (conv, session),
            ).fetchone()
            stale = row is None or ExtractionMark(*row) != want
        if stale:
            raise StaleExtraction(
                f"{conv!r} session {session} was extracted by another writer meanwhile"
            )

    def _delete_session_derived(self, db: Connection, conv: str, session: int) -> None:
        n = db.execute(
            "DELETE FROM claims WHERE episode_id IN "
            "(SELECT id FROM episodes WHERE conversation = ? AND session = ?)",
            (conv, session),
        ).rowcount
        m = db.execute(
            "DELETE FROM episodes WHERE conversation = ? AND session = ?", (conv, session)
        ).rowcount
        if n or m:
            self._reopen_orphans(db)  # type: ignore[attr-defined]  # closed from another chat
            self._bump_vector_epoch(db)
            # Claims that replaced or absorbed the deleted ones are gone: the
            # conversation is reconciled again from what the archivist said.
            self._reset_reconciliation(db, conv)  # type: ignore[attr-defined]

    def _insert_episode(
        self,
        db: Connection,
        ie: IndexedEpisode,
        msg_rowids: dict[str, int],
        model: str,
        now: str,
    ) -> int:
        e = ie.episode
        rowids = [msg_rowids[m] for m in e.message_ids if m in msg_rowids]
        cond, params = self._d.in_ids("msg_rowid", rowids)
        people = {
            p
            for (p,) in db.execute(
                f"SELECT DISTINCT person FROM message_people WHERE {cond}", params
            )
        }
        [eid] = db.insert_ids(
            "INSERT INTO episodes(conversation, session, message_ids, n_messages, start_ts, "
            "end_ts, title, narrative, qa, method, search_text, scope, embed_hash, vec_id, "
            "created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
            [
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
                    self._vector_id(db, model, ie.embed_hash),
                    now,
                )
            ],
        )
        db.executemany(
            "INSERT INTO episode_messages(episode_id, msg_rowid) VALUES (?, ?) "
            "ON CONFLICT DO NOTHING",
            [(eid, r) for r in rowids],
        )
        return eid

    def _insert_claim(
        self,
        db: Connection,
        ic: IndexedClaim,
        episode_ids: list[int],
        msg_rowids: dict[str, int],
        model: str,
        now: str,
    ) -> int:
        c = ic.claim
        rowids = sorted({msg_rowids[m] for m in c.evidence if m in msg_rowids})
        if not c.speaker or not rowids:
            raise ValueError(f"claim {c.text[:60]!r} has no speaker or no stored evidence")
        [cid] = db.insert_ids(
            "INSERT INTO claims(conversation, episode_id, text, speaker, speaker_key, subject, "
            "subject_key, kind, source, "
            "importance, salience, said_at, said_epoch, valid_from, valid_to, evidence, "
            "n_evidence, entities, method, search_text, scope, embed_hash, vec_id, created_at, "
            "facet) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
            [
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
                    iso(c.valid_from),
                    iso(c.valid_to),
                    json.dumps(list(c.evidence)),
                    len(rowids),
                    json.dumps([_entity_dict(e) for e in c.entities]),
                    c.method,
                    ic.search_text,
                    q.scope_text(c.conversation, (c.speaker, c.subject)),
                    ic.embed_hash,
                    self._vector_id(db, model, ic.embed_hash),
                    now,
                    c.facet,
                )
            ],
        )
        db.executemany(
            "INSERT INTO claim_evidence(claim_id, msg_rowid) VALUES (?, ?)",
            [(cid, r) for r in rowids],
        )
        return cid

    @retried
    def clear_derived(self, conversation: str | None = None, *, actor: str | None = None) -> None:
        """Forget derived memory (all, or one conversation's) so it can be rebuilt.
        ``actor``: who asked (a rebuild), for the audit line written with the clearing."""
        where, params = ("WHERE conversation = ?", (conversation,)) if conversation else ("", ())
        with self._write() as db:
            claims = self._count(db, "claims", conversation)
            # Everything reconciliation and consolidation built goes too: it is
            # derived from these claims and episodes and is rebuilt with them.
            for table in (
                "claims",
                "episodes",
                "extraction_state",
                "entities",
                "scenes",
                "summaries",
            ):
                db.execute(f"DELETE FROM {table} {where}", params)
            self._reopen_orphans(db)  # type: ignore[attr-defined]  # closed from another chat
            self._bump_vector_epoch(db)
            if actor is not None:
                scope = {"conversation": conversation} if conversation else {}
                self._audit(db, actor, "rebuild", scope, claims=claims)

    # -- reads -----------------------------------------------------------------------------

    def claim_keyword_search(
        self, text: str, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """BM25 over claim texts; higher is better."""
        return self._keyword("claims", text, filters, limit)

    def claim_vector_search(
        self, model: str, query: np.ndarray, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """Exact cosine search over the filtered claims."""
        return self._nearest("claims", model, query, filters, limit)

    def episode_keyword_search(
        self, text: str, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """BM25 over episode titles and narratives; higher is better."""
        return self._keyword("episodes", text, filters, limit)

    def episode_vector_search(
        self, model: str, query: np.ndarray, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """Exact cosine search over the filtered episodes' narratives."""
        return self._nearest("episodes", model, query, filters, limit)

    def episode_message_rowids(self, episode_ids: Iterable[int]) -> dict[int, list[int]]:
        """episode id -> its message rowids in conversation order."""
        out: dict[int, list[int]] = {}
        for eid, rid in self._by_ids(
            "SELECT em.episode_id, em.msg_rowid FROM episode_messages em JOIN messages m "
            "ON m.rowid = em.msg_rowid WHERE {ids} ORDER BY m.seq",
            "em.episode_id",
            (int(i) for i in episode_ids),
        ):
            out.setdefault(eid, []).append(rid)
        return out

    def claims_by_id(self, ids: Iterable[int]) -> dict[int, Claim]:
        rows = self._by_ids(
            f"SELECT {CLAIM_COLS} FROM claims WHERE {{ids}}", "id", (int(i) for i in ids)
        )
        return {r[0]: row_to_claim(r) for r in rows}

    def claim_evidence_rowids(self, claim_ids: Iterable[int]) -> dict[int, list[int]]:
        """claim id -> message rowids of its evidence, in conversation order."""
        ids = list(dict.fromkeys(int(i) for i in claim_ids))
        out: dict[int, list[int]] = {i: [] for i in ids}
        for cid, rid in self._by_ids(
            "SELECT ce.claim_id, ce.msg_rowid FROM claim_evidence ce JOIN messages m "
            "ON m.rowid = ce.msg_rowid WHERE {ids} ORDER BY m.seq",
            "ce.claim_id",
            ids,
        ):
            out[cid].append(rid)
        return out

    def claims_for_messages(self, rowids: Iterable[int]) -> dict[int, list[Claim]]:
        """message rowid -> the claims it is evidence of (any status), for as-of recall."""
        out: dict[int, list[Claim]] = {}
        for r in self._by_ids(
            f"SELECT ce.msg_rowid, {claim_cols('c')} FROM claim_evidence ce "
            "JOIN claims c ON c.id = ce.claim_id WHERE {ids} ORDER BY c.id",
            "ce.msg_rowid",
            (int(r) for r in rowids),
        ):
            out.setdefault(r[0], []).append(row_to_claim(r[1:]))
        return out

    def claims_for_message_ids(
        self, keys: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], list[Claim]]:
        """(conversation, message id) -> the claims the message is evidence of (any status)."""
        by_conv: dict[str, set[str]] = {}
        for conv, mid in keys:
            by_conv.setdefault(conv, set()).add(mid)
        out: dict[tuple[str, str], list[Claim]] = {}
        for conv, mids in by_conv.items():
            for r in self._by_ids(
                f"SELECT m.msg_id, {claim_cols('c')} FROM messages m "
                "JOIN claim_evidence ce ON ce.msg_rowid = m.rowid "
                "JOIN claims c ON c.id = ce.claim_id WHERE m.conversation = ? AND {ids} "
                "ORDER BY c.id",
                "m.msg_id",
                sorted(mids),
                before=(conv,),
            ):
                out.setdefault((conv, r[0]), []).append(row_to_claim(r[1:]))
        return out

    def list_claims(self, filters: q.Filters, limit: int = 100, offset: int = 0) -> list[Claim]:
        where, params = q.claim_filter_clause(filters, dialect=self._d)
        rows = self._db.execute(
            f"SELECT {CLAIM_COLS} FROM claims c WHERE {where} "
            "ORDER BY c.said_epoch, c.id LIMIT ? OFFSET ?",
            (*params, int(limit), int(offset)),
        )
        return [row_to_claim(r) for r in rows]

    def browse_claims(
        self,
        filters: q.Filters,
        *,
        kind: str | None = None,
        current: bool | None = None,
        text: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[Claim], int]:
        """A page of claims, newest first, and how many match in all: ``filters`` (person:
        speaker or subject; conversation), a ``kind``, what holds now (``current``) or
        history (``current=False``), and words in the text (case-insensitive)."""
        where, params = q.claim_filter_clause(filters, dialect=self._d)
        if kind:
            where, params = f"{where} AND c.kind = ?", [*params, kind]
        if current is not None:
            where += " AND c.status = 'current'" if current else " AND c.status <> 'current'"
        if text and text.strip():
            like = "%" + re.sub(r"([\\%_])", r"\\\1", text.strip().lower()) + "%"
            where, params = f"{where} AND lower(c.text) LIKE ? ESCAPE '\\'", [*params, like]
        (total,) = self._db.execute(
            f"SELECT count(*) FROM claims c WHERE {where}", params
        ).fetchone()
        rows = self._db.execute(
            f"SELECT {CLAIM_COLS} FROM claims c WHERE {where} "
            "ORDER BY c.said_epoch DESC, c.id DESC LIMIT ? OFFSET ?",
            (*params, int(limit), int(offset)),
        )
        return [row_to_claim(r) for r in rows], int(total)

    def ending_claims(self, conversation: str) -> list[Claim]:
        """The conversation's claims that can stop holding (``Claim.holds_at``): those a
        newer claim superseded, and foresights. Every other claim holds once said."""
        rows = self._db.execute(
            f"SELECT {CLAIM_COLS} FROM claims c WHERE c.conversation = ? "
            "AND (c.status = 'superseded' OR c.kind = 'foresight') ORDER BY c.said_epoch, c.id",
            (conversation,),
        )
        return [row_to_claim(r) for r in rows]

    def list_episodes(
        self, conversation: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Episode]:
        where, params = ("WHERE conversation = ?", (conversation,)) if conversation else ("", ())
        c = self._d.order_text
        rows = self._db.execute(
            f"SELECT {_EPISODE_COLS} FROM episodes {where} "
            f"ORDER BY conversation{c}, start_ts{c}, id LIMIT ? OFFSET ?",
            (*params, int(limit), int(offset)),
        )
        return [_row_to_episode(r) for r in rows]

    def episodes_for_messages(self, rowids: Iterable[int]) -> dict[int, Episode]:
        """message rowid -> the episode it belongs to (index fine, return coarse)."""
        rows = self._by_ids(
            f"SELECT em.msg_rowid, {_EPISODE_COLS.replace('id,', 'e.id,', 1)} "
            "FROM episode_messages em JOIN episodes e ON e.id = em.episode_id WHERE {ids}",
            "em.msg_rowid",
            (int(r) for r in rowids),
        )
        return {r[0]: _row_to_episode(r[1:]) for r in rows}

    def derived_stats(self) -> dict:
        return self._counts(
            {
                "episodes": "SELECT count(*) FROM episodes",
                "claims": "SELECT count(*) FROM claims",
                "claims_by_kind": "SELECT kind, count(*) FROM claims GROUP BY kind",
                "sessions_extracted": "SELECT count(*) FROM extraction_state",
                "claims_rejected": "SELECT coalesce(sum(rejected), 0) FROM extraction_state",
                "llm_cache_entries": "SELECT count(*) FROM llm_cache",
            }
        )
