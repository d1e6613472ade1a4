"""The SQLite store's message vectors in a side file (store/vecfile.py) and its
quantized index (store/ann.py): reopened without reading the BLOBs again, rebuilt
when deleted or stale, never returning a deleted message, and the quantized path
agreeing with exact search, filters included. Real SQLite files, FakeEmbedder vectors."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from archivist.store import vecfile
from archivist.store.sql import Filters
from archivist.store.sqlite import SQLiteStore
from archivist.testing import FakeEmbedder
from conftest import T0, add_direct, make_conversation

ALL = Filters()
WORDS = (
    "garden paint concert hiking guitar violin piano marathon bakery recipe museum river"
).split()


def chat(cid: str, n: int, people=("Ana", "Lee"), seed: int = 0):
    """A conversation of ``n`` messages in sessions of 20, words drawn by ``seed``."""
    rng = np.random.default_rng(seed)
    turns = [
        (people[i % 2], " ".join(rng.choice(WORDS, 5)) + f" number {seed}-{i}") for i in range(n)
    ]
    return make_conversation(cid, [turns[i : i + 20] for i in range(0, n, 20)], people=people)


@pytest.fixture
def emb() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def filled(tmp_path: Path, emb: FakeEmbedder) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "v.db")
    s.ann_auto = False
    for i, people in enumerate([("Ana", "Lee"), ("Ana", "Bob"), ("Cara", "Dan"), ("Eve", "Lee")]):
        add_direct(s, chat(f"c{i}", 60, people, seed=i), emb)
    yield s
    s.close()


def stored(path: Path) -> dict[int, np.ndarray]:
    """rowid -> vector, read straight from the rows (the source of truth)."""
    with sqlite3.connect(path) as c:
        rows = c.execute(
            "SELECT m.rowid, v.vec FROM messages m JOIN vectors v ON v.id = m.vec_id"
        ).fetchall()
    return {r: np.frombuffer(b, dtype="<f4") for r, b in rows}


def exact(path: Path, query: np.ndarray, k: int, keep=None) -> list[int]:
    vecs = {r: v for r, v in stored(path).items() if keep is None or r in keep}
    ranked = sorted(vecs, key=lambda r: -float(vecs[r] @ query))
    return ranked[:k]


def search(s: SQLiteStore, emb: FakeEmbedder, text: str, k: int = 10, f: Filters = ALL):
    return [r for r, _ in s.vector_search(emb.name, emb.embed_batch([text])[0], f, k)]


def test_side_file_mirrors_the_rows_and_search_is_exact(filled: SQLiteStore, emb) -> None:
    got = search(filled, emb, "violin concert by the river")
    assert got == exact(filled.path, emb.embed_batch(["violin concert by the river"])[0], 10)
    info = filled.refresh_vector_index()
    assert info["rows"] == len(stored(filled.path)) == 240
    assert (filled.path.parent / "v.db.vectors" / "state.json").exists()


def test_a_reopened_store_maps_the_file_without_reading_the_blobs(
    filled: SQLiteStore, emb, monkeypatch
) -> None:
    before = search(filled, emb, "piano bakery")
    filled.close()

    def no_reload(*a, **k):
        raise AssertionError("the side file was read from SQLite again")

    monkeypatch.setattr(vecfile.VectorFile, "_catch_up", no_reload)
    again = SQLiteStore(filled.path)
    try:
        assert search(again, emb, "piano bakery") == before
    finally:
        again.close()


def test_a_deleted_side_file_is_rebuilt(filled: SQLiteStore, emb) -> None:
    before = search(filled, emb, "marathon recipe")
    root = filled.path.parent / "v.db.vectors"
    for f in root.iterdir():
        f.unlink()
    root.rmdir()
    assert search(filled, emb, "marathon recipe") == before
    assert filled.refresh_vector_index()["rows"] == 240


@pytest.mark.parametrize("damage", ["garbage state", "short vectors", "state from the future"])
def test_a_damaged_or_foreign_side_file_is_rebuilt(filled: SQLiteStore, emb, damage) -> None:
    before = search(filled, emb, "guitar museum")
    root = filled.path.parent / "v.db.vectors"
    state = json.loads((root / "state.json").read_text())
    if damage == "garbage state":
        (root / "state.json").write_text("{not json")
    elif damage == "short vectors":
        (root / f"vecs-{state['gen']}.f32").write_bytes(b"\0" * 100)
    else:  # a store restored from a copy older than its side file
        state["seq"] += 5
        (root / "state.json").write_text(json.dumps(state))
    again = SQLiteStore(filled.path)  # a process that has not mapped it yet
    try:
        assert search(again, emb, "guitar museum") == before
    finally:
        again.close()


def test_a_side_file_left_beside_another_database_is_not_trusted(tmp_path: Path, emb) -> None:
    """Two stores with the same shape (same rowids, no deletes): only the store id tells
    their side files apart."""
    a, b = SQLiteStore(tmp_path / "a.db"), SQLiteStore(tmp_path / "b.db")
    try:
        add_direct(a, chat("x", 40, seed=1), emb)
        add_direct(b, chat("x", 40, seed=2), emb)
        search(a, emb, "map a")
    finally:
        a.close()
        b.close()
    (tmp_path / "b.db.vectors").mkdir()
    for f in (tmp_path / "a.db.vectors").iterdir():
        (tmp_path / "b.db.vectors" / f.name).write_bytes(f.read_bytes())
    b = SQLiteStore(tmp_path / "b.db")
    try:
        q = emb.embed_batch(["number 2-3"])[0]
        assert search(b, emb, "number 2-3", 10) == exact(b.path, q, 10)
    finally:
        b.close()


def test_rows_written_behind_the_side_files_back_are_found(filled: SQLiteStore, emb) -> None:
    """A crash after SQLite committed but before the side file was touched: the next
    search catches up from the rows above its watermark."""
    search(filled, emb, "anything")
    other = SQLiteStore(filled.path)  # another process writes; nothing touches the side file
    other.ann_auto = False
    try:
        add_direct(other, chat("late", 20, seed=9), emb)
    finally:
        other.close()
    late = {r for r, _ in filled.conversation_messages("late")}
    text = filled.messages_by_rowid(late)[min(late)].text
    q = emb.embed_batch([text])[0]
    assert filled.vector_search(emb.name, q, ALL, 1)[0][0] in late
    assert filled.refresh_vector_index()["rows"] == 260


def test_deleted_messages_never_come_back(filled: SQLiteStore, emb) -> None:
    search(filled, emb, "warm the file")
    gone = {r for r, _ in filled.conversation_messages("c1")}
    other = SQLiteStore(filled.path)
    try:
        other.delete_conversation("c1")
    finally:
        other.close()
    for text in ("garden paint", "hiking guitar", "number 1-3"):
        assert not gone & set(search(filled, emb, text, 300))
    # The top rows deleted: the new messages, not the old, under rowids never used before.
    top = {r for r, _ in filled.conversation_messages("c3")}
    filled.delete_conversation("c3")
    add_direct(filled, chat("new", 60, ("Zed", "Yan"), seed=42), emb)
    new = {r for r, _ in filled.conversation_messages("new")}
    assert min(new) > max(top)  # a freed rowid is never handed out again (AUTOINCREMENT)
    q = emb.embed_batch(["number 42-7"])[0]
    assert search(filled, emb, "number 42-7", 20) == exact(filled.path, q, 20)
    assert len(search(filled, emb, "x", 1000)) == len(stored(filled.path)) == 180


def test_vectors_filled_after_the_message_are_found(tmp_path: Path, emb) -> None:
    s = SQLiteStore(tmp_path / "f.db")
    try:
        add_direct(s, chat("a", 40, seed=1), emb)
        conv = chat("b", 20, seed=2)
        from conftest import indexed

        rows, vectors = indexed(conv, emb)
        s.add_conversation(conv, rows, emb.name, {})  # stored before its vectors
        add_direct(s, chat("c", 20, seed=3), emb)
        search(s, emb, "cover b without vectors")
        assert s.fill_message_vectors("b", emb.name, vectors) == 20
        b = {r for r, _ in s.conversation_messages("b")}
        q = emb.embed_batch(["number 2-5"])[0]
        assert search(s, emb, "number 2-5", 20) == exact(s.path, q, 20)
        assert b & set(search(s, emb, "number 2-5", 5))
    finally:
        s.close()


def test_the_quantized_path_finds_what_exact_search_finds(filled: SQLiteStore, emb) -> None:
    queries = ["violin river", "number 2-17", "bakery museum piano", "Cara garden"]
    want = [search(filled, emb, t) for t in queries]
    filled.ann_min_rows = 1
    info = filled.refresh_vector_index(build_ann=True)
    assert info["ann_rows"] == 240
    assert filled._vectors._mapped().ann is not None
    assert [search(filled, emb, t) for t in queries] == want


def test_the_quantized_scan_honours_filters_and_deletes(filled: SQLiteStore, emb) -> None:
    filled.ann_min_rows = 1
    filled.exact_scope_rows = 0  # every filtered search scans the codes of the rows it admits
    filled.refresh_vector_index(build_ann=True)
    convs = {
        c["id"]: {r for r, _ in filled.conversation_messages(c["id"])}
        for c in filled.conversations()
    }
    cases = {
        "conversation": (Filters(conversation="c2"), convs["c2"]),
        "person": (Filters(person="Lee"), convs["c0"] | convs["c3"]),
        "speaker": (Filters(speaker="Ana"), None),
        "time": (Filters(until=T0 + timedelta(weeks=1)), None),
    }
    q = emb.embed_batch(["hiking concert number 3-4"])[0]
    for name, (f, allowed) in cases.items():
        allowed = allowed if allowed is not None else filled.filter_rowids(stored(filled.path), f)
        got = [r for r, _ in filled.vector_search(emb.name, q, f, 10)]
        assert set(got) <= allowed, name
        assert got == exact(filled.path, q, 10, allowed), name
    filled.delete_conversation("c3")  # tombstoned in the index's positions
    assert not convs["c3"] & {r for r, _ in filled.vector_search(emb.name, q, ALL, 240)}
    got = [r for r, _ in filled.vector_search(emb.name, q, Filters(person="Lee"), 10)]
    assert got == exact(filled.path, q, 10, convs["c0"])


def test_broad_filters_are_checked_on_the_scans_best_first(filled: SQLiteStore, emb, monkeypatch):
    """A filter admitting more rows than a scope is exact over is first tried on the
    unfiltered scan's best candidates (checked in SQL), then on more, then on every
    admitted row: whichever round answers, the answer is the exact one."""
    from archivist.store import sqlite as backend

    monkeypatch.setattr(backend, "ANN_FETCH", 20)  # 240 rows: make each round a part
    monkeypatch.setattr(backend, "BROAD_FETCH", 2)
    monkeypatch.setattr(backend, "BROAD_MAX", 120)
    filled.ann_min_rows = 1
    filled.exact_scope_rows = 0
    filled.refresh_vector_index(build_ann=True)
    add_direct(filled, chat("late", 40, ("Ana", "Lee"), seed=9), emb)  # rows after the index
    rows = stored(filled.path)
    cases = [
        Filters(until=T0 + timedelta(weeks=2)),  # most rows
        Filters(person="Lee"),  # about half
        Filters(conversation="c2"),  # a quarter of the indexed rows, none after
        Filters(speaker="Dan"),  # an eighth: too few pass, every admitted row is read
        Filters(conversation="late"),  # only rows after the index
    ]
    for text in ("violin river", "number 2-17", "number 9-3", "bakery museum piano"):
        q = emb.embed_batch([text])[0]
        for f in cases:
            allowed = filled.filter_rowids(rows, f)
            assert allowed
            got = [r for r, _ in filled.vector_search(emb.name, q, f, 2)]
            assert got == exact(filled.path, q, 2, allowed), (text, f)


def test_new_rows_after_the_index_are_searched_exactly(filled: SQLiteStore, emb) -> None:
    filled.ann_min_rows = 1
    filled.refresh_vector_index(build_ann=True)
    add_direct(filled, chat("after", 20, seed=77), emb)
    q = emb.embed_batch(["number 77-3"])[0]
    assert search(filled, emb, "number 77-3", 10) == exact(filled.path, q, 10)
    assert filled.refresh_vector_index()["ann_rows"] == 240
    assert filled.refresh_vector_index(build_ann=True)["ann_rows"] == 260  # rebuilt over every row
    assert search(filled, emb, "number 77-3", 10) == exact(filled.path, q, 10)


def test_an_index_of_a_kind_no_longer_read_is_ignored_and_replaced(
    filled: SQLiteStore, emb
) -> None:
    """A side file written by a version that kept an HNSW graph names an ``.usearch``
    file: searches stay exact until the quantized index replaces it."""
    filled.ann_min_rows = 1
    q = emb.embed_batch(["number 2-5"])[0]
    want = exact(filled.path, q, 10)
    filled.refresh_vector_index()
    root = filled._vectors.root
    state = json.loads((root / "state.json").read_text())
    (root / "ann-1-240.usearch").write_bytes(b"an old graph")
    state.update(ann_rows=240, ann_file="ann-1-240.usearch")
    (root / "state.json").write_text(json.dumps(state))
    assert filled._vectors._mapped().ann is None
    assert search(filled, emb, "number 2-5", 10) == want
    info = filled.refresh_vector_index(build_ann=True)
    assert (info["ann_rows"], info["ann_error"]) == (240, None)
    assert filled._vectors._mapped().state.ann_file.endswith(".sq8")
    assert not (root / "ann-1-240.usearch").exists()
    assert search(filled, emb, "number 2-5", 10) == want


def test_frequent_words_are_ranked_again_in_a_large_store(tmp_path: Path, emb, monkeypatch) -> None:
    """Above the size threshold a word in most messages is scored apart (bounded cost),
    not dropped: it still lifts the messages that hold it."""
    from archivist.store import sqlite as backend

    s = SQLiteStore(tmp_path / "k.db")
    try:
        turns = []
        for i in range(120):
            words = ["music"] if i % 3 == 0 else []
            words += ["garden"] if i % 5 == 0 else ["violin"] if i % 7 == 0 else ["river"]
            turns.append(("Ana" if i % 2 else "Lee", " ".join(words) + f" item{i}"))
        add_direct(s, make_conversation("k", [turns[i : i + 20] for i in range(0, 120, 20)]), emb)
        exact_bm25 = s.keyword_search("music garden", ALL, 5)
        monkeypatch.setattr(backend, "FREQUENT_TERMS_MIN_STORE", 50)
        s._term_df_size = 0
        assert "music" in s._frequent_terms(["music", "garden"])  # in a third of them
        got = s.keyword_search("music garden", ALL, 5)
        texts = s.messages_by_rowid([r for r, _ in got])
        both = {r for r, m in texts.items() if "music garden" in m.text}
        assert both == set(texts)  # 8 messages hold both words: they beat garden alone
        full = s.messages_by_rowid(r for r, _ in exact_bm25).values()
        assert all("music garden" in m.text for m in full)  # as bm25() over every term ranks
        alone = s.keyword_search("music", ALL, 10)
        assert len(alone) == 10
        assert all("music" in m.text for m in s.messages_by_rowid(r for r, _ in alone).values())
        lee = s.keyword_search("music garden", Filters(speaker="Lee"), 5)
        assert all(m.speaker == "Lee" for m in s.messages_by_rowid(r for r, _ in lee).values())
    finally:
        s.close()


def test_reset_and_a_pruned_log_rebuild_the_file(filled: SQLiteStore, emb, monkeypatch) -> None:
    from archivist.store import common

    search(filled, emb, "map it")
    filled.reset()
    assert search(filled, emb, "anything", 50) == []
    add_direct(filled, chat("again", 20, seed=5), emb)
    search(filled, emb, "catch up")
    monkeypatch.setattr(common, "FILLS_KEPT", 3)  # deletes log more than is kept
    other = SQLiteStore(filled.path)
    try:
        other.delete_conversation("again")
        add_direct(other, chat("later", 20, seed=6), emb)
    finally:
        other.close()
    later = {r for r, _ in filled.conversation_messages("later")}
    assert set(search(filled, emb, "number 6-1", 100)) == later


def test_a_damaged_index_is_searched_around_and_written_again(filled: SQLiteStore, emb) -> None:
    """A short or overwritten codes file is no error: searches are exact until a
    build replaces it."""
    filled.ann_min_rows = 1
    q = emb.embed_batch(["number 3-7"])[0]
    want = exact(filled.path, q, 10)
    filled.refresh_vector_index(build_ann=True)
    root = filled._vectors.root
    (path,) = root.glob("*.sq8")
    filled.close()  # a mapping of a file cut short under it faults (SIGBUS) when read
    path.write_bytes(path.read_bytes()[:100])
    again = SQLiteStore(filled.path)
    again.ann_auto = False
    again.ann_min_rows = 1
    try:
        assert search(again, emb, "number 3-7", 10) == want
        assert again._vectors._mapped().ann is None
        assert again.refresh_vector_index(build_ann=True)["ann_rows"] == 240
        assert again._vectors._mapped().ann is not None
        assert search(again, emb, "number 3-7", 10) == want
    finally:
        again.close()


def test_a_cached_codes_file_is_not_read_again(tmp_path: Path) -> None:
    """The page cache is asked (mincore) before a codes file is read end to end: a file
    just written is there. None only where the platform cannot say."""
    from archivist.store.ann import _cached_share

    f = tmp_path / "codes.sq8"
    f.write_bytes(b"x" * (1 << 20))
    share = _cached_share(f)
    assert share is None or share >= 0.9
    assert _cached_share(tmp_path / "missing.sq8") is None
