"""The answer without an LLM reads what its evidence says (read/extractive.py)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from archivist.read.extractive import denies
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder
from archivist.text import stem
from conftest import T0, make_conversation

DIET = (
    (("Priya", "I eat everything, steak is my favourite dinner."), ("Ava", "Noted!")),
    (("Priya", "I am pescatarian now, fish but no meat."), ("Ava", "Got it.")),
    (("Priya", "I went fully vegan this month, so no fish anymore."), ("Ava", "Wow, ok.")),
)


@pytest.fixture
def memory(tmp_path: Path) -> MemoryService:
    m = MemoryService(tmp_path / "x.db", embedder=FakeEmbedder())
    m.add(make_conversation("diet", DIET, people=("Priya", "Ava")))
    yield m
    m.close()


def test_a_denial_in_the_evidence_answers_no(memory: MemoryService) -> None:
    got = memory.ask("Does Priya eat fish?", person="Priya")
    assert got.answer.startswith("No:") and "no fish anymore" in got.answer


def test_what_held_before_answers_a_question_about_then(memory: MemoryService) -> None:
    then = T0 + timedelta(days=8)  # after the second session, before the third
    got = memory.ask("Does Priya eat fish?", person="Priya", at=then)
    assert got.answer.startswith("Yes:") and "pescatarian" in got.answer  # not "steak"


@pytest.mark.parametrize(
    ("sentence", "asked", "denied"),
    [
        ("No fish anymore.", "eat fish", True),
        ("I quit smoking.", "smoke", True),
        ("Gave the old iPhone to my dad.", "iphone", True),
        ("Doctor says I'm lactose intolerant.", "have dairy", True),
        # a restriction the question asks about is what it affirms
        ("Doctor says I'm lactose intolerant.", "lactose intolerant", False),
        ("I'm allergic to peanuts.", "allergic peanuts", False),
        ("I love fish.", "eat fish", False),
    ],
)
def test_what_denies_a_yes_no_question(sentence: str, asked: str, denied: bool) -> None:
    assert denies(sentence, [stem(w) for w in asked.split()]) is denied


@pytest.mark.parametrize(
    ("sentence", "asked", "denied"),
    [
        ("I am pescatarian, fish but no meat.", "eat fish", False),
        ("I left the choir, I play bass in a band now.", "band", False),
        ("I left the choir, I play bass in a band now.", "choir", True),
        ("I don't eat fish.", "eat fish", True),
        ("Fish? Not anymore.", "fish", True),
        ("Nope, never.", "fish", True),  # no asked word: the whole sentence answers
        ("Boot's off, crutches handed back to the hospital.", "crutches", True),
    ],
)
def test_a_negation_denies_what_it_bears_on(sentence: str, asked: str, denied: bool) -> None:
    assert denies(sentence, [stem(w) for w in asked.split()]) is denied


def test_a_change_said_later_does_not_reach_back(memory: MemoryService) -> None:
    """ "I went vegan this month", said in the third week, starts on the 1st; on the
    16th memory knew only the pescatarian diet, and answers and context say so."""
    then = T0 + timedelta(days=8)
    got = memory.ask("Is Priya pescatarian?", person="Priya", at=then)
    assert got.answer.startswith("Yes:")
    assert memory.ask("Is Priya pescatarian?", person="Priya").answer.startswith("No:")
    shown = memory.context("What does Priya eat?", person="Priya", at=then).text
    assert "pescatarian" in shown and "[history]" not in shown


def test_a_window_that_closed_still_answers_whether_it_holds(tmp_path: Path) -> None:
    """The newest sentence of a chat outranks an older one on recency; when it is too
    weak to answer, the relevant older one does ("on night shifts until July"),
    read as no longer holding."""
    chat = (
        (
            ("Mateo", "Heads up, I'm on night shifts at the hospital until the end of July."),
            ("Vale", "Brutal."),
            ("Mateo", "Nope. August I'm back on days and all yours."),
        ),
    )
    with MemoryService(tmp_path / "x.db", embedder=FakeEmbedder()) as m:
        m.add(make_conversation("shifts", chat, people=("Mateo", "Vale"), start=T0))
        got = m.ask("Is Mateo still on night shifts?", person="Mateo", at=T0 + timedelta(days=120))
    assert not got.abstain and got.answer.startswith("No:") and "night shifts" in got.answer


def test_where_is_answered_by_a_sentence_naming_a_place(tmp_path: Path) -> None:
    chat = (
        (("Esteban", "Everyone cycles everywhere here."), ("Nadia", "Lucky you.")),
        (("Esteban", "First week in Berlin done."), ("Nadia", "Come back soon.")),
    )
    with MemoryService(tmp_path / "x.db", embedder=FakeEmbedder()) as m:
        m.add(make_conversation("move", chat, people=("Esteban", "Nadia")))
        got = m.ask("Where is Esteban now?", person="Esteban")
    assert "Berlin" in got.answer
