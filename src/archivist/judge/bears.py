"""What a turn bears on: a map of the embedder's space from a turn to the standing
items (values, goals, lessons, states) it needs, learned from cue/trigger pairs.

A trigger ("let my nephew cut the ticket queue") and its cue ("I believe in fair
treatment") share no words and sit far apart in the embedder's space. A linear map
``W``, fitted by ``archivist train bears`` on pairs the team wrote (contrastively:
each mapped trigger must pick out its own cue; kept near the identity), moves a
turn's vector toward the items it bears on; items are then ranked by cosine.
The map belongs to one embedder: for any other (a different name or size) it is the
identity, plain cosine.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from .trained import MODEL_DIR

MAP_FILE = "bears.npy"
CARD = "bears.json"  # the embedder it belongs to, the data and the measured ranks


@lru_cache(maxsize=4)
def _load(folder: Path) -> tuple[str, np.ndarray | None]:
    card, weights = folder / CARD, folder / MAP_FILE
    if not card.is_file() or not weights.is_file():
        return "", None
    meta = json.loads(card.read_text(encoding="utf-8"))
    return str(meta.get("embedder", "")), np.load(weights).astype(np.float32)


def turn_map(embedder_name: str, dim: int, folder: Path = MODEL_DIR) -> np.ndarray | None:
    """The learned map for this embedder, or None (plain cosine) when none fits it."""
    name, w = _load(folder)
    if w is None or name != embedder_name or w.shape != (dim, dim):
        return None
    return w


def bearing(query_vector: np.ndarray, vectors: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """How much a turn bears on each item: the cosine of the mapped turn and each item's
    vector, floored at 0."""
    q = query_vector if w is None else query_vector @ w
    q = q / (np.linalg.norm(q) or 1.0)
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    return np.clip((vectors @ q) / norms, 0.0, 1.0)
