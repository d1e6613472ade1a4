"""The Store contract, run against every backend (SQLite file, PostgreSQL + pgvector).

Behaviour, not identical orderings: "the right item is in the top k", filters
admit exactly the right rows, deletes reach every index. The PostgreSQL
backend runs on pgserver's own server, or on ARCHIVIST_TEST_PG_DSN when set.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from archivist.errors import EmbeddingMismatch, InputError, StaleExtraction
from archivist.model import Attachment, Claim, Conversation, Episode, Message
from archivist.service import MemoryService
from archivist.store import sql as q
from archivist.store.base import (
    ExtractionMark,
    IndexedClaim,
    IndexedEpisode,
    ReconcileBatch,
    Store,
)
from archivist.store.dialect import POSTGRES
from archivist.store.sql import Filters
from archivist.testing import FakeEmbedder
from archivist.write.index_text import (
    claim_embed_text,
    claim_search_text,
    episode_embed_text,
    episode_search_text,
    text_hash,
)
from conftest import T0, add_direct, ana_bob, ana_lee, cara_dan, indexed, make_conversation

ALL = Filters()
W1 = T0 + timedelta(weeks=1)


@pytest.fixture
def store(store_factory):
    """An empty store of the parametrised backend."""
    return store_factory()


@pytest.fixture
def three(store, embedder):
    """The store holding ana-lee, ana-bob and cara-dan, added through the Store interface."""
    for conv in (ana_lee(), ana_bob(), cara_dan()):
        add_direct(store, conv, embedder)
    return store


def all_messages(store) -> dict[int, Message]:
    out: dict[int, Message] = {}
    for c in store.conversations():
        out.update(store.conversation_messages(c["id"]))
    return out


def rowid_of(store, conversation: str, msg_id: str) -> int:
    for rowid, m in store.conversation_messages(conversation):
        if m.id == msg_id:
            return rowid
    raise AssertionError(f"{conversation}/{msg_id} not stored")


def message_vectors(store, embedder, convs: list[Conversation]) -> dict[int, np.ndarray]:
    """rowid -> the vector stored for that message (the cache, keyed by embedded-text hash)."""
    out = {}
    for conv in convs:
        rows, _ = indexed(conv, embedder)
        by_id = {r.message.id: r.embed_hash for r in rows}
        cached = store.cached_vectors(embedder.name, by_id.values())
        for rowid, m in store.conversation_messages(conv.id):
            out[rowid] = cached[by_id[m.id]]
    return out


def keyword_ids(store, text: str, filters: Filters = ALL) -> set[tuple[str, str]]:
    found = store.messages_by_rowid(r for r, _ in store.keyword_search(text, filters, 100))
    return {(m.conversation, m.id) for m in found.values()}


def snapshot(store) -> dict:
    """What a refused write must leave unchanged."""
    s = store.stats()
    keys = ("conversations", "sessions", "messages", "people", "vectors", "embed_model")
    return {k: s[k] for k in keys} | {
        "all": sorted(r for r, _ in store.keyword_search("2023", ALL, 1000))
    }


# -- protocol, migrations, writes -----------------------------------------------------


def test_store_implements_the_protocol_and_records_its_migrations(store) -> None:
    assert isinstance(store, Store)
    names = store.migrations()
    assert names[:3] == ["0001_message_log", "0002_derived_memory", "0003_reconcile_consolidate"]
    assert store.migrate() == []


def test_reopening_applies_nothing_twice_and_keeps_data(store_factory, embedder) -> None:
    first = store_factory("same")
    add_direct(first, ana_lee(), embedder)
    first.close()
    again = store_factory("same")
    assert again.migrate() == []
    assert again.stats()["messages"] == len(ana_lee().messages)
    assert again.embed_model() == embedder.name


def test_stored_messages_round_trip_exactly(store, embedder) -> None:
    photo = Attachment("image", caption="a grey cat on a pillow", url="https://example.org/p.jpg")
    conv = ana_lee()
    first = replace(conv.messages[0], attachments=(photo,))
    conv = replace(conv, messages=(first, *conv.messages[1:]))
    add_direct(store, conv, embedder)
    assert [m for _, m in store.conversation_messages("ana-lee")] == list(conv.messages)
    assert store.get_message("ana-lee", "D1:1") == first
    assert store.get_message("ana-lee", "nope") is None
    assert store.existing_hashes("ana-lee") == {m.id: m.hash for m in conv.messages}
    assert store.existing_hashes("nope") == {}


def test_adding_the_same_conversation_twice_adds_nothing(store, embedder) -> None:
    conv = ana_lee()
    n = len(conv.messages)
    first = add_direct(store, conv, embedder)
    assert (first.added, first.unchanged, first.vectors_added) == (n, 0, n)
    assert first.added_ids == [m.id for m in conv.messages]
    before = snapshot(store)
    second = add_direct(store, conv, embedder)
    assert (second.added, second.unchanged, second.vectors_added, second.added_ids) == (
        0,
        n,
        0,
        [],
    )
    assert snapshot(store) == before


def test_a_conversation_stored_again_after_a_delete_reads_back_as_stored_now(
    store, embedder
) -> None:
    """A process remembers decoded message rows (store/log.py): a row that changed
    under the same id and position reads back as it is now."""
    conv = ana_lee()
    add_direct(store, conv, embedder)
    assert [m for _, m in store.conversation_messages("ana-lee")] == list(conv.messages)
    assert store.delete_conversation("ana-lee") == len(conv.messages)
    first = replace(conv.messages[0], text="Something else entirely.")
    again = replace(conv, messages=(first, *conv.messages[1:]))
    add_direct(store, again, embedder)
    assert [m for _, m in store.conversation_messages("ana-lee")] == list(again.messages)


def test_last_messages_are_the_end_of_the_log_in_order(store, embedder) -> None:
    conv = ana_lee()
    add_direct(store, conv, embedder)
    log = store.conversation_messages("ana-lee")
    assert store.last_messages("ana-lee", 2) == log[-2:]
    assert store.last_messages("ana-lee", 100) == log
    assert store.last_messages("nope", 2) == []


def test_cached_vectors_returns_what_was_stored(store, embedder) -> None:
    conv = ana_lee()
    rows, vectors = indexed(conv, embedder)
    store.add_conversation(conv, rows, embedder.name, vectors)
    got = store.cached_vectors(embedder.name, [*vectors, "no-such-hash"])
    assert set(got) == set(vectors)
    for h, v in vectors.items():
        assert got[h].dtype == np.float32
        np.testing.assert_allclose(got[h], v, atol=1e-6)
    assert store.cached_vectors("other-model", vectors) == {}
    assert store.cached_vectors(embedder.name, []) == {}


def test_same_id_with_different_content_is_refused_and_changes_nothing(three, embedder) -> None:
    before = snapshot(three)
    conv = ana_lee()
    edited = replace(conv.messages[1], text="Pixel is a menace.")
    bad = replace(conv, messages=(conv.messages[0], edited, *conv.messages[2:]))
    with pytest.raises(InputError, match=r"'ana-lee'.*'D1:2'.*append-only"):
        add_direct(three, bad, embedder)
    assert snapshot(three) == before
    assert three.get_message("ana-lee", "D1:2") == conv.messages[1]
    assert keyword_ids(three, "menace") == set()


def test_a_late_conflict_rolls_back_the_whole_batch(three, embedder) -> None:
    before = snapshot(three)
    old = ana_lee()
    later = make_conversation(
        "ana-lee",
        [[("Ana", "Pixel learned to open the fridge."), ("Lee", "Quite the burglar.")]],
        first_session=3,
        first_seq=len(old.messages),
    )
    conflict = replace(old.messages[-1], text="Rewritten history about the Azores.")
    batch = replace(
        old,
        participants=("Ana", "Lee", "Zed"),
        messages=(*later.messages, conflict),
        sessions=later.sessions,
    )
    with pytest.raises(InputError):
        add_direct(three, batch, embedder)
    assert snapshot(three) == before
    assert keyword_ids(three, "fridge burglar") == set()
    convs = {c["id"]: c for c in three.conversations()}
    assert convs["ana-lee"]["participants"] == ["Ana", "Lee"]
    assert convs["ana-lee"]["sessions"] == 2


def test_incremental_add_stores_only_new_messages(store, embedder) -> None:
    add_direct(store, ana_lee(), embedder)
    more = make_conversation(
        "ana-lee",
        [[("Lee", "Back from Reykjavik, bringing you a puffin magnet.")]],
        first_session=3,
        first_seq=7,
    )
    result = add_direct(store, more, embedder)
    assert (result.added, result.unchanged) == (1, 0)
    assert store.stats()["messages"] == 8
    assert [c["sessions"] for c in store.conversations()] == [3]
    assert keyword_ids(store, "puffin") == {("ana-lee", "D3:1")}


def test_embedding_model_mismatch_is_refused(store) -> None:
    add_direct(store, ana_lee(), FakeEmbedder(dim=64))
    before = snapshot(store)
    with pytest.raises(EmbeddingMismatch, match=r"fake:64.*fake:32"):
        add_direct(store, ana_bob(), FakeEmbedder(dim=32))
    assert snapshot(store) == before
    assert store.embed_model() == "fake:64"


def test_a_100_kb_message_is_stored_and_found(store, embedder) -> None:
    body = " ".join(f"filler{i % 997}" for i in range(12_000))
    text = f"{body} zanzibarquokka"
    conv = make_conversation("long", [[("Ana", text), ("Lee", "That was long.")]])
    assert add_direct(store, conv, embedder).added == 2
    assert store.get_message("long", "D1:1").text == text
    assert keyword_ids(store, "zanzibarquokka") == {("long", "D1:1")}
    rows, vectors = indexed(conv, embedder)
    top = store.vector_search(embedder.name, vectors[rows[0].embed_hash], ALL, 1)
    assert store.messages_by_rowid([top[0][0]])[top[0][0]].id == "D1:1"


# -- keyword search -------------------------------------------------------------------


def test_keyword_search_finds_by_word_best_first(three) -> None:
    hits = three.keyword_search("tomatoes greenhouse Bob", ALL, 10)
    assert len(hits) == 3  # Bob's tomatoes, and two more turns between Ana and Bob
    assert all(isinstance(r, int) and isinstance(s, float) for r, s in hits)
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] > scores[-1] > 0  # higher is better
    top = three.messages_by_rowid([hits[0][0]])[hits[0][0]]
    assert (top.conversation, top.id) == ("ana-bob", "D1:1")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("adopting", ("ana-lee", "D1:1")),
        ("shift", ("ana-lee", "D2:1")),
        ("ripen", ("ana-bob", "D1:1")),
        ("Marathons", ("cara-dan", "D1:1")),
        ("Reykjavik cargo", ("ana-lee", "D1:4")),
        ("head nurse consecutive nights", ("ana-lee", "D2:2")),
        ("sister Azores trip", ("ana-lee", "D2:3")),
    ],
)
def test_keyword_search_stems_and_ranks_the_right_message_first(three, query, expected) -> None:
    hits = three.keyword_search(query, ALL, 3)
    top = three.messages_by_rowid([hits[0][0]])[hits[0][0]]
    assert (top.conversation, top.id) == expected


def test_conversations_of_a_person_stop_reading_past_the_limit(three) -> None:
    """Where someone sent or received messages, in the order they first did, read
    only while they are few: a context shows a short history whole without a search."""
    ana = len(three.conversation_messages("ana-lee")) + len(three.conversation_messages("ana-bob"))
    assert three.conversations_of("ana", ana) == ["ana-lee", "ana-bob"]  # any case
    assert three.conversations_of("Ana", ana - 1) is None
    assert three.conversations_of("Dan", 100) == ["cara-dan"]
    assert three.conversations_of("Zoe", 100) == []


def test_keyword_search_limit(three) -> None:
    assert len(three.keyword_search("2023", ALL, 3)) == 3


HOSTILE = [
    'AND OR NOT "unterminated NEAR( * ^col: -x',
    '"',
    "''\"\"''",
    "the and of to",
    "",
    "   \n\t",
    "🙂🐈‍⬛🚀",
    "Pixel 🐈",
    "x" * 10_000,
    " ".join(f"word{i}" for i in range(1_500)),
    "search_text : cat",
    "scope : c0123",
    "NEAR(cat dog, 2) AND {search_text scope}: x*",
    "-cat +dog ^nurse",
    "\x00\x01 cat",
    "e\u0301 café naïve",
    "pixel:* & !cat | 'a':A <-> b",
    "\\' \\\\ pixel\\",
]


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: repr(t[:20]))
@pytest.mark.parametrize(
    "filters", [ALL, Filters(conversation="ana-lee", person="ana")], ids=["all", "filtered"]
)
def test_keyword_search_never_raises_on_hostile_text(three, text, filters) -> None:
    for search in (three.keyword_search, three.claim_keyword_search, three.episode_keyword_search):
        hits = search(text, filters, 10)
        assert all(isinstance(r, int) and isinstance(s, float) for r, s in hits)


def test_operators_in_user_text_are_just_words(three) -> None:
    assert ("ana-lee", "D1:1") in keyword_ids(three, 'Pixel" OR NOT (adopted')
    assert ("ana-lee", "D1:1") in keyword_ids(three, "Pixel 🐈")
    assert ("ana-lee", "D1:1") in keyword_ids(three, "pixel:* & !cat")
    assert keyword_ids(three, "🙂🐈") == set()


# -- filters, for both rankers -------------------------------------------------------

FILTER_CASES = {
    "conversation": (Filters(conversation="ana-bob"), lambda m: m.conversation == "ana-bob"),
    "conversations": (
        Filters(conversation=("ana-bob", "cara-dan")),
        lambda m: m.conversation in ("ana-bob", "cara-dan"),
    ),
    "person-sent-or-received": (
        Filters(person="lee"),
        lambda m: "Lee" in (m.speaker, *m.addressees),
    ),
    "person-padded-upper": (Filters(person=" BOB "), lambda m: "Bob" in (m.speaker, *m.addressees)),
    "speaker": (Filters(speaker="ANA"), lambda m: m.speaker == "Ana"),
    "session": (Filters(session=2), lambda m: m.session == 2),
    "since": (Filters(since=W1), lambda m: m.timestamp >= W1),
    "until": (
        Filters(until=T0 + timedelta(minutes=2)),
        lambda m: m.timestamp <= T0 + timedelta(minutes=2),
    ),
    "combined": (
        Filters(conversation="ana-lee", person="Ana", session=1, speaker="Lee"),
        lambda m: m.conversation == "ana-lee" and m.session == 1 and m.speaker == "Lee",
    ),
    "nobody": (Filters(person="Zed"), lambda m: False),
}


@pytest.mark.parametrize("case", FILTER_CASES, ids=list(FILTER_CASES))
def test_keyword_search_filters(three, case: str) -> None:
    filters, admits = FILTER_CASES[case]
    expected = {r for r, m in all_messages(three).items() if admits(m)}
    got = {r for r, _ in three.keyword_search("2023", filters, 100)}
    assert got == expected
    assert case == "nobody" or expected


@pytest.mark.parametrize("case", FILTER_CASES, ids=list(FILTER_CASES))
def test_vector_search_and_filter_rowids_apply_filters(three, embedder, case: str) -> None:
    filters, admits = FILTER_CASES[case]
    messages = all_messages(three)
    expected = {r for r, m in messages.items() if admits(m)}
    query = embedder.embed_batch(["cat hospital tomatoes marathon"])[0]
    got = three.vector_search(embedder.name, query, filters, 100)
    assert {r for r, _ in got} == expected
    scores = [s for _, s in got]
    assert scores == sorted(scores, reverse=True)
    assert three.filter_rowids([*messages, 99_999], filters) == expected | (
        {99_999} if filters.is_empty() else set()
    )


def test_vector_search_is_exact(three, embedder) -> None:
    vectors = message_vectors(three, embedder, [ana_lee(), ana_bob(), cara_dan()])
    assert len(vectors) == 12
    for rowid, vec in vectors.items():
        (top, score), *_ = three.vector_search(embedder.name, vec, ALL, 3)
        assert top == rowid
        assert score == pytest.approx(1.0, abs=1e-5)


def test_vector_search_restricted_to_a_filter(three, embedder) -> None:
    pixel = rowid_of(three, "ana-lee", "D1:1")
    vec = message_vectors(three, embedder, [ana_lee()])[pixel]
    got = three.vector_search(embedder.name, vec, Filters(conversation="ana-bob"), 10)
    assert got and pixel not in {r for r, _ in got}
    found = three.messages_by_rowid(r for r, _ in got).values()
    assert {m.conversation for m in found} == {"ana-bob"}


def test_vector_search_of_another_model_finds_nothing(three) -> None:
    other = FakeEmbedder(dim=64)
    other.name = "other-model"
    assert three.vector_search(other.name, other.embed_batch(["cat"])[0], ALL, 5) == []


def test_empty_store_searches_return_empty_lists(store, embedder) -> None:
    assert store.keyword_search("cat", ALL, 5) == []
    assert store.vector_search(embedder.name, embedder.embed_batch(["cat"])[0], ALL, 5) == []
    assert store.stats()["messages"] == 0
    assert store.embed_model() is None
    assert store.messages_by_rowid([]) == {}
    assert store.filter_rowids([], Filters(person="ana")) == set()


# -- reads ------------------------------------------------------------------------------


def test_neighbours_stay_in_the_conversation_in_order_and_within_filters(three) -> None:
    rowid = rowid_of(three, "ana-lee", "D1:2")
    assert [m.id for _, m in three.neighbours(rowid, 1, 1)] == ["D1:1", "D1:2", "D1:3"]
    lee_only = three.neighbours(rowid, 2, 2, Filters(speaker="Lee"))
    assert [m.id for _, m in lee_only] == ["D1:2", "D1:4"]
    first = rowid_of(three, "ana-bob", "D1:1")
    assert [m.id for _, m in three.neighbours(first, 2, 0)] == ["D1:1"]
    assert three.neighbours(10_000, 1, 1) == []


def test_around_finds_the_neighbours_of_many_messages_at_once(three) -> None:
    seq = {
        (c, m.id): m.seq for c in ("ana-lee", "ana-bob") for _, m in three.conversation_messages(c)
    }
    lee2, bob1 = seq[("ana-lee", "D1:2")], seq[("ana-bob", "D1:1")]
    spots = [("ana-lee", lee2), ("ana-bob", bob1), ("ana-lee", lee2), ("nowhere", 5)]
    near = [(m.conversation, m.id) for _, m in three.around(spots, 1, 1)]
    assert near == [
        ("ana-bob", "D1:1"),
        ("ana-bob", "D1:2"),
        ("ana-lee", "D1:1"),
        ("ana-lee", "D1:2"),
        ("ana-lee", "D1:3"),
    ]
    lee_only = three.around([("ana-lee", lee2)], 2, 2, Filters(speaker="Lee"))
    assert [m.id for _, m in lee_only] == ["D1:2", "D1:4"]
    assert three.around([], 1, 1) == []


def test_messages_by_rowid(three) -> None:
    ids = {rowid_of(three, "ana-lee", "D1:1"), rowid_of(three, "cara-dan", "D1:2")}
    got = three.messages_by_rowid([*ids, *ids, 10_000])
    assert set(got) == ids
    assert {m.id for m in got.values()} == {"D1:1", "D1:2"}


def test_people_conversations_and_stats(three) -> None:
    assert dict(three.people()) == {"ana": 10, "bob": 3, "cara": 2, "dan": 2, "lee": 7}
    convs = {c["id"]: c for c in three.conversations()}
    assert [c["id"] for c in three.conversations()] == ["ana-bob", "ana-lee", "cara-dan"]
    assert convs["ana-lee"] == {
        "id": "ana-lee",
        "participants": ["Ana", "Lee"],
        "source": "",
        "messages": 7,
        "sessions": 2,
    }
    s = three.stats()
    assert (s["conversations"], s["sessions"], s["messages"], s["people"]) == (3, 4, 12, 5)
    assert s["vectors"] == {"fake:64": 12}
    assert s["embed_model"] == "fake:64"
    assert s["bytes"] > 0
    for key in ("path", "migrations", "episodes", "claims", "llm_cache_entries", "jobs"):
        assert key in s


# -- deletion -------------------------------------------------------------------------


def _assert_gone(store, embedder, gone: dict[int, np.ndarray]) -> None:
    assert store.messages_by_rowid(gone) == {}
    assert not {r for r, _ in store.keyword_search("2023", ALL, 1000)} & set(gone)
    for vec in gone.values():
        hits = store.vector_search(embedder.name, vec, ALL, 100)
        assert not {r for r, _ in hits} & set(gone)


def test_delete_conversation_removes_it_from_every_index(three, embedder) -> None:
    vectors = message_vectors(three, embedder, [ana_lee(), ana_bob(), cara_dan()])
    doomed = {r: vectors[r] for r, _ in three.conversation_messages("ana-lee")}
    kept_before = [r for r, _ in three.keyword_search("tomatoes", ALL, 10)]
    assert three.delete_conversation("ana-lee") == 7
    _assert_gone(three, embedder, doomed)
    assert keyword_ids(three, "Pixel Reykjavik Azores") == set()
    assert three.stats()["vectors"] == {"fake:64": 5}
    assert [c["id"] for c in three.conversations()] == ["ana-bob", "cara-dan"]
    assert three.stats()["sessions"] == 2
    assert [r for r, _ in three.keyword_search("tomatoes", ALL, 10)] == kept_before
    some = next(r for r in vectors if r not in doomed)
    assert len(three.vector_search(embedder.name, vectors[some], ALL, 100)) == 5
    assert three.delete_conversation("ana-lee") == 0
    assert three.delete_conversation("never-stored") == 0


def test_delete_person_received_removes_what_they_sent_or_received(three, embedder) -> None:
    vectors = message_vectors(three, embedder, [ana_lee(), ana_bob(), cara_dan()])
    messages = all_messages(three)
    doomed = {r: vectors[r] for r, m in messages.items() if "Bob" in (m.speaker, *m.addressees)}
    assert len(doomed) == 3
    assert three.delete_person("  bOB ", received=True) == 3
    _assert_gone(three, embedder, doomed)
    assert keyword_ids(three, "tomatoes seeds balcony") == set()
    assert "bob" not in dict(three.people())
    assert three.stats()["messages"] == 9
    assert "ana-bob" not in {c["id"] for c in three.conversations()}
    assert ("ana-lee", "D1:1") in keyword_ids(three, "Pixel")
    assert three.delete_person("bob", received=True) == 0


def test_a_shared_vector_survives_until_its_last_message_goes(store, embedder) -> None:
    add_direct(store, ana_bob("first"), embedder)
    add_direct(store, ana_bob("second"), embedder)
    assert store.stats()["vectors"] == {"fake:64": 3}
    store.delete_conversation("first")
    assert store.stats()["vectors"] == {"fake:64": 3}
    vec = embedder.embed_batch(["tomatoes greenhouse"])[0]
    assert len(store.vector_search(embedder.name, vec, ALL, 10)) == 3
    store.delete_conversation("second")
    assert store.stats()["vectors"] == {}
    assert store.vector_search(embedder.name, vec, ALL, 10) == []


def test_a_delete_through_another_store_object_is_seen(store_factory, embedder) -> None:
    one = store_factory("shared")
    for conv in (ana_lee(), cara_dan()):
        add_direct(one, conv, embedder)
    vectors = message_vectors(one, embedder, [cara_dan()])
    some = next(iter(vectors))
    assert one.vector_search(embedder.name, vectors[some], ALL, 1)[0][0] == some  # cached
    other = store_factory("shared")
    assert other.delete_conversation("cara-dan") == 2
    _assert_gone(one, embedder, vectors)


# -- derived memory: extraction, claims, episodes, LLM cache -----------------------------


def _extraction(conv: Conversation, embedder) -> tuple[list, list, dict]:
    """One episode per session and one claim per message, as the service would index them."""
    episodes, claims = [], []
    for number in sorted({m.session for m in conv.messages}):
        msgs = [m for m in conv.messages if m.session == number]
        ep = Episode(
            conversation=conv.id,
            session=number,
            message_ids=tuple(m.id for m in msgs),
            start=msgs[0].timestamp,
            end=msgs[-1].timestamp,
            narrative=" ".join(f"{m.speaker} said: {m.text}" for m in msgs),
            title=f"Session {number}",
        )
        episodes.append(
            (number, IndexedEpisode(ep, episode_search_text(ep), text_hash(episode_embed_text(ep))))
        )
        for m in msgs:
            c = Claim(
                text=f"{m.speaker}: {m.text}",
                speaker=m.speaker,
                subject=m.speaker,
                conversation=conv.id,
                evidence=(m.id,),
                said_at=m.timestamp,
                kind="event" if "?" not in m.text else "fact",
            )
            claims.append((number, c))
    texts = {e.embed_hash: episode_embed_text(e.episode) for _, e in episodes}
    texts |= {text_hash(claim_embed_text(c)): claim_embed_text(c) for _, c in claims}
    vectors = dict(zip(texts, embedder.embed_batch(list(texts.values())), strict=True))
    return episodes, claims, vectors


def _extract(store, conv: Conversation, embedder) -> dict[int, list[int]]:
    """Save every session's extraction; session -> claim ids."""
    episodes, claims, vectors = _extraction(conv, embedder)
    out = {}
    for number, ep in episodes:
        rows = [
            IndexedClaim(c, 0, claim_search_text(c), text_hash(claim_embed_text(c)))
            for s, c in claims
            if s == number
        ]
        out[number] = store.save_extraction(
            conv.id,
            number,
            [ep],
            rows,
            embedder.name,
            vectors,
            n_messages=len(ep.episode.message_ids),
            method="heuristic",
            rejected=1,
        )
    return out


@pytest.fixture
def derived(three, embedder):
    """``three`` with episodes and claims for ana-lee and ana-bob."""
    _extract(three, ana_lee(), embedder)
    _extract(three, ana_bob(), embedder)
    return three


def test_save_extraction_records_state_and_claims(derived, embedder) -> None:
    assert derived.extraction_state("ana-lee") == {1: 4, 2: 3}
    assert derived.extraction_state("cara-dan") == {}
    claims = derived.list_claims(Filters(conversation="ana-lee"), limit=100)
    assert len(claims) == 7
    assert [c.said_at for c in claims] == sorted(c.said_at for c in claims)
    by_id = derived.claims_by_id([c.id for c in claims] + [99_999])
    assert set(by_id) == {c.id for c in claims}
    first = by_id[claims[0].id]
    assert (first.speaker, first.evidence, first.status) == ("Ana", ("D1:1",), "current")
    assert first.episode is not None
    s = derived.stats()
    assert (s["episodes"], s["claims"], s["sessions_extracted"], s["claims_rejected"]) == (
        3,
        10,
        3,
        3,
    )


def test_re_extracting_a_session_replaces_its_claims(derived, embedder) -> None:
    before = {c.id for c in derived.list_claims(Filters(conversation="ana-lee", session=2))}
    again = _extract(derived, ana_lee(), embedder)
    after = {c.id for c in derived.list_claims(Filters(conversation="ana-lee", session=2))}
    assert len(after) == len(before) == 3 and after == set(again[2]) and not after & before
    assert derived.stats()["claims"] == 10


def test_claim_evidence_and_episodes_point_at_messages(derived) -> None:
    pixel = rowid_of(derived, "ana-lee", "D1:1")
    (claim,) = derived.claims_for_messages([pixel])[pixel]
    assert derived.claim_evidence_rowids([claim.id]) == {claim.id: [pixel]}
    episode = derived.episodes_for_messages([pixel, 99_999])[pixel]
    assert (episode.conversation, episode.session, episode.title) == ("ana-lee", 1, "Session 1")
    rowids = derived.episode_message_rowids([episode.id])[episode.id]
    assert [derived.messages_by_rowid([r])[r].id for r in rowids] == [
        "D1:1",
        "D1:2",
        "D1:3",
        "D1:4",
    ]
    assert [e.session for e in derived.list_episodes("ana-lee")] == [1, 2]
    assert len(derived.list_episodes(limit=2)) == 2


def test_claim_and_episode_search_find_the_right_item(derived, embedder) -> None:
    hits = derived.claim_keyword_search("greenhouse tomatoes", ALL, 3)
    top = derived.claims_by_id([hits[0][0]])[hits[0][0]]
    assert "tomatoes" in top.text and top.speaker == "Bob"
    assert derived.claim_keyword_search("greenhouse", Filters(conversation="ana-lee"), 5) == []
    vec = embedder.embed_batch([claim_embed_text(top)])[0]
    (best, score), *_ = derived.claim_vector_search(embedder.name, vec, ALL, 3)
    assert best == top.id and score == pytest.approx(1.0, abs=1e-5)
    only_lee = derived.claim_vector_search(embedder.name, vec, Filters(speaker="Lee"), 20)
    assert {derived.claims_by_id([c])[c].speaker for c, _ in only_lee} == {"Lee"}
    ep_hits = derived.episode_keyword_search("Azores sister", ALL, 3)
    assert ep_hits
    ep = derived.list_episodes("ana-lee")[1]
    assert ep_hits[0][0] == ep.id
    ep_vec = embedder.embed_batch([episode_embed_text(ep)])[0]
    assert derived.episode_vector_search(embedder.name, ep_vec, ALL, 1)[0][0] == ep.id
    assert (
        derived.episode_vector_search(embedder.name, ep_vec, Filters(person="bob"), 5)[0][0]
        != ep.id
    )


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (Filters(person="lee"), {"Lee"}),  # said by or about
        (Filters(speaker="Ana", conversation="ana-bob"), {"Ana"}),
        (Filters(session=2), {"Ana", "Lee"}),
        (Filters(since=W1), {"Ana", "Lee"}),
        (Filters(person="zed"), set()),
    ],
)
def test_list_claims_filters(derived, filters, expected) -> None:
    claims = derived.list_claims(filters, limit=100)
    assert {c.speaker for c in claims} == expected
    if filters.session == 2:
        assert len(claims) == 3
    if filters.since is not None:
        assert all(c.said_at >= W1 for c in claims)
    page = derived.list_claims(ALL, limit=3, offset=3)
    assert [c.id for c in page] == [c.id for c in derived.list_claims(ALL, limit=100)][3:6]


def test_clear_derived_and_deletes_take_derived_memory_along(derived) -> None:
    derived.clear_derived("ana-bob")
    assert derived.extraction_state("ana-bob") == {}
    assert derived.list_claims(Filters(conversation="ana-bob")) == []
    assert derived.stats()["claims"] == 7
    derived.delete_person("lee", received=True)  # every ana-lee message involved Lee
    assert derived.stats()["claims"] == 0 and derived.stats()["episodes"] == 0
    assert derived.claim_keyword_search("Pixel", ALL, 5) == []
    derived.clear_derived()
    assert derived.stats()["sessions_extracted"] == 0


def _save_part(store, embedder, msgs: list[Message], n: int, after=None) -> list[int]:
    """Save ``msgs`` (the end of a session's first ``n`` messages) as one episode, one claim
    each: replacing the session's extraction, or appended after the mark ``after``."""
    conv = Conversation(id=msgs[0].conversation, messages=tuple(msgs))
    episodes, claims, vectors = _extraction(conv, embedder)
    ((number, ep),) = episodes
    rows = [
        IndexedClaim(c, 0, claim_search_text(c), text_hash(claim_embed_text(c))) for _, c in claims
    ]
    return store.save_extraction(
        conv.id,
        number,
        [ep],
        rows,
        embedder.name,
        vectors,
        n_messages=n,
        method="heuristic",
        rejected=1,
        last_message=msgs[-1].id,
        append_after=after,
    )


def test_appending_to_a_session_adds_and_keeps_what_was_there(three, embedder) -> None:
    s1 = [m for m in ana_lee().messages if m.session == 1]
    first = _save_part(three, embedder, s1[:2], 2)
    mark = three.extraction_marks("ana-lee")[1]
    assert mark == ExtractionMark(2, "D1:2", "heuristic")
    three.save_reconciliation(
        ReconcileBatch("ana-lee", {}, [], [], [], reconciled=first, model=embedder.name)
    )
    epoch = three.meta("vector_epoch")
    more = _save_part(three, embedder, s1[2:], 4, after=mark)
    assert min(more) > max(first)  # new ids after the old: cached indexes only grow
    assert three.meta("vector_epoch") == epoch
    assert three.extraction_marks("ana-lee") == {1: ExtractionMark(4, "D1:4", "heuristic")}
    assert three.extraction_state("ana-lee") == {1: 4}
    done, todo = three.claims_to_reconcile("ana-lee")
    assert ([c.id for c in done], [c.id for c in todo]) == (first, more)  # no reset
    assert [e.message_ids for e in three.list_episodes("ana-lee")] == [
        ("D1:1", "D1:2"),
        ("D1:3", "D1:4"),
    ]
    s = three.stats()
    assert (s["claims"], s["episodes"], s["claims_rejected"]) == (4, 2, 2)
    vec = embedder.embed_batch([claim_embed_text(three.claims_by_id(more[:1])[more[0]])])[0]
    assert three.claim_vector_search(embedder.name, vec, ALL, 1)[0][0] == more[0]

    # A second append after the same (now stale) mark writes nothing.
    with pytest.raises(StaleExtraction):
        _save_part(three, embedder, s1[2:], 4, after=mark)
    assert three.stats()["claims"] == 4
    assert three.extraction_marks("ana-lee")[1].n_messages == 4
    # Without a mark to append after, the session's extraction is replaced.
    again = _save_part(three, embedder, s1, 4)
    assert {c.id for c in three.list_claims(Filters(conversation="ana-lee"))} == set(again)
    assert three.claims_to_reconcile("ana-lee")[0] == []


def test_claims_read_back_after_reconciliation_show_what_it_changed(three, embedder) -> None:
    """A process remembers decoded claim rows (store/derived.py): a claim reconciliation
    closed reads back closed."""
    s1 = [m for m in ana_lee().messages if m.session == 1]
    first = _save_part(three, embedder, s1[:2], 2)
    _, todo = three.claims_to_reconcile("ana-lee")
    assert [(c.id, c.status) for c in todo] == [(first[0], "current"), (first[1], "current")]
    update = {first[0]: ("superseded", first[1], W1)}
    three.save_reconciliation(
        ReconcileBatch("ana-lee", update, [], [], [], reconciled=[], model=embedder.name)
    )
    _, todo = three.claims_to_reconcile("ana-lee")
    assert [(c.id, c.status, c.replaced_by) for c in todo] == [
        (first[0], "superseded", first[1]),
        (first[1], "current", None),
    ]
    assert todo[0].valid_to == W1


def test_llm_cache_and_usage(store) -> None:
    assert store.llm_cache_get("k") is None
    store.llm_cache_put("k", "extract", "m", '{"a": 1}')
    store.llm_cache_put("k", "extract", "m", '{"a": 2}')
    assert store.llm_cache_get("k") == '{"a": 2}'
    assert store.stats()["llm_cache_entries"] == 1
    store.add_llm_usage("m", {"extract": {"calls": 2, "input_tokens": 100, "seconds": 1.5}})
    store.add_llm_usage("m", {"extract": {"calls": 1, "cache_hits": 1, "seconds": 0.25}})
    usage = store.llm_usage()["m"]["extract"]
    assert (usage["calls"], usage["cache_hits"], usage["input_tokens"]) == (3, 1, 100)
    assert usage["seconds"] == pytest.approx(1.75)
    assert usage["failures"] == 0


def test_meta_round_trips(store) -> None:
    assert store.meta("x") is None
    store.set_meta("x", "1")
    store.set_meta("x", "2")
    assert store.meta("x") == "2"


# -- the service on either backend -----------------------------------------------------


def test_memory_service_end_to_end(store, embedder) -> None:
    mem = MemoryService(store=store, embedder=embedder)
    mem.add([ana_lee(), ana_bob(), cara_dan()])
    hits = mem.search("Who adopted a grey cat?", k=3)
    assert (hits[0].message.conversation, hits[0].message.id) == ("ana-lee", "D1:1")
    hits = mem.search("tomatoes", person="bob", k=5)
    assert hits and {h.message.conversation for h in hits} == {"ana-bob"}
    answer = mem.ask("What is the name of Ana's cat?")
    assert answer is not None
    assert mem.stats()["claims"] > 0
    assert mem.delete(person="bob") == 2  # what Bob said; Ana's message to him stays
    assert not mem.search("tomatoes greenhouse", k=5) or all(
        h.message.conversation != "ana-bob" for h in mem.search("tomatoes greenhouse", k=5)
    )


# -- PostgreSQL only -------------------------------------------------------------------


@pytest.mark.parametrize("method", ["hnsw", "ivfflat"])
def test_postgres_ann_path_finds_the_nearest(store_factory, embedder, method) -> None:
    if store_factory.backend != "postgres":
        pytest.skip("the approximate index is the PostgreSQL backend's")
    store = store_factory()
    store.ann_method = method
    for conv in (ana_lee(), ana_bob(), cara_dan()):
        add_direct(store, conv, embedder)
    assert store._ann_index() is None  # a small store: no index, exact search
    assert store.refresh_vector_index()["ann_index"] is None
    store.ann_min_rows = 0  # as if the store were large
    assert store.refresh_vector_index()["ann_index"].startswith(f"{method}:")
    assert store._ann_index() is not None
    vectors = message_vectors(store, embedder, [ana_lee(), ana_bob(), cara_dan()])
    for rowid, vec in vectors.items():
        (top, score), *_ = store.vector_search(embedder.name, vec, ALL, 3)
        assert top == rowid and score == pytest.approx(1.0, abs=1e-5)
    other = FakeEmbedder(dim=64)
    other.name = "other-model"
    assert store.vector_search(other.name, vectors[rowid], ALL, 5) == []


def test_postgres_keeps_using_the_hnsw_index_an_older_store_built(store_factory, embedder) -> None:
    """A store made before 2026-11-30 built vectors_hnsw with its first vectors: opened
    again it is recorded once and unfiltered search goes through it; a round rebuilds
    nothing."""
    if store_factory.backend != "postgres":
        pytest.skip("the approximate index is the PostgreSQL backend's")
    store = store_factory()
    for conv in (ana_lee(), ana_bob()):
        add_direct(store, conv, embedder)
    with store._write() as db:  # what the older store did with its first vectors
        db.execute(
            f"CREATE INDEX vectors_hnsw ON vectors USING hnsw ((vec::vector({embedder.dim})) "
            f"vector_cosine_ops) WHERE model = '{embedder.name}'"
        )
    assert store._ann_index() is None
    store.close()
    store = store_factory()
    assert store._ann_index() == ("hnsw", 0, 0)
    assert store.refresh_vector_index()["ann_index"] == "hnsw:0:0:vectors_hnsw"
    vectors = message_vectors(store, embedder, [ana_lee(), ana_bob()])
    for rowid, vec in vectors.items():
        (top, _), *_ = store.vector_search(embedder.name, vec, ALL, 3)
        assert top == rowid


def _mirrored(store_factory):
    """A PostgreSQL store whose whole-store message search uses this process's 8-bit
    copy of its vectors (store/pgmirror.py) whatever its size."""
    if store_factory.backend != "postgres":
        pytest.skip("the vector mirror is the PostgreSQL backend's")
    store = store_factory()
    assert store.ann_method == "mirror"  # the default
    store.mirror_min_rows = 0  # as if the store were large
    return store


def _top(store, embedder, vec, k=3):
    return store.vector_search(embedder.name, vec, ALL, k)


def test_postgres_mirror_is_read_in_the_background_then_searched(store_factory, embedder) -> None:
    """The first whole-store search starts reading the copy and is answered by the
    server meanwhile; later ones go through the copy, scored again by the server."""
    store = _mirrored(store_factory)
    convs = [ana_lee(), ana_bob(), cara_dan()]
    for conv in convs:
        add_direct(store, conv, embedder)
    vectors = message_vectors(store, embedder, convs)
    rowid, vec = next(iter(vectors.items()))
    assert _top(store, embedder, vec)[0][0] == rowid  # the server's exact scan
    store._mirror.wait()
    assert store._mirror.ready and len(store._mirror) == len(vectors)
    for rowid, vec in vectors.items():
        (top, score), *_ = _top(store, embedder, vec)
        assert top == rowid and score == pytest.approx(1.0, abs=1e-5)
        exact = store.vector_search(
            embedder.name, vec, Filters(conversation=None, since=T0 - timedelta(days=1)), 5
        )
        assert [r for r, _ in _top(store, embedder, vec, 5)] == [r for r, _ in exact]
    other = FakeEmbedder(dim=64)
    other.name = "other-model"
    copy = store._mirror
    assert store.vector_search(other.name, vectors[rowid], ALL, 5) == []
    with pytest.raises(ValueError):  # a query of another dimension: one line, as before
        store.vector_search(embedder.name, np.ones(7, dtype=np.float32), ALL, 3)
    assert store._mirror is copy and copy.ready  # neither replaced the copy


def test_postgres_mirror_follows_adds_deletes_and_late_vectors(store_factory, embedder) -> None:
    store = _mirrored(store_factory)
    add_direct(store, ana_lee(), embedder)
    assert store.refresh_vector_index(build_ann=True)["mirror_rows"] == len(ana_lee().messages)
    add_direct(store, ana_bob(), embedder)  # above the watermark
    for rowid, vec in message_vectors(store, embedder, [ana_bob()]).items():
        assert _top(store, embedder, vec)[0][0] == rowid
    store.delete_conversation(ana_lee().id)  # logged by the trigger: codes dropped
    gone = len(ana_lee().messages)
    assert _top(store, embedder, embedder.embed_batch(["anything"])[0], 50)
    assert store._mirror.dead == gone and len(store._mirror) == len(ana_bob().messages)
    # messages stored before their vector (a server embeds in its worker), filled later
    conv = cara_dan()
    rows, vectors = indexed(conv, embedder)
    store.add_conversation(conv, rows, embedder.name, {})
    _top(store, embedder, vectors[rows[0].embed_hash])  # the copy passes their rowids
    assert len(store._mirror) == len(ana_bob().messages)
    store.fill_message_vectors(conv.id, embedder.name, vectors)
    for rowid, vec in message_vectors(store, embedder, [conv]).items():
        (top, score), *_ = _top(store, embedder, vec)
        assert top == rowid and score == pytest.approx(1.0, abs=1e-5)
    assert store._mirror.dead == gone  # each filled row read once
    assert len(store._mirror) == len(ana_bob().messages) + len(conv.messages)


def test_postgres_mirror_finds_rows_committed_after_later_ones(store_factory, embedder) -> None:
    """Another process took its message ids first and committed after this one's copy
    had read past them: the copy asks for those ids again and finds them."""
    store = _mirrored(store_factory)
    add_direct(store, ana_lee(), embedder)
    store.refresh_vector_index(build_ann=True)
    other = store_factory()
    with other._write():  # ids taken, not committed
        add_direct(other, ana_bob(), embedder)
        add_direct(store, cara_dan(), embedder)  # later ids, committed first
        for rowid, vec in message_vectors(store, embedder, [cara_dan()]).items():
            assert _top(store, embedder, vec)[0][0] == rowid
    other.close()
    for rowid, vec in message_vectors(store, embedder, [ana_bob()]).items():
        assert _top(store, embedder, vec)[0][0] == rowid


def test_postgres_mirror_is_read_again_when_the_log_was_pruned_past_it(
    store_factory, embedder
) -> None:
    store = _mirrored(store_factory)
    add_direct(store, ana_lee(), embedder)
    store.refresh_vector_index(build_ann=True)
    store.delete_conversation(ana_lee().id)
    add_direct(store, ana_bob(), embedder)
    with store._write() as db:  # what FILLS_KEPT pruning does to a copy far behind
        db.execute("INSERT INTO vector_fills(msg_rowid) VALUES (0)")
        db.execute("DELETE FROM vector_fills WHERE msg_rowid <> 0")
    for rowid, vec in message_vectors(store, embedder, [ana_bob()]).items():
        assert _top(store, embedder, vec)[0][0] == rowid
    assert store._mirror.dead == 0 and len(store._mirror) == len(ana_bob().messages)


def test_postgres_scores_frequent_words_apart_in_a_large_store(
    store_factory, embedder, monkeypatch
) -> None:
    """Above the size threshold a word in FREQUENT_ROWS messages or more picks no
    candidates (ranking it cost ~9 µs a holder) but still lifts the messages holding it,
    and a query of frequent words alone ranks their newest holders, within the filters."""
    if store_factory.backend != "postgres":
        pytest.skip("SQLite's own frequent words: tests/test_vector_file.py")
    from archivist.store import postgres as backend

    store = store_factory()
    turns = []
    for i in range(120):
        words = ["music"] if i % 3 == 0 else []
        words += ["garden"] if i % 5 == 0 else ["violin"] if i % 7 == 0 else ["river"]
        turns.append(("Ana" if i % 2 else "Lee", " ".join(words) + f" item{i}"))
    add_direct(
        store, make_conversation("k", [turns[i : i + 20] for i in range(0, 120, 20)]), embedder
    )
    exact = store.keyword_search("music garden", ALL, 5)
    assert store.refresh_term_counts() == {"skipped": "no count due"}  # a small store
    monkeypatch.setattr(backend, "FREQUENT_TERMS_MIN_STORE", 50)
    monkeypatch.setattr(backend, "FREQUENT_TERM_SHARE", 0.5)
    monkeypatch.setattr(backend, "FREQUENT_ROWS", 30)  # music: 40 rows; garden: 24
    store._corpus.clear()
    got = store.keyword_search("music garden", ALL, 5)
    df = store._corpus["messages"][3]
    assert df["garden"] == 24 and df["music"] >= 30  # counted; estimated, not counted
    texts = store.messages_by_rowid([r for r, _ in got])
    assert len(texts) == 5 and all("music garden" in m.text for m in texts.values())
    assert {r for r, _ in got} == {r for r, _ in exact}  # as BM25 over every term ranks
    alone = store.keyword_search("music", ALL, 10)
    held = store.messages_by_rowid(r for r, _ in alone)
    assert len(held) == 10 and all("music" in m.text for m in held.values())
    lee = store.keyword_search("music garden", Filters(speaker="Lee"), 5)
    assert lee and all(
        m.speaker == "Lee" for m in store.messages_by_rowid(r for r, _ in lee).values()
    )
    ana = store.keyword_search("music", Filters(speaker="Ana"), 50)
    assert len(ana) == 20  # every holder within the filter: i % 3 == 0 and i odd
    # a consolidation round's count of the common terms, read instead of counting
    assert store.refresh_term_counts()["terms"] == 0  # due: none in 200 messages
    monkeypatch.setattr(backend, "TERM_ROWS_MIN", 20)
    assert store.refresh_term_counts(force=True)["terms"] >= 3  # music, garden, river...
    counted = dict(store._db.execute("SELECT lexeme, rows FROM term_rows").fetchall())
    assert counted["music"] == 40 and counted["garden"] == 24 and "item1" not in counted
    assert not any(x.startswith(("c", "p")) and len(x) == 17 for x in counted)  # no scope tokens
    got_again = store.keyword_search("music garden", ALL, 5)
    assert store._corpus["messages"][3]["music"] == 40  # read, not estimated
    assert [r for r, _ in got_again] == [r for r, _ in got]
    assert store.refresh_term_counts() == {"skipped": "no count due"}  # not grown since


def test_postgres_counts_the_corpus_of_a_table_no_analyze_has_counted(
    store_factory, embedder, monkeypatch
) -> None:
    """BM25's N of a large table is the count ANALYZE left; a table it never counted
    (or too small for a page sample to hold a row) is counted, not guessed."""
    if store_factory.backend != "postgres":
        pytest.skip("SQLite's FTS5 keeps its own corpus figures")
    from archivist.store import postgres as backend

    store = store_factory()
    for conv in (ana_lee(), ana_bob()):
        add_direct(store, conv, embedder)
    want = store._db.execute("SELECT count(*), avg(doc_len)::float8 FROM messages").fetchone()
    monkeypatch.setattr(backend, "CORPUS_SAMPLED_FROM", 0)  # as if the table were large
    n, avgdl, _ = store._corpus_stats("messages")
    assert (n, avgdl) == (want[0], pytest.approx(want[1]))


# -- the PostgreSQL SQL builders, as strings -----------------------------------------


def test_pg_builders_quote_lexemes_and_put_scope_tokens_in_the_tsquery() -> None:
    from archivist.store import sql_pg as pq
    from archivist.store.sql import scope_token

    assert pq.quote_lexeme("it's", "A") == "'it''s':A"
    assert pq.quote_lexeme("a\\b") == "'a\\\\b'"
    f = Filters(conversation=("c1", "c2"), person="Ana")
    match = pq.match_tsquery(["cat", "pixel"], f)
    assert match.startswith("('cat':A | 'pixel':A) & (")
    assert f"'{scope_token('c', 'c1')}':D | '{scope_token('c', 'c2')}':D" in match
    assert f"'{scope_token('p', 'ana')}':D" in match
    assert pq.scope_tsquery(ALL) is None
    sql, params = pq.bm25_sql("messages", ["cat"], [1.5], 10.0, f, 5)
    assert "search_tsv @@ ?::tsquery" in sql and "m.conversation = ANY(?)" in sql
    assert sql.count("?") == len(params) and params[-1] == 5
    sql, params = pq.exact_vector_sql("claims", [0.5, 0.5], "m", Filters(person="x"), 3)
    assert "+ 0" in sql and "(c.speaker_key = ? OR c.subject_key = ?)" in sql
    assert params[0].data.tolist() == [0.5, 0.5]  # bound in pgvector's binary form
    assert params[1:] == ["m", "x", "x", 3]
    assert q.where(ALL, "episodes", "e", POSTGRES) == ("TRUE", [])
    since = Filters(since=T0)
    assert (
        "extract(epoch FROM e.start_ts::timestamptz) >= ?"
        in q.where(since, "episodes", "e", POSTGRES)[0]
    )
    assert "strftime('%s', e.start_ts)" in q.where(since, "episodes", "e")[0]


def test_question_marks_become_psycopg_placeholders_outside_literals() -> None:
    from archivist.store.dialect import to_format_style

    sql = "UPDATE t SET e = 'died? 100%' WHERE a = ? AND b LIKE 'x%' AND c = ?"
    assert to_format_style(sql) == (
        "UPDATE t SET e = 'died? 100%%' WHERE a = %s AND b LIKE 'x%%' AND c = %s"
    )
    assert to_format_style("SELECT 'it''s?' , ?") == "SELECT 'it''s?' , %s"


# -- vectors that come after their messages (a server's worker embeds them) ---------------


def test_messages_stored_without_vectors_get_them_later(store, embedder) -> None:
    later = ana_lee()
    rows, vectors = indexed(later, embedder)
    store.add_conversation(later, rows, embedder.name, {})  # stored before its vectors
    add_direct(store, ana_bob(), embedder)  # later rowids, with vectors
    pixel = embedder.embed_batch([later.messages[0].text])[0]
    here = Filters(conversation=later.id)
    assert store.vector_search(embedder.name, pixel, here, 5) == []  # warms any cache too
    missing = store.messages_without_vectors(later.id)
    assert missing == {r.message.id: r.embed_hash for r in rows}
    assert store.messages_without_vectors(ana_bob().id) == {}
    assert keyword_ids(store, "Pixel", here)  # keyword search needs no vector

    assert store.fill_message_vectors(later.id, embedder.name, vectors) == len(rows)
    assert store.messages_without_vectors(later.id) == {}
    found = store.vector_search(embedder.name, pixel, here, 50)
    assert {r for r, _ in found} == {rowid_of(store, later.id, m.id) for m in later.messages}
    # the conversation with its vectors from the start is still searched as before
    assert store.vector_search(embedder.name, pixel, Filters(conversation="ana-bob"), 5)
    assert store.fill_message_vectors(later.id, embedder.name, vectors) == 0  # idempotent


def test_filling_vectors_refuses_another_model(store, embedder) -> None:
    add_direct(store, ana_bob(), embedder)
    later = ana_lee()
    rows, vectors = indexed(later, embedder)
    store.add_conversation(later, rows, embedder.name, {})
    with pytest.raises(EmbeddingMismatch):
        store.fill_message_vectors(later.id, "another-model", vectors)
    assert len(store.messages_without_vectors(later.id)) == len(rows)


def test_a_job_queued_for_later_is_not_taken_before_then(store) -> None:
    import time

    now = time.time()
    later = store.enqueue_job("extract", "c@1@idle", {"conversation": "c"}, now + 60)
    soon = store.enqueue_job("extract", "c@2", {"conversation": "c"})
    assert store.take_job(now, 600, 3).id == soon  # the later one does not block it
    assert store.take_job(now, 600, 3) is None
    job = store.take_job(now + 61, 600, 3)
    assert job is not None and job.id == later and job.payload == {"conversation": "c"}


def test_one_person_one_conversations_names_and_a_declaration_empties_only_its_person(
    three,
) -> None:
    three.ensure_identities()
    assert three.person("nobody") is None
    assert three.identity_names("no-such-chat") == []
    names = sorted(three.identity_names("ana-lee"))
    assert [n.lower() for n in names] == ["ana", "lee"]
    before = {p.id for p in three.persons()}
    (auto,) = [p.id for p in three.persons() if ("ana-lee", "Ana") in p.identities]
    joined = three.declare_identity("ana-lee", "Ana", "u-ana")
    assert joined == []  # the user had no identity before
    assert three.person(auto) is None  # left without an identity: gone, and only it
    assert {p.id for p in three.persons()} == before - {auto} | {"u-ana"}
    three.declare_identity("ana-bob", "Ana", "u-ana")
    everyone = {p.id: p for p in three.persons()}
    assert three.person("u-ana") == everyone["u-ana"]
    assert [c for c, _ in three.person("u-ana").identities] == ["ana-bob", "ana-lee"]
