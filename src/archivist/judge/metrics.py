"""How well a judge did on labelled items: accuracy, macro-F1, per label, confusion."""

from __future__ import annotations

from collections.abc import Sequence

from .base import LABELS


def score_task(task: str, gold: Sequence[str], said: Sequence[str]) -> dict:
    """Accuracy, macro-F1 (over the labels present in gold or said), per label and the
    confusion matrix (``confusion[gold][said]``) of one task."""
    labels = LABELS[task]
    confusion = {g: {s: 0 for s in labels} for g in labels}
    for g, s in zip(gold, said, strict=True):
        confusion[g][s] += 1
    n = len(gold)
    by_label = {}
    for label in labels:
        tp = confusion[label][label]
        gold_n = sum(confusion[label].values())
        said_n = sum(confusion[g][label] for g in labels)
        precision = tp / said_n if said_n else 0.0
        recall = tp / gold_n if gold_n else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        by_label[label] = {
            "n": gold_n,
            "precision": round(precision, 4),
            "recall": round(recall, 4),
            "f1": round(f1, 4),
        }
    present = [x for x in labels if by_label[x]["n"] or sum(confusion[g][x] for g in labels)]
    correct = sum(confusion[x][x] for x in labels)
    return {
        "n": n,
        "accuracy": round(correct / n, 4) if n else 0.0,
        "macro_f1": round(sum(by_label[x]["f1"] for x in present) / len(present), 4)
        if present
        else 0.0,
        "by_label": by_label,
        "confusion": confusion,
    }
