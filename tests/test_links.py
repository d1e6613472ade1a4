"""Link rankers (read/links.py): scenes, dossiers, named entities and one hop out.

Small conversations written here, real SQLite files, the heuristic archivist and
the FakeEmbedder. Where a test needs what an LLM archivist would have written
(an alias merged by its verifier, scenes it clustered), it is filed through the
store's own write methods, the ones the jobs call.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from archivist.config import Settings
from archivist.model import Entity, Scene
from archivist.read.links import interleave, keyword_scores, named_entities, words
from archivist.read.search import PRESETS, SearchConfig, SearchTrace, search
from archivist.service import MemoryService
from archivist.store.base import ReconcileBatch
from archivist.store.sql import Filters
from archivist.testing import FakeEmbedder
from archivist.write.archivist import HeuristicArchivist
from conftest import T0, make_conversation

# Session 1: Ana's neighbour Sam (named mid-sentence, so the heuristic files him as an
# entity); session 2: her brother Robert Brown, later called "Bobby"; session 3: Sam's
# course of antibiotics, a foresight that expires ten days later.
SESSIONS = [
    [
        ("Ana", "My neighbour Sam fixes bikes in his garage."),
        ("Lee", "Handy guy to have around!"),
        ("Ana", "Yesterday Sam lent me a pump."),
        ("Lee", "The weather is lovely today."),
    ],
    [
        ("Ana", "My brother Robert Brown teaches chemistry."),
        ("Lee", "Nice."),
        ("Ana", "Yesterday Bobby repaired the old boat."),
        ("Lee", "I bought new running shoes."),
    ],
    [
        ("Ana", "My neighbour Sam is on antibiotics for 10 days, so no beer."),
        ("Lee", "Poor guy."),
    ],
]
# Another conversation, other people, another neighbour called Sam.
OTHER = [
    [
        ("Bo", "My neighbour Sam fixes bikes in his garage."),
        ("Cy", "Handy!"),
        ("Bo", "Yesterday Sam lent me a pump."),
    ]
]


def memory(path: Path) -> MemoryService:
    settings = Settings(consolidate_mode="manual")
    return MemoryService(
        path, settings=settings, embedder=FakeEmbedder(), archivist=HeuristicArchivist()
    )


@pytest.fixture
def mem(tmp_path: Path):
    with memory(tmp_path / "links.db") as m:
        m.add(make_conversation("c", SESSIONS))
        m.add(make_conversation("other", OTHER, people=("Bo", "Cy"), id_prefix="o"))
        m.consolidate()  # reconcile (entities), scenes, dossiers, ...
        yield m


def ids(hits) -> list[str]:
    return [h.message.id for h in hits]


def only(mem: MemoryService, ranker: str, query: str, **kw) -> list[str]:
    """Message ids a search with this one ranker returns in conversation "c"."""
    return ids(mem.search(query, conversation="c", k=10, preset=PRESETS[ranker], **kw))


def merge_alias(mem: MemoryService, name: str, alias: str, claim_text: str) -> None:
    """What an LLM verifier's merge files: ``alias`` becomes another name of the entity
    called ``name``, and the claim that used the alias mentions it."""
    (e,) = mem.entities(name=name)
    claim = next(c for c in mem.claims(limit=100) if claim_text in c.text)
    text = f"{name} ({e.kind})"
    mem.store.save_reconciliation(
        ReconcileBatch(
            conversation=e.conversation,
            updates={},
            events=[],
            conflicts=[],
            entities=[(replace(e, aliases=(alias,)), (claim.id,), f"{name} {alias}", text)],
            reconciled=[],
            model=mem.embedder.name,
        )
    )


# -- pure matching ---------------------------------------------------------------------


def entity(i: int, name: str, *aliases: str, mentions: int = 1) -> Entity:
    return Entity("c", "Ana", name, aliases=aliases, mentions=mentions, id=i)


def test_named_entities_match_names_and_aliases_as_phrases() -> None:
    ents = [
        entity(1, "Jack"),
        entity(2, "Jack Russell"),
        entity(3, "Robert Brown", "Bobby"),
        entity(4, "Brown"),
        entity(5, "The"),  # only a stopword: never named
        entity(6, "Russell Square"),
    ]
    got = named_entities("Is Bobby's dog a Jack Russell? The dogs love Brown", ents)
    assert [e.id for e in got] == [2, 1, 3, 4]  # longer match first, then by mentions
    assert named_entities("Robert came by", ents) == []  # half a name is not the name
    assert words("Audrey’s dogs, the Pixies") == ["audrey", "dog", "the", "pixie"]


def test_keyword_scores_weigh_rare_words_over_everywhere_words() -> None:
    docs = [
        (1, "Audrey: Pepper is a Lab mix who loves the couch."),
        (2, "Audrey: Pixie is a Chihuahua mix."),
        (3, "Audrey: the dogs went to the park."),
        (4, "Audrey: two dogs bark at the mailman."),
        (5, "Audrey: painting calms me down."),
    ]
    scored = dict(keyword_scores("Which of Audrey's dogs is a Chihuahua?", docs))
    # "chihuahua" (1 of 5) > "dog" (2 of 5) > "audrey" (in every dossier: ~nothing)
    assert scored[2] > scored[3] == scored[4] > scored[1] == scored[5]
    assert scored[5] < 1e-3
    # the people a question names are who said things, not what a dossier is about
    assert 5 not in dict(keyword_scores("Which of Audrey's dogs?", docs, ignore=["Audrey"]))
    assert keyword_scores("the of a", docs) == [] and keyword_scores("dogs", []) == []


def test_interleave_takes_turns_and_stops_at_the_limit() -> None:
    assert interleave([[1, 2, 3], [4, 1], []], 10) == [1, 4, 2, 3]
    assert interleave([[1, 2, 3], [4, 5]], 3) == [1, 4, 2]
    assert interleave([], 3) == []


# -- each ranker finds what only it can find ---------------------------------------------


def test_a_dossier_reaches_the_entity_s_other_messages(mem: MemoryService) -> None:
    (sam,) = mem.entities(conversation="c", name="Sam")
    assert "fixes bikes" in sam.dossier and "pump" in sam.dossier
    q = "Who fixes bikes in a garage?"
    assert "D1:3" not in only(mem, "bm25", q)  # no word of the question in it
    assert "D1:3" not in only(mem, "entities", q)  # and nobody is named
    assert {"D1:1", "D1:3"} <= set(only(mem, "dossiers", q))
    # with the query's vector, the entity's claims nearest the question vote first
    hits = search(mem.store, mem.embedder, q, Filters(conversation="c"), 5, PRESETS["dossiers"])
    assert ids(hits)[0] == "D1:1" and "D1:3" in ids(hits)


def test_a_named_entity_reaches_a_message_that_only_uses_its_alias(mem: MemoryService) -> None:
    q = "What has Robert Brown been up to?"
    assert only(mem, "entities", q) == ["D2:1"]  # before the merge: the name's own claim
    merge_alias(mem, "Robert Brown", "Bobby", "repaired the old boat")
    assert "D2:3" not in only(mem, "bm25", q)
    assert "D2:3" not in ids(mem.search(q, conversation="c", k=3, preset="rrf"))
    assert set(only(mem, "entities", q)) == {"D2:1", "D2:3"}
    # the alias names him too
    assert "D2:1" in only(mem, "entities", "Did Bobby ever teach?")


def test_one_hop_from_the_top_claims_reaches_the_same_entity_s_claims(mem: MemoryService) -> None:
    q = "garage bikes"
    hop = replace(PRESETS["claims"], name="hop", rankers=("claims_bm25", "entity_hop"))
    trace = SearchTrace()
    mem.search(q, conversation="c", k=10, preset=hop, trace=trace)
    assert trace.rankings["claims_bm25"][:1] == [_rowid(mem, "D1:1")]
    hopped = {_id(mem, r) for r in trace.rankings["entity_hop"]}
    assert hopped == {"D1:3", "D3:1"}  # Sam's other claims; the seed claim is not repeated


def test_scenes_let_through_only_their_members_in_dense_order(mem: MemoryService) -> None:
    """A theme filter: the nearest scene's messages, ranked as the dense ranker ranks them."""
    eps = {e.session: e.id for e in mem.store.list_episodes("c")}
    vec = mem.embedder.embed_batch(  # as the scene job would: near its members' texts
        [
            "Sam fixes bikes in his garage and lent a pump",
            "Robert Brown teaches chemistry and repaired the old boat",
        ]
    )
    mem.store.save_scenes(
        "c",
        [
            (_scene("Bikes", (eps[1],)), vec[0], "h1"),
            (_scene("Family", (eps[2],)), vec[1], "h2"),
        ],
        delete=[s.id for s in mem.store.list_scenes("c")],
    )
    one = replace(PRESETS["scenes"], scene_top=1)
    trace = SearchTrace()
    q = "Which old bikes did Sam fix?"
    hits = search(mem.store, mem.embedder, q, Filters(conversation="c"), 10, one, trace=trace)
    assert {h.message.session for h in hits} == {1}
    dense = search(mem.store, mem.embedder, q, Filters(conversation="c"), 10, PRESETS["dense"])
    assert {h.message.session for h in dense} == {1, 2, 3}  # Sam's antibiotics, the old boat
    in_scene = [h.message.id for h in dense if h.message.session == 1]
    assert ids(hits) == in_scene  # the same order
    # a conversation with one scene: nothing to exclude, so the ranker abstains
    assert search(mem.store, mem.embedder, q, Filters(conversation="other"), 10, one) == []
    every = search(mem.store, mem.embedder, q, Filters(), 10, one)
    assert {(h.message.conversation, h.message.session) for h in every} == {("c", 1)}
    later = Filters(conversation="c", since=T0 + timedelta(weeks=2, days=1))
    assert search(mem.store, mem.embedder, q, later, 10, one) == []  # no scene reaches then


# -- filters and time --------------------------------------------------------------------

LINK_PRESETS = {
    "dossiers": "Who fixes bikes in a garage?",
    "entities": "What is going on with Sam?",
}


@pytest.mark.parametrize(("preset", "query"), LINK_PRESETS.items())
def test_link_rankers_respect_conversation_person_and_time(
    mem: MemoryService, preset: str, query: str
) -> None:
    everywhere = mem.search(query, k=20, preset=preset)
    assert {h.message.conversation for h in everywhere} == {"c", "other"}
    assert {h.message.conversation for h in mem.search(query, preset=preset, person="Bo")} == {
        "other"
    }
    assert {h.message.conversation for h in mem.search(query, preset=preset, person="Ana")} == {"c"}
    since = T0 + timedelta(weeks=2)
    late = mem.search(query, conversation="c", preset=preset, since=since)
    assert late and all(h.message.timestamp >= since for h in late)
    for h in mem.search(query, preset=preset):
        assert h.claims and all(c.conversation == h.message.conversation for c in h.claims)


def test_as_of_a_date_closed_claims_do_not_vote(mem: MemoryService) -> None:
    q = "What is going on with Sam?"
    course = next(c for c in mem.claims(limit=100) if "antibiotics" in c.text)
    assert course.kind == "foresight" and course.valid_to is not None
    started = T0 + timedelta(weeks=2)
    assert "D3:1" in only(mem, "entities", q, at=started + timedelta(days=5))
    after = only(mem, "entities", q, at=started + timedelta(days=20))
    assert "D3:1" not in after and "D1:1" in after


def test_presets_name_the_link_rankers_and_keep_them_off_by_default() -> None:
    for name in ("scenes", "dossiers", "entities"):
        assert PRESETS[name].rankers == (name,)
    default: SearchConfig = PRESETS["archivist"]
    assert not {"scenes", "dossiers", "entities", "entity_hop"} & set(default.rankers)


# -- helpers -----------------------------------------------------------------------------


def _scene(title: str, episodes: tuple[int, ...]) -> Scene:
    return Scene("c", title, title, episodes, T0, T0 + timedelta(weeks=2))


def _rowid(mem: MemoryService, msg_id: str) -> int:
    return next(r for r, m in mem.store.conversation_messages("c") if m.id == msg_id)


def _id(mem: MemoryService, rowid: int) -> str:
    return mem.store.messages_by_rowid([rowid])[rowid].id
