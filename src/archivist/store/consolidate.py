"""Consolidation output, written once for both backends: scenes, summaries, dossiers,
key info, entity links, context log and usefulness scores.

Every write here is one transaction, and the jobs only call a write when something
changed, so a re-run over unchanged data touches no row.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime

import numpy as np

from ..model import Claim, Entity, Scene, Summary
from . import sql as q
from .common import Body, Connection, all_of, json_tuple, record, retried
from .derived import CLAIM_COLS, row_to_claim
from .vecindex import pack

_SELF_KINDS = ("fact", "event", "preference", "plan", "foresight")


def _unpack(blob: bytes | None) -> np.ndarray | None:
    return None if blob is None else np.frombuffer(blob, dtype="<f4").astype(np.float32)


def _row_to_summary(r: tuple) -> Summary:
    at = datetime.fromisoformat
    return record(Summary, _SUMMARY_FIELDS, r, start=at, end=at, covers=json_tuple)


_SUMMARY_COLS = "id, conversation, level, start_ts, end_ts, covers, text, method"
_SUMMARY_FIELDS = "id, conversation, level, start, end, covers, text, method"


def rank_centroids(
    rows: Iterable[tuple[int, bytes | None]], query: np.ndarray, limit: int
) -> list[tuple[int, float]]:
    """(scene id, cosine) of the ``limit`` centroids nearest ``query``, best first.

    A centroid is a mean of unit vectors, so it is normalised here; centroids of
    another dimension (another model's) are skipped.
    """
    qv = np.asarray(query, dtype=np.float32).reshape(-1)
    ids, vecs = [], []
    for sid, blob in rows:
        v = _unpack(None if blob is None else bytes(blob))
        if v is not None and v.shape[0] == qv.shape[0] and np.any(v):
            ids.append(int(sid))
            vecs.append(v / np.linalg.norm(v))
    if not ids:
        return []
    scores = np.stack(vecs) @ qv
    order = sorted(range(len(ids)), key=lambda i: (-float(scores[i]), ids[i]))[: max(limit, 0)]
    return [(ids[i], float(scores[i])) for i in order]


class Consolidation(Body):
    """The ConsolidationStore part of the Store protocol (see the module docstring)."""

    # -- scenes ------------------------------------------------------------------------

    def scene_rows(self, conversation: str) -> list[tuple[Scene, np.ndarray | None, str]]:
        """A conversation's scenes with their centroids and summary hashes (for clustering)."""
        return self._scenes("WHERE s.conversation = ?", (conversation,), centroids=True)

    def list_scenes(self, conversation: str | None = None) -> list[Scene]:
        """Scenes (all, or one conversation's) in time order, members oldest first."""
        where, params = ("WHERE s.conversation = ?", (conversation,)) if conversation else ("", ())
        return [s for s, _, _ in self._scenes(where, params, centroids=False)]

    def _scenes(
        self, where: str, params: tuple, *, centroids: bool
    ) -> list[tuple[Scene, np.ndarray | None, str]]:
        c = self._d.order_text
        members: dict[int, list[int]] = {}
        for sid, eid in self._db.execute(
            "SELECT se.scene_id, se.episode_id FROM scene_episodes se "
            "JOIN episodes e ON e.id = se.episode_id JOIN scenes s ON s.id = se.scene_id "
            f"{where} ORDER BY e.start_ts{c}, e.id",
            params,
        ):
            members.setdefault(sid, []).append(eid)
        centroid = "s.centroid" if centroids else "NULL"
        rows = self._db.execute(
            "SELECT s.id, s.conversation, s.title, s.summary, s.summary_hash, s.start_ts, "
            f"s.end_ts, s.method, {centroid} FROM scenes s {where} "
            f"ORDER BY s.conversation{c}, s.start_ts{c}, s.id",
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

    @retried
    def save_scenes(
        self,
        conversation: str,
        scenes: Sequence[tuple[Scene, np.ndarray, str]],
        delete: Iterable[int] = (),
    ) -> list[int]:
        """Insert or update scenes with their members, and drop emptied ones, atomically."""
        now = self._now_iso()
        ids: list[int] = []
        with self._write() as db:
            db.executemany(
                "DELETE FROM scenes WHERE id = ? AND conversation = ?",
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
                    [sid] = db.insert_ids(
                        "INSERT INTO scenes(title, summary, summary_hash, centroid, n_episodes, "
                        "start_ts, end_ts, method, updated_at, conversation) "
                        "VALUES (?,?,?,?,?,?,?,?,?,?) RETURNING id",
                        [(*values, conversation)],
                    )
                else:
                    sid = scene.id
                    db.execute(
                        "UPDATE scenes SET title = ?, summary = ?, summary_hash = ?, centroid = ?, "
                        "n_episodes = ?, start_ts = ?, end_ts = ?, method = ?, updated_at = ? "
                        "WHERE id = ?",
                        (*values, sid),
                    )
                db.executemany(  # an episode re-extracted meanwhile is gone: skip it
                    "INSERT INTO scene_episodes(scene_id, episode_id) "
                    "SELECT ?, id FROM episodes WHERE id = ? ON CONFLICT DO NOTHING",
                    [(sid, e) for e in scene.episode_ids],
                )
                ids.append(sid)
        return ids

    def scene_search(
        self, query: np.ndarray, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """Scene ids by cosine of their centroid to ``query``, best first.

        Scenes of the filters' conversations whose span meets their time window;
        person and session filters are left to the members' messages.
        """
        since, until = filters.since, filters.until
        where, params = all_of(
            ("centroid IS NOT NULL", []),
            self._in_conversations(filters, "conversation"),
            (f"{self._d.epoch('end_ts')} >= ?", [since.timestamp()]) if since else None,
            (f"{self._d.epoch('start_ts')} <= ?", [until.timestamp()]) if until else None,
        )
        rows = self._db.execute(f"SELECT id, centroid FROM scenes WHERE {where}", params)
        return rank_centroids(rows, query, limit)

    def scene_message_rowids(self, scene_ids: Iterable[int]) -> dict[int, list[int]]:
        """scene id -> the rowids of its episodes' messages, in conversation order."""
        out: dict[int, list[int]] = {}
        for sid, rid in self._by_ids(
            "SELECT se.scene_id, em.msg_rowid FROM scene_episodes se "
            "JOIN episode_messages em ON em.episode_id = se.episode_id "
            "JOIN messages m ON m.rowid = em.msg_rowid WHERE {ids} ORDER BY m.seq, m.rowid",
            "se.scene_id",
            (int(i) for i in scene_ids),
        ):
            out.setdefault(sid, []).append(rid)
        return out

    # -- message summaries -------------------------------------------------------------

    def list_summaries(
        self, conversation: str | None = None, level: int | None = None
    ) -> list[Summary]:
        """Summaries, by conversation, then level, then time."""
        return [s for s, _ in self.summary_rows(conversation, level)]

    def summary_rows(
        self, conversation: str | None = None, level: int | None = None
    ) -> list[tuple[Summary, str]]:
        """Summaries with their covers_hash (what makes a re-run idempotent)."""
        parts, params = [], []
        if conversation is not None:
            parts.append("conversation = ?")
            params.append(conversation)
        if level is not None:
            parts.append("level = ?")
            params.append(int(level))
        where = f"WHERE {' AND '.join(parts)}" if parts else ""
        rows = self._db.execute(
            f"SELECT {_SUMMARY_COLS}, covers_hash FROM summaries {where} "
            f"ORDER BY conversation{self._d.order_text}, level, start_ts{self._d.order_text}, id",
            params,
        )
        return [(_row_to_summary(r[:-1]), r[-1]) for r in rows]

    @retried
    def replace_summaries(
        self,
        conversation: str,
        level: int,
        delete: Iterable[int],
        add: Sequence[tuple[Summary, str]],
    ) -> list[int]:
        """Drop stale summaries of one level and insert new ones, in one transaction."""
        now = self._now_iso()
        ids = []
        with self._write() as db:
            db.executemany(
                "DELETE FROM summaries WHERE id = ? AND conversation = ? AND level = ?",
                [(i, conversation, level) for i in delete],
            )
            ids = db.insert_ids(
                "INSERT INTO summaries(conversation, level, start_ts, end_ts, covers, "
                "covers_hash, text, method, created_at) VALUES (?,?,?,?,?,?,?,?,?) RETURNING id",
                [
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
                    )
                    for s, covers_hash in add
                ],
            )
        return ids

    # -- entity dossiers ---------------------------------------------------------------

    def dossier_states(self, conversation: str | None = None) -> list[tuple[int, str, str]]:
        """(entity id, name, dossier_hash) of every entity (of one conversation)."""
        where, params = ("WHERE conversation = ?", (conversation,)) if conversation else ("", ())
        rows = self._db.execute(
            f"SELECT id, name, dossier_hash FROM entities {where} ORDER BY id", params
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]

    def current_entity_claims(self, entity_ids: Iterable[int]) -> dict[int, list[Claim]]:
        """entity id -> its current claims (status 'current'), oldest first."""
        ids = list(dict.fromkeys(int(i) for i in entity_ids))
        links: dict[int, list[int]] = {i: [] for i in ids}
        for eid, cid in self._by_ids(
            "SELECT ce.entity_id, ce.claim_id FROM claim_entities ce "
            "JOIN claims c ON c.id = ce.claim_id WHERE c.status = 'current' AND {ids}",
            "ce.entity_id",
            ids,
        ):
            links[eid].append(cid)
        claims = self.claims_by_id(c for cs in links.values() for c in cs)  # type: ignore[attr-defined]
        return {
            eid: sorted((claims[c] for c in cs if c in claims), key=lambda c: (c.said_at, c.id))
            for eid, cs in links.items()
        }

    @retried
    def save_dossiers(self, rows: Iterable[tuple[int, str, str]]) -> int:
        """Write (entity id, dossier, dossier_hash) rows; returns how many were written."""
        with self._write() as db:
            cur = db.executemany(
                "UPDATE entities SET dossier = ?, dossier_hash = ? WHERE id = ?",
                [(d, h, i) for i, d, h in rows],
            )
        return max(cur.rowcount, 0)

    def entity_dossier(self, entity_id: int) -> str | None:
        """An entity's dossier ('' before consolidation), or None if there is no such entity."""
        row = self._db.execute("SELECT dossier FROM entities WHERE id = ?", (entity_id,)).fetchone()
        return row[0] if row else None

    def dossier_texts(self, filters: q.Filters, limit: int) -> list[tuple[int, str]]:
        """(entity id, dossier) of written dossiers in the filters' conversations, most
        mentioned entities first (there is no dossier index: the caller scores them)."""
        where, params = all_of(self._in_conversations(filters, "conversation"))
        rows = self._db.execute(
            f"SELECT id, dossier FROM entities WHERE dossier <> '' AND {where} "
            "ORDER BY mentions DESC, id LIMIT ?",
            (*params, int(limit)),
        )
        return [(int(i), d) for i, d in rows]

    # -- entity links (recall) ---------------------------------------------------------

    def entity_search(self, text: str, filters: q.Filters, limit: int) -> list[Entity]:
        """Entities of the filters' conversations whose name, aliases, roles or kind share a
        word with ``text``, most mentioned first (the caller decides which are named)."""
        raise NotImplementedError  # a backend's keyword index

    def entity_claim_ids(self, entity_ids: Iterable[int], per_entity: int) -> dict[int, list[int]]:
        """entity id -> up to ``per_entity`` ids of the claims that mention it (any status),
        more important first, then newer."""
        ids = list(dict.fromkeys(int(i) for i in entity_ids))
        out: dict[int, list[int]] = {i: [] for i in ids}
        for eid, cid in self._by_ids(
            "SELECT entity_id, claim_id FROM (SELECT ce.entity_id, ce.claim_id, "
            "row_number() OVER (PARTITION BY ce.entity_id ORDER BY c.importance DESC, "
            "c.said_epoch DESC, c.id DESC) AS n FROM claim_entities ce "
            "JOIN claims c ON c.id = ce.claim_id WHERE {ids}) ranked "
            "WHERE n <= ? ORDER BY entity_id, n",
            "ce.entity_id",
            ids,
            after=(int(per_entity),),
        ):
            out[eid].append(cid)
        return out

    def claim_entity_ids(self, claim_ids: Iterable[int]) -> dict[int, list[int]]:
        """claim id -> ids of the entities it mentions (claims mentioning none left out)."""
        out: dict[int, list[int]] = {}
        for cid, eid in self._by_ids(
            "SELECT claim_id, entity_id FROM claim_entities WHERE {ids} "
            "ORDER BY claim_id, entity_id",
            "claim_id",
            (int(i) for i in claim_ids),
        ):
            out.setdefault(cid, []).append(eid)
        return out

    # -- key info per person -----------------------------------------------------------

    def key_info_states(
        self, conversation: str | None = None
    ) -> list[tuple[str, str, str, list[tuple[str, str]]]]:
        """(person id, name, key_info_hash, identities) of persons (those in ``conversation``)."""
        idents = self._identities()
        out = []
        for pid, name, h in self._db.execute(
            f"SELECT id, name, key_info_hash FROM persons ORDER BY id{self._d.order_text}"
        ):
            mine = idents.get(pid, [])
            if conversation is None or any(cid == conversation for cid, _ in mine):
                out.append((pid, name, h, mine))
        return out

    def self_claims(
        self, identities: Iterable[tuple[str, str]], facets: Sequence[str] = ()
    ) -> list[Claim]:
        """Current first-hand claims each identity made about itself (facts, plans, ...);
        with ``facets``, only those of these parts of the person model."""
        kinds = ",".join(f"'{k}'" for k in _SELF_KINDS)
        only = f"AND facet IN ({','.join('?' * len(facets))}) " if facets else ""
        out: list[Claim] = []
        for conv, name in identities:
            key = q.person_key(name)
            rows = self._db.execute(
                f"SELECT {CLAIM_COLS} FROM claims WHERE conversation = ? AND speaker_key = ? "
                "AND subject_key = ? AND source = 'first_hand' AND status = 'current' "
                f"AND kind IN ({kinds}) {only}ORDER BY said_epoch, id",
                (conv, key, key, *facets),
            )
            out += [row_to_claim(r) for r in rows]
        return out

    @retried
    def save_key_info(self, rows: Iterable[tuple[str, str, str]]) -> int:
        """Write (person id, key_info, key_info_hash) rows; returns how many were written."""
        with self._write() as db:
            cur = db.executemany(
                "UPDATE persons SET key_info = ?, key_info_hash = ? WHERE id = ?",
                [(k, h, i) for i, k, h in rows],
            )
        return max(cur.rowcount, 0)

    def person_key_info(self, person_id: str) -> str | None:
        """A person's key info ('' before consolidation), or None if there is no such person."""
        row = self._db.execute("SELECT key_info FROM persons WHERE id = ?", (person_id,)).fetchone()
        return row[0] if row else None

    # -- context log and usefulness ----------------------------------------------------

    @retried
    def log_context(
        self,
        person: str | None,
        conversation: str | None,
        items: Sequence[Sequence],
        reply: str,
        turn_id: str = "",
        keep: int = 0,
    ) -> int:
        """Record what was shown for one assistant turn and the reply it got: (kind, id,
        text) items, each with its assembly score when given as a fourth element;
        ``turn_id``: the message of ``conversation`` the context was assembled for.
        ``keep``: the newest rows kept (0: all); older ones go in the same transaction,
        so the log of a long-served store stays bounded (ids only grow: one range)."""
        rows = [[k, str(i), t, *(float(x) for x in rest[:1])] for k, i, t, *rest in items]
        payload = json.dumps(rows, ensure_ascii=False)
        with self._write() as db:
            [log_id] = db.insert_ids(
                "INSERT INTO context_log(person, conversation, items, reply, at, turn_id) "
                "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                [(person, conversation, payload, reply, self._now_iso(), turn_id)],
            )
            if keep:
                db.execute("DELETE FROM context_log WHERE id <= ?", (log_id - keep,))
        return log_id

    def contexts_shown(self, conversation: str, replies: Iterable[str]) -> dict[str, list[str]]:
        """Reply text -> the texts of the memory items shown before each turn of
        ``conversation`` that got that reply (the context log)."""
        out: dict[str, list[str]] = {}
        rows = self._by_ids(
            "SELECT reply, items FROM context_log WHERE conversation = ? AND {ids}",
            "reply",
            (r for r in replies if r),
            before=(conversation,),
        )
        for reply, items in rows:
            out.setdefault(reply, []).extend(str(x[2]) for x in json.loads(items))
        return out

    def context_logs(
        self, conversation: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[dict]:
        """The context shown before proxied turns, newest first: what the assistant saw."""
        where, params = ("WHERE conversation = ?", (conversation,)) if conversation else ("", ())
        rows = self._db.execute(
            "SELECT id, person, conversation, items, reply, at, reviewed, turn_id "
            f"FROM context_log {where} ORDER BY id DESC LIMIT ? OFFSET ?",
            (*params, int(limit), int(offset)),
        )
        return [
            {
                "id": int(i),
                "person": person,
                "conversation": conv,
                # (kind, id, text, score or None: logs from before scores were kept)
                "items": [(*x[:3], x[3] if len(x) > 3 else None) for x in json.loads(items)],
                "reply": reply,
                "at": at,
                "reviewed": bool(reviewed),
                "turn_id": turn_id,
            }
            for i, person, conv, items, reply, at, reviewed, turn_id in rows
        ]

    def _forget_in_logs(self, db: Connection) -> None:
        """After a delete: what memory forgot leaves the logs that copied it.

        A context-log line whose message, claim or summary is gone is dropped
        (a log left with no line goes), and so is a key-info, dossier or brief
        line whose source was cleared for rebuilding; the LLM response cache,
        whose prompts and answers quote messages, is emptied (it refills on
        use). Reads every context log once: deletes are rare, turns are many.
        """
        db.execute("DELETE FROM llm_cache")
        logs = db.execute("SELECT id, items FROM context_log").fetchall()
        items = {i: json.loads(raw) for i, raw in logs}
        ids: dict[str, set[str]] = {}
        for rows in items.values():
            for kind, item_id, *_ in rows:
                ids.setdefault(kind, set()).add(str(item_id))
        kept = {kind: self._still_there(db, kind, found) for kind, found in ids.items()}
        for log_id, rows in items.items():
            left = [r for r in rows if str(r[1]) in kept[r[0]]]
            if len(left) == len(rows):
                continue
            if left:
                payload = json.dumps(left, ensure_ascii=False)
                db.execute("UPDATE context_log SET items = ? WHERE id = ?", (payload, log_id))
            else:
                db.execute("DELETE FROM context_log WHERE id = ?", (log_id,))

    def _still_there(self, db: Connection, kind: str, item_ids: set[str]) -> set[str]:
        """Which of a context-log kind's item ids still have their source."""
        if kind == "message":  # "conversation/message id"; either part may hold a "/"
            out = set()
            for item in item_ids:
                parts = item.split("/")
                for cut in range(1, len(parts)):
                    conv, mid = "/".join(parts[:cut]), "/".join(parts[cut:])
                    row = db.execute(
                        "SELECT 1 FROM messages WHERE conversation = ? AND msg_id = ?",
                        (conv, mid),
                    ).fetchone()
                    if row:
                        out.add(item)
                        break
            return out
        table, where = {
            "claim": ("claims", "id = ?"),
            "summary": ("summaries", "id = ?"),
            "dossier": ("entities", "id = ? AND dossier <> ''"),
            "brief": ("entities", "id = ? AND brief <> ''"),
            "key_info": ("persons", "id = ? AND key_info <> ''"),
        }.get(kind, ("", ""))
        if not table:
            return set(item_ids)  # a kind this store does not know how to check: kept
        numeric = kind != "key_info"
        return {
            i
            for i in item_ids
            if (not numeric or i.isdigit())
            and db.execute(
                f"SELECT 1 FROM {table} WHERE {where}", (int(i) if numeric else i,)
            ).fetchone()
        }

    def unreviewed_context(
        self, conversation: str | None = None, limit: int = 200
    ) -> list[tuple[int, list[tuple[str, str, str]], str]]:
        """The oldest context logs not yet scored: (log id, items, reply)."""
        where, params = ("AND conversation = ?", (conversation,)) if conversation else ("", ())
        rows = self._db.execute(
            f"SELECT id, items, reply FROM context_log WHERE reviewed = 0 {where} "
            "ORDER BY id LIMIT ?",
            (*params, int(limit)),
        )
        return [(i, [tuple(x[:3]) for x in json.loads(items)], reply) for i, items, reply in rows]  # type: ignore[misc]

    @retried
    def record_usefulness(
        self, log_ids: Iterable[int], outcomes: Iterable[tuple[str, str, bool]]
    ) -> None:
        """Count each (kind, id, used) outcome and mark the logs reviewed, atomically.

        score = (used + 1) / (shown + 2): Laplace's rule, 0.5 for an item never shown.
        """
        now = self._now_iso()
        with self._write() as db:
            db.executemany(
                "INSERT INTO usefulness AS u (item_kind, item_id, shown, used, score, updated_at) "
                "VALUES (?, ?, 1, ?, (? + 1.0) / 3.0, ?) "
                "ON CONFLICT (item_kind, item_id) DO UPDATE SET shown = u.shown + 1, "
                "used = u.used + excluded.used, "
                "score = (u.used + excluded.used + 1.0) / (u.shown + 1 + 2.0), "
                "updated_at = excluded.updated_at",
                [(k, str(i), int(u), int(u), now) for k, i, u in outcomes],
            )
            db.executemany(
                "UPDATE context_log SET reviewed = 1 WHERE id = ?", [(i,) for i in log_ids]
            )

    def usefulness_scores(self, kind: str, ids: Iterable[str | int]) -> dict[str | int, float]:
        """item id (as given) -> its usefulness score; items never reviewed are left out."""
        wanted = {str(i): i for i in ids}
        rows = self._by_ids(
            "SELECT item_id, score FROM usefulness WHERE item_kind = ? AND {ids}",
            "item_id",
            list(wanted),
            before=(kind,),
        )
        return {wanted[item]: float(score) for item, score in rows}
