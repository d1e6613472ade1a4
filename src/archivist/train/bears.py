"""Train the map of what a turn bears on (``archivist train bears``; judge/bears.py).

Reads the team's cue/trigger pairs: ``training/implicit/train-*.json`` to fit,
``dev.json`` to choose the ridge strength, ``fresh.json`` (written apart, never
used to choose) to report. Each pair's cue turn is embedded as said and as a claim
would word it (third person), its trigger as said. The map ``W`` (from the identity)
is fitted contrastively: each mapped trigger must pick its own cue among all the
cues, and each cue its trigger (softmax over cosines at temperature ``TAU``, both
ways), with ``decay * |W - I|^2`` keeping it near plain cosine. Full-batch Adam in
numpy, no randomness: the same data gives the same map, in a minute here.
Reported for plain cosine and for the map: the share of triggers whose cue ranks
first, in the top 5 and in the top 10 among all the cues of a split.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from ..config import Settings
from ..embed import get_embedder
from ..judge.bears import CARD, MAP_FILE
from ..judge.trained import MODEL_DIR
from ..write.heuristic import in_third_person
from . import file_hash

DATA = Path("training/implicit")
DECAYS = (0.03, 0.1, 0.3)  # chosen on dev
TAU = 0.05
STEPS = 300
RATE = 0.01
NAME = "Sam"  # the name a cue is put in the third person with


def _pairs(files: list[Path]) -> list[dict]:
    return [it for f in files for it in json.loads(f.read_text(encoding="utf-8"))["items"]]


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9)


def ranks(triggers: np.ndarray, cues: np.ndarray, w: np.ndarray | None) -> dict[str, float]:
    """Share of triggers whose own cue (same row) ranks 1st, top 5, top 10 among all cues."""
    q = _unit(triggers if w is None else triggers @ w)
    s = q @ cues.T
    r = np.array([(s[i] > s[i, i]).sum() for i in range(len(s))])
    return {f"top{k}": round(float(np.mean(r < k)), 3) for k in (1, 5, 10)}


def fit(triggers: np.ndarray, cues: np.ndarray, decay: float) -> np.ndarray:
    """The map from trigger vectors toward their cue vectors (module docstring)."""
    d, n = triggers.shape[1], len(triggers)
    eye = np.eye(d)
    w, m, v = eye.copy(), np.zeros((d, d)), np.zeros((d, d))
    for step in range(1, STEPS + 1):
        raw = triggers @ w
        norm = np.maximum(np.linalg.norm(raw, axis=1, keepdims=True), 1e-9)
        q = raw / norm
        s = q @ cues.T / TAU
        rows = np.exp(s - s.max(axis=1, keepdims=True))
        rows /= rows.sum(axis=1, keepdims=True)
        cols = np.exp(s - s.max(axis=0, keepdims=True))
        cols /= cols.sum(axis=0, keepdims=True)
        d_s = (rows + cols - 2 * np.eye(n)) / n
        d_q = d_s @ cues / TAU
        d_raw = (d_q - q * np.sum(d_q * q, axis=1, keepdims=True)) / norm
        grad = triggers.T @ d_raw + 2 * decay * (w - eye)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        w -= RATE * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return w


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="archivist train bears", description=__doc__)
    parser.add_argument("--data", type=Path, default=DATA, help="the pairs' folder")
    parser.add_argument("--out", type=Path, default=MODEL_DIR, help="where the map goes")
    args = parser.parse_args(argv)
    train = sorted(args.data.glob("train-*.json"))
    if not train or not (args.data / "dev.json").is_file():
        print(f"no train-*.json and dev.json in {args.data}", file=sys.stderr)
        return 2
    embedder = get_embedder(Settings())

    def embed(texts: list[str]) -> np.ndarray:
        return _unit(np.asarray(embedder.embed_batch(texts), dtype=np.float64))

    def split(files: list[Path], claims_too: bool) -> tuple[np.ndarray, np.ndarray]:
        items = _pairs(files)
        cue = [it["cue"][it["cue_turn"]]["text"] for it in items]
        trig = [it["trigger"] for it in items]
        if claims_too:  # the cue as said and as a claim words it
            cue, trig = cue + [in_third_person(c, NAME, None) for c in cue], trig + trig
        return embed(trig), embed(cue)

    t_train, c_train = split(train, claims_too=True)
    t_dev, c_dev = split([args.data / "dev.json"], claims_too=False)
    fresh = [args.data / "fresh.json"] if (args.data / "fresh.json").is_file() else []
    chosen, best, by_decay, maps = 0.0, None, {}, {}
    for decay in DECAYS:
        maps[decay] = fit(t_train, c_train, decay)
        got = ranks(t_dev, c_dev, maps[decay])
        by_decay[str(decay)] = got
        if best is None or (got["top5"], got["top10"]) > (best["top5"], best["top10"]):
            chosen, best = decay, got
    w = maps[chosen]
    report = {
        "embedder": embedder.name,
        "fit": {"decay": chosen, "temperature": TAU, "steps": STEPS, "rate": RATE},
        "train_pairs": len(t_train) // 2,
        "train_files": {f.name: file_hash(f) for f in train},
        "dev": {"cosine": ranks(t_dev, c_dev, None), "map": best, "by_decay": by_decay},
    }
    if fresh:
        t_fresh, c_fresh = split(fresh, claims_too=False)
        report["fresh"] = {
            "cosine": ranks(t_fresh, c_fresh, None),
            "map": ranks(t_fresh, c_fresh, w),
        }
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / MAP_FILE, w.astype(np.float16))
    (args.out / CARD).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))
    return 0
