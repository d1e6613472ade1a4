"""Claim.holds_at: the one "as of" rule of search, link rankers and context."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from archivist.model import Claim

SAID = datetime(2023, 5, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def claim(**kw) -> Claim:
    base = Claim("Ana works as a nurse.", "Ana", "Ana", "c1", ("D1:1",), SAID)
    return replace(base, **kw)


def test_nothing_holds_before_it_was_said() -> None:
    c = claim(valid_from=SAID - 300 * DAY)  # told later of something long true
    assert not c.holds_at(SAID - DAY)
    assert c.holds_at(SAID) and c.holds_at(SAID + 1000 * DAY)


def test_a_foresight_expires_at_valid_to() -> None:
    c = claim(kind="foresight", valid_from=SAID + 10 * DAY, valid_to=SAID + 20 * DAY)
    assert c.holds_at(SAID + DAY)  # a plan is known before it starts
    assert c.holds_at(SAID + 15 * DAY)
    assert not c.holds_at(SAID + 20 * DAY) and not c.holds_at(SAID + 30 * DAY)


def test_a_superseded_claim_held_until_it_was_closed() -> None:
    c = claim(status="superseded", replaced_by=7, valid_to=SAID + 30 * DAY)
    assert c.holds_at(SAID + 29 * DAY)
    assert not c.holds_at(SAID + 30 * DAY) and not c.holds_at(SAID + 90 * DAY)


def test_a_refined_claim_has_no_close_date_and_still_holds() -> None:
    c = claim(status="superseded", replaced_by=7)  # a refinement closes nothing
    assert c.holds_at(SAID + 1000 * DAY)


@pytest.mark.parametrize("kind", ["fact", "event", "preference"])
def test_valid_to_of_a_fact_or_event_is_what_it_says_not_an_expiry(kind: str) -> None:
    c = claim(kind=kind, valid_from=SAID - 60 * DAY, valid_to=SAID - 30 * DAY)
    assert c.holds_at(SAID + 100 * DAY)


def test_a_duplicate_holds_like_the_claim_it_repeats() -> None:
    assert claim(status="duplicate", replaced_by=3).holds_at(SAID + DAY)
    expired = claim(status="duplicate", kind="foresight", valid_to=SAID + DAY)
    assert not expired.holds_at(SAID + 2 * DAY)
