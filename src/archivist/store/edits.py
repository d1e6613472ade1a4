"""The user's own edits of memory, written once for both backends: claims forgotten or
corrected, single messages forgotten, and a full reset.

Claims are derived: a session that grows or is rebuilt is extracted again and
its claims are inserted anew with new ids. An edit therefore lives apart, in
``claim_edits``, keyed by the claim's conversation and a hash of its evidence
message ids and its normalised text (``claim_key``), and is applied whenever
extraction saves a claim with that key (``_apply_edits``): a forgotten claim is
deleted at once, a corrected one is superseded again by a new claim carrying
the user's text (method ``user-correction``). Reconciliation, when it starts a
conversation over, re-marks the corrections it reset (``_reapply_corrections``).

A correction never rewrites the old claim: it is closed (status
``superseded``, ``replaced_by`` the new claim, ``closed_at`` its own start, so
it never held), with a claim event and a conflict of kind ``correction``.
Forgetting one claim of a correction chain forgets the whole chain: the user
asked for that memory to go, not for an older wording of it to come back.
What was built from a removed or corrected claim (key info, entity dossiers,
session summaries) is cleared, and the next consolidation round rebuilds it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

import numpy as np

from . import sql as q
from .audit import Audit
from .common import Connection, iso, retried
from .derived import CLAIM_COLS, row_to_claim

USER_METHOD = "user-correction"
# What a correction may set beside the text: the claim's kind, subject and the span it
# holds (ISO times; a null ``valid_to`` clears an end date)
EDITABLE = ("kind", "subject", "valid_from", "valid_to")
MAX_CHAIN = 50  # corrections of corrections applied per claim: a guard against a cycle
# Every table holding memory, children first (``reset`` empties them; the ledger, the
# audit log and the retired person ids stay).
_ALL_TABLES = (
    "claim_edits",
    "claim_events",
    "conflicts",
    "claim_entities",
    "claim_evidence",
    "claims",
    "deleted_claims",  # filled by the claims' delete trigger above: a reset forgets it too
    "scene_episodes",
    "scenes",
    "episode_messages",
    "episodes",
    "entities",
    "summaries",
    "extraction_state",
    "decisions",
    "person_identities",
    "persons",
    "vector_fills",
    "message_people",
    "messages",
    "sessions",
    "conversations",
    "vectors",
    "llm_cache",
    "llm_usage",
    "jobs",
    "context_log",
    "usefulness",
    "meta",
)


def claim_key(text: str, evidence: Iterable[str]) -> str:
    """What identifies a claim across re-extractions: its evidence ids and its words."""
    words = " ".join(text.casefold().split())
    ids = "\x1f".join(sorted(set(evidence)))
    return hashlib.sha1(f"{ids}\x1e{words}".encode()).hexdigest()


class ClaimEdits(Audit):
    """The user-edit part of the Store protocol (see the module docstring)."""

    # -- the edits themselves ---------------------------------------------------------

    @retried
    def correct_claim(
        self,
        claim_id: int,
        text: str,
        search_text: str,
        embed_hash: str,
        model: str,
        vectors: dict[str, np.ndarray],
        reason: str = "",
        fields: dict[str, str | None] | None = None,
    ) -> int | None:
        """Supersede a claim by a new one with the user's ``text`` (and ``fields``, of
        ``EDITABLE``); the new claim's id (None: no such claim). The edit is kept and
        applied again after re-extraction."""
        fields = dict(fields or {})
        if set(fields) - set(EDITABLE):
            raise ValueError(f"not editable: {sorted(set(fields) - set(EDITABLE))}")
        with self._write() as db:
            old = self._claim_row(db, claim_id)
            if old is None:
                return None
            self._put_vectors(db, model, vectors)
            key = claim_key(old.text, old.evidence)
            before = self._edits(db, old.conversation).get(key)
            if before is not None and before["action"] == "correct":
                # correcting the user's own claim of the same words: one edit, fields merged
                fields = {**json.loads(before["fields"] or "{}"), **fields}
            db.execute(
                "INSERT INTO claim_edits(conversation, claim_key, action, text, search_text, "
                "embed_hash, reason, created_at, fields) "
                "VALUES (?, ?, 'correct', ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (conversation, claim_key) DO UPDATE SET action = 'correct', "
                "text = excluded.text, search_text = excluded.search_text, embed_hash = "
                "excluded.embed_hash, reason = excluded.reason, created_at = excluded.created_at, "
                "fields = excluded.fields",
                (
                    old.conversation,
                    key,
                    text,
                    search_text,
                    embed_hash,
                    reason,
                    self._now_iso(),
                    json.dumps(fields, sort_keys=True),
                ),
            )
            edit = self._edits(db, old.conversation)[key]
            new_id = self._apply_correction(db, old, edit)
            self._invalidate(db, old.conversation, [old.id, new_id])  # type: ignore[list-item]
        return new_id

    @retried
    def forget_claims(
        self, claim_ids: Iterable[int], reason: str = "", *, actor: str | None = None
    ) -> int:
        """Delete claims (each with its correction chain) for good; how many went.
        ``actor``: who asked, for the audit line written with the deletion."""
        with self._write() as db:
            gone = self._forget_claims(db, claim_ids, reason)
            if gone and actor is not None:
                self._audit(db, actor, "claim", {"claims": sorted(gone)}, claims=len(gone))
            return len(gone)

    def _forget_claims(self, db: Connection, claim_ids: Iterable[int], reason: str) -> set[int]:
        """The claims deleted (every claim of each one's correction chain)."""
        gone: set[int] = set()
        for cid in claim_ids:
            for c in self._chain(db, int(cid)):
                if c.id in gone:
                    continue
                gone.add(c.id)  # type: ignore[arg-type]
                db.execute(
                    "INSERT INTO claim_edits(conversation, claim_key, action, reason, created_at) "
                    "VALUES (?, ?, 'forget', ?, ?) ON CONFLICT (conversation, claim_key) "
                    "DO UPDATE SET action = 'forget', reason = excluded.reason",
                    (c.conversation, claim_key(c.text, c.evidence), reason, self._now_iso()),
                )
                self._invalidate(db, c.conversation, [c.id])  # type: ignore[list-item]
        if gone:
            cond, params = self._d.in_ids("id", sorted(gone))
            db.execute(f"DELETE FROM claims WHERE {cond}", params)
            self._after_delete(db)  # type: ignore[attr-defined]
        return gone

    def claim_edit_origin(self, claim_id: int) -> int | None:
        """The claim a user correction replaced (None: ``claim_id`` is no correction)."""
        row = self._db.execute(
            "SELECT claim_id FROM claim_edits WHERE new_claim_id = ? AND action = 'correct'",
            (int(claim_id),),
        ).fetchone()
        return row[0] if row else None

    @retried
    def delete_message(self, conversation: str, msg_id: str, *, actor: str | None = None) -> int:
        """Remove one message from every index, with what was derived from it; 0 or 1.
        ``actor``: who asked, for the audit line written with the deletion."""
        with self._write() as db:
            claims_before = self._count(db, "claims", conversation)
            row = db.execute(
                "SELECT rowid, session FROM messages WHERE conversation = ? AND msg_id = ?",
                (conversation, msg_id),
            ).fetchone()
            if row is None:
                return 0
            claims = [
                cid
                for (cid,) in db.execute(
                    "SELECT claim_id FROM claim_evidence WHERE msg_rowid = ?", (row[0],)
                )
            ]
            self._invalidate(db, conversation, claims, sessions={row[1]})
            db.execute("DELETE FROM messages WHERE rowid = ?", (row[0],))
            db.execute(
                "UPDATE scenes SET summary = '', summary_hash = '' WHERE conversation = ?",
                (conversation,),
            )
            self._after_delete(db)  # type: ignore[attr-defined]
            if actor is not None:
                scope = {"conversation": conversation, "message": msg_id}
                claims = claims_before - self._count(db, "claims", conversation)
                self._audit(db, actor, "message", scope, messages=1, claims=claims)
        return 1

    @retried
    def reset(self, *, actor: str | None = None) -> None:
        """Empty every table of memory (the migration ledger stays): a fresh store.

        Ids are not handed out again (SQLite's sequences and PostgreSQL's identities
        live on), nor are retired person ids; the audit log keeps every line and gets
        one for the reset when ``actor`` says who asked."""
        with self._write() as db:
            messages = self._count(db, "messages")
            claims = self._count(db, "claims")
            for table in _ALL_TABLES:
                db.execute(f"DELETE FROM {table}")
            self._bump_vector_epoch(db)  # type: ignore[attr-defined]
            if actor is not None:
                self._audit(db, actor, "reset", {}, messages=messages, claims=claims)

    # -- applying edits when extraction saves claims -----------------------------------

    def _apply_edits(self, db: Connection, conversation: str, claim_ids: Sequence[int]) -> None:
        """Forget or correct the just-saved claims the user edited before."""
        edits = self._edits(db, conversation)
        if not edits:
            return
        doomed: list[int] = []
        for cid in claim_ids:
            c = self._claim_row(db, cid)
            applied: set[int] = set()
            for _ in range(MAX_CHAIN):
                edit = edits.get(claim_key(c.text, c.evidence)) if c is not None else None
                if edit is None or c is None or edit["id"] in applied:
                    break  # (a correction of the fields alone keeps the words, and the key)
                applied.add(edit["id"])
                if edit["action"] == "forget":
                    doomed.append(c.id)  # type: ignore[arg-type]
                    break
                c = self._claim_row(db, self._apply_correction(db, c, edit))
        if doomed:
            cond, params = self._d.in_ids("id", doomed)
            db.execute(f"DELETE FROM claims WHERE {cond}", params)

    def _reapply_corrections(self, db: Connection, conversation: str) -> None:
        """Reconciliation was reset for a conversation: close the corrected claims again."""
        for edit in self._edits(db, conversation).values():
            if edit["action"] != "correct" or edit["claim_id"] is None:
                continue
            old = self._claim_row(db, edit["claim_id"])
            new = self._claim_row(db, edit["new_claim_id"] or 0)
            if old is None or new is None or new.method != USER_METHOD:
                continue  # the claims it made went with their session
            if claim_key(old.text, old.evidence) != edit["claim_key"] or new.text != edit["text"]:
                continue
            self._close_corrected(db, old, new.id, edit)  # type: ignore[arg-type]

    def _apply_correction(self, db: Connection, old, edit: dict) -> int:
        """Insert the user's claim for ``old`` and close ``old``; the new claim's id."""
        cols = (
            "conversation, episode_id, text, speaker, speaker_key, subject, subject_key, kind, "
            "source, importance, salience, said_at, said_epoch, valid_from, valid_to, evidence, "
            "n_evidence, entities, supports, method, search_text, scope, embed_hash, vec_id, "
            "created_at, facet"
        )
        found = db.execute("SELECT value FROM meta WHERE key = 'embed_model'").fetchone()
        model = found[0] if found else ""
        fields = {k: v for k, v in json.loads(edit.get("fields") or "{}").items() if k in EDITABLE}
        subject = fields.get("subject") or old.subject
        [new_id] = db.insert_ids(
            f"INSERT INTO claims({cols}) SELECT conversation, episode_id, ?, speaker, "
            "speaker_key, ?, ?, ?, source, importance, salience, said_at, "
            "said_epoch, ?, ?, evidence, n_evidence, '[]', '[]', ?, ?, ?, "
            "?, ?, ?, facet FROM claims WHERE id = ? RETURNING id",
            [
                (
                    edit["text"],
                    subject,
                    q.person_key(subject),
                    fields.get("kind") or old.kind,
                    fields["valid_from"] if "valid_from" in fields else iso(old.valid_from),
                    fields["valid_to"] if "valid_to" in fields else iso(old.valid_to),
                    USER_METHOD,
                    edit["search_text"] or edit["text"],
                    q.scope_text(old.conversation, (old.speaker, subject)),
                    edit["embed_hash"] or "",
                    self._vector_id(db, model, edit["embed_hash"] or ""),
                    self._now_iso(),
                    old.id,
                )
            ],
        )
        db.execute(
            "INSERT INTO claim_evidence(claim_id, msg_rowid) "
            "SELECT ?, msg_rowid FROM claim_evidence WHERE claim_id = ?",
            (new_id, old.id),
        )
        db.execute(
            "UPDATE claim_edits SET claim_id = ?, new_claim_id = ? WHERE id = ?",
            (old.id, new_id, edit["id"]),
        )
        self._bump_vector_epoch(db)  # type: ignore[attr-defined]
        self._close_corrected(db, old, new_id, edit)
        return new_id

    def _close_corrected(self, db: Connection, old, new_id: int, edit: dict) -> None:
        """``old`` never held: superseded by ``new_id`` from its own start, with its event
        and a ``correction`` conflict."""
        start = (old.valid_from or old.said_at).isoformat()
        db.execute(
            "UPDATE claims SET status = 'superseded', replaced_by = ?, closed_at = ?, "
            "reconciled = 1 WHERE id = ?",
            (new_id, start, old.id),
        )
        detail = {"by": "user", "old": old.text, "new": edit["text"], "reason": edit["reason"]}
        if fields := json.loads(edit.get("fields") or "{}"):
            detail["fields"] = fields
        now = self._now_iso()
        db.execute(
            "INSERT INTO claim_events(claim_id, conversation, action, other_claim, at, detail, "
            "created_at) VALUES (?, ?, 'corrected', ?, ?, ?, ?)",
            (old.id, old.conversation, new_id, edit["created_at"], json.dumps(detail), now),
        )
        db.execute(
            "INSERT INTO claim_events(claim_id, conversation, action, other_claim, at, detail, "
            "created_at) VALUES (?, ?, 'correction_of', ?, ?, ?, ?)",
            (new_id, old.conversation, old.id, edit["created_at"], json.dumps(detail), now),
        )
        db.execute(
            "INSERT INTO conflicts(conversation, subject, attribute, old_claim, new_claim, "
            "old_value, new_value, old_time, new_time, kind, resolution, method, created_at) "
            "VALUES (?, ?, 'statement', ?, ?, ?, ?, ?, ?, 'correction', 'user_edit', 'user', ?) "
            "ON CONFLICT DO NOTHING",
            (
                old.conversation,
                old.subject,
                old.id,
                new_id,
                old.text,
                edit["text"],
                old.said_at.isoformat(),
                edit["created_at"],
                now,
            ),
        )

    # -- helpers -------------------------------------------------------------------------

    def _edits(self, db: Connection, conversation: str) -> dict[str, dict]:
        """claim key -> the edit of that claim in ``conversation``."""
        cols = (
            "id, claim_key, action, text, search_text, embed_hash, reason, claim_id, "
            "new_claim_id, created_at, fields"
        ).split(", ")
        rows = db.execute(
            f"SELECT {', '.join(cols)} FROM claim_edits WHERE conversation = ?", (conversation,)
        )
        return {r[1]: dict(zip(cols, r, strict=True)) for r in rows}

    @staticmethod
    def _claim_row(db: Connection, claim_id: int):
        row = db.execute(f"SELECT {CLAIM_COLS} FROM claims WHERE id = ?", (int(claim_id),))
        found = row.fetchone()
        return row_to_claim(found) if found else None

    def _chain(self, db: Connection, claim_id: int) -> list:
        """The claim and every claim linked to it by user corrections, either way."""
        first = self._claim_row(db, claim_id)
        if first is None:
            return []
        links = db.execute(
            "SELECT claim_id, new_claim_id FROM claim_edits WHERE conversation = ? "
            "AND action = 'correct' AND claim_id IS NOT NULL",
            (first.conversation,),
        ).fetchall()
        seen, todo = {first.id}, [first.id]
        while todo:
            cur = todo.pop()
            for a, b in links:
                for x, y in ((a, b), (b, a)):
                    if x == cur and y not in seen:
                        seen.add(y)
                        todo.append(y)
        found = [self._claim_row(db, i) for i in sorted(seen)]  # type: ignore[arg-type]
        return [c for c in found if c is not None]

    def _invalidate(
        self,
        db: Connection,
        conversation: str,
        claim_ids: Sequence[int],
        sessions: set[int] | None = None,
    ) -> None:
        """Clear what was built from these claims (and sessions): dossiers of their
        entities, key info of the conversation's persons, summaries of their sessions and
        every roll-up above; the next consolidation round rebuilds them."""
        ids = [int(i) for i in claim_ids]
        sessions = set(sessions or ())
        if ids:
            cond, params = self._d.in_ids("c.id", ids)
            sessions |= {
                s
                for (s,) in db.execute(
                    f"SELECT e.session FROM claims c JOIN episodes e ON e.id = c.episode_id "
                    f"WHERE {cond}",
                    params,
                )
            }
            cond, params = self._d.in_ids("claim_id", ids)
            db.execute(
                "UPDATE entities SET dossier = '', dossier_hash = '' WHERE id IN "
                f"(SELECT entity_id FROM claim_entities WHERE {cond})",
                params,
            )
        db.execute(
            "UPDATE persons SET key_info = '', key_info_hash = '' WHERE id IN "
            "(SELECT person_id FROM person_identities WHERE conversation = ?)",
            (conversation,),
        )
        for sid, level, covers in db.execute(
            "SELECT id, level, covers FROM summaries WHERE conversation = ?", (conversation,)
        ).fetchall():
            if level > 1 or set(json.loads(covers)) & sessions:
                db.execute("DELETE FROM summaries WHERE id = ?", (sid,))

    def claims_about(self, person: str) -> list[int]:
        """Ids of the claims whose subject is ``person`` (whoever said them)."""
        rows = self._db.execute(
            "SELECT id FROM claims WHERE subject_key = ?", (q.person_key(person),)
        )
        return [int(r[0]) for r in rows]
