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
import hashlib
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
    fresh_files = sorted(args.data.glob("fresh*.jsonl"))  # written apart: reported only
    fresh = {f.name: [it for it in read_items(f) if it.task == "serves"] for f in fresh_files}
    embedder = MiniLMEmbedder()
    cache: dict[str, np.ndarray] = {}

    def vectors(texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in cache]
        for at in range(0, len(todo), 256):
            chunk = todo[at : at + 256]
            cache.update(zip(chunk, embedder.embed_batch(chunk), strict=True))
        return np.stack([cache[t] for t in texts])

    def pairs_of(chosen: list[Item], claims_too: bool) -> tuple[np.ndarray, np.ndarray]:
        goals = [it.pair.goal for it in chosen]  # type: ignore[union-attr]
        things = [it.pair.item for it in chosen]  # type: ignore[union-attr]
        labels = [SERVES_LABELS.index(it.label) for it in chosen]
        if claims_too:  # as extraction words them: "Tom is saving for ..." ("I'm saving ...")
            who = [it.pair.speaker or "Sam" for it in chosen]  # type: ignore[union-attr]
            goals += [in_third_person(g, w, None) for g, w in zip(goals, who, strict=True)]
            things += [in_third_person(t, w, None) for t, w in zip(things, who, strict=True)]
            labels += labels
        return features(vectors(goals), vectors(things)), np.array(labels)

    def cosine(chosen: list[Item]) -> np.ndarray:
        g = vectors([it.pair.goal for it in chosen])  # type: ignore[union-attr]
        i = vectors([it.pair.item for it in chosen])  # type: ignore[union-attr]
        g = g / np.linalg.norm(g, axis=1, keepdims=True)
        i = i / np.linalg.norm(i, axis=1, keepdims=True)
        return (g * i).sum(axis=1)

    def scored(chosen: list[Item], said: list[str]) -> dict:
        return score_task("serves", [it.label for it in chosen], said)

    x_train, y_train = pairs_of(train, claims_too=True)
    x_dev, _ = pairs_of(dev, claims_too=False)
    heads, by_decay = {}, {}
    for decay in DECAYS:
        heads[decay] = fit(x_train, y_train, decay)
        said = [
            SERVES_LABELS[int(r.argmax())]
            for r in softmax(x_dev @ heads[decay][0] + heads[decay][1])
        ]
        by_decay[str(decay)] = scored(dev, said)["macro_f1"]
    chosen = max(DECAYS, key=lambda d: (by_decay[str(d)], -d))
    w, b = heads[chosen]

    def predict(items_: list[Item]) -> list[str]:
        x, _ = pairs_of(items_, claims_too=False)
        return [SERVES_LABELS[int(r.argmax())] for r in softmax(x @ w + b)]

    dev_cos = cosine(dev)
    cut = max(
        np.unique(np.round(dev_cos, 2)),
        key=lambda c: sum(
            ("serves" if s >= c else "unrelated") == it.label
            for s, it in zip(dev_cos, dev, strict=True)
        ),
    )

    def baselines(items_: list[Item]) -> dict:
        majority = max(SERVES_LABELS, key=lambda lab: sum(it.label == lab for it in train))
        cos = ["serves" if s >= cut else "unrelated" for s in cosine(items_)]
        return {
            "majority": round(scored(items_, [majority] * len(items_))["accuracy"], 3),
            "cosine": round(scored(items_, cos)["accuracy"], 3),
        }

    def swapped(items_: list[Item]) -> float:
        """The control: each item that serves or hinders its goal, set against the next
        other goal of the split (sorted); the share the head still links at LINK_SURE
        (it should be near 0: a head that reads the item alone links them all)."""
        goals = sorted({it.pair.goal for it in items_})  # type: ignore[union-attr]
        moved = []
        for it in items_:
            if it.label != "unrelated" and len(goals) > 1:
                other = goals[(goals.index(it.pair.goal) + 1) % len(goals)]  # type: ignore[union-attr]
                moved.append(replace(it, pair=replace(it.pair, goal=other), label="unrelated"))
        if not moved:
            return 0.0
        x, _ = pairs_of(moved, claims_too=False)
        probs = softmax(x @ w + b)
        linked = (probs.argmax(axis=1) != SERVES_LABELS.index("unrelated")) & (
            probs.max(axis=1) >= LINK_SURE
        )
        return round(float(linked.mean()), 3)

    def summary(items_: list[Item]) -> dict:
        got = scored(items_, predict(items_))
        by_label = {k: round(v["f1"], 3) for k, v in got["by_label"].items()}
        return {
            "n": got["n"],
            "accuracy": round(got["accuracy"], 3),
            "macro_f1": round(got["macro_f1"], 3),
            "f1": by_label,
            **baselines(items_),
            "another_goal_linked": swapped(items_),
        }

    report = {
        "embedder": embedder.name,
        "labels": list(SERVES_LABELS),
        "fit": {"decay": chosen, "steps": STEPS, "rate": RATE, "by_decay_dev_macro_f1": by_decay},
        "cosine_cut": float(cut),
        "train_items": len(train),
        "train_files": {f.name: _sha(f) for f in files},
        "dev": summary(dev),
    }
    for f in fresh_files:
        report[f.stem] = summary(fresh[f.name])
        report[f"{f.stem}_file"] = {f.name: _sha(f)}
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez(args.out / HEAD_FILE, w=w.astype(np.float16), b=b)
    (args.out / CARD).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))
    return 0


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
