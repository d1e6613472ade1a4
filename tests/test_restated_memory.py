"""Issue 14, item 3: a reply that only says back the memory it was shown adds no fact.

The proxy logs what it injected before each turn; extraction reads that log, so
"You went vegan in August…" said by the assistant in a later chat is not a new
claim beside the user's own, while what the reply adds of its own is kept.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from archivist.config import Settings
from archivist.service import MemoryService
from archivist.store.sql import Filters
from archivist.testing import FakeEmbedder
from conftest import T0, make_conversation

FACT = "I went vegan in August, so no fish or dairy anymore."
SHOWN = "[5 Aug 2024] Ana (fact): I went vegan in August, so no fish or dairy anymore."
RESTATED = "You went vegan in August, so no fish or dairy anymore for you."
OWN = "Lentil dal with spinach and toasted cumin seeds makes a warming supper tonight."


@pytest.fixture
def mem(tmp_path: Path):
    m = MemoryService(
        tmp_path / "m.db", settings=Settings(consolidate_mode="inline"), embedder=FakeEmbedder()
    )
    m.add(make_conversation("diet", [[("Ana", FACT)]], people=("Ana", "assistant")))
    yield m
    m.close()


def _later(reply: str):
    conv = make_conversation(
        "supper",
        [[("Ana", "What should I cook tonight?"), ("assistant", reply)]],
        people=("Ana", "assistant"),
        start=T0 + timedelta(weeks=2),
    )
    last = replace(conv.messages[-1], role="assistant")
    return replace(conv, messages=(conv.messages[0], last))


def _assistant_claims(mem: MemoryService) -> list[str]:
    claims = mem.store.list_claims(Filters(conversation=("supper",)), limit=100)
    return [c.text for c in claims if c.speaker == "assistant"]


def test_a_reply_restating_shown_memory_adds_no_claim(mem: MemoryService) -> None:
    reply = f"{RESTATED} {OWN}"
    mem.record_context([("claim", "1", SHOWN)], reply, person="Ana", conversation="supper")
    mem.add(_later(reply))
    said = _assistant_claims(mem)
    assert not any("vegan" in text for text in said), said
    assert any("Lentil" in text for text in said), said  # what it added of its own stays
    # the user's own claim is untouched
    ana = mem.store.list_claims(Filters(conversation=("diet",)), limit=100)
    assert any("vegan" in c.text and c.speaker == "Ana" for c in ana)


def test_without_that_memory_shown_the_reply_is_read_as_usual(mem: MemoryService) -> None:
    reply = f"{RESTATED} {OWN}"
    # shown before another reply: nothing to say this one restated it
    mem.record_context([("claim", "1", SHOWN)], "Something else.", conversation="supper")
    mem.add(_later(reply))
    assert any("vegan" in text for text in _assistant_claims(mem))
