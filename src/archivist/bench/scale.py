"""Store-scale benchmark: search latency as a synthetic message log grows to 1M.

Embedding a million texts with the real model would take hours here, so the
synthetic messages carry synthetic unit vectors filed under the real embedder's
name: a conversation's direction, its session's, the message's words' and noise
(``_vectors``), so neighbours cluster by conversation and topic as real chat
embeddings do, with more noise than a real model's (a harder case for an
approximate index; pure random vectors are harder still). Full-path queries are embedded by
the real model; the vector-only figures (ANN recall@10 against the exact scan of
the same run) use synthetic queries near stored messages. Texts are drawn from a
Zipf-like vocabulary so BM25 posting lists have realistic shapes. The store, FTS
index, side file, quantized index, filters and search path are exactly the production ones.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np

from ..model import Conversation, Message, Session, content_hash
from ..service import MemoryService
from ..store.base import IndexedMessage
from ..store.sql import Filters, filtered_keys_sql
from ..store.sqlite import SQLiteStore
from ..write.index_text import index_rows
from .metrics import percentile

_REAL_WORDS = (
    "garden paint concert hiking camping guitar violin piano marathon bakery recipe "
    "museum library beach mountain river lake forest city village train airport "
    "flight hospital school university office meeting project deadline promotion "
    "vacation holiday birthday wedding anniversary dinner lunch breakfast coffee tea "
    "dog cat horse puppy kitten bird roses tulips novel poetry photography "
    "pottery sculpture dance yoga running cycling swimming football tennis chess "
    "workshop volunteer shelter charity fundraiser parade festival market sunset "
    "sunrise storm snow summer winter spring autumn family sister brother mother "
    "father grandma cousin friend neighbour colleague teacher doctor nurse pilot"
).split()
_SYLLABLES = "ba ko ri su te la mo ni pa do ve ra xi lu fe go".split()
# A vocabulary of 20,000 content words: the real ones first, then pseudo-words.
# Zipf weights 1/(rank + 100) give the head a realistic spread for content words
# (the most common in about 1% of messages), not the 20% of a 100-word toy list.
_WORDS = tuple(
    _REAL_WORDS
    + [
        "".join(_SYLLABLES[(i >> s) % 16] for s in (0, 4, 8, 12))
        for i in range(20_000 - len(_REAL_WORDS))
    ]
)
_WEIGHTS = tuple(1.0 / (r + 100) for r in range(len(_WORDS)))
_FILLER = "I we it was so really just went saw had got made felt think love great".split()
_QUERIES = (
    "When did {p} go to the {w}?",
    "What did {p} say about the {w}?",
    "How does {p} feel about {w} and {w2}?",
    "Who went to the {w} with {p}?",
)

MESSAGES_PER_CONVERSATION = 1000


def _text(rng: random.Random, weights: Sequence[float]) -> str:
    n = rng.randint(6, 24)
    words = rng.choices(_WORDS, cum_weights=weights, k=n // 2) + rng.choices(_FILLER, k=n - n // 2)
    rng.shuffle(words)
    return " ".join(words).capitalize() + "."


def _conversation(idx: int, rng: random.Random, weights: Sequence[float]) -> Conversation:
    a, b = f"Person{2 * idx}", f"Person{2 * idx + 1}"
    start = datetime(2023, 1, 1, tzinfo=UTC) + timedelta(days=idx % 365)
    msgs = []
    for i in range(MESSAGES_PER_CONVERSATION):
        speaker, other = (a, b) if i % 2 == 0 else (b, a)
        session = i // 50 + 1
        when = start + timedelta(days=session, seconds=30 * i)
        msgs.append(
            Message(
                id=f"D{session}:{i % 50 + 1}",
                conversation=f"syn-{idx}",
                session=session,
                speaker=speaker,
                text=_text(rng, weights),
                timestamp=when,
                addressees=(other,),
                session_start=start + timedelta(days=session),
                seq=i,
            )
        )
    sessions = tuple(
        Session(f"syn-{idx}", s, start + timedelta(days=s))
        for s in range(1, MESSAGES_PER_CONVERSATION // 50 + 1)
    )
    return Conversation(f"syn-{idx}", (a, b), tuple(msgs), sessions, "synthetic")


class _Space:
    """The synthetic embedding space: fixed directions per word, conversation and session."""

    def __init__(self, dim: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.dim = dim
        self.words = {w: i for i, w in enumerate(_WORDS)}
        self.word_vecs = _unit(rng.standard_normal((len(_WORDS), dim)))
        self.common = _unit(rng.standard_normal(dim))  # real embeddings share a direction
        self.seed = seed

    def _dir(self, *key: int) -> np.ndarray:
        return _unit(np.random.default_rng((self.seed, *key)).standard_normal(self.dim))

    def vectors(self, conv: int, msgs: Sequence[Message], rng: np.random.Generator) -> np.ndarray:
        c = self._dir(1, conv)
        out = np.empty((len(msgs), self.dim), dtype=np.float32)
        sessions: dict[int, np.ndarray] = {}
        for i, m in enumerate(msgs):
            s = sessions.setdefault(m.session, self._dir(2, conv, m.session))
            ids = [self.words[w] for w in m.text.rstrip(".").lower().split() if w in self.words]
            words = self.word_vecs[ids].sum(0) / max(1.0, len(ids) ** 0.5) if ids else 0.0
            out[i] = 0.5 * self.common + 0.5 * c + 0.35 * s + 0.8 * words
        out += 0.3 * _unit(rng.standard_normal(out.shape))
        return _unit(out)

    def queries(self, stored: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """Queries near stored messages: one's vector, the common direction, a few words."""
        near = stored[rng.integers(0, len(stored), n)]
        words = self.word_vecs[rng.integers(0, 2000, (n, 3))].sum(1) / 3**0.5
        return _unit(0.5 * self.common + 0.5 * near + 0.8 * words)


def _unit(a: np.ndarray) -> np.ndarray:
    return (a / np.linalg.norm(a, axis=-1, keepdims=True)).astype(np.float32)


def _fill(memory: MemoryService, space: _Space, first: int, last: int, seed: int) -> float:
    """Insert synthetic conversations [first, last) with random unit vectors; returns seconds."""
    rng = random.Random(seed + first)
    nrng = np.random.default_rng(seed + first)
    weights = list(itertools.accumulate(_WEIGHTS))
    model = memory.embedder.name
    t0 = time.perf_counter()
    for idx in range(first, last):
        conv = _conversation(idx, rng, weights)
        vecs = space.vectors(idx, conv.messages, nrng)
        rows = [
            IndexedMessage(m, f"{m.speaker} to {m.addressees[0]}: {m.text}", content_hash(m.hash))
            for m in conv.messages
        ]
        memory.store.add_conversation(
            conv, rows, model, {r.embed_hash: v for r, v in zip(rows, vecs, strict=True)}
        )
    return time.perf_counter() - t0


def _latencies(memory: MemoryService, n_conv: int, queries: int, seed: int) -> dict:
    rng = random.Random(seed)
    out: dict[str, dict] = {}
    for label, scoped in (("one conversation", True), ("whole store", False)):
        ms = []
        for _ in range(queries):
            c = rng.randrange(n_conv)
            w, w2 = rng.choices(_WORDS, weights=_WEIGHTS, k=2)
            q = rng.choice(_QUERIES).format(p=f"Person{2 * c + rng.randint(0, 1)}", w=w, w2=w2)
            t = time.perf_counter()
            memory.search(q, conversation=f"syn-{c}" if scoped else None, k=10)
            ms.append((time.perf_counter() - t) * 1000)
        out[label] = {"p50": round(percentile(ms, 50), 2), "p95": round(percentile(ms, 95), 2)}
    return out


def _vector_only(store: SQLiteStore, space: _Space, model: str, n: int, seed: int) -> dict:
    """The vector side alone: the exact scan (the baseline) and the production path
    (the quantized scan above the threshold) on the same synthetic queries; recall@10
    of one against the other, over the whole store and under a time filter that
    admits about half of it (exact: the float32 scan of the admitted rows)."""
    rng = np.random.default_rng(seed)
    snap = store._vectors.snapshot(model, store._vector_top())
    sample = np.asarray(snap.vecs[rng.integers(0, snap.state.rows, min(2000, snap.state.rows))])
    qs = space.queries(sample, n, rng)
    half = Filters(until=datetime(2023, 7, 2, tzinfo=UTC))  # conversations start over 2023
    sql, params = filtered_keys_sql("messages", half)
    admitted = snap.positions(np.fromiter((r[0] for r in store._db.execute(sql, params)), np.int64))
    out: dict = {}
    for label, filters, pos in (("", Filters(), None), ("filtered_", half, admitted)):
        figures = _against_exact(
            qs,
            lambda q, pos=pos: {r for r, _ in snap.exact(q, 10, pos)},
            lambda q, filters=filters: {r for r, _ in store.vector_search(model, q, filters, 10)},
        )
        out.update({f"{label}{k}": v for k, v in figures.items()})
    out["filtered_share"] = round(admitted.size / max(1, len(snap)), 3)
    out["ann"] = snap.ann is not None and len(snap) >= store.ann_min_rows
    return out


def _pg_vector_only(store, space: _Space, model: str, n: int, seed: int) -> dict:
    """PostgreSQL's vector side alone, whole store: the exact scan (the baseline) and the
    production path (the process's 8-bit copy of the vectors, or a pgvector index, once the
    store is large enough for either) on the same synthetic queries, and the recall@10 of
    the one against the other."""
    from ..store import sql_pg as pq

    rng = np.random.default_rng(seed)
    raw = store._db.execute(
        "SELECT v.vec::real[] FROM vectors v JOIN messages m ON m.vec_id = v.id "
        "WHERE v.model = ? AND m.rowid % 97 = 0 LIMIT 2000",
        (model,),
    ).fetchall()
    sample = np.asarray([r[0] for r in raw], dtype=np.float32)

    def exact(q: np.ndarray) -> set[int]:
        sql, params = pq.exact_vector_sql("messages", q.tolist(), model, Filters(), 10)
        return {int(r[0]) for r in store._db.execute(sql, params)}

    path = lambda q: {r for r, _ in store.vector_search(model, q, Filters(), 10)}  # noqa: E731
    return {
        **_against_exact(space.queries(sample, n, rng), exact, path),
        "ann_index": store.meta("ann_index"),
        "mirror_rows": len(store._mirror) if store._mirror is not None else 0,
    }


def _against_exact(
    queries: np.ndarray,
    exact: Callable[[np.ndarray], set[int]],
    path: Callable[[np.ndarray], set[int]],
) -> dict:
    """Each query's top 10 by the exact scan and by the production path, both timed:
    their latencies and the path's recall@10 against the exact scan."""
    exact_ms, path_ms, hits = [], [], []
    for q in queries:
        t = time.perf_counter()
        want = exact(q)
        exact_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        got = path(q)
        path_ms.append((time.perf_counter() - t) * 1000)
        hits.append(len(want & got) / max(1, len(want)))
    return {
        "exact_ms": _pcts(exact_ms),
        "path_ms": _pcts(path_ms),
        "recall_at_10": round(float(np.mean(hits)), 4),
    }


_KEYWORD_QUERIES = (
    "I went to the {w} and felt great",
    "we saw the {w}, really love it",
    "what did you think about the {w} and the {w2}",
)


def keyword_only(store: SQLiteStore, n: int, seed: int) -> dict:
    """Whole-store BM25 with the store's handling of frequent words against bm25() over
    every term (the baseline: reads whole posting lists) and against dropping them
    (before): latency and top-10 overlap with the baseline, on queries mixing common
    filler words with Zipf-drawn content words."""
    from ..store import sql as q

    rng = random.Random(seed)
    frequent_ms, full_ms, drop_ms, same, same_drop = [], [], [], [], []

    def ranked(match: str | None) -> tuple[set[int], float]:
        t = time.perf_counter()
        if match is None:
            return set(), 0.0
        sql, params = q.ranked_sql("messages", match, Filters(), 10)
        rows = {r for r, _ in store._db.execute(sql, params).fetchall()}
        return rows, (time.perf_counter() - t) * 1000

    for _ in range(n):
        w, w2 = rng.choices(_WORDS, weights=_WEIGHTS, k=2)
        text = rng.choice(_KEYWORD_QUERIES).format(w=w, w2=w2)
        t = time.perf_counter()
        got = {r for r, _ in store.keyword_search(text, Filters(), 10)}
        frequent_ms.append((time.perf_counter() - t) * 1000)
        full, ms = ranked(q.fts_query(text))
        full_ms.append(ms)
        dropped, ms = ranked(q.fts_query(text, store._frequent_terms(q.query_terms(text))))
        drop_ms.append(ms)
        same.append(len(got & full) / max(1, len(full)))
        same_drop.append(len(dropped & full) / max(1, len(full)))
    return {
        "queries": n,
        "bm25_all_terms_ms": _pcts(full_ms),
        "frequent_apart_ms": _pcts(frequent_ms),
        "frequent_dropped_ms": _pcts(drop_ms),
        "top10_overlap_frequent_apart": round(float(np.mean(same)), 3),
        "top10_overlap_frequent_dropped": round(float(np.mean(same_drop)), 3),
    }


def _pcts(ms: list[float]) -> dict:
    return {"p50": round(percentile(ms, 50), 2), "p95": round(percentile(ms, 95), 2)}


def _reopen(path, model: str, query: np.ndarray) -> dict:
    """A new process's cost: open the store, then its first whole-store vector search
    and first keyword search (the page cache is warm: the file was just written)."""
    t = time.perf_counter()
    store = SQLiteStore(path)
    opened = time.perf_counter() - t
    try:
        t = time.perf_counter()
        store.vector_search(model, query, Filters(), 10)
        first_vec = time.perf_counter() - t
        t = time.perf_counter()
        store.keyword_search("went to the garden with my sister", Filters(), 10)
        first_kw = time.perf_counter() - t
    finally:
        store.close()
    return {
        "open_s": round(opened, 4),
        "first_vector_search_s": round(first_vec, 4),
        "first_keyword_search_s": round(first_kw, 4),
    }


def ingest_throughput(memory: MemoryService, n: int = 400, seed: int = 3) -> dict:
    """Messages/s of ``add`` (embedding included, no extraction) into a fresh store
    against the embedder's own texts/s on the same texts."""
    import tempfile
    from pathlib import Path

    rng = random.Random(seed)
    conv = _conversation(10_000_000 + seed, rng, list(itertools.accumulate(_WEIGHTS)))
    conv = Conversation(conv.id, conv.participants, conv.messages[:n], conv.sessions, "synthetic")
    # What add embeds: each message with its session's previous turns (index_text.py).
    texts = [e for _, e in index_rows(list(conv.messages), memory.index_options)]

    def embed_alone() -> float:
        t = time.perf_counter()
        memory.embedder.embed_batch(texts)
        return time.perf_counter() - t

    before = embed_alone()
    with tempfile.TemporaryDirectory() as tmp:
        fresh = MemoryService(Path(tmp) / "ingest.db", embedder=memory.embedder)
        try:
            t = time.perf_counter()
            fresh.add([conv], extract=False)
            add_s = time.perf_counter() - t
        finally:
            fresh.close()
    embed_s = (before + embed_alone()) / 2  # either side of the add: the machine drifts
    return {
        "messages": len(texts),
        "embedder_texts_per_s": round(len(texts) / embed_s, 1),
        "ingest_messages_per_s": round(len(texts) / add_s, 1),
        "ratio": round(embed_s / add_s, 3),
    }


def run_scale(
    memory: MemoryService,
    sizes: Sequence[int] = (10_000, 100_000, 1_000_000),
    queries: int = 100,
    seed: int = 7,
    progress: Callable[[str, int, int], None] | None = None,
    ann_from: int | None = None,
) -> dict:
    """Grow one store through ``sizes`` messages, timing searches at each size;
    ``ann_from``: the store size from which whole-store search scans 8-bit codes."""
    dim = memory.embedder.dim or len(memory.embedder.embed_batch(["probe"])[0])
    memory.search("warm up the query embedder", k=1)  # cold model load is not a search cost
    store = memory.store
    if ann_from is not None and isinstance(store, SQLiteStore):
        store.ann_min_rows = ann_from
    model = memory.embedder.name
    space = _Space(dim, seed)
    have = sum(c["messages"] for c in memory.conversations())
    results = []
    for size in sorted(sizes):
        n_conv = max(1, size // MESSAGES_PER_CONVERSATION)
        done = have // MESSAGES_PER_CONVERSATION
        load_s = _fill(memory, space, done, n_conv, seed) if n_conv > done else 0.0
        if progress:
            progress("scale", n_conv * MESSAGES_PER_CONVERSATION, max(sizes))
        added = (n_conv - done) * MESSAGES_PER_CONVERSATION
        have = n_conv * MESSAGES_PER_CONVERSATION
        row: dict = {"messages": have}
        row["insert_rows_per_s"] = round(added / load_s, 1) if load_s else None
        if isinstance(store, SQLiteStore):
            t = time.perf_counter()
            store.refresh_vector_index()
            row["side_file_catch_up_s"] = round(time.perf_counter() - t, 2)
            if have >= store.ann_min_rows:
                t = time.perf_counter()
                store.refresh_vector_index(build_ann=True)
                row["ann_build_s"] = round(time.perf_counter() - t, 1)
            row["reopen"] = _reopen(store.path, model, space.common)
            row["vector_only"] = _vector_only(store, space, model, queries, seed)
            row["side_file_bytes"] = store.vector_file_bytes()
            row["keyword_only"] = keyword_only(store, min(queries, 30), seed)
        elif hasattr(store, "refresh_vector_index"):  # PostgreSQL: its ANN index, when due
            before, t = store.meta("ann_index"), time.perf_counter()
            # the process's vector copy: read now (a server's first search starts it)
            mirror = store.ann_method == "mirror" and have >= store.mirror_min_rows
            info = store.refresh_vector_index(build_ann=mirror)
            if info.get("ann_index") != before:
                row["ann_build_s"] = round(time.perf_counter() - t, 1)
            if "mirror_rows" in info:
                row["mirror_read_s"] = round(time.perf_counter() - t, 1)
            t = time.perf_counter()  # what a consolidation round does once the store grew
            if "terms" in store.refresh_term_counts():
                row["term_counts_s"] = round(time.perf_counter() - t, 1)
            row["vector_only"] = _pg_vector_only(store, space, model, queries, seed)
            row["recall_at_10"] = row["vector_only"]["recall_at_10"]
        t = time.perf_counter()
        memory.search("first search of this size", k=1)
        row["first_search_s"] = round(time.perf_counter() - t, 3)
        row["search_ms"] = _latencies(memory, n_conv, queries, seed)
        row["db_bytes"] = memory.stats()["bytes"]
        results.append(row)
    return {
        "benchmark": "scale",
        "queries_per_size": queries,
        "embedder": memory.embedder.name,
        "preset": memory.settings.search_preset,
        "sizes": results,
        "ingest": ingest_throughput(memory),
    }
