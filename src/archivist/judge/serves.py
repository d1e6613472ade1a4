"""What serves a goal: a small head on the bundled embedder's sentence vectors.

The fifth task of the judge seam (``serves``): does another thing memory holds of a
person (what they did, do, have or plan) move them toward one of their goals
(``serves``), work against it (``hinders``), or neither (``unrelated``)? A goal and
its item are embedded apart by the bundled MiniLM embedder (whatever embedder the
store uses: the head was fitted on this one's vectors), and a multinomial logistic
regression reads ``[g * i, |g - i|, g, i]``. ``archivist train serves`` fits it on
the team's written pairs (training/serves/); it is one small file beside the
cross-encoder.

No head ships: the one fitted on the team's 1,600 pairs reads the item, not the
pair (it links a third of the steps toward one goal to another goal as well: its
control), so the trained judge links nothing and a goal's links come from an LLM
when one is configured (docs/judge.md, "What serves a goal").
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from .base import SERVES_LABELS

HEAD_FILE = "serves.npz"  # the weights and bias
CARD = "serves.json"  # the embedder it belongs to, the data and the measured accuracy
# A head is used only if it judges the pair, not the item alone: on its dev split, of the
# items that serve or hinder a goal set against another goal, it may link at most this
# share (``archivist train serves`` measures it: "another_goal_linked")
CONTROL_MAX = 0.05


def features(goals: np.ndarray, items: np.ndarray) -> np.ndarray:
    """The head's input, one row per (goal, item) row pair of unit vectors."""
    g = goals / np.maximum(np.linalg.norm(goals, axis=1, keepdims=True), 1e-9)
    i = items / np.maximum(np.linalg.norm(items, axis=1, keepdims=True), 1e-9)
    return np.hstack([g * i, np.abs(g - i), g, i]).astype(np.float32)


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


@lru_cache(maxsize=4)
def load_head(folder: Path) -> tuple[str, np.ndarray, np.ndarray] | None:
    """(embedder name, weights, bias) of the head in ``folder``, or None without one
    that passed its control (CONTROL_MAX)."""
    card, weights = folder / CARD, folder / HEAD_FILE
    if not card.is_file() or not weights.is_file():
        return None
    meta = json.loads(card.read_text(encoding="utf-8"))
    if tuple(meta.get("labels", ())) != SERVES_LABELS:
        return None
    if meta.get("dev", {}).get("another_goal_linked", 1.0) > CONTROL_MAX:
        return None  # it reads the item, not the pair: its links would be noise
    with np.load(weights) as data:
        return str(meta.get("embedder", "")), data["w"].astype(np.float32), data["b"]


def probabilities(
    head: tuple[str, np.ndarray, np.ndarray], goals: np.ndarray, items: np.ndarray
) -> np.ndarray:
    """Label probabilities (columns: SERVES_LABELS), one row per (goal, item) pair."""
    _, w, b = head
    if not len(goals):
        return np.zeros((0, len(SERVES_LABELS)), dtype=np.float32)
    return softmax(features(goals, items) @ w + b)
