"""Issue 14: the context adds what the chat in front of the assistant does not hold."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from archivist.config import Settings
from archivist.read.context_lines import same_text
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder
from archivist.write.archivist import HeuristicArchivist
from conftest import make_conversation

T0 = datetime(2024, 3, 4, 9, tzinfo=UTC)
ECHO = "Noted, I will remember that you prefer aisle seats on every flight."

EARLIER = make_conversation(
    "trip",
    [
        [
            ("Ana", "I prefer aisle seats on every flight since my knee operation."),
            ("Lee", ECHO),
            ("Ana", "My sister Maya lives in Porto and teaches chemistry."),
            ("Lee", ECHO),
        ],
        [
            ("Ana", "Book me the Tuesday flight to Porto to visit Maya."),
            ("Lee", ECHO),
            ("Ana", "And a taxi to the airport at six."),
            ("Lee", ECHO),
        ],
    ],
    start=T0,
)
NOW = T0 + timedelta(weeks=3)
QUESTION = "Which seat does Ana like when she flies to Porto?"


@pytest.fixture
def mem(tmp_path: Path):
    m = MemoryService(
        tmp_path / "m.db",
        settings=Settings(consolidate_mode="inline"),
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(),
    )
    m.add(EARLIER)
    m.consolidate()
    yield m
    m.close()


def _lines(ctx) -> list[str]:
    return [line for line in ctx.text.splitlines() if line.startswith("- ")]


def test_no_item_is_shown_twice(mem: MemoryService) -> None:
    """The same reply said four times is one item; a claim and the message that says
    all of it are one item."""
    ctx = mem.context(QUESTION, person="Ana", at=NOW, budget_tokens=1500)
    assert sum(ECHO[:40] in line for line in _lines(ctx)) <= 1
    bodies = [same_text(i.text.split(": ", 1)[-1]) for i in ctx.items]
    assert len(bodies) == len(set(bodies))
    assert "aisle" in ctx.text  # what was asked is still there


def test_the_request_s_messages_and_their_claims_are_not_injected(mem: MemoryService) -> None:
    request = [m for m in EARLIER.messages if m.session == 2]
    ctx = mem.context(QUESTION, person="Ana", at=NOW, budget_tokens=1500, request=request)
    shown = {i.id for i in ctx.items if i.kind == "message"}
    assert not shown & {f"trip/{m.id}" for m in request}
    assert "taxi" not in ctx.text  # its only evidence is in the request
    assert "aisle" in ctx.text and "Maya" in ctx.text  # what the request does not hold stays
    # the same words stored under another conversation are the same message
    moved = [replace(m, conversation="elsewhere", id=f"x{m.id}") for m in request]
    again = mem.context(QUESTION, person="Ana", at=NOW, budget_tokens=1500, request=moved)
    said = {same_text(m.text) for m in request}
    assert not any(
        i.kind == "message" and same_text(i.text.split(": ", 1)[1]) in said for i in again.items
    )
    assert "taxi" not in again.text


def test_a_history_that_fits_is_shown_without_a_search(mem: MemoryService) -> None:
    """A user whose every message fits the budget (the proxy's common case): no
    search could reach beyond their conversations, so none runs (no query is
    embedded) and the context is that history, the request left out."""
    request = [m for m in EARLIER.messages if m.session == 2]
    before = mem.embedder.calls
    ctx = mem.context(QUESTION, person="Ana", at=NOW, budget_tokens=1500, request=request)
    assert mem.embedder.calls == before
    assert ctx.text.startswith("## Earlier messages, oldest first")
    assert [i.text.split(": ", 1)[1] for i in ctx.items] == [
        "I prefer aisle seats on every flight since my knee operation.",
        "My sister Maya lives in Porto and teaches chemistry.",
    ]  # the echo is in the request
    # too small a budget for it: a search picks what to show
    small = mem.context(QUESTION, person="Ana", at=NOW, budget_tokens=40, request=request)
    assert mem.embedder.calls > before
    assert small.items and not small.text.startswith("## Earlier messages")
