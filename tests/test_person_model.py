"""The person model: a person's goals, values, standing states, habits, lessons and
preferences beside the facts of the profile; key info written from it, ranked and
capped; and a context that always carries the requester's key info."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from archivist.model import estimate_tokens
from archivist.read.context import DEFAULT_CONTEXT, Candidate, assemble_context, pack
from archivist.service import MemoryService
from archivist.write.consolidate import KEY_INFO
from conftest import kinds_by_word, make_conversation, person_page

KINDS = {
    "fair": "value",
    "petrol": "lesson",
    "japan": "goal",
    "migraine": "state",
    "swim": "habit",
    "weather": "chit-chat",
}
memory = kinds_by_word(KINDS)


CHAT = [
    [
        ("Ana", "Chores get split exactly in half at ours, I really believe in fair play."),
        ("Lee", "Respect."),
        ("Ana", "Once ran out of petrol on the moor, so now I refill at a quarter tank."),
    ],
    [
        ("Ana", "Went to the cinema with Jo on Friday."),
        ("Lee", "Lovely weather for it!"),
        ("Ana", "I swim every Tuesday before work."),
    ],
    [
        ("Ana", "Saving every penny to take my mum to Japan one day."),
        ("Lee", "I get a migraine whenever I skip breakfast."),
        ("Ana", "I bought a blue kettle at the market."),
    ],
]


def ana(m: MemoryService):
    (found,) = [p for p in m.persons() if p.name == "Ana"]
    return found


def test_the_profile_lists_the_person_model_beside_the_facts(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db") as m:
        m.add(make_conversation("c", CHAT))
        profile = m.profile("Ana")
    model = dict(profile.model())
    assert [e.text for e in model["values and beliefs"]] and "fair play" in (
        model["values and beliefs"][0].text
    )
    assert "petrol" in model["lessons"][0].text and "Japan" in model["goals"][0].text
    assert "Tuesday" in model["habits and routines"][0].text
    shown = [e.text for _, found in profile.model() for e in found]
    assert not any("cinema" in t or "kettle" in t for t in shown)  # events and facts stay
    assert not any("migraine" in t for t in shown)  # Lee's, not Ana's
    # each entry keeps its evidence, its date and who said it
    value = model["values and beliefs"][0]
    assert value.evidence and value.source == "first-hand" and value.facet == "value"
    data = profile.to_dict()
    assert data["model"]["lessons"][0]["facet"] == "lesson"
    assert any("fair play" in e["text"] for g in data["groups"].values() for e in g)
    text = profile.text()
    assert "person model:" in text and "  lessons:" in text
    assert text.count("fair play") == 1  # in the person model only


def test_key_info_puts_the_person_model_first_and_keeps_to_its_cap(tmp_path: Path) -> None:
    chatty = [
        [("Ana", f"I bought a {colour} mug at the market on day {i}."), ("Lee", "Nice.")]
        for i, colour in enumerate(["red", "green", "blue", "grey", "pink"] * 12)
    ]
    with memory(tmp_path / "m.db") as m:
        m.add(make_conversation("c", CHAT + chatty))
        m.consolidate()
        text = m.key_info(ana(m).id)
        assert estimate_tokens(text) <= KEY_INFO.tokens and len(text) <= KEY_INFO.cap
        # the standing items come before sixty mugs, each headed by what it is
        first = text[: text.index("mug")]
        for head in ("Value: ", "Lesson: ", "Goal: ", "Habit: "):
            assert head in first, head
        assert "fair play" in first and "petrol" in first and "Japan" in first
        assert m.consolidate() is not None and m.key_info(ana(m).id) == text  # stable


# not the whole history of this small chat (that would be all memory holds, key info aside)
SECTIONS_ONLY = replace(DEFAULT_CONTEXT, whole_history=False)


def _ctx(m: MemoryService, turn: str, person: str, budget: int):
    return assemble_context(
        m.core,
        turn,
        person=person,
        budget_tokens=budget,
        at=datetime(2024, 1, 1, tzinfo=UTC),
        config=SECTIONS_ONLY,
    )


def test_a_turn_always_carries_the_requesters_key_info_whole(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db") as m:
        m.add(make_conversation("c", CHAT))
        m.consolidate()
        own = m.key_info(ana(m).id)
        # a turn that shares no word with any of it
        ctx = _ctx(m, "What should I cook tonight?", "Ana", 2000)
        (item,) = [i for i in ctx.items if i.kind == "key_info"]
        assert item.text == f"Ana: {own}"
        # neither the standing section nor a claim says again what key info says
        said = [i.kind for i in ctx.items if "fair play" in i.text and i.kind != "message"]
        assert said == ["key_info"]
        # Lee's turn carries Lee's key info, and Ana's only where the turn bears on it
        lee = _ctx(m, "What should I cook tonight?", "Lee", 2000)
        assert [i.id for i in lee.items if i.kind == "key_info"] == [
            p.id for p in m.persons() if p.name == "Lee"
        ]
        named = _ctx(m, "How is Ana's fund for the Japan trip going?", "Lee", 2000)
        about = [i.text for i in named.items if i.kind == "key_info" and i.text.startswith("Ana")]
        assert about and "Japan" in about[0] and "fair play" not in about[0]


def test_key_info_with_too_little_room_keeps_its_best_facts_whole() -> None:
    text = "Ana: Value: Ana believes in fair play (since 2023-05-01). " + " ".join(
        f"Other: Ana bought mug number {i} at the market (on 2023-05-0{i})." for i in range(1, 8)
    )
    own = Candidate("key_info", "p1", text, pinned=True)
    other = Candidate("key_info", "p2", "Lee: Work: Lee flies cargo planes (since 2023-01-01).")
    at = datetime(2023, 6, 1, tzinfo=UTC)
    small = pack({"key_info": [own, other]}, 160, at)
    shown = [i for i in small.items if i.kind == "key_info"]
    assert shown[0].id == "p1" and shown[0].text.startswith("Ana: Value: Ana believes in fair")
    assert shown[0].text.endswith(").") and "[cut]" not in small.text  # whole facts only
    assert len(shown[0].text) < len(text)
    whole = pack({"key_info": [own, other]}, 2000, at)
    assert [i.text for i in whole.items if i.kind == "key_info"][0] == text
    # without the requester's, key info keeps its small share: nothing of this fits
    assert not [i for i in pack({"key_info": [other]}, 160, at).items if i.kind == "key_info"]


def test_the_person_page_shows_the_person_model_apart_from_the_facts(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("jinja2")
    page = person_page(tmp_path, memory, make_conversation("c", CHAT), "Ana", consolidate=True)
    facts, model = page.split('id="model-h"')
    model = model.split('id="key-h"')[0]
    assert "fair play" in model and "petrol" in model and "Values and beliefs" in model
    assert "fair play" not in facts and "cinema" in facts and "cinema" not in model
