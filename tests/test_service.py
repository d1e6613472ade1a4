"""MemoryService: the one core every front end calls (add, search, delete, get, stats)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from archivist.config import Settings
from archivist.errors import ConfigError, InputError, NotFound
from archivist.model import Conversation, Hit, Message
from archivist.read.search import SearchConfig, SearchTrace
from archivist.service import Memory, MemoryService
from archivist.testing import FakeEmbedder
from archivist.write.index_text import index_rows, text_hash
from conftest import (
    T0,
    RecordingEmbedder,
    ana_bob,
    ana_lee,
    cara_dan,
    jsonl_records,
    make_conversation,
    message_embed_texts,
    raw_count,
    write_jsonl,
)

RRF = "rrf"  # hybrid search without neighbour expansion


def ids(hits: list[Hit]) -> list[tuple[str, str]]:
    return [(h.message.conversation, h.message.id) for h in hits]


def message_vectors(mem: MemoryService) -> int:
    """Distinct vectors the stored messages point at."""
    return raw_count(
        mem.store.path, "SELECT count(DISTINCT vec_id) FROM messages WHERE vec_id IS NOT NULL"
    )


def stored_vectors_for(mem: MemoryService, hashes: list[str]) -> int:
    marks = ",".join("?" * len(hashes))
    return raw_count(
        mem.store.path, f"SELECT count(*) FROM vectors WHERE hash IN ({marks})", hashes
    )


def embed_hashes(mem: MemoryService, conversation: str) -> dict[str, str]:
    con = sqlite3.connect(str(mem.store.path))
    try:
        rows = con.execute(
            "SELECT msg_id, embed_hash FROM messages WHERE conversation = ?", (conversation,)
        )
        return dict(rows.fetchall())
    finally:
        con.close()


# -- construction ---------------------------------------------------------------------


def test_settings_choose_the_fake_embedder_and_the_path(tmp_path: Path) -> None:
    settings = Settings(db_path=tmp_path / "a.db", embedder="fake")
    with MemoryService(settings=settings) as mem:
        assert mem.embedder.name == "fake:64"
        assert mem.store.path == tmp_path / "a.db"
    with MemoryService(tmp_path / "b.db", settings=settings) as mem:  # path wins
        assert mem.store.path == tmp_path / "b.db"
    assert Memory is MemoryService


def test_unknown_embedder_name_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown embedder 'magic'"):
        MemoryService(tmp_path / "m.db", settings=Settings(embedder="magic"))
    assert not (tmp_path / "m.db").exists()  # refused before the store was opened


# -- search ---------------------------------------------------------------------------


def test_search_returns_hits_with_provenance(loaded: MemoryService) -> None:
    hits = loaded.search("When did Ana adopt her cat Pixel?")
    assert hits and all(isinstance(h, Hit) for h in hits)
    # Neighbour smoothing may lift a turn of a strongly matching exchange above
    # it in a toy conversation; the best match is still near the top and ranked
    # first by every ranker, and its claim comes with it.
    best = next(h for h in hits if h.message.id == "D1:1" and h.message.conversation == "ana-lee")
    assert hits.index(best) < 2
    assert best.sources == {"bm25": 1, "dense": 1, "claims_dense": 1}
    assert [c.text for c in best.claims] == [
        "Ana adopted a cat yesterday, a grey one called Pixel."
    ]
    for h in hits:
        assert set(h.sources) <= {"bm25", "dense", "claims_dense"}
        assert all(rank >= 1 for rank in h.sources.values())
        assert h.sources or h.expanded_from, "a hit must say why it was found"
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    as_json = json.loads(json.dumps(best.to_dict()))
    assert as_json["provenance"]["rankers"] == {"bm25": 1, "dense": 1, "claims_dense": 1}
    assert as_json["provenance"]["expanded_from"] is None
    assert as_json["timestamp"] == "2023-05-08T13:57:00+00:00"
    assert as_json["claims"][0]["speaker"] == "Ana" and as_json["claims"][0]["evidence"] == ["D1:1"]


@pytest.mark.parametrize("k", [1, 2, 5, 12])
def test_search_respects_k(loaded: MemoryService, k: int) -> None:
    hits = loaded.search("cat hospital tomatoes marathon", k=k)
    assert len(hits) == k  # the dense ranker reaches every one of the 12 messages
    assert len({(h.message.conversation, h.message.id) for h in hits}) == k


def test_search_trace_records_the_rankers(loaded: MemoryService) -> None:
    trace = SearchTrace()
    loaded.search("Pixel", trace=trace)
    assert set(trace.rankings) == {"bm25", "dense", "claims_dense"}
    assert trace.seconds["bm25"] >= 0


def test_search_by_person_covers_sent_and_received(loaded: MemoryService) -> None:
    hits = loaded.search("seeds tomatoes cat marathon", person="bob", k=20)
    assert {h.message.conversation for h in hits} == {"ana-bob"}
    assert {h.message.speaker for h in hits} == {"Ana", "Bob"}  # to Bob, and from Bob


def test_search_by_conversation(loaded: MemoryService) -> None:
    hits = loaded.search("cat", conversation="cara-dan", k=20)
    assert set(ids(hits)) == {("cara-dan", "D1:1"), ("cara-dan", "D1:2")}
    hits = loaded.search("cat", conversation=["cara-dan", "ana-bob"], k=20)
    assert {c for c, _ in ids(hits)} == {"cara-dan", "ana-bob"}
    assert loaded.search("cat", conversation=[]) == []
    assert loaded.search("cat", conversation="nope") == []


def test_search_by_speaker_session_and_time_with_plain_rrf(loaded: MemoryService) -> None:
    hits = loaded.search("cat nurse", speaker="lee", k=20, preset=RRF)
    assert hits and {h.message.speaker for h in hits} == {"Lee"}
    hits = loaded.search("cat nurse", session=2, k=20, preset=RRF)
    assert hits and {h.message.session for h in hits} == {2}
    week2 = T0 + timedelta(weeks=1)
    hits = loaded.search("cat nurse", since=week2, k=20, preset=RRF)
    assert set(ids(hits)) == {("ana-lee", "D2:1"), ("ana-lee", "D2:2"), ("ana-lee", "D2:3")}
    hits = loaded.search("cat", until=T0 + timedelta(minutes=1), k=20, preset=RRF)
    assert {i for _, i in ids(hits)} == {"D1:1"}


def test_speaker_filter_is_case_insensitive_beyond_ascii(mem: MemoryService) -> None:
    conv = make_conversation(
        "fr",
        [[("Élodie", "J'adore le fromage de chèvre."), ("Lee", "Moi aussi.")]],
        people=("Élodie", "Lee"),
    )
    mem.add(conv)
    assert ids(mem.search("fromage", person="élodie", preset=RRF))  # works
    assert ids(mem.search("fromage", speaker="ÉLODIE", preset=RRF)) == [("fr", "D1:1")]
    assert ids(mem.search("fromage", speaker="élodie", preset=RRF)) == [("fr", "D1:1")]


def test_person_filter_holds_in_a_group_conversation(mem: MemoryService) -> None:
    def turn(i: int, speaker: str, to: str, text: str) -> Message:
        return Message(
            id=f"g{i}",
            conversation="group",
            session=1,
            speaker=speaker,
            text=text,
            timestamp=T0 + timedelta(minutes=i),
            addressees=(to,),
            seq=i,
        )

    conv = Conversation(
        "group",
        ("Ana", "Bob", "Lee"),
        (
            turn(0, "Bob", "Lee", "Lee, did the cargo flight land?"),
            turn(1, "Ana", "Bob", "Bob, my cat Pixel says hello."),
            turn(2, "Lee", "Bob", "Landed fine in Reykjavik."),
        ),
    )
    mem.add(conv)
    hits = mem.search("Pixel cat", person="Ana")
    assert hits
    for h in hits:
        assert "Ana" in (h.message.speaker, *h.message.addressees), h


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_search_refuses_an_empty_query(loaded: MemoryService, query: str) -> None:
    with pytest.raises(InputError, match="non-empty"):
        loaded.search(query)


def test_search_refuses_a_non_string_query(loaded: MemoryService) -> None:
    with pytest.raises(InputError):
        loaded.search(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [0, -1, 1001, 2.5, "3"])
def test_search_refuses_a_bad_k(loaded: MemoryService, k) -> None:
    with pytest.raises(InputError, match="k must be"):
        loaded.search("cat", k=k)


@pytest.mark.parametrize("name", ["since", "until"])
def test_search_refuses_naive_datetimes(loaded: MemoryService, name: str) -> None:
    with pytest.raises(InputError, match=f"{name} must be timezone-aware"):
        loaded.search("cat", **{name: datetime(2023, 5, 8)})


def test_search_with_an_unknown_preset_is_a_config_error(loaded: MemoryService) -> None:
    with pytest.raises(ConfigError, match="unknown search preset"):
        loaded.search("cat", preset="nope")


def test_search_accepts_a_config_object_and_keyword_only_needs_no_embedder(
    tmp_path: Path,
) -> None:
    class NoEmbedder:
        name = "never"
        dim = 1

        def embed_batch(self, texts):
            raise AssertionError("bm25-only search must not embed")

    with MemoryService(tmp_path / "kw.db", embedder=FakeEmbedder()) as mem:
        mem.add(ana_lee())
    with MemoryService(tmp_path / "kw.db", embedder=NoEmbedder()) as mem:  # type: ignore[arg-type]
        hits = mem.search("Azores", preset=SearchConfig("kw", rankers=("bm25",)))
        assert ids(hits) == [("ana-lee", "D2:3")]
        assert ids(mem.search("Azores", preset="bm25")) == [("ana-lee", "D2:3")]


def test_search_on_an_empty_store(mem: MemoryService) -> None:
    assert mem.search("anything at all") == []


def test_search_with_fts_operators_in_the_query(loaded: MemoryService) -> None:
    hits = loaded.search('Pixel OR "cat NEAR(* -grey ^col:', k=3)
    assert ids(hits)[0] == ("ana-lee", "D1:1")


# -- add: idempotent, incremental, cached --------------------------------------------


def test_add_reports_per_conversation_results(mem: MemoryService) -> None:
    results = mem.add([ana_lee(), ana_bob()])
    assert [(r.conversation, r.added, r.unchanged) for r in results] == [
        ("ana-lee", 7, 0),
        ("ana-bob", 3, 0),
    ]
    again = mem.add([ana_lee(), ana_bob()])
    assert [(r.added, r.unchanged, r.vectors_added) for r in again] == [(0, 7, 0), (0, 3, 0)]
    assert mem.stats()["messages"] == 10


def test_re_adding_embeds_nothing(mem: MemoryService, embedder: RecordingEmbedder) -> None:
    mem.add(ana_lee())
    assert message_embed_texts(ana_lee()) <= set(embedder.texts)
    seen = len(embedder.texts)
    mem.add(ana_lee())
    assert embedder.texts[seen:] == []


def test_incremental_add_stores_only_new_messages_and_finds_them(
    mem: MemoryService, embedder: RecordingEmbedder
) -> None:
    full = ana_lee()
    first = replace(full, messages=full.messages[:4], sessions=full.sessions[:1])
    later = replace(full, messages=full.messages[4:], sessions=full.sessions[1:])
    assert mem.add(first)[0].added == 4
    seen = len(embedder.texts)
    result = mem.add(later)[0]
    assert (result.added, result.unchanged) == (3, 0)
    assert result.added_ids == ["D2:1", "D2:2", "D2:3"]
    all_texts = message_embed_texts(full)
    new_texts = message_embed_texts(replace(full, messages=full.messages[4:]))
    assert set(embedder.texts[seen:]) & all_texts == new_texts  # only the new turns embedded
    assert mem.stats()["messages"] == 7
    assert ids(mem.search("Azores trip", k=1)) == [("ana-lee", "D2:3")]
    # re-sending the whole history afterwards stores nothing
    again = mem.add(full)[0]
    assert (again.added, again.unchanged) == (0, 7)


def test_incremental_add_indexes_new_turns_with_their_stored_context(
    tmp_path: Path,
) -> None:
    """A turn added later gets the same embedded text as if it had come with the rest."""
    full = make_conversation(
        "c", [[("Lee", "Did you go to the support group?"), ("Ana", "Yes, I went yesterday.")]]
    )
    with MemoryService(tmp_path / "once.db", embedder=FakeEmbedder()) as once:
        once.add(full)
        expected = embed_hashes(once, "c")
    with MemoryService(tmp_path / "twice.db", embedder=FakeEmbedder()) as twice:
        twice.add(replace(full, messages=full.messages[:1]))
        twice.add(replace(full, messages=full.messages[1:]))
        assert embed_hashes(twice, "c") == expected
    _, answer_text = index_rows(list(full.messages))[1]
    assert expected["D1:2"] == text_hash(answer_text)
    assert "support group" in answer_text


def test_appending_a_jsonl_file_of_new_turns_keeps_conversation_order(
    mem: MemoryService, tmp_path: Path
) -> None:
    records = jsonl_records(ana_lee())
    mem.add(write_jsonl(tmp_path / "part1.jsonl", records[:4]))
    mem.add(write_jsonl(tmp_path / "part2.jsonl", records[4:]))
    stored = [m for _, m in mem.store.conversation_messages("ana-lee")]
    assert [m.id for m in stored] == [r["id"] for r in records]
    assert len({m.seq for m in stored}) == len(stored)


def test_a_second_conversation_with_the_same_texts_reuses_cached_vectors(
    mem: MemoryService, embedder: RecordingEmbedder
) -> None:
    mem.add(ana_bob("first"))
    seen = len(embedder.texts)
    result = mem.add(ana_bob("second"))[0]  # same speakers, texts and turns: same embed text
    assert result.added == 3 and result.vectors_added == 0
    assert message_embed_texts(ana_bob("second")) == message_embed_texts(ana_bob("first"))
    assert not set(embedder.texts[seen:]) & message_embed_texts(ana_bob())
    assert message_vectors(mem) == 3  # six messages share three vectors
    hits = mem.search("tomatoes greenhouse", conversation="second", preset="dense", k=1)
    assert ids(hits) == [("second", "D1:1")]


def test_re_adding_after_delete_embeds_again_and_is_found(
    mem: MemoryService, embedder: RecordingEmbedder
) -> None:
    mem.add([ana_lee(), ana_bob()])
    bob_hashes = [text_hash(t) for t in message_embed_texts(ana_bob())]
    assert stored_vectors_for(mem, bob_hashes) == 3
    assert mem.delete(conversation="ana-bob") == 3
    assert stored_vectors_for(mem, bob_hashes) == 0  # the deleted texts' vectors are gone
    assert message_vectors(mem) == 7
    seen = len(embedder.texts)
    result = mem.add(ana_bob())[0]
    assert (result.added, result.vectors_added) == (3, 3)
    assert message_embed_texts(ana_bob()) <= set(embedder.texts[seen:])
    assert stored_vectors_for(mem, bob_hashes) == 3
    assert ids(mem.search("tomatoes", k=1)) == [("ana-bob", "D1:1")]
    assert mem.stats()["messages"] == 10


def test_progress_counts_every_message_once(mem: MemoryService) -> None:
    seen: list[int] = []
    mem.add([ana_lee(), ana_bob()], progress=seen.append)
    assert sum(seen) == 10
    seen.clear()
    mem.add([ana_lee(), ana_bob()], progress=seen.append)  # all unchanged
    assert sum(seen) == 10


def test_add_a_file_path(mem: MemoryService, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "conv.jsonl", jsonl_records(ana_lee()))
    results = mem.add(str(path))
    assert results[0].added == 7
    assert mem.conversations()[0]["source"] == str(path)
    txt = write_jsonl(tmp_path / "conv.txt", jsonl_records(ana_bob()))
    assert mem.add(txt, format="jsonl")[0].added == 3


def test_add_refuses_what_is_not_a_conversation(mem: MemoryService) -> None:
    with pytest.raises(InputError):
        mem.add([ana_lee(), "not a conversation"])  # type: ignore[list-item]
    with pytest.raises(InputError, match="id"):
        mem.add(Conversation(id="", messages=ana_lee().messages))
    assert mem.stats()["messages"] == 0


# -- delete, get, stats ---------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs", [{}, {"conversation": "ana-lee", "person": "Ana"}], ids=["none", "both"]
)
def test_delete_takes_exactly_one_target(loaded: MemoryService, kwargs) -> None:
    with pytest.raises(InputError, match="exactly one"):
        loaded.delete(**kwargs)
    assert loaded.stats()["messages"] == 12


def test_delete_conversation_hides_it_from_search(loaded: MemoryService) -> None:
    assert loaded.delete(conversation="ana-lee") == 7
    assert all(c != "ana-lee" for c, _ in ids(loaded.search("Pixel cat Azores", k=20)))
    assert "lee" not in loaded.people()
    with pytest.raises(NotFound):
        loaded.get("ana-lee", "D1:1")
    assert loaded.get("ana-bob", "D1:1").speaker == "Bob"


def test_delete_person_received_hides_everything_they_sent_or_received(
    loaded: MemoryService,
) -> None:
    assert "bob" in loaded.people()
    assert loaded.delete(person="Bob", received=True) == 3
    assert "bob" not in loaded.people()
    hits = loaded.search("tomatoes seeds greenhouse balcony", k=20)
    assert hits and all("Bob" not in (h.message.speaker, *h.message.addressees) for h in hits)
    assert loaded.delete(person="bob", received=True) == 0


def test_get_returns_the_message_or_raises_not_found(loaded: MemoryService) -> None:
    m = loaded.get("ana-lee", "D2:3")
    assert m.text.startswith("My sister Marta")
    assert m == ana_lee().messages[6]
    with pytest.raises(NotFound, match="'D9:9'.*'ana-lee'"):
        loaded.get("ana-lee", "D9:9")
    with pytest.raises(NotFound):
        loaded.get("nope", "D1:1")


def test_stats_and_conversations(loaded: MemoryService) -> None:
    s = loaded.stats()
    assert (s["conversations"], s["sessions"], s["messages"], s["people"]) == (3, 4, 12, 5)
    assert s["embed_model"] == "fake:64"
    assert s["migrations"][0] == "0001_message_log"
    convs = loaded.conversations()
    assert [(c["id"], c["messages"], c["sessions"]) for c in convs] == [
        ("ana-bob", 3, 1),
        ("ana-lee", 7, 2),
        ("cara-dan", 2, 1),
    ]
    assert loaded.people() == ["ana", "bob", "cara", "dan", "lee"]


def test_people_cache_follows_adds(mem: MemoryService) -> None:
    mem.add(ana_lee())
    assert mem.people() == ["ana", "lee"]
    mem.add(cara_dan())
    assert mem.people() == ["ana", "cara", "dan", "lee"]


def test_timestamps_keep_their_zone_through_the_store(mem: MemoryService) -> None:
    from datetime import timezone

    plus2 = timezone(timedelta(hours=2))
    conv = make_conversation(
        "tz", [[("Ana", "Guten Morgen")]], start=datetime(2024, 1, 2, 8, tzinfo=plus2)
    )
    mem.add(conv)
    got = mem.get("tz", "D1:1")
    assert got.timestamp == conv.messages[0].timestamp
    assert got.timestamp.utcoffset() == timedelta(hours=2)
    # 08:01+02:00 is 06:01 UTC, and both bounds are inclusive
    hits = mem.search("Morgen", since=datetime(2024, 1, 2, 6, 1, tzinfo=UTC), preset=RRF)
    assert ids(hits) == [("tz", "D1:1")]
    assert mem.search("Morgen", since=datetime(2024, 1, 2, 6, 2, tzinfo=UTC), preset=RRF) == []
    hits = mem.search("Morgen", until=datetime(2024, 1, 2, 8, 1, tzinfo=plus2), preset=RRF)
    assert ids(hits) == [("tz", "D1:1")]
    assert mem.search("Morgen", until=datetime(2024, 1, 2, 6, 0, tzinfo=UTC), preset=RRF) == []
