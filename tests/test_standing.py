"""The person model's standing items in a context: kept with their facet, offered to the
turns that need them without sharing their words, ranked by the map of what a turn
bears on (judge/bears.py), never shown twice, and never a superseded one."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from archivist.config import Settings
from archivist.judge.bears import CARD, MAP_FILE, bearing, turn_map
from archivist.read.context import DEFAULT_CONTEXT, assemble_context
from archivist.service import MemoryService
from conftest import kinds_by_word, make_conversation

KINDS = {
    "fair": "value",
    "petrol": "lesson",
    "marathon": "goal",
    "weather": "chit-chat",
}
memory = kinds_by_word(KINDS, Settings().with_(consolidate_mode="manual", reconcile_on_write=False))


# not the whole history of a small chat, and two search hits: what the turn's words find
NO_LOG = replace(DEFAULT_CONTEXT, whole_history=False, search_k=2, tokens_per_hit=10**6)


def context(m: MemoryService, turn: str, person: str):
    return assemble_context(
        m.core, turn, person=person, conversation="c", budget_tokens=800, config=NO_LOG
    )


def chat():
    return make_conversation(
        "c",
        [
            [
                ("Ana", "Chores get split exactly in half at ours, I really believe in fair play."),
                ("Lee", "Respect."),
                ("Ana", "Once ran out of petrol on the moor, so now I refill at a quarter tank."),
            ],
            [("Lee", "Lovely weather for it!"), ("Ana", "Went to the cinema with Jo.")],
            [
                ("Lee", "My nephew queued for hours for those tickets."),
                ("Ana", "The ticket office opens at nine."),
                ("Lee", "Queue jumpers at the ticket office again."),
            ],
        ],
    )


def test_claims_keep_the_judges_kind_as_their_facet(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db") as m:
        m.add(chat())
        facets = {c.text: c.facet for c in m.claims(limit=50)}
    assert any("fair play" in t and f == "value" for t, f in facets.items())
    assert any("petrol" in t and f == "lesson" for t, f in facets.items())
    assert any("cinema" in t and f == "event" for t, f in facets.items())
    assert all(f == "" for t, f in facets.items() if "weather" in t)


def test_a_turn_sharing_no_word_with_a_value_gets_it_in_its_own_section(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db") as m:
        m.add(chat())
        turn = "Let my nephew jump the ticket queue and it bugs me."
        ctx = context(m, turn, "Ana")
        standing = [i for i in ctx.items if i.kind == "standing"]
        texts = " ".join(i.text for i in standing)
        assert "fair play" in texts and "petrol" in texts  # Ana's values and lessons
        assert "cinema" not in texts  # an event is no standing item
        assert "## Values, goals, lessons and standing states" in ctx.text
        # one line per turn: a standing item's turn is not shown again as a message
        shown = [i.text for i in ctx.items]
        assert sum("fair play" in t for t in shown) == 1
        # Lee's turn is Lee's: a context for Lee shows Lee's standing items, not Ana's
        other = context(m, turn, "Lee")
        assert not [i for i in other.items if i.kind == "standing"]


def test_a_standing_item_search_finds_is_ranked_with_the_claims(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db") as m:
        m.add(chat())
        ctx = context(m, "petrol tank on the moor", "Ana")
    standing = " ".join(i.text for i in ctx.items if i.kind == "standing")
    assert "petrol" not in standing and "petrol" in ctx.text


def test_the_map_belongs_to_one_embedder_and_moves_a_turn_toward_its_cue(tmp_path: Path) -> None:
    # a map that sends the turn's axis 0 onto the cue's axis 1
    w = np.eye(3, dtype=np.float32)
    w[0] = [0.0, 1.0, 0.0]
    np.save(tmp_path / MAP_FILE, w.astype(np.float16))
    (tmp_path / CARD).write_text(json.dumps({"embedder": "mini"}))
    assert turn_map("mini", 3, tmp_path) is not None
    assert turn_map("other", 3, tmp_path) is None and turn_map("mini", 4, tmp_path) is None
    turn = np.array([1.0, 0.0, 0.0])
    items = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]])
    plain = bearing(turn, items, None)
    mapped = bearing(turn, items, turn_map("mini", 3, tmp_path))
    assert plain.argmax() == 1 and mapped.argmax() == 0
    assert (plain >= 0).all() and plain[2] == 0.0  # floored at 0


def test_the_shipped_map_fits_the_bundled_embedder() -> None:
    from archivist.embed import get_embedder

    embedder = get_embedder(Settings())
    w = turn_map(embedder.name, 384)
    assert w is not None and w.shape == (384, 384)


def test_a_corrected_standing_item_is_offered_as_corrected_never_as_it_was(
    tmp_path: Path,
) -> None:
    with memory(tmp_path / "m.db") as m:
        m.add(chat())
        old = next(c for c in m.claims(limit=50) if "fair play" in c.text)
        new = m.update(old.id, "Ana believes in fair shares for everyone at home.")
        assert new.facet == "value"  # a correction keeps what part of the person it is
        assert next(c for c in m.claims(limit=50) if c.id == old.id).status == "superseded"
        ctx = context(m, "Let my nephew jump the ticket queue and it bugs me.", "Ana")
    standing = " ".join(i.text for i in ctx.items if i.kind == "standing")
    assert "fair shares" in standing and "fair play" not in standing
