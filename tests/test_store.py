"""SQLiteStore on real files: migrations, idempotent transactional writes, keyword and
vector search with filters, deletion from every index, concurrency and crash safety."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from archivist.config import Settings
from archivist.errors import EmbeddingMismatch, InputError, StoreError
from archivist.model import Attachment, Message
from archivist.service import MemoryService
from archivist.store.base import Store
from archivist.store.migrations import MIGRATIONS
from archivist.store.sql import Filters
from archivist.store.sqlite import SQLiteStore
from archivist.testing import FakeEmbedder
from conftest import (
    T0,
    add_direct,
    ana_bob,
    ana_lee,
    cara_dan,
    fts_doc_count,
    jsonl_records,
    make_conversation,
    raw_count,
    table_counts,
    write_jsonl,
)

ALL = Filters()


@pytest.fixture
def three(store: SQLiteStore, embedder: FakeEmbedder) -> SQLiteStore:
    """The store holding ana-lee, ana-bob and cara-dan, added through the Store interface."""
    for conv in (ana_lee(), ana_bob(), cara_dan()):
        add_direct(store, conv, embedder)
    return store


def all_messages(store: SQLiteStore) -> dict[int, Message]:
    out: dict[int, Message] = {}
    for c in store.conversations():
        out.update(store.conversation_messages(c["id"]))
    return out


def stored_vectors(db: Path) -> dict[int, np.ndarray]:
    """rowid -> the vector the store holds for that message."""
    con = sqlite3.connect(str(db))
    try:
        rows = con.execute(
            "SELECT m.rowid, v.vec, v.dim FROM messages m JOIN vectors v ON v.id = m.vec_id"
        ).fetchall()
    finally:
        con.close()
    return {r: np.frombuffer(blob, dtype="<f4", count=dim) for r, blob, dim in rows}


def rowid_of(store: SQLiteStore, conversation: str, msg_id: str) -> int:
    for rowid, m in store.conversation_messages(conversation):
        if m.id == msg_id:
            return rowid
    raise AssertionError(f"{conversation}/{msg_id} not stored")


def keyword_ids(store: SQLiteStore, text: str, filters: Filters = ALL) -> set[tuple[str, str]]:
    found = store.messages_by_rowid(r for r, _ in store.keyword_search(text, filters, 100))
    return {(m.conversation, m.id) for m in found.values()}


# -- schema and migrations ------------------------------------------------------------


def test_sqlite_store_implements_the_store_protocol(store: SQLiteStore) -> None:
    assert isinstance(store, Store)


def test_new_store_records_every_migration_in_the_ledger(store: SQLiteStore) -> None:
    names = [m.name for m in MIGRATIONS]
    assert store.migrations() == names
    rows = sqlite3.connect(str(store.path)).execute("SELECT name, applied_at FROM _migrations")
    ledger = dict(rows.fetchall())
    assert sorted(ledger) == sorted(names)
    for applied_at in ledger.values():
        assert datetime.fromisoformat(applied_at).tzinfo is not None


def test_reopening_applies_nothing_twice_and_keeps_data(tmp_path: Path, embedder) -> None:
    path = tmp_path / "s.db"
    first = SQLiteStore(path)
    add_direct(first, ana_lee(), embedder)
    first.close()
    before = sqlite3.connect(str(path)).execute("SELECT * FROM _migrations").fetchall()

    again = SQLiteStore(path)
    try:
        assert again.migrate() == []
        assert again.migrations() == [m.name for m in MIGRATIONS]
        assert again.stats()["messages"] == len(ana_lee().messages)
    finally:
        again.close()
    after = sqlite3.connect(str(path)).execute("SELECT * FROM _migrations").fetchall()
    assert after == before  # same names, same applied_at: nothing re-run


def test_store_runs_in_wal_mode(store: SQLiteStore) -> None:
    con = sqlite3.connect(str(store.path))
    assert con.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"


def test_garbage_file_raises_store_error_and_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    garbage = bytes(range(256)) * 16
    path.write_bytes(garbage)
    with pytest.raises(StoreError) as info:
        SQLiteStore(path)
    assert str(path) in str(info.value)
    assert "not a usable archivist store" in str(info.value)
    assert not isinstance(info.value, EmbeddingMismatch)
    assert path.read_bytes() == garbage
    with pytest.raises(StoreError):
        MemoryService(path, embedder=FakeEmbedder())


# -- writes: idempotent, append-only, transactional ---------------------------------


def test_stored_messages_round_trip_exactly(store: SQLiteStore, embedder) -> None:
    photo = Attachment("image", caption="a grey cat on a pillow", url="https://example.org/p.jpg")
    conv = ana_lee()
    first = replace(conv.messages[0], attachments=(photo,))
    conv = replace(conv, messages=(first, *conv.messages[1:]))
    add_direct(store, conv, embedder)
    stored = [m for _, m in store.conversation_messages("ana-lee")]
    assert stored == list(conv.messages)
    assert store.get_message("ana-lee", "D1:1") == first
    assert store.get_message("ana-lee", "nope") is None
    assert store.existing_hashes("ana-lee") == {m.id: m.hash for m in conv.messages}


def test_adding_the_same_conversation_twice_adds_nothing(store: SQLiteStore, embedder) -> None:
    conv = ana_lee()
    n = len(conv.messages)
    first = add_direct(store, conv, embedder)
    assert (first.added, first.unchanged, first.vectors_added) == (n, 0, n)
    assert first.added_ids == [m.id for m in conv.messages]
    before = table_counts(store.path)

    second = add_direct(store, conv, embedder)
    assert (second.added, second.unchanged, second.vectors_added) == (0, n, 0)
    assert second.added_ids == []
    assert table_counts(store.path) == before


def test_same_id_with_different_content_is_refused_and_changes_nothing(
    three: SQLiteStore, embedder
) -> None:
    before = table_counts(three.path)
    conv = ana_lee()
    edited = replace(conv.messages[1], text="Pixel is a menace.")
    bad = replace(conv, messages=(conv.messages[0], edited, *conv.messages[2:]))
    with pytest.raises(InputError, match=r"'ana-lee'.*'D1:2'.*append-only"):
        add_direct(three, bad, embedder)
    assert table_counts(three.path) == before
    assert three.get_message("ana-lee", "D1:2") == conv.messages[1]
    assert keyword_ids(three, "menace") == set()


def test_a_late_conflict_rolls_back_the_whole_batch(three: SQLiteStore, embedder) -> None:
    """New messages before the conflicting one are not stored either (one transaction)."""
    before = table_counts(three.path)
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
    assert table_counts(three.path) == before
    assert keyword_ids(three, "fridge burglar") == set()
    assert three.get_message("ana-lee", "D3:1") is None
    convs = {c["id"]: c for c in three.conversations()}
    assert convs["ana-lee"]["participants"] == ["Ana", "Lee"]
    assert convs["ana-lee"]["sessions"] == 2


def test_incremental_add_stores_only_new_messages(store: SQLiteStore, embedder) -> None:
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


def test_embedding_model_mismatch_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    add_direct(store, ana_lee(), FakeEmbedder(dim=64))
    before = table_counts(path)
    with pytest.raises(EmbeddingMismatch, match=r"fake:64.*fake:32"):
        add_direct(store, ana_bob(), FakeEmbedder(dim=32))
    assert table_counts(path) == before
    assert store.embed_model() == "fake:64"
    store.close()

    with MemoryService(path, embedder=FakeEmbedder(dim=32)) as mem:
        with pytest.raises(EmbeddingMismatch):
            mem.search("cat")
        with pytest.raises(EmbeddingMismatch):
            mem.add(ana_bob())
    assert table_counts(path) == before
    with MemoryService(path, embedder=FakeEmbedder(dim=64)) as mem:
        assert mem.search("Pixel cat", k=1)[0].message.id == "D1:1"


def test_a_100_kb_message_is_stored_and_found(store: SQLiteStore, embedder) -> None:
    body = " ".join(f"filler{i % 997}" for i in range(12_000))
    text = f"{body} zanzibarquokka"
    assert len(text.encode()) > 100_000
    conv = make_conversation("long", [[("Ana", text), ("Lee", "That was long.")]])
    assert add_direct(store, conv, embedder).added == 2
    assert store.get_message("long", "D1:1").text == text
    assert keyword_ids(store, "zanzibarquokka") == {("long", "D1:1")}
    vec = embedder.embed_batch([text])[0]
    top = store.vector_search(embedder.name, vec, ALL, 1)
    assert store.messages_by_rowid([top[0][0]])[top[0][0]].id == "D1:1"


# -- keyword search -------------------------------------------------------------------


def test_keyword_search_finds_by_word_best_first(three: SQLiteStore) -> None:
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
        ("adopting", ("ana-lee", "D1:1")),  # adopted ~ adopting (porter)
        ("shift", ("ana-lee", "D2:1")),  # shifts ~ shift
        ("ripen", ("ana-bob", "D1:1")),  # ripened ~ ripen
        ("Marathons", ("cara-dan", "D1:1")),  # case and plural
    ],
)
def test_keyword_search_stems(three: SQLiteStore, query: str, expected) -> None:
    assert expected in keyword_ids(three, query)


def test_keyword_search_limit(three: SQLiteStore) -> None:
    assert len(three.keyword_search("2023", ALL, 3)) == 3  # date words: every message


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
    " ".join(f"word{i}" for i in range(1_500)),  # ~10 kB of distinct terms
    "search_text : cat",
    "scope : c0123",
    "NEAR(cat dog, 2) AND {search_text scope}: x*",
    "-cat +dog ^nurse",
    "\x00\x01 cat",
    "e\u0301 café naïve",
]


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: repr(t[:20]))
@pytest.mark.parametrize(
    "filters", [ALL, Filters(conversation="ana-lee", person="ana")], ids=["all", "filtered"]
)
def test_keyword_search_never_raises_on_hostile_text(three: SQLiteStore, text, filters) -> None:
    hits = three.keyword_search(text, filters, 10)
    assert isinstance(hits, list)
    assert all(isinstance(r, int) and isinstance(s, float) for r, s in hits)


def test_hostile_text_still_matches_its_plain_words(three: SQLiteStore) -> None:
    assert ("ana-lee", "D1:1") in keyword_ids(three, 'Pixel" OR NOT (adopted')
    assert ("ana-lee", "D1:1") in keyword_ids(three, "Pixel 🐈")
    assert keyword_ids(three, "🙂🐈") == set()


# -- filters, for both rankers -------------------------------------------------------

W1 = T0 + timedelta(weeks=1)

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
    "person-padded-upper": (
        Filters(person=" BOB "),
        lambda m: "Bob" in (m.speaker, *m.addressees),
    ),
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
def test_keyword_search_filters(three: SQLiteStore, case: str) -> None:
    filters, admits = FILTER_CASES[case]
    messages = all_messages(three)
    expected = {r for r, m in messages.items() if admits(m)}
    # every message's search text carries its date words, so "2023" matches all of them
    got = {r for r, _ in three.keyword_search("2023", filters, 100)}
    assert got == expected
    assert case == "nobody" or expected


@pytest.mark.parametrize("case", FILTER_CASES, ids=list(FILTER_CASES))
def test_vector_search_filters(three: SQLiteStore, embedder, case: str) -> None:
    filters, admits = FILTER_CASES[case]
    expected = {r for r, m in all_messages(three).items() if admits(m)}
    query = embedder.embed_batch(["cat hospital tomatoes marathon"])[0]
    got = three.vector_search(embedder.name, query, filters, 100)
    assert {r for r, _ in got} == expected
    scores = [s for _, s in got]
    assert scores == sorted(scores, reverse=True)


def test_vector_search_is_exact(three: SQLiteStore, embedder) -> None:
    vectors = stored_vectors(three.path)
    assert len(vectors) == len(all_messages(three))
    for rowid, vec in vectors.items():
        (top, score), *_ = three.vector_search(embedder.name, vec, ALL, 3)
        assert top == rowid
        assert score == pytest.approx(1.0, abs=1e-5)


def test_vector_search_restricted_to_a_filter(three: SQLiteStore, embedder) -> None:
    pixel = rowid_of(three, "ana-lee", "D1:1")
    vec = stored_vectors(three.path)[pixel]
    got = three.vector_search(embedder.name, vec, Filters(conversation="ana-bob"), 10)
    assert got and pixel not in {r for r, _ in got}
    assert {m.conversation for m in three.messages_by_rowid(r for r, _ in got).values()} == {
        "ana-bob"
    }


def test_vector_search_of_another_model_finds_nothing(three: SQLiteStore) -> None:
    other = FakeEmbedder(dim=64)
    other.name = "other-model"
    assert three.vector_search(other.name, other.embed_batch(["cat"])[0], ALL, 5) == []


def test_empty_store_searches_return_empty_lists(store: SQLiteStore, embedder) -> None:
    assert store.keyword_search("cat", ALL, 5) == []
    assert store.vector_search(embedder.name, embedder.embed_batch(["cat"])[0], ALL, 5) == []
    assert store.stats()["messages"] == 0
    assert store.embed_model() is None


# -- reads ------------------------------------------------------------------------------


def test_neighbours_stay_in_the_conversation_and_in_order(three: SQLiteStore) -> None:
    rowid = rowid_of(three, "ana-lee", "D1:2")
    around = [m.id for _, m in three.neighbours(rowid, 1, 1)]
    assert around == ["D1:1", "D1:2", "D1:3"]
    first = rowid_of(three, "ana-bob", "D1:1")
    assert [m.id for _, m in three.neighbours(first, 2, 0)] == ["D1:1"]
    assert three.neighbours(10_000, 1, 1) == []


def test_people_conversations_and_stats(three: SQLiteStore) -> None:
    assert dict(three.people()) == {"ana": 10, "bob": 3, "cara": 2, "dan": 2, "lee": 7}
    convs = {c["id"]: c for c in three.conversations()}
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


# -- deletion -------------------------------------------------------------------------


def _assert_gone(store: SQLiteStore, embedder, gone: dict[int, np.ndarray]) -> None:
    """None of these rowids is reachable from messages, FTS, vectors or the dense index."""
    db = store.path
    assert store.messages_by_rowid(gone) == {}
    assert raw_count(db, "SELECT count(*) FROM messages_fts") == raw_count(
        db, "SELECT count(*) FROM messages"
    )
    assert fts_doc_count(db) == raw_count(db, "SELECT count(*) FROM messages")
    assert (
        raw_count(
            db, "SELECT count(*) FROM vectors WHERE hash NOT IN (SELECT embed_hash FROM messages)"
        )
        == 0
    )
    for vec in gone.values():
        hits = store.vector_search(embedder.name, vec, ALL, 100)
        assert not {r for r, _ in hits} & set(gone)


def test_delete_conversation_removes_it_from_every_index(three: SQLiteStore, embedder) -> None:
    vectors = stored_vectors(three.path)
    doomed = {r: vectors[r] for r, _ in three.conversation_messages("ana-lee")}
    kept_before = [r for r, _ in three.keyword_search("tomatoes", ALL, 10)]
    # warm the cached dense index so the delete has to invalidate it
    assert three.vector_search(embedder.name, next(iter(doomed.values())), ALL, 1)[0][0] in doomed

    assert three.delete_conversation("ana-lee") == 7
    _assert_gone(three, embedder, doomed)
    assert keyword_ids(three, "Pixel Reykjavik Azores") == set()
    assert raw_count(three.path, "SELECT count(*) FROM vectors") == 5
    assert [c["id"] for c in three.conversations()] == ["ana-bob", "cara-dan"]
    assert three.stats()["sessions"] == 2
    # the others are intact
    assert [r for r, _ in three.keyword_search("tomatoes", ALL, 10)] == kept_before
    assert len(three.vector_search(embedder.name, vectors[1], ALL, 100)) == 5
    assert three.delete_conversation("ana-lee") == 0
    assert three.delete_conversation("never-stored") == 0


def test_delete_person_received_removes_what_they_sent_or_received(
    three: SQLiteStore, embedder
) -> None:
    vectors = stored_vectors(three.path)
    messages = all_messages(three)
    doomed = {r: vectors[r] for r, m in messages.items() if "Bob" in (m.speaker, *m.addressees)}
    assert len(doomed) == 3
    three.vector_search(embedder.name, vectors[1], ALL, 1)  # cache the index

    assert three.delete_person("  bOB ", received=True) == 3
    _assert_gone(three, embedder, doomed)
    assert keyword_ids(three, "tomatoes seeds balcony") == set()
    assert "bob" not in dict(three.people())
    assert three.stats()["messages"] == 9
    assert ("ana-lee", "D1:1") in keyword_ids(three, "Pixel")  # Ana's other messages stay
    assert three.delete_person("bob", received=True) == 0


def test_a_shared_vector_survives_until_its_last_message_goes(store: SQLiteStore, embedder) -> None:
    add_direct(store, ana_bob("first"), embedder)
    add_direct(store, ana_bob("second"), embedder)
    assert raw_count(store.path, "SELECT count(*) FROM vectors") == 3  # same texts, shared
    store.delete_conversation("first")
    assert raw_count(store.path, "SELECT count(*) FROM vectors") == 3
    vec = embedder.embed_batch(["tomatoes greenhouse"])[0]
    assert len(store.vector_search(embedder.name, vec, ALL, 10)) == 3
    store.delete_conversation("second")
    assert raw_count(store.path, "SELECT count(*) FROM vectors") == 0
    assert store.vector_search(embedder.name, vec, ALL, 10) == []


def test_delete_through_another_connection_invalidates_a_cached_index(
    three: SQLiteStore, embedder
) -> None:
    vectors = stored_vectors(three.path)
    doomed = {r: vectors[r] for r, _ in three.conversation_messages("cara-dan")}
    some = next(iter(doomed))
    assert three.vector_search(embedder.name, doomed[some], ALL, 1)[0][0] == some  # cached

    other = SQLiteStore(three.path)
    try:
        assert other.delete_conversation("cara-dan") == 2
    finally:
        other.close()
    _assert_gone(three, embedder, doomed)


def test_rowids_freed_by_a_delete_are_not_reused_and_search_finds_the_new_messages(
    three: SQLiteStore, embedder
) -> None:
    three.vector_search(embedder.name, stored_vectors(three.path)[1], ALL, 1)  # cache
    freed = {r for r, _ in three.conversation_messages("cara-dan")}  # the highest rowids
    three.delete_conversation("cara-dan")
    new = make_conversation("new", [[("Eve", "Quantum knitting is my hobby.")]], people=("Eve",))
    add_direct(three, new, embedder)
    rowid = rowid_of(three, "new", "D1:1")
    assert rowid > max(freed)  # a freed rowid is never handed out again (AUTOINCREMENT)
    vec = stored_vectors(three.path)[rowid]
    (top, score), *_ = three.vector_search(embedder.name, vec, ALL, 5)
    assert (top, score) == (rowid, pytest.approx(1.0, abs=1e-5))
    assert three.messages_by_rowid([top])[top].text == "Quantum knitting is my hobby."
    assert len(three.vector_search(embedder.name, vec, ALL, 100)) == 11


# -- concurrency and crashes --------------------------------------------------------


def test_a_reader_is_not_blocked_by_an_open_write_transaction(three: SQLiteStore, embedder) -> None:
    reader = SQLiteStore(three.path)
    query = embedder.embed_batch(["grey cat Pixel"])[0]
    expected_kw = reader.keyword_search("Pixel", ALL, 10)
    assert expected_kw
    results: dict[str, object] = {}

    def read() -> None:
        t = time.perf_counter()
        results["kw"] = reader.keyword_search("Pixel", ALL, 10)
        results["vec"] = reader.vector_search(embedder.name, query, ALL, 5)
        results["stats"] = reader.stats()["messages"]
        results["seconds"] = time.perf_counter() - t

    writer = three._db  # the raw connection, to hold the write lock open
    writer.execute("BEGIN IMMEDIATE")
    try:
        writer.execute("DELETE FROM messages WHERE conversation = 'ana-lee'")  # uncommitted
        worker = threading.Thread(target=read, daemon=True)
        worker.start()
        worker.join(timeout=10)
        assert not worker.is_alive(), "reader blocked behind the writer"
    finally:
        writer.execute("ROLLBACK")
        reader.close()
    assert results["seconds"] < 2.0
    assert results["kw"] == expected_kw  # sees the last committed state
    assert len(results["vec"]) == 5
    assert results["stats"] == 12


INGEST_SCRIPT = """
import sys
from archivist.config import Settings
from archivist.service import MemoryService
db, path = sys.argv[1], sys.argv[2]
with MemoryService(settings=Settings(db_path=db, embedder="fake")) as mem:
    mem.add(path)
print("finished")
"""

N_CONVS, N_MSGS = 40, 100


def _big_file(tmp_path: Path) -> Path:
    records = []
    for c in range(N_CONVS):
        turns = [
            ("Ana" if i % 2 else "Lee", f"topic{c} turn {i} about subject{(i * 7) % 13}")
            for i in range(N_MSGS)
        ]
        conv = make_conversation(f"conv{c:02d}", [turns[:50], turns[50:]])
        records += jsonl_records(conv)
    return write_jsonl(tmp_path / "big.jsonl", records)


def _count_conversations_with_messages(db: Path) -> int:
    try:
        return raw_count(db, "SELECT count(DISTINCT conversation) FROM messages")
    except sqlite3.OperationalError:  # schema not created yet, or briefly locked
        return 0


def test_a_killed_ingest_leaves_whole_conversations_and_resumes(tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    path = _big_file(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-c", INGEST_SCRIPT, str(db), str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists() and _count_conversations_with_messages(db) >= 2:
                break
            time.sleep(0.005)
        assert proc.poll() is None, f"ingest ended before the kill: {proc.communicate()}"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    con = sqlite3.connect(str(db))
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    n_messages = con.execute("SELECT count(*) FROM messages").fetchone()[0]
    assert con.execute("SELECT count(*) FROM messages_fts").fetchone()[0] == n_messages
    per_conv = dict(
        con.execute("SELECT conversation, count(*) FROM messages GROUP BY conversation")
    )
    con.close()
    assert fts_doc_count(db) == n_messages
    assert 2 <= len(per_conv) < N_CONVS
    assert set(per_conv.values()) == {N_MSGS}, "a conversation was stored in part"

    with MemoryService(settings=Settings(db_path=db, embedder="fake")) as mem:
        results = mem.add(path)
        assert sum(r.added for r in results) == (N_CONVS - len(per_conv)) * N_MSGS
        assert sum(r.unchanged for r in results) == len(per_conv) * N_MSGS
        stats = mem.stats()
        assert stats["messages"] == N_CONVS * N_MSGS
        assert stats["conversations"] == N_CONVS
        hits = mem.search("topic7 subject3", conversation="conv07", k=100)
        assert {h.message.conversation for h in hits} == {"conv07"}
    assert (
        raw_count(
            db,
            "SELECT count(*) FROM (SELECT 1 FROM messages "
            "GROUP BY conversation, msg_id HAVING count(*) > 1)",
        )
        == 0
    )
    assert fts_doc_count(db) == N_CONVS * N_MSGS


def test_jsonl_written_by_these_tests_loads_back_unchanged(tmp_path: Path) -> None:
    """The JSONL the killed-ingest test writes is read back as the messages it came from."""
    conv = make_conversation("rt", [[("Ana", "one"), ("Lee", "two")], [("Ana", "three")]])
    path = write_jsonl(tmp_path / "rt.jsonl", jsonl_records(conv))
    with MemoryService(tmp_path / "rt.db", embedder=FakeEmbedder()) as mem:
        mem.add(path)
        stored = [m for _, m in mem.store.conversation_messages("rt")]
    assert [(m.id, m.session, m.seq, m.text) for m in stored] == [
        (m.id, m.session, m.seq, m.text) for m in conv.messages
    ]


def _open_and_close(path: str) -> str:
    try:
        SQLiteStore(path).close()
        return "ok"
    except Exception as e:  # noqa: BLE001 - the outcome is what the test compares
        return f"{type(e).__name__}: {e}"


def test_processes_opening_a_new_store_at_once_all_succeed(tmp_path: Path) -> None:
    """The ledger is read again inside each migration's transaction: no process applies a
    migration another one applied meanwhile ("duplicate column", "already exists")."""
    import multiprocessing

    path = str(tmp_path / "new.db")
    with multiprocessing.get_context("spawn").Pool(6) as pool:
        outcomes = pool.map(_open_and_close, [path] * 6)
    assert outcomes == ["ok"] * 6
    store = SQLiteStore(path)
    try:
        from archivist.store.migrations import MIGRATIONS

        assert store.migrations() == [m.name for m in MIGRATIONS]  # each once, in order
    finally:
        store.close()
