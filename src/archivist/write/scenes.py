"""Scenes: a conversation's episodes clustered incrementally by theme and time.

Each episode not yet in a scene joins the nearest scene of its conversation
(cosine to the scene's centroid, the mean of its members' narrative vectors)
when it is close enough and near enough in time, else it starts a new scene.
Membership is never revised, so a run only ever places new episodes; a scene
is re-described only when its member set changed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from ..lang.statement import TITLE_STOP
from ..lang.text import query_terms
from ..model import Episode, Scene, content_hash
from ..prompts import scene as scene_prompt
from .condense import (
    Asker,
    Counts,
    LLMPolicy,
    conversations,
    first_sentence,
    join_capped,
    llm_session,
    trim,
)
from .index_text import episode_embed_text, text_hash

if TYPE_CHECKING:
    from ..core import Core


@dataclass(frozen=True)
class SceneConfig:
    """How episodes are clustered into scenes and how scenes are described."""

    threshold: float = 0.55  # least cosine between an episode and a scene's centroid to join
    max_gap_days: float = 60.0  # an episode joins only scenes active within this many days
    summary_cap: int = 600  # characters of a scene summary
    title_cap: int = 80  # characters of a scene title
    title_terms: int = 3  # keywords in a heuristic title
    llm_episodes: int = 40  # most recent member episodes shown to the model
    llm: LLMPolicy = LLMPolicy()


DEFAULT_SCENES = SceneConfig()


@dataclass
class _Cluster:
    """One scene during a run: its stored row (None if new), members and running centroid."""

    row: Scene | None
    members: list[Episode]
    centroid: np.ndarray | None
    stored_hash: str = ""
    added: list[int] = field(default_factory=list)
    span: tuple[datetime, datetime] | None = None  # (first start, last end), kept as it grows

    @property
    def member_hash(self) -> str:
        return scene_hash(self.members)

    @property
    def changed(self) -> bool:
        return bool(self.added) or self.member_hash != self.stored_hash

    def gap_days(self, e: Episode) -> float:
        """Days between the episode and the scene's span (0 when they overlap)."""
        if self.span is None:
            self.span = (min(m.start for m in self.members), max(m.end for m in self.members))
        start, end = self.span
        gap = max((e.start - end).total_seconds(), (start - e.end).total_seconds(), 0.0)
        return gap / 86400.0

    def add(self, e: Episode, vec: np.ndarray) -> None:
        """Take the episode in, moving the centroid as a running mean."""
        n = len(self.members)
        c = self.centroid if self.centroid is not None else np.zeros_like(vec)
        self.centroid = (c * n + vec) / (n + 1)
        self.members.append(e)
        self.added.append(e.id or 0)
        if self.span is not None:
            self.span = (min(self.span[0], e.start), max(self.span[1], e.end))


def scene_hash(members: Sequence[Episode]) -> str:
    """Identity of a member set by id and narrative (ids may be reused after re-extraction)."""
    return content_hash("scene", *sorted(f"{e.id}:{e.narrative}" for e in members))


def cosine(a: np.ndarray, b: np.ndarray | None) -> float:
    """Cosine similarity; 0 for a missing or zero vector."""
    if b is None:
        return 0.0
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b) / (na * nb) if na and nb else 0.0


def assign(e: Episode, vec: np.ndarray, clusters: list[_Cluster], config: SceneConfig) -> bool:
    """Put ``e`` in the nearest eligible scene, or a new one; True when it joined a scene."""
    best, best_score = None, config.threshold
    for cl in clusters:
        if cl.members and cl.gap_days(e) > config.max_gap_days:
            continue
        score = cosine(vec, cl.centroid)
        if score >= best_score:
            best, best_score = cl, score
    if best is None:
        best = _Cluster(row=None, members=[], centroid=None)
        clusters.append(best)
        best.add(e, vec)
        return False
    best.add(e, vec)
    return True


def episode_vectors(core: Core, episodes: Sequence[Episode]) -> dict[int, np.ndarray]:
    """Narrative vectors: the stored ones, and the embedder (with its cache) for the rest."""
    model = core.store.embed_model()
    have = core.store.episode_vectors(model, [e.id for e in episodes]) if model else {}
    missing = [e for e in episodes if e.id not in have]
    if missing:
        texts = {text_hash(episode_embed_text(e)): episode_embed_text(e) for e in missing}
        vecs, _ = core.embed_missing(texts, None)
        have.update({e.id: vecs[text_hash(episode_embed_text(e))] for e in missing})
    return {int(k): np.asarray(v, dtype=np.float32) for k, v in have.items()}


def heuristic_title(members: Sequence[Episode], names: Sequence[str], cap: int, n: int) -> str:
    """The members' most frequent keywords (titles count twice), names and dates left out."""
    stop = TITLE_STOP | {t for name in names for t in query_terms(name)}
    counts: Counter[str] = Counter()
    for e in members:
        for text, weight in ((e.title, 2), (e.narrative, 1)):
            for t in query_terms(text):
                if t not in stop and not any(ch.isdigit() for ch in t):
                    counts[t] += weight
    words = [w for w, _ in counts.most_common(n)]
    return trim(", ".join(words).capitalize(), cap) if words else trim(members[0].title, cap)


def describe(
    cl: _Cluster, asker: Asker, names: Sequence[str], config: SceneConfig
) -> tuple[str, str, str]:
    """(title, summary, method) of a scene: the model's, or picked from member narratives."""
    members = sorted(cl.members, key=lambda e: (e.start, e.id or 0))
    if asker.model is not None:
        shown = members[-config.llm_episodes :]
        out = asker.ask(
            scene_prompt, scene_prompt.build(shown, config.summary_cap), scene_prompt.SceneOut
        )
        if out is not None and out.summary.strip():
            title = trim(out.title, config.title_cap) or heuristic_title(
                members, names, config.title_cap, config.title_terms
            )
            return title, trim(out.summary, config.summary_cap), asker.method
    title = heuristic_title(members, names, config.title_cap, config.title_terms)
    summary = join_capped(
        [first_sentence(e.narrative or e.title) for e in members], config.summary_cap
    )
    return title, summary, "heuristic"


def _scene_of(cl: _Cluster, conversation: str, title: str, summary: str, method: str) -> Scene:
    members = sorted(cl.members, key=lambda e: (e.start, e.id or 0))
    return Scene(
        conversation=conversation,
        title=title,
        summary=summary,
        episode_ids=tuple(e.id or 0 for e in members),
        start=members[0].start,
        end=max(e.end for e in members),
        method=method,
        id=cl.row.id if cl.row is not None else None,
    )


def scene_conversation(
    core: Core, cid: str, names: Sequence[str], asker: Asker, config: SceneConfig
) -> Counts:
    """Place a conversation's new episodes into scenes and re-describe the scenes that changed."""
    counts = Counts()
    episodes = core.store.list_episodes(cid, limit=1_000_000_000)
    by_id = {e.id: e for e in episodes}
    clusters = [
        _Cluster(
            row=s,
            members=[by_id[i] for i in s.episode_ids if i in by_id],
            centroid=c,
            stored_hash=h,
        )
        for s, c, h in core.store.scene_rows(cid)
    ]
    placed = {e.id for cl in clusters for e in cl.members}
    todo = [e for e in episodes if e.id not in placed]
    vectors = episode_vectors(core, todo)
    for e in todo:
        counts.add("episodes_placed")
        if not assign(e, vectors[e.id or 0], clusters, config):
            counts.add("scenes_created")
    changed = [cl for cl in clusters if cl.changed]
    emptied = [cl.row.id for cl in changed if not cl.members and cl.row and cl.row.id]
    live = [cl for cl in changed if cl.members]
    if not live and not emptied:
        return counts
    member_vecs = episode_vectors(core, [e for cl in live for e in cl.members])
    rows = []
    for cl in live:
        centroid = np.mean([member_vecs[e.id or 0] for e in cl.members], axis=0)
        title, summary, method = describe(cl, asker, names, config)
        rows.append((_scene_of(cl, cid, title, summary, method), centroid, cl.member_hash))
        counts.add("scenes_described")
    core.store.save_scenes(cid, rows, delete=emptied)
    counts.add("scenes_deleted", len(emptied))
    return counts


def run_scenes(core: Core, payload: dict, config: SceneConfig = DEFAULT_SCENES) -> dict:
    """Job handler: cluster new episodes into scenes (payload: optional "conversation")."""
    total = Counts()
    participants = {c["id"]: c["participants"] for c in core.store.conversations()}
    seen = 0
    with llm_session(core, total, config.llm) as asker:
        for cid in conversations(core, payload):
            if not core.store.list_episodes(cid, limit=1):
                continue
            seen += 1
            done = scene_conversation(core, cid, participants.get(cid, ()), asker, config)
            for k, v in done.values.items():
                total.add(k, v)
    if not seen:
        return {"skipped": "no episodes"}
    return total.result(conversations=seen, episodes_placed=0, scenes_described=0)
