"""Train the map of what a turn bears on (``archivist train bears``; judge/bears.py).

Reads the team's cue/trigger pairs: ``training/implicit/train-*.json`` to fit,
``dev.json`` to choose the ridge strength, ``fresh.json`` (written apart, never
used to choose) to report. Each pair's cue turn is embedded as said and as a claim
would word it (third person), its trigger as said; the map ``W`` minimises
``|T W - C|^2 + lam |W - I|^2`` (closed form, deterministic, seconds, numpy only).
Reported for plain cosine and for the map: the share of triggers whose cue ranks
first, in the top 5 and in the top 10 among all the cues of a split.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from ..config import Settings
from ..embed import get_embedder
from ..judge.bears import CARD, MAP_FILE
from ..judge.trained import MODEL_DIR
from ..write.heuristic import in_third_person

DATA = Path("training/implicit")
LAMBDAS = (0.3, 1.0, 3.0, 10.0)
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


def fit(triggers: np.ndarray, cues: np.ndarray, lam: float) -> np.ndarray:
    """The ridge map from trigger vectors to cue vectors, pulled toward the identity."""
    d = triggers.shape[1]
    eye = np.eye(d)
    return np.linalg.solve(triggers.T @ triggers + lam * eye, triggers.T @ cues + lam * eye)


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
    chosen, best, by_lambda = 0.0, None, {}
    for lam in LAMBDAS:
        got = ranks(t_dev, c_dev, fit(t_train, c_train, lam))
        by_lambda[str(lam)] = got
        if best is None or (got["top5"], got["top10"]) > (best["top5"], best["top10"]):
            chosen, best = lam, got
    w = fit(t_train, c_train, chosen)
    report = {
        "embedder": embedder.name,
        "lambda": chosen,
        "train_pairs": len(t_train) // 2,
        "train_files": {f.name: _sha(f) for f in train},
        "dev": {"cosine": ranks(t_dev, c_dev, None), "map": best, "by_lambda": by_lambda},
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


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
