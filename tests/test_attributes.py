"""One attribute vocabulary: reconciliation and the identity agent read the same values."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from archivist.lang.attributes import attribute_of, compatible_values, same_value
from archivist.model import Claim, Person
from archivist.write.people_tools import Side, side_facts


def facts(*texts: str) -> set[tuple[str, str]]:
    claims = [
        Claim(t, "John", "John", "c1", ("D1:1",), datetime(2023, 1, 1, tzinfo=UTC), id=i)
        for i, t in enumerate(texts, start=1)
    ]
    side = Side("a", Person("p", "John", (("c1", "John"),)), claims)
    return {(f.attribute, f.value) for f in side_facts(side)}


@pytest.mark.parametrize(
    "text",
    [
        "John works as a software engineer at Acme.",
        "John is a midwife.",
        "John was promoted to team lead yesterday!",
        "John got bumped up to senior designer.",
        "John is now a police officer.",
        "John works at Globex.",
        "John lives in Lisbon, Portugal.",
        "John resides in Porto.",
        "John moved to Bergen.",
        "John went vegan.",
        "John has been pescatarian for years.",
        "John is dating Maria Lopez.",
        "John's wife Sarah is a teacher.",
    ],
)
def test_the_agent_reads_what_reconciliation_reads(text: str) -> None:
    got = attribute_of(text, "John")
    assert got is not None
    assert (got.attribute, got.value) in facts(text)


def test_past_values_identify_a_person_but_close_nothing() -> None:
    for text, fact in [
        ("John lived in Oslo.", ("residence", "Oslo")),
        ("John was a nurse.", ("job", "nurse")),
    ]:
        assert attribute_of(text, "John") is None
        assert fact in facts(text)


def test_someone_elses_value_is_neither_ones() -> None:
    text = "John's sister Marta lives in Porto."
    assert attribute_of(text, "John") is None
    assert ("residence", "Porto") not in facts(text)
    assert ("family", "sister Marta") in facts(text)


def test_one_partner_read_once() -> None:
    assert facts("John's husband Carl cooks.") == {("partner", "Carl")}


def test_same_value_for_reconciliation_compatible_for_identity() -> None:
    assert same_value("Lisbon", "Lisbon, Portugal") and same_value("Team Lead", "team lead")
    assert not same_value("nurse", "head nurse")  # a promotion is a change of value
    assert compatible_values("nurse", "head nurse")  # but may be one person
    assert compatible_values("Lisbon", "Lisbon, Portugal")
    assert not compatible_values("pilot", "nurse")


def read(text: str, subject: str) -> tuple[str, str, str] | None:
    """(attribute, value, change) that ``text`` states of ``subject``, or None."""
    got = attribute_of(text, subject)
    return None if got is None else (got.attribute, got.value, got.change)


def test_it_s_is_no_possessive_and_a_transfer_is_a_move() -> None:
    """ "It's official: I'm transferring to the Berlin office" is the speaker's move; "It's"
    names nobody else, while "Ana's sister lives in Porto" is still not Ana's home."""
    said = "It's official: I'm transferring to the Berlin office in June."
    assert read(said, "Ana") == ("residence", "Berlin", "move")
    assert attribute_of("Ana's sister lives in Porto.", "Ana") is None
    assert attribute_of("I got transferred to the Marketing team.", "Ana") is None


def test_a_home_named_by_its_place_and_a_home_bought_are_residences() -> None:
    """ "£1,450 a month for this shoebox in Walthamstow" says where the speaker lives;
    "Completed on the flat in Leyton" is a move there. A flat merely seen is neither."""
    shoebox = read("£1,450 a month for this shoebox in Walthamstow.", "Zainab")
    assert shoebox is not None and shoebox[:2] == ("residence", "Walthamstow")
    assert read("Completed on the flat in Leyton today!!!", "Zainab") == (
        "residence",
        "Leyton",
        "move",
    )
    assert attribute_of("We viewed the flat in Leyton today.", "Zainab") is None
    assert attribute_of("Her flat in Leyton is lovely.", "Zainab") is None


def test_homes_and_jobs_said_in_passing() -> None:
    """ "Living in my parents' basement in Queens" is a home, "Signed a lease on a one-bed
    in Brooklyn" a move, "Still a sales rep at Lumen" a job."""
    cases = {
        "Living in my parents' basement in Queens is killing me.": ("residence", "Queens"),
        "Signed a lease on a one-bed in Brooklyn, moving out on Saturday.": (
            "residence",
            "Brooklyn",
        ),
        "Still a sales rep at Lumen, still chasing quota every month.": ("job", "sales rep"),
    }
    for text, (attribute, value) in cases.items():
        got = read(text, "Theo")
        assert got is not None and got[:2] == (attribute, value), text
