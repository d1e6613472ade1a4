"""Train the head that reads what serves a goal (``archivist train serves``; judge/serves.py).

Reads the team's written pairs: ``training/serves/serves-*.jsonl`` to fit, a fifth
of their goals held out as the dev split (by a hash of the goal, so a goal's items
never sit on both sides) to choose the L2 strength, and ``fresh*.jsonl`` (written
apart, never used to choose) to report. Goals and items are embedded by the
bundled embedder, each also as a claim words it (third person) in training. The
head is a multinomial logistic regression over ``[g * i, |g - i|, g, i]`` fitted by
full-batch Adam in numpy with class-balanced weights: no randomness, the same data
gives the same head, in a minute here. Reported beside it, for each split: the
majority label, cosine alone (``serves`` above the dev split's best cut), and a
control: the items that serve or hinder a goal set against another goal, which a
head that judges the pair links rarely and one that reads the item alone links
as often as the right pairs.
"""

from __future__ import annotations

import argparse
import json
import sys
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..embed.local import MiniLMEmbedder
from ..judge.base import SERVES_LABELS, GoalPair
from ..judge.items import Item, read_items
from ..judge.metrics import score_task
from ..judge.serves import CARD, HEAD_FILE, features, softmax
from ..judge.trained import MODEL_DIR
from ..profile import LINK_SURE
from ..write.heuristic import in_third_person
from . import file_hash

DATA = Path("training/serves")
DECAYS = (1e-4, 1e-3, 1e-2)  # chosen on dev
STEPS = 400
RATE = 0.01
DEV_SHARE = 5  # one goal in five


def _dev(item: Item) -> bool:
    pair = item.pair
    assert isinstance(pair, GoalPair)
    return zlib.crc32(pair.goal.casefold().encode("utf-8")) % DEV_SHARE == 0


def fit(x: np.ndarray, y: np.ndarray, decay: float) -> tuple[np.ndarray, np.ndarray]:
    """Weights and bias of the class-balanced logistic regression (module docstring)."""
    n, d = x.shape
    k = len(SERVES_LABELS)
    counts = np.bincount(y, minlength=k).astype(np.float64)
    weight = (n / (k * np.maximum(counts, 1.0)))[y]
    onehot = np.eye(k)[y]
    w, b = np.zeros((d, k)), np.zeros(k)
    mw, vw, mb, vb = np.zeros_like(w), np.zeros_like(w), np.zeros_like(b), np.zeros_like(b)
    for step in range(1, STEPS + 1):
        p = softmax(x @ w + b)
        g = (p - onehot) * weight[:, None] / weight.sum()
        gw, gb = x.T @ g + 2 * decay * w, g.sum(axis=0)
        for param, grad, m, v in ((w, gw, mw, vw), (b, gb, mb, vb)):
            m *= 0.9
            m += 0.1 * grad
            v *= 0.999
            v += 0.001 * grad**2
            param -= RATE * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return w.astype(np.float32), b.astype(np.float32)


class _Pairs:
    """Goal/item pairs as the head reads them: the bundled embedder's vectors, each text
    embedded once."""

    def __init__(self) -> None:
        self.embedder = MiniLMEmbedder()
        self._cache: dict[str, np.ndarray] = {}

    def vectors(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        for at in range(0, len(todo), 256):
            chunk = todo[at : at + 256]
            self._cache.update(zip(chunk, self.embedder.embed_batch(chunk), strict=True))
        return np.stack([self._cache[t] for t in texts])

    def features(
        self, chosen: list[Item], claims_too: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """The head's input and the labels' indexes; ``claims_too``: each pair again as
        extraction words it ("Tom is saving for ..." for "I'm saving ...")."""
        goals = [it.pair.goal for it in chosen]  # type: ignore[union-attr]
        things = [it.pair.item for it in chosen]  # type: ignore[union-attr]
        labels = [SERVES_LABELS.index(it.label) for it in chosen]
        if claims_too:
            who = [it.pair.speaker or "Sam" for it in chosen]  # type: ignore[union-attr]
            goals += [in_third_person(g, w, None) for g, w in zip(goals, who, strict=True)]
            things += [in_third_person(t, w, None) for t, w in zip(things, who, strict=True)]
            labels += labels
        return features(self.vectors(goals), self.vectors(things)), np.array(labels)

    def cosine(self, chosen: list[Item]) -> np.ndarray:
        g = self.vectors([it.pair.goal for it in chosen])  # type: ignore[union-attr]
        i = self.vectors([it.pair.item for it in chosen])  # type: ignore[union-attr]
        g = g / np.linalg.norm(g, axis=1, keepdims=True)
        i = i / np.linalg.norm(i, axis=1, keepdims=True)
        return (g * i).sum(axis=1)


def _probs(head: tuple[np.ndarray, np.ndarray], x: np.ndarray) -> np.ndarray:
    return softmax(x @ head[0] + head[1])


def _said(head: tuple[np.ndarray, np.ndarray], x: np.ndarray) -> list[str]:
    return [SERVES_LABELS[int(r.argmax())] for r in _probs(head, x)]


def _scored(chosen: list[Item], said: list[str]) -> dict:
    return score_task("serves", [it.label for it in chosen], said)


def choose_head(
    pairs: _Pairs, train: list[Item], dev: list[Item]
) -> tuple[float, tuple[np.ndarray, np.ndarray], dict[str, float]]:
    """The L2 strength with the best dev macro-F1 (ties: the smaller), its head, and
    each strength's dev macro-F1."""
    x_train, y_train = pairs.features(train, claims_too=True)
    x_dev, _ = pairs.features(dev)
    heads = {decay: fit(x_train, y_train, decay) for decay in DECAYS}
    by_decay = {str(d): _scored(dev, _said(h, x_dev))["macro_f1"] for d, h in heads.items()}
    chosen = max(DECAYS, key=lambda d: (by_decay[str(d)], -d))
    return chosen, heads[chosen], by_decay


def cosine_cut(pairs: _Pairs, dev: list[Item]) -> float:
    """The cosine above which "serves" (else "unrelated") is right most often on dev."""
    dev_cos = pairs.cosine(dev)
    return max(
        np.unique(np.round(dev_cos, 2)),
        key=lambda c: sum(
            ("serves" if s >= c else "unrelated") == it.label
            for s, it in zip(dev_cos, dev, strict=True)
        ),
    )


def control(pairs: _Pairs, head: tuple[np.ndarray, np.ndarray], items: list[Item]) -> float:
    """Each item that serves or hinders its goal, set against the next other goal of the
    split (sorted): the share the head still links at LINK_SURE (it should be near 0:
    a head that reads the item alone links them all)."""
    goals = sorted({it.pair.goal for it in items})  # type: ignore[union-attr]
    moved = []
    for it in items:
        if it.label != "unrelated" and len(goals) > 1:
            other = goals[(goals.index(it.pair.goal) + 1) % len(goals)]  # type: ignore[union-attr]
            moved.append(replace(it, pair=replace(it.pair, goal=other), label="unrelated"))
    if not moved:
        return 0.0
    probs = _probs(head, pairs.features(moved)[0])
    unrelated = SERVES_LABELS.index("unrelated")
    linked = (probs.argmax(axis=1) != unrelated) & (probs.max(axis=1) >= LINK_SURE)
    return round(float(linked.mean()), 3)


def summary(
    pairs: _Pairs,
    head: tuple[np.ndarray, np.ndarray],
    items: list[Item],
    majority: str,
    cut: float,
) -> dict:
    """The head on ``items``, beside the majority label, cosine alone and the control."""
    got = _scored(items, _said(head, pairs.features(items)[0]))
    cos = ["serves" if s >= cut else "unrelated" for s in pairs.cosine(items)]
    return {
        "n": got["n"],
        "accuracy": round(got["accuracy"], 3),
        "macro_f1": round(got["macro_f1"], 3),
        "f1": {k: round(v["f1"], 3) for k, v in got["by_label"].items()},
        "majority": round(_scored(items, [majority] * len(items))["accuracy"], 3),
        "cosine": round(_scored(items, cos)["accuracy"], 3),
        "another_goal_linked": control(pairs, head, items),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="archivist train serves", description=__doc__)
    parser.add_argument("--data", type=Path, default=DATA, help="the pairs' folder")
    parser.add_argument("--out", type=Path, default=MODEL_DIR, help="where the head goes")
    args = parser.parse_args(argv)
    files = sorted(args.data.glob("serves-*.jsonl"))
    if not files:
        print(f"no serves-*.jsonl in {args.data}", file=sys.stderr)
        return 2
    items = [it for f in files for it in read_items(f) if it.task == "serves"]
    train = [it for it in items if not _dev(it)]
    dev = [it for it in items if _dev(it)]
    pairs = _Pairs()
    chosen, head, by_decay = choose_head(pairs, train, dev)
    cut = cosine_cut(pairs, dev)
    majority = max(SERVES_LABELS, key=lambda lab: sum(it.label == lab for it in train))
    report = {
        "embedder": pairs.embedder.name,
        "labels": list(SERVES_LABELS),
        "fit": {"decay": chosen, "steps": STEPS, "rate": RATE, "by_decay_dev_macro_f1": by_decay},
        "cosine_cut": float(cut),
        "train_items": len(train),
        "train_files": {f.name: file_hash(f) for f in files},
        "dev": summary(pairs, head, dev, majority, cut),
    }
    for f in sorted(args.data.glob("fresh*.jsonl")):  # written apart: reported only
        fresh = [it for it in read_items(f) if it.task == "serves"]
        report[f.stem] = summary(pairs, head, fresh, majority, cut)
        report[f"{f.stem}_file"] = {f.name: file_hash(f)}
    args.out.mkdir(parents=True, exist_ok=True)
    w, b = head
    np.savez(args.out / HEAD_FILE, w=w.astype(np.float16), b=b)
    (args.out / CARD).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))
    return 0
