"""The pairs training adds to the written ones (archivist.train.judge): strangers, hard
strangers, answers said by someone other than the person asked about, and steps set
against another goal; and the files it reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archivist.errors import ConfigError
from archivist.judge.base import GoalPair, RelationPair, SupportPair
from archivist.judge.items import Item
from archivist.testing import FakeEmbedder
from archivist.train.judge import hard_strangers, load, other_goals, other_speakers, segments


def _rel(i: str, area: str, older: str, newer: str, label: str = "ends") -> Item:
    pair = RelationPair("Ana", older, newer)
    return Item(i, "relation", pair, label, extra={"area": area, "group": i})


ITEMS = [
    _rel("r1", "home", "i live in york by the minster", "moved to leeds last weekend"),
    _rel("r2", "work", "freelancing every evening for my brother's fees", "quit the agency"),
    _rel("r3", "pets", "my cat sleeps on my pillow", "the cat passed away in june"),
    _rel("r4", "home", "renting a flat in york", "bought a house in hull", "continues"),
]


def test_hard_strangers_pair_an_ending_with_a_state_of_another_area() -> None:
    made = hard_strangers(ITEMS, 10, seed=1, embedder=FakeEmbedder())
    assert made and all(it.label == "unrelated" and it.task == "relation" for it in made)
    areas = {it.pair.older: it.extra.get("area") for it in ITEMS}  # type: ignore[union-attr]
    olders = {o.pair.older: o for o in ITEMS}  # type: ignore[union-attr]
    for it in made:
        ending = next(e for e in ITEMS if e.pair.newer == it.pair.newer)  # type: ignore[union-attr]
        assert ending.label == "ends"  # only a written ending gives its newer statement
        assert areas[it.pair.older] != ending.extra["area"]  # type: ignore[union-attr]
        assert it.pair.older in olders  # type: ignore[union-attr]
    assert len(made) <= 3  # at most one per written ending
    assert hard_strangers(ITEMS, 0, seed=1, embedder=FakeEmbedder()) == []
    again = hard_strangers(ITEMS, 10, seed=1, embedder=FakeEmbedder())
    assert [(i.pair.older, i.pair.newer) for i in again] == [
        (i.pair.older, i.pair.newer) for i in made
    ]  # seeded


def _sup(i: str, speaker: str, question: str, sentence: str, label: str) -> Item:
    return Item(i, "support", SupportPair(question, sentence, speaker), label)


def test_an_answer_said_by_someone_else_settles_nothing() -> None:
    items = [
        _sup("s1", "Hannah", "Where is Hannah moving?", "moving to york next month!!", "answers"),
        _sup("s2", "Tom", "Does Tom have a dog?", "no dogs, my landlord says no", "no"),
        _sup("s3", "Priya", "Is Priya vegetarian?", "did u try the paneer place", "neither"),
        _sup("s4", "Gil", "Is Gil drinking?", "dry january, you know me", "no"),  # "you"
        _sup("s5", "Ola", "Is Ola working?", "Ola here, still at the bank", "yes"),  # names her
        _sup("s6", "Ben", "Is Ana at uni?", "Ana's in halls now", "yes"),  # Ben tells of Ana
    ]
    made = other_speakers(items, 10, seed=3)
    assert made and all(it.label == "neither" for it in made)
    sources = {(i.pair.question, i.pair.sentence): i for i in items}  # type: ignore[union-attr]
    for it in made:
        source = sources[(it.pair.question, it.pair.sentence)]  # type: ignore[union-attr]
        assert source.id in ("s1", "s2")  # a question about its speaker, settled, no "you"
        assert it.pair.speaker != source.pair.speaker  # type: ignore[union-attr]
        assert it.pair.speaker.split()[0] not in it.pair.question  # type: ignore[union-attr]


def _goal(i: str, goal: str, item: str, label: str) -> Item:
    return Item(i, "serves", GoalPair(goal, item, "Ana"), label)


def test_a_step_toward_one_goal_is_set_against_another_as_unrelated() -> None:
    goals = [f"goal {n}" for n in range(9)]
    items = [_goal(f"g{n}", g, f"step {n}", "serves") for n, g in enumerate(goals)]
    items += [_goal("h", "goal 0", "spent it all", "hinders")]
    items += [_goal("u", "goal 1", "nice weather", "unrelated"), _rel("r", "home", "a", "b")]
    made = other_goals(items)
    assert len(made) == 10  # each serves or hinders pair once; unrelated and others none
    assert all(it.task == "serves" and it.label == "unrelated" for it in made)
    for source, it in zip(items[:10], made, strict=True):
        assert it.pair.item == source.pair.item  # type: ignore[union-attr]
        assert it.pair.goal != source.pair.goal  # type: ignore[union-attr]
    assert segments(made[0]) == ("serves. Ana's goal: goal 7", "Ana: step 0")
    assert other_goals(items) == made  # no randomness


def test_load_reads_the_goal_pairs_after_the_judge_files(tmp_path: Path) -> None:
    judge, serves = tmp_path / "judge", tmp_path / "serves"
    judge.mkdir(), serves.mkdir()
    rel = {"id": "r1", "task": "relation", "speaker": "Ana", "older": "vegan",
           "newer": "eating fish again", "label": "ends"}  # fmt: skip
    goal = {"id": "s1", "task": "serves", "speaker": "Ana", "goal": "save",
            "item": "cancelled netflix", "label": "serves"}  # fmt: skip
    (judge / "a.jsonl").write_text(json.dumps(rel), encoding="utf-8")
    (judge / "fresh-a.jsonl").write_text(json.dumps(rel), encoding="utf-8")  # kept out
    (serves / "serves-a.jsonl").write_text(json.dumps(goal), encoding="utf-8")
    (serves / "fresh.jsonl").write_text(json.dumps(goal), encoding="utf-8")  # kept out
    items, hashes = load(judge, serves)
    assert [it.id for it in items] == ["r1", "s1"]
    assert list(hashes) == ["a.jsonl", "serves-a.jsonl"]
    assert [it.id for it in load(judge)[0]] == ["r1"]
    with pytest.raises(ConfigError, match="no goal pairs"):
        load(judge, tmp_path / "nowhere")
