"""Retrieval: the pure pieces (fusion, rescoring, SQL builders, query analysis, metrics)
and the hybrid search over a real store."""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from archivist.bench.metrics import by_category, evidence_recall, mean, percentile
from archivist.embed.base import forget_query_vectors
from archivist.embed.fake import FakeEmbedder
from archivist.errors import ConfigError
from archivist.lang.query import asks_when, names_in
from archivist.read import search as search_module
from archivist.read.fusion import rrf
from archivist.read.search import (
    PRESETS,
    SearchConfig,
    SearchTrace,
    boost_speakers,
    get_preset,
    search,
    smooth_neighbours,
    top_items,
)
from archivist.service import MemoryService
from archivist.store.sql import (
    Filters,
    filter_clause,
    filtered_keys_sql,
    fts_query,
    query_terms,
    ranked_sql,
    scope_match,
    scope_text,
    scope_token,
)
from conftest import ana_bob, ana_lee

# -- rrf --------------------------------------------------------------------------------


def test_rrf_scores_are_reciprocal_ranks_summed() -> None:
    scores = rrf({"bm25": ["a", "b", "c"], "dense": ["c", "a"]}, k=60)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["b"] == pytest.approx(1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert sorted(scores, key=scores.get, reverse=True) == ["a", "c", "b"]


def test_rrf_agreement_beats_a_single_first_place() -> None:
    scores = rrf({"x": ["solo", "both"], "y": ["other", "both"]})
    assert scores["both"] > scores["solo"] == scores["other"]


def test_rrf_smaller_k_sharpens_the_gap_between_ranks() -> None:
    sharp = rrf({"x": ["a", "b"]}, k=1)
    flat = rrf({"x": ["a", "b"]}, k=1000)
    assert sharp["a"] / sharp["b"] > flat["a"] / flat["b"]


def test_rrf_weights_scale_a_ranker_and_zero_drops_it() -> None:
    ranked = {"bm25": ["a", "b"], "dense": ["b", "a"]}
    assert rrf(ranked)["a"] == pytest.approx(rrf(ranked)["b"])  # a tie without weights
    weighted = rrf(ranked, weights={"dense": 2.0})
    assert weighted["b"] > weighted["a"]
    assert weighted["b"] == pytest.approx(1 / 62 + 2 / 61)
    only_bm25 = rrf(ranked, weights={"dense": 0.0})
    assert only_bm25 == pytest.approx({"a": 1 / 61, "b": 1 / 62})
    assert rrf({"bm25": ["z"]}, weights={"dense": 3.0}) == {"z": pytest.approx(1 / 61)}


def test_rrf_of_nothing_is_empty() -> None:
    assert rrf({}) == {}
    assert rrf({"bm25": [], "dense": []}) == {}


def test_top_items_breaks_ties_by_rowid_and_cuts_at_k() -> None:
    scores = {5: 0.5, 3: 0.5, 9: 0.9, 1: 0.1}
    assert top_items(scores, 3) == [(9, 0.9), (3, 0.5), (5, 0.5)]
    assert top_items(scores, 0) == []
    assert top_items(rrf({"a": [7, 2], "b": [2, 7]}), 2) == [
        (2, pytest.approx(1 / 61 + 1 / 62)),
        (7, pytest.approx(1 / 61 + 1 / 62)),
    ]


# -- rescoring steps -------------------------------------------------------------------


def test_smooth_neighbours_lends_the_best_adjacent_score() -> None:
    position = {1: ("c", 0), 2: ("c", 1), 3: ("c", 2), 4: ("d", 3), 5: ("c", 5)}
    scores = {1: 1.0, 3: 0.4, 4: 2.0}
    out = smooth_neighbours(scores, position, weight=0.5)
    assert out[1] == pytest.approx(1.0)  # its neighbour (2) scored nothing
    assert out[2] == pytest.approx(0.0 + 0.5 * 1.0)  # best of 1.0 and 0.4
    assert out[3] == pytest.approx(0.4)  # seq 3 is in another conversation
    assert out[4] == pytest.approx(2.0)
    assert out[5] == pytest.approx(0.0)  # seq 4 is a gap; 3 is too far
    wide = smooth_neighbours(scores, position, weight=0.5, span=2)
    assert wide[3] == pytest.approx(0.4 + 0.5 * 1.0)


def test_smooth_neighbours_with_zero_weight_is_identity() -> None:
    scores = {1: 1.0, 2: 0.5}
    out = smooth_neighbours(scores, {1: ("c", 0), 2: ("c", 1)}, weight=0.0)
    assert out == scores and out is not scores


def test_boost_speakers_raises_only_named_speakers_case_insensitively() -> None:
    scores = {1: 1.0, 2: 1.0, 3: 0.2}
    speakers = {1: "Caroline", 2: "Melanie", 3: "caroline"}
    out = boost_speakers(scores, speakers, ["CAROLINE"], boost=0.5)
    assert out == pytest.approx({1: 1.5, 2: 1.0, 3: 0.3})
    assert boost_speakers(scores, speakers, [], boost=0.5) == scores
    assert boost_speakers(scores, speakers, ["Caroline"], boost=0.0) == scores
    assert boost_speakers({4: 1.0}, speakers, ["Caroline"], boost=1.0) == {4: 1.0}


def test_presets_are_frozen_and_named() -> None:
    assert set(PRESETS) >= {"bm25", "dense", "rrf", "archivist"}
    for name, config in PRESETS.items():
        assert config.name == name
        assert config.rankers and len(set(config.rankers)) == len(config.rankers)
    with pytest.raises(AttributeError):
        PRESETS["archivist"].rrf_k = 1  # type: ignore[misc]
    assert get_preset("bm25").rankers == ("bm25",)
    with pytest.raises(ConfigError, match="unknown search preset 'nope'.*archivist"):
        get_preset("nope")


# -- SQL builders -----------------------------------------------------------------------


def test_fts_query_quotes_every_term() -> None:
    assert fts_query("Where did Caroline run?") == 'search_text : ("caroline" OR "run")'
    assert fts_query("cat cat CAT") == 'search_text : ("cat")'
    q = fts_query('AND OR NOT "unterminated NEAR( * ^col: -x')
    assert q == 'search_text : ("unterminated" OR "near" OR "col")'
    assert fts_query("Melanie's race") == 'search_text : ("melanie" OR "race")'


@pytest.mark.parametrize("text", ["", "   ", '"', "''", "🙂", "*", "-", "_ _"])
def test_fts_query_is_none_without_terms(text: str) -> None:
    assert fts_query(text) is None


def test_fts_query_falls_back_to_stopwords_when_nothing_else_is_left() -> None:
    assert fts_query("what is it") == 'search_text : ("what" OR "is" OR "it")'


def test_fts_query_output_is_always_well_quoted() -> None:
    """Whatever goes in, every term is a complete "…" string with inner quotes doubled."""
    for text in ['a "b" c', "x\"y z'w", 'NEAR("a b")', "naïve café ß", "O'Brien's \"quote"]:
        q = fts_query(text)
        assert q is not None and q.startswith("search_text : (") and q.endswith(")")
        inner = q[len("search_text : (") : -1]
        for term in inner.split(" OR "):
            assert re.fullmatch(r'"(?:[^"]|"")*"', term), term


def test_query_terms_drops_stopwords_and_short_words_keeps_digits() -> None:
    assert query_terms("What did I do on 5 May with the dog?") == ["5", "may", "dog"]
    assert query_terms("the the", keep_stopwords=True) == ["the"]


def test_scope_tokens_are_opaque_normalised_and_distinct() -> None:
    assert scope_token("p", " Ana ") == scope_token("p", "ana")
    assert scope_token("p", "ana") != scope_token("c", "ana")
    assert scope_token("c", "x") != scope_token("c", "y")
    assert re.fullmatch(r"p[0-9a-f]{16}", scope_token("p", 'we"ird (id) OR *'))
    text = scope_text("conv", ["Lee", "Ana", "lee", " "])
    tokens = text.split()
    assert tokens[0] == scope_token("c", "conv")
    assert sorted(tokens[1:]) == tokens[1:] and len(tokens) == 3


def test_scope_match_combines_the_filters() -> None:
    assert scope_match(Filters()) is None
    assert scope_match(Filters(session=2)) is None  # not a scope filter
    c, p = scope_token("c", "a"), scope_token("p", "ana")
    assert scope_match(Filters(conversation="a", person="Ana")) == f"scope : (({c}) AND {p})"
    both = scope_match(Filters(conversation=("a", "b")))
    assert both == f"scope : (({c} OR {scope_token('c', 'b')}))"


def test_filter_clause_strings_and_params() -> None:
    assert filter_clause(Filters()) == ("1", [])
    since = datetime(2023, 5, 8, tzinfo=UTC)
    until = datetime(2023, 5, 9, 2, tzinfo=timezone(timedelta(hours=2)))
    sql, params = filter_clause(
        Filters(
            conversation=("a", "b"),
            person=" Ana ",
            speaker=" Lee ",
            session=2,
            since=since,
            until=until,
        ),
        alias="x",
    )
    assert sql == (
        "x.conversation IN (?,?) AND "
        "x.rowid IN (SELECT msg_rowid FROM message_people WHERE person = ?) AND "
        "x.speaker_key = ? AND x.session = ? AND "
        "x.ts_epoch >= ? AND x.ts_epoch <= ?"
    )
    assert params == ["a", "b", "ana", "lee", 2, since.timestamp(), until.timestamp()]
    assert params[-1] - params[-2] == 86_400  # 02:00 at +02:00 is midnight UTC
    assert filter_clause(Filters(conversation="solo")) == ("m.conversation IN (?)", ["solo"])


def test_ranked_sql_puts_scope_in_match_and_params_in_order() -> None:
    match = fts_query("cat")
    sql, params = ranked_sql("messages", match, Filters(conversation="c1", session=1), 7)
    assert "messages_fts MATCH ?" in sql and "ORDER BY score LIMIT ?" in sql
    assert "bm25(messages_fts, 1.0, 0.0)" in sql
    assert params == [f"scope : (({scope_token('c', 'c1')})) AND {match}", "c1", 1, 7]
    sql, params = ranked_sql("messages", match, Filters(), 3)
    assert params == [match, 3]
    assert "WHERE messages_fts MATCH ? AND 1 " in sql


def test_filtered_keys_sql() -> None:
    sql, params = filtered_keys_sql("messages", Filters(speaker="Ana"))
    # no ORDER BY: it made SQLite walk the whole table instead of using the filter's index
    assert sql == "SELECT m.rowid FROM messages m WHERE m.speaker_key = ?"
    assert params == ["ana"]


def test_filters_is_empty() -> None:
    assert Filters().is_empty()
    assert not Filters(session=0).is_empty()
    assert not Filters(conversation=()).is_empty()


# -- query analysis ---------------------------------------------------------------------

PEOPLE = ["Caroline", "Melanie", "Lee", "Jo Ann", " "]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did Caroline realise after her race?", ["Caroline"]),
        ("What is caroline's job?", ["Caroline"]),
        ("Where is Melanie’s house?", ["Melanie"]),
        ("Did Lee and Melanie meet?", ["Melanie", "Lee"]),
        ("Who lives in Leeds?", []),
        ("Is Carol here?", []),
        ("What did Jo Ann say?", ["Jo Ann"]),
        ("", []),
    ],
)
def test_names_in(query: str, expected: list[str]) -> None:
    assert names_in(query, PEOPLE) == expected


def test_names_in_escapes_regex_characters() -> None:
    assert names_in("ask a.b about it", ["a.b", "a+"]) == ["a.b"]
    assert names_in("ask axb about it", ["a.b"]) == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("When did Caroline go to the support group?", True),
        ("  when was it?", True),
        ("What year did Melanie paint the sunrise?", True),
        ("In which month did they move?", True),
        ("How long ago was the race?", True),
        ("How long after the move did she start?", True),
        ("What did Caroline realise?", False),
        ("Whenever I travel, what do I pack?", False),
        ("Who was there when it rained?", False),
        ("How long is the race?", False),
    ],
)
def test_asks_when(query: str, expected: bool) -> None:
    assert asks_when(query) is expected


# -- bench metrics -----------------------------------------------------------------------


def test_evidence_recall() -> None:
    retrieved = ["D1:1", "D1:2", "D2:5", "D3:1"]
    assert evidence_recall(retrieved, ["D1:2", "D3:1"], k=2) == 0.5
    assert evidence_recall(retrieved, ["D1:2", "D3:1"], k=4) == 1.0
    assert evidence_recall(retrieved, {"D9:9"}, k=10) == 0.0
    assert evidence_recall(retrieved, ["D1:1", "D1:1"], k=1) == 1.0  # duplicates count once
    with pytest.raises(ValueError):
        evidence_recall(retrieved, [], k=5)


def test_percentile_nearest_rank_basics() -> None:
    assert percentile([], 50) == 0.0
    assert percentile([7.0], 95) == 7.0
    values = [5.0, 1.0, 4.0, 2.0, 3.0]  # unsorted on purpose
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 5.0
    assert percentile(values, 50) == 3.0  # 2.5 -> rank 3
    assert percentile(list(range(1, 21)), 90) == 18  # 18.0 -> rank 18
    assert percentile(list(range(1, 101)), 99.5) == 100  # 99.5 -> rank 100
    assert percentile(list(range(1, 11)), 40) == 4  # 4.0 -> rank 4


@pytest.mark.parametrize(
    ("n", "p", "expected"), [(10, 50, 5), (10, 90, 9), (10, 10, 1), (20, 95, 19), (100, 99, 99)]
)
def test_percentile_nearest_rank_when_rank_is_exact(n: int, p: float, expected: int) -> None:
    assert percentile(list(range(1, n + 1)), p) == expected


def test_by_category_means_and_overall_over_rows() -> None:
    rows = [(1, 1.0), (1, 0.0), (2, 1.0), ("4", 0.5), (2, 1.0), (2, 1.0)]
    out = by_category(rows)
    assert out == {"overall": round(4.5 / 6, 4), "1": 0.5, "2": 1.0, "4": 0.5}
    assert list(out) == ["overall", "1", "2", "4"]
    assert by_category([]) == {"overall": 0.0}
    assert mean([]) == 0.0 and mean([1, 2]) == 1.5


# -- hybrid search over a store ----------------------------------------------------------


def run_search(mem: MemoryService, query: str, preset: str = "archivist", **filters):
    trace = SearchTrace()
    hits = search(
        mem.store,
        mem.embedder,
        query,
        Filters(**filters),
        10,
        get_preset(preset),
        mem.people(),
        trace,
    )
    return hits, trace


def test_search_fuses_both_rankers_and_records_provenance(loaded: MemoryService) -> None:
    hits, trace = run_search(loaded, "grey cat Pixel")
    assert set(trace.rankings) == {"bm25", "dense", "claims_dense"}
    assert {"bm25", "dense", "embed", "rescore"} <= set(trace.seconds)
    top = hits[0]
    assert (top.message.conversation, top.message.id) == ("ana-lee", "D1:1")
    assert top.sources == {"bm25": 1, "dense": 1, "claims_dense": 1}
    assert top.expanded_from is None
    for h in hits:
        for name, rank in h.sources.items():
            assert trace.rankings[name][rank - 1] in loaded.store.messages_by_rowid(
                trace.rankings[name]
            )
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_search_single_ranker_presets(loaded: MemoryService) -> None:
    bm25, trace = run_search(loaded, "tomatoes", preset="bm25")
    assert set(trace.rankings) == {"bm25"}
    assert all(set(h.sources) == {"bm25"} for h in bm25)
    assert [h.message.id for h in bm25] == ["D1:1"]
    dense, trace = run_search(loaded, "tomatoes", preset="dense")
    assert set(trace.rankings) == {"dense"}
    assert len(dense) == 10 and all(set(h.sources) == {"dense"} for h in dense)


def test_search_without_embedder_uses_keywords_only(loaded: MemoryService) -> None:
    hits = search(loaded.store, None, "marathon", Filters(), 5, get_preset("rrf"))
    assert [(h.message.conversation, h.message.id) for h in hits] == [("cara-dan", "D1:1")]


def test_neighbour_expansion_pulls_in_the_reply(loaded: MemoryService) -> None:
    config = SearchConfig("n", rankers=("bm25",), neighbour_weight=0.5)
    hits = search(loaded.store, None, "marathon", Filters(), 5, config)
    assert [(h.message.conversation, h.message.id) for h in hits] == [
        ("cara-dan", "D1:1"),
        ("cara-dan", "D1:2"),
    ]
    found, reply = hits
    assert found.sources == {"bm25": 1} and found.expanded_from is None
    assert reply.sources == {} and reply.expanded_from == "D1:1"
    assert reply.score == pytest.approx(0.5 * found.score)
    assert reply.to_dict()["provenance"] == {"rankers": {}, "expanded_from": "D1:1"}


def test_person_boost_lifts_the_named_speaker(loaded: MemoryService) -> None:
    query = "What did Bob say about seeds?"
    plain = SearchConfig("plain", rankers=("bm25",))
    base = search(loaded.store, None, query, Filters(), 3, plain, loaded.people())
    assert base[0].message.speaker == "Ana"  # "Save me some seeds" matches more words
    boosted = SearchConfig("boosted", rankers=("bm25",), person_boost=5.0)
    trace = SearchTrace()
    lifted = search(loaded.store, None, query, Filters(), 3, boosted, ["Ana", "Bob"], trace)
    assert trace.names == ["Bob"]
    assert lifted[0].message.speaker == "Bob"
    assert {h.message.id for h in lifted} == {h.message.id for h in base}


@pytest.mark.parametrize(
    "filters",
    [
        {"speaker": "Ana"},
        {"session": 2},
        {"since": datetime(2023, 5, 15, tzinfo=UTC)},
    ],
    ids=["speaker", "session", "since"],
)
def test_filters_hold_for_neighbour_expanded_hits(loaded: MemoryService, filters) -> None:
    hits, _ = run_search(loaded, "Pixel cat hospital nurse shifts Azores", **filters)
    assert hits
    for h in hits:
        m = h.message
        if "speaker" in filters:
            assert m.speaker == filters["speaker"], h
        if "session" in filters:
            assert m.session == filters["session"], h
        if "since" in filters:
            assert m.timestamp >= filters["since"], h


def test_when_questions_favour_messages_that_mention_a_time(mem) -> None:
    from archivist.model import Conversation, Message

    at = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
    texts = [
        ("Ana", "The support group was powerful, so many stories."),
        ("Lee", "I want to hear about the support group."),
        ("Ana", "I went to the support group yesterday."),
    ]
    msgs = tuple(
        Message(id=f"m{i}", conversation="c", session=1, speaker=s, text=t,
                timestamp=at + timedelta(minutes=i), addressees=("Lee" if s == "Ana" else "Ana",),
                seq=i)
        for i, (s, t) in enumerate(texts)
    )  # fmt: skip
    mem.add(Conversation("c", ("Ana", "Lee"), msgs), extract=False)
    plain = SearchConfig("plain", rankers=("bm25",))
    timed = SearchConfig("timed", rankers=("bm25",), when_boost=5.0)
    q = "When did Ana go to the support group?"
    plain_scores = {h.message.id: h.score for h in mem.search(q, preset=plain)}
    timed_scores = {h.message.id: h.score for h in mem.search(q, preset=timed)}
    assert timed_scores["m2"] == pytest.approx(plain_scores["m2"] * 6.0)  # "yesterday"
    assert timed_scores["m0"] == pytest.approx(plain_scores["m0"])  # no time expression
    assert timed_scores["m1"] == pytest.approx(plain_scores["m1"])
    # not a "when" question: no boost at all
    q2 = "What did Ana say about the support group?"
    assert [(h.message.id, h.score) for h in mem.search(q2, preset=timed)] == [
        (h.message.id, h.score) for h in mem.search(q2, preset=plain)
    ]


class _ThreadNoting(FakeEmbedder):
    """The fake embedder, noting the thread each batch was embedded on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def embed_batch(self, texts: list[str]):
        self.threads.append(threading.current_thread().name)
        return super().embed_batch(texts)


def test_a_slow_keyword_search_has_the_query_embedded_beside_it_with_the_same_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = _ThreadNoting()
    m = MemoryService(tmp_path / "m.db", embedder=embedder)
    try:
        m.add([ana_lee(), ana_bob()])
        questions = ["What does Ana paint?", "Where did Bob go?", "Lee's sister"]
        monkeypatch.setattr(search_module, "OVERLAP_FROM", float("inf"))  # never slow enough
        forget_query_vectors()
        alone = [[(h.message.id, h.score) for h in m.search(q, k=3)] for q in questions]
        assert all(alone)
        assert not any(t.startswith("archivist-query") for t in embedder.threads)
        monkeypatch.setattr(search_module, "OVERLAP_FROM", 0.0)  # every store counts as slow
        forget_query_vectors()
        embedder.threads.clear()
        beside = [[(h.message.id, h.score) for h in m.search(q, k=3)] for q in questions]
        assert beside == alone
        assert embedder.threads and all(t.startswith("archivist-query") for t in embedder.threads)
    finally:
        m.close()
