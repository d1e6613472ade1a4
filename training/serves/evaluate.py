"""How a trained judge reads what serves a goal, on the pairs kept out of training.

    python training/serves/evaluate.py [MODEL_DIR]    # default: the shipped model

For each set written apart (fresh*.jsonl) and for the dev split of the training files
(the trainer's own split, train/judge.split): accuracy and macro-F1; the links a profile
would show (serves or hinders at p >= LINK_SURE) and key info (KEY_LINK_SURE), with how
many are right; and the control: each step that serves or hinders its goal set against
the next goal of the set (sorted), which a judge reading the pair, not the item alone,
should not link. Each set also in the third person a memory stores ("Ana picked up...").
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from archivist.judge.base import GoalPair
from archivist.judge.items import Item, read_items
from archivist.judge.metrics import score_task
from archivist.judge.trained import TrainedJudge
from archivist.profile import LINK_SURE
from archivist.train.judge import split
from archivist.write.consolidate import KEY_LINK_SURE
from archivist.write.heuristic import in_third_person

HERE = Path(__file__).parent


def third_person(items: list[Item]) -> list[Item]:
    def told(text: str, who: str) -> str:
        return in_third_person(text, who, None)

    return [
        replace(it, pair=replace(p, goal=told(p.goal, p.speaker), item=told(p.item, p.speaker)))
        for it in items
        if isinstance(p := it.pair, GoalPair)
    ]


def links(items: list[Item], verdicts: list, sure: float) -> str:
    said = [(it, v) for it, v in zip(items, verdicts, strict=True) if linked(v, sure)]
    right = sum(v.label == it.label for it, v in said)
    steps = sum(it.label != "unrelated" for it in items)
    return f"{len(said)} links, {right} right, of {steps} steps"


def linked(v, sure: float) -> bool:
    return v.label != "unrelated" and v.p >= sure


def control(judge: TrainedJudge, items: list[Item], sure: float) -> float:
    goals = sorted({it.pair.goal for it in items})
    moved = [
        replace(it.pair, goal=goals[(goals.index(it.pair.goal) + 1) % len(goals)])
        for it in items
        if it.label != "unrelated"
    ]
    return sum(linked(v, sure) for v in judge.serves(moved)) / max(len(moved), 1)


def report(judge: TrainedJudge, name: str, items: list[Item]) -> None:
    for form, chosen in (("as written", items), ("third person", third_person(items))):
        verdicts = judge.serves([it.pair for it in chosen])
        scored = score_task("serves", [it.label for it in chosen], [v.label for v in verdicts])
        at = [
            f"at {sure}: {links(chosen, verdicts, sure)}, "
            f"control {control(judge, chosen, sure):.3f}"
            for sure in (LINK_SURE, KEY_LINK_SURE)
        ]
        print(
            f"{name} ({len(chosen)}, {form}): accuracy {scored['accuracy']:.3f}, "
            f"macro-F1 {scored['macro_f1']:.3f}; " + "; ".join(at)
        )


def main() -> None:
    judge = TrainedJudge(Path(sys.argv[1])) if len(sys.argv) > 1 else TrainedJudge()
    training = [it for f in sorted(HERE.glob("serves-*.jsonl")) for it in read_items(f)]
    report(judge, "dev split", split(training, 0.15)[1])
    for f in sorted(HERE.glob("fresh*.jsonl")):
        report(judge, f.name, read_items(f))


if __name__ == "__main__":
    main()
