"""Routing (people → conversation/scope) and temporal intent, with a fixed ``now``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from archivist.lang.temporal import time_intent
from archivist.read.route import route
from archivist.service import MemoryService
from archivist.store.sql import Filters
from archivist.testing import FakeEmbedder
from conftest import make_conversation

NOW = datetime(2023, 10, 1, 12, tzinfo=UTC)
INDEX = [
    {"id": "c1", "participants": ["Caroline", "Melanie"]},
    {"id": "c2", "participants": ["Caroline", "Jon"]},
    {"id": "c3", "participants": ["Gina", "Jon"]},
]
PEOPLE = ["Caroline", "Melanie", "Jon", "Gina"]


def test_two_people_in_one_conversation_route_there() -> None:
    r = route("What did Caroline tell Melanie about the race?", PEOPLE, INDEX, NOW)
    assert (r.scope, r.conversation, set(r.people)) == (
        "conversation",
        "c1",
        {"Caroline", "Melanie"},
    )
    assert r.filters() == Filters(conversation="c1")


def test_a_person_in_several_conversations_uses_their_global_memory() -> None:
    r = route("What does Caroline like?", PEOPLE, INDEX, NOW)
    assert (r.scope, r.conversation) == ("person", None)
    assert set(r.conversations) == {"c1", "c2"}
    assert r.filters() == Filters(person="Caroline")


def test_a_person_in_one_conversation_routes_there() -> None:
    assert route("What did Gina sell?", PEOPLE, INDEX, NOW).conversation == "c3"


def test_people_without_a_shared_conversation_search_theirs() -> None:
    r = route("Did Melanie ever meet Gina?", PEOPLE, INDEX, NOW)
    assert r.scope == "people" and set(r.conversations) == {"c1", "c3"}
    assert r.filters() == Filters(conversation=r.conversations)


def test_no_one_named_searches_everything_and_keeps_the_callers_filters() -> None:
    r = route("Who adopted a cat?", PEOPLE, INDEX, NOW)
    assert r.scope == "all" and r.filters(Filters(session=2)) == Filters(session=2)


def test_route_carries_the_period() -> None:
    r = route("What did Caroline tell Melanie in May 2023?", PEOPLE, INDEX, NOW)
    assert (r.since, r.until) == (
        datetime(2023, 5, 1, tzinfo=UTC),
        datetime(2023, 6, 1, tzinfo=UTC),
    )


def test_explicit_month_and_year() -> None:
    t = time_intent("What did Evan do in May 2023?", NOW)
    assert t is not None and t.explicit
    assert (t.since, t.until) == (
        datetime(2023, 5, 1, tzinfo=UTC),
        datetime(2023, 6, 1, tzinfo=UTC),
    )


def test_last_may_resolves_against_now() -> None:
    t = time_intent("What did Ana do last May?", NOW)
    assert t is not None and not t.explicit
    assert t.since == datetime(2023, 5, 1, tzinfo=UTC)
    later = time_intent("What did Ana do last May?", datetime(2024, 8, 1, tzinfo=UTC))
    assert later is not None and later.since == datetime(2024, 5, 1, tzinfo=UTC)


def test_a_year() -> None:
    t = time_intent("Where did they live in 2022?", NOW)
    assert t is not None and (t.since, t.until) == (
        datetime(2022, 1, 1, tzinfo=UTC),
        datetime(2023, 1, 1, tzinfo=UTC),
    )


def test_before_a_date_reaches_back_a_month() -> None:
    t = time_intent("What did Andrew do on the Monday before July 24, 2023?", NOW)
    assert t is not None and t.until == datetime(2023, 7, 24, tzinfo=UTC)
    assert t.since == t.until - timedelta(days=31)


def test_before_an_event_uses_the_events_date() -> None:
    wedding = datetime(2023, 6, 10, tzinfo=UTC)
    asked = []

    def locate(event: str) -> datetime | None:
        asked.append(event)
        return wedding

    t = time_intent("What did Lee buy before the wedding?", NOW, locate)
    assert asked == ["wedding"] and t is not None
    assert (t.since, t.until, t.explicit) == (None, wedding, False)
    assert time_intent("What did Lee buy before the wedding?", NOW) is None  # no lookup


def test_questions_without_time_have_no_intent() -> None:
    assert time_intent("What did Caroline realise after her race?", NOW) is None
    assert time_intent("How did Evan start two years ago?", NOW) is None  # speaker-relative


def test_service_routes_a_search_to_the_conversation(tmp_path: Path) -> None:
    a = make_conversation("c1", [[("Ana", "I adopted a grey cat."), ("Lee", "Lovely!")]])
    b = make_conversation(
        "c2", [[("Bob", "I adopted a grey cat too."), ("Cara", "Nice.")]], people=("Bob", "Cara")
    )
    with MemoryService(tmp_path / "m.db", embedder=FakeEmbedder()) as mem:
        mem.add([a, b])
        hits = mem.search("What cat did Bob adopt?", route=True, k=5)
        assert {h.message.conversation for h in hits} == {"c2"}
        unrouted = mem.search("What cat did Bob adopt?", k=5)
        assert {h.message.conversation for h in unrouted} == {"c1", "c2"}
        assert mem.route("What did Ana tell Lee?").conversation == "c1"
