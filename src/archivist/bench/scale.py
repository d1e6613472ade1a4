"""Store-scale benchmark: search latency as a synthetic message log grows to 1M.

Embedding a million texts with the real model would take hours here, so the
synthetic messages carry random unit vectors filed under the real embedder's
name; queries are embedded by the real model. Texts are drawn from a Zipf-like
vocabulary so BM25 posting lists have realistic shapes. The store, FTS index,
filters and search path are exactly the production ones.
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


def _fill(memory: MemoryService, first: int, last: int, dim: int, seed: int) -> float:
    """Insert synthetic conversations [first, last) with random unit vectors; returns seconds."""
    rng = random.Random(seed + first)
    nrng = np.random.default_rng(seed + first)
    weights = list(itertools.accumulate(_WEIGHTS))
    model = memory.embedder.name
    t0 = time.perf_counter()
    for idx in range(first, last):
        conv = _conversation(idx, rng, weights)
        vecs = nrng.standard_normal((len(conv.messages), dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
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


def run_scale(
    memory: MemoryService,
    sizes: Sequence[int] = (10_000, 100_000, 1_000_000),
    queries: int = 100,
    seed: int = 7,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Grow one store through ``sizes`` messages, timing searches at each size."""
    dim = memory.embedder.dim or len(memory.embedder.embed_batch(["probe"])[0])
    memory.search("warm up the query embedder", k=1)  # cold model load is not a search cost
    have = sum(c["messages"] for c in memory.conversations())
    results = []
    for size in sorted(sizes):
        n_conv = max(1, size // MESSAGES_PER_CONVERSATION)
        done = have // MESSAGES_PER_CONVERSATION
        load_s = _fill(memory, done, n_conv, dim, seed) if n_conv > done else 0.0
        if progress:
            progress("scale", n_conv * MESSAGES_PER_CONVERSATION, max(sizes))
        added = (n_conv - done) * MESSAGES_PER_CONVERSATION
        have = n_conv * MESSAGES_PER_CONVERSATION
        t = time.perf_counter()
        memory.search("first search loads the vector index", k=1)
        index_s = time.perf_counter() - t
        lat = _latencies(memory, n_conv, queries, seed)
        results.append(
            {
                "messages": have,
                "insert_rows_per_s": round(added / load_s, 1) if load_s else None,
                "first_search_s": round(index_s, 3),
                "search_ms": lat,
                "db_bytes": memory.stats()["bytes"],
            }
        )
    return {
        "benchmark": "scale",
        "queries_per_size": queries,
        "embedder": memory.embedder.name,
        "preset": memory.settings.search_preset,
        "sizes": results,
    }
