"""Recall: foresights expire, searches as of a date, re-ranking, LLM rewrites (FakeLLM)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from archivist.config import Settings
from archivist.lang.temporal import TimeIntent
from archivist.llm.base import LLMError
from archivist.read.rerank import Features, RerankConfig, recency, rerank
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder, FakeLLM
from archivist.write.archivist import HeuristicArchivist
from conftest import T0, make_conversation


def memory(path: Path, llm: FakeLLM | None = None) -> MemoryService:
    settings = Settings(consolidate_mode="manual")
    return MemoryService(
        path, settings=settings, embedder=FakeEmbedder(), llm=llm, archivist=HeuristicArchivist()
    )


ANTIBIOTICS = [
    [
        ("Ana", "I'm on antibiotics for 10 days, so no alcohol for me."),
        ("Lee", "Get well soon, we can skip the bar."),
        ("Ana", "My cat Pixel knocked over a plant today."),
    ]
]


def ids(hits) -> list[str]:
    return [h.message.id for h in hits]


def test_a_foresight_holds_until_it_expires(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db") as mem:
        mem.add(make_conversation("c", ANTIBIOTICS))
        claim = next(c for c in mem.claims() if "antibiotics" in c.text)
        assert claim.kind == "foresight" and claim.valid_to is not None
        q = "Can Ana drink alcohol?"
        soon = mem.search(q, at=T0 + timedelta(days=5), k=3)
        assert ids(soon)[0] == "D1:1"
        later = mem.search(q, at=T0 + timedelta(days=20), k=3)
        assert "D1:1" not in ids(later)
        # history questions still see it
        assert "D1:1" in ids(mem.search("When was Ana on antibiotics?", at=T0 + timedelta(days=20)))
        # without ``at`` nothing is filtered: the full history
        assert ids(mem.search(q, k=3))[0] == "D1:1"


def test_search_as_of_two_dates_returns_different_current_facts(tmp_path: Path) -> None:
    conv = make_conversation(
        "work",
        [
            [("Ana", "I work as a software engineer at Acme."), ("Lee", "Cool!")],
            [("Ana", "Big news: I was promoted to team lead yesterday!"), ("Lee", "Congrats!")],
        ],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        mem.reconcile()
        q = "What is Ana's job at Acme?"
        before = mem.search(q, at=T0 + timedelta(days=3), k=3)
        assert ids(before)[0] == "D1:1" and "D2:1" not in ids(before)  # not said yet
        after = mem.search(q, at=T0 + timedelta(days=10), k=3)
        assert ids(after)[0] == "D2:1" and "D1:1" not in ids(after)  # superseded by then
        assert "D1:1" in ids(mem.search("What was Ana's job before, in May 2023?", k=5))


def test_a_period_in_the_question_lifts_messages_said_in_it(tmp_path: Path) -> None:
    sessions = [[("Ana", "We went hiking in the hills.")]] * 1 + [
        [("Ana", "We went hiking by the lake.")]
    ]
    conv = make_conversation("c", sessions, start=datetime(2023, 4, 28, tzinfo=UTC))
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        at = datetime(2023, 6, 1, tzinfo=UTC)
        plain = mem.search("Where did Ana go hiking?", at=at, k=2)
        in_may = mem.search("Where did Ana go hiking in May 2023?", at=at, k=2, route=True)
        assert ids(in_may)[0] == "D2:1"
        assert ids(plain) != ids(in_may) or ids(plain)[0] == "D2:1"


def test_time_intent_window_with_grace() -> None:
    t = TimeIntent(
        "May 2023", datetime(2023, 5, 1, tzinfo=UTC), datetime(2023, 6, 1, tzinfo=UTC), True
    )
    assert t.contains(datetime(2023, 5, 20, tzinfo=UTC))
    assert not t.contains(datetime(2023, 6, 10, tzinfo=UTC))
    assert t.contains(datetime(2023, 6, 10, tzinfo=UTC), timedelta(days=31))


def test_rerank_is_neutral_without_features_and_lifts_important_ones() -> None:
    scores = {1: 1.0, 2: 0.95, 3: 0.5}
    cfg = RerankConfig("t", importance=0.2)
    same = rerank(scores, {}, cfg)
    assert sorted(same, key=same.get, reverse=True) == [1, 2, 3]
    lifted = rerank(scores, {1: Features(importance=0.3), 2: Features(importance=0.9)}, cfg)
    assert max(lifted, key=lifted.get) == 2


def test_recency_halves_every_half_life() -> None:
    at = datetime(2024, 1, 1, tzinfo=UTC)
    assert recency(at, at, 30) == 1.0
    assert recency(at - timedelta(days=30), at, 30) == pytest.approx(0.5)


CATS = [
    [
        ("Ana", "I adopted a grey kitten called Pixel."),
        ("Lee", "The weather is nice today."),
        ("Ana", "Pixel sleeps on my pillow every night."),
    ]
]


def test_rewrites_are_fused_when_the_llm_finds_the_hits_short(tmp_path: Path) -> None:
    llm = FakeLLM({"sufficient": False, "queries": ["Pixel pillow night", "kitten adopted"]})
    with memory(tmp_path / "m.db", llm=llm) as mem:
        mem.add(make_conversation("c", CATS), extract=False)
        got = mem.recall("Where does Ana's pet sleep?", k=2)
        assert got.sufficient is False and got.queries[1:] == (
            "Pixel pillow night",
            "kitten adopted",
        )
        assert "D1:3" in ids(got.hits) and len(got.hits) == 2
        assert "Where does Ana's pet sleep?" in llm.calls[0]["messages"][1]["content"]


def test_sufficient_hits_are_kept_as_they_are(tmp_path: Path) -> None:
    llm = FakeLLM({"sufficient": True, "queries": []})
    with memory(tmp_path / "m.db", llm=llm) as mem:
        mem.add(make_conversation("c", CATS), extract=False)
        plain = mem.recall("Where does Ana's Pixel sleep?", k=2, rewrite=False)
        got = mem.recall("Where does Ana's Pixel sleep?", k=2)
        assert got.sufficient is True and ids(got.hits) == ids(plain.hits)
        assert got.route is not None and got.route.conversation == "c"


def test_a_failing_llm_leaves_the_plain_result(tmp_path: Path) -> None:
    llm = FakeLLM(LLMError("down"), LLMError("down"), LLMError("down"))
    with memory(tmp_path / "m.db", llm=llm) as mem:
        mem.add(make_conversation("c", CATS), extract=False)
        got = mem.recall("Where does Pixel sleep?", k=2)
        assert got.sufficient is None and got.queries == ("Where does Pixel sleep?",)
        assert ids(got.hits) == ids(mem.recall("Where does Pixel sleep?", k=2, rewrite=False).hits)
