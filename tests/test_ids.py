"""An id names one thing forever; every deletion leaves an audit line; odd ids and odd
strings are one-line errors.

The store tests run on both backends (SQLite file, PostgreSQL) through the Store
interface. They store no vectors: ids, not vector search, are what they test (and
it keeps them to plain SQL on either engine). The service, mem0 and CLI tests run on
real SQLite files with the FakeEmbedder.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from archivist.errors import InputError, NotFound
from archivist.mem0 import Memory
from archivist.model import Claim, Conversation, Decision, Episode
from archivist.service import MemoryService
from archivist.store.base import IndexedClaim, IndexedEpisode
from archivist.store.dialect import to_format_style
from archivist.store.migrations import MIGRATIONS, REKEY_MARGIN, Rekey, rekey_sql
from archivist.store.sql import Filters
from archivist.store.sqlite import SQLiteStore
from archivist.testing import FakeEmbedder
from archivist.write.index_text import claim_search_text, episode_search_text
from conftest import T0, ana_bob, ana_lee, cara_dan, indexed, make_conversation
from test_cli import run_main

MODEL = "fake:64"
REKEYED = [s.table for m in MIGRATIONS for s in m.statements if isinstance(s, Rekey)]


# -- helpers: the Store interface alone, without vectors ---------------------------------


def put(store, conv: Conversation) -> None:
    rows, _ = indexed(conv, FakeEmbedder())
    store.add_conversation(conv, rows, MODEL, {})


def extract(store, conv: Conversation, session: int) -> list[int]:
    """Save one episode and one claim per message of a session, as extraction would."""
    msgs = [m for m in conv.messages if m.session == session]
    ep = Episode(conv.id, session, tuple(m.id for m in msgs), msgs[0].timestamp, msgs[-1].timestamp)
    claims = [
        Claim(
            text=f"{m.speaker} said {m.text}",
            speaker=m.speaker,
            subject=m.speaker,
            conversation=conv.id,
            evidence=(m.id,),
            said_at=m.timestamp,
        )
        for m in msgs
    ]
    return store.save_extraction(
        conv.id,
        session,
        [IndexedEpisode(ep, episode_search_text(ep), f"e{session}")],
        [IndexedClaim(c, 0, claim_search_text(c), f"c{i}") for i, c in enumerate(claims)],
        MODEL,
        {},
        n_messages=len(msgs),
        method="heuristic",
    )


def rowids(store, conversation: str) -> dict[str, int]:
    return {m.id: r for r, m in store.conversation_messages(conversation)}


@pytest.fixture
def store(store_factory):
    return store_factory()


# -- ids are never reused, on both backends ----------------------------------------------


def test_the_newest_claim_deleted_its_id_names_no_other_claim(store) -> None:
    put(store, ana_lee())
    first = extract(store, ana_lee(), 1)
    newest = max(first)
    assert store.forget_claims([newest]) == 1
    again = extract(store, ana_lee(), 2)
    assert min(again) > newest
    assert store.claims_by_id([newest]) == {}
    assert store.deleted_claims([newest])[newest].id == newest


def test_a_forgotten_messages_rowid_does_not_come_back(store) -> None:
    put(store, ana_lee())
    before = rowids(store, "ana-lee")
    newest = max(before, key=before.__getitem__)
    assert store.delete_message("ana-lee", newest) == 1
    put(store, cara_dan())
    assert min(rowids(store, "cara-dan").values()) > before[newest]
    assert store.messages_by_rowid([before[newest]]) == {}


def test_a_rebuild_gives_no_old_claim_id_to_another_claim(store) -> None:
    put(store, ana_lee())
    old = extract(store, ana_lee(), 1) + extract(store, ana_lee(), 2)
    old_episodes = [e.id for e in store.list_episodes("ana-lee")]
    store.clear_derived()
    new = extract(store, ana_lee(), 1) + extract(store, ana_lee(), 2)
    assert len(new) == len(old) and min(new) > max(old)
    assert store.claims_by_id(old) == {}
    episodes = [e.id for e in store.list_episodes("ana-lee")]
    assert len(episodes) == len(old_episodes) == 2 and min(episodes) > max(old_episodes)


def test_a_reset_does_not_restart_numbering(store) -> None:
    put(store, ana_lee())
    store.ensure_identities()
    claims = extract(store, ana_lee(), 1)
    decision = Decision("identity", "ana-lee/Ana", "ana-lee/Lee", "SEPARATE", "two people")
    did = store.add_decision(decision)
    messages, persons = rowids(store, "ana-lee"), {p.id for p in store.persons()}
    store.reset()
    put(store, ana_lee())
    store.ensure_identities()
    assert min(rowids(store, "ana-lee").values()) > max(messages.values())
    assert min(extract(store, ana_lee(), 1)) > max(claims)
    assert store.add_decision(decision) > did
    again = {p.id for p in store.persons()}
    assert len(again) == len(persons) == 2 and not again & persons  # person ids retired


def test_a_person_id_once_deleted_names_no_new_person(store) -> None:
    put(store, ana_bob())
    store.ensure_identities()
    bob = next(p.id for p in store.persons() if p.name == "Bob")
    assert store.delete_conversation("ana-bob") == 3
    store.ensure_identities()
    assert store.persons() == []
    put(store, make_conversation("ana-bob", [[("Bob", "A different Bob, new chat.")]]))
    store.ensure_identities()
    (new_bob,) = [p for p in store.persons() if p.name == "Bob"]
    assert new_bob.id != bob and new_bob.id.startswith("p-")


# -- the audit log and what is kept of deleted claims -------------------------------------


def test_every_deletion_leaves_one_audit_line_without_the_text(store) -> None:
    for conv in (ana_lee(), ana_bob(), cara_dan()):
        put(store, conv)
    lee = extract(store, ana_lee(), 1) + extract(store, ana_lee(), 2)
    extract(store, ana_bob(), 1)
    assert store.audit_log() == []

    store.forget_claims([lee[0]], actor="cli")
    store.delete_message("ana-lee", "D2:3", actor="mcp")
    store.delete_conversation("ana-bob", actor="browser")
    store.delete_person("Cara", actor="rest (127.0.0.1)")
    store.clear_derived("ana-lee", actor="python")
    store.forget_claims([999_999], actor="cli")  # nothing went: no line
    store.reset(actor="mem0")

    log = store.audit_log()
    assert [(e.kind, e.actor, e.messages, e.claims) for e in reversed(log)] == [
        ("claim", "cli", 0, 1),
        ("message", "mcp", 1, 3),  # the session's episode went, and its claims with it
        ("conversation", "browser", 3, 3),
        ("person", "rest (127.0.0.1)", 1, 0),
        ("rebuild", "python", 0, 3),
        ("reset", "mem0", 7, 0),
    ]
    assert [e.scope for e in reversed(log)][:4] == [
        {"claims": [lee[0]]},
        {"conversation": "ana-lee", "message": "D2:3"},
        {"conversation": "ana-bob"},
        {"person": "Cara", "received": False},
    ]
    assert [e.id for e in log] == sorted((e.id for e in log), reverse=True)
    assert [e.id for e in store.audit_log(2)] == [e.id for e in log[:2]]
    dumped = json.dumps([e.to_dict() for e in log])
    for conv in (ana_lee(), ana_bob(), cara_dan()):
        assert not any(m.text in dumped for m in conv.messages)
    with pytest.raises(InputError):
        store.audit_log(0)


def test_an_audit_line_can_be_appended_and_needs_a_storable_actor(store) -> None:
    entry = store.append_audit("importer", "conversation", {"conversation": "c"}, messages=4)
    assert (entry.actor, entry.kind, entry.scope, entry.messages) == (
        "importer",
        "conversation",
        {"conversation": "c"},
        4,
    )
    assert store.audit_log() == [entry]
    for actor in ("", "  ", "a\ud800", "x" * 201, 7):
        with pytest.raises(InputError):
            store.append_audit(actor, "claim")  # type: ignore[arg-type]
    with pytest.raises(InputError):
        store.append_audit("cli", "everything")
    assert store.audit_log() == [entry]


def test_a_deleted_claim_keeps_its_ids_and_times_and_its_corrections(store) -> None:
    put(store, ana_lee())
    ids = extract(store, ana_lee(), 1)
    new = store.correct_claim(
        ids[0], "Ana adopted Pixel in May.", "ana adopted pixel", "h", MODEL, {}
    )
    assert new is not None
    assert store.forget_claims([new]) == 2  # the whole correction chain
    chain = store.deleted_claim_chain(ids[0])
    assert [c.id for c in chain] == [ids[0], new] == [c.id for c in store.deleted_claim_chain(new)]
    assert chain[1].method == "user-correction" and chain[0].replaced_by == new
    assert chain[0].deleted_at >= chain[0].created_at
    store.delete_conversation("ana-lee")  # the rest go by cascade: kept all the same
    assert set(store.deleted_claims(ids)) == set(ids)
    assert store.deleted_claim_chain(ids[1])[0].id == ids[1]
    assert store.deleted_claim_chain(999_999) == [] and store.deleted_claims([2**70]) == {}


# -- an old store keeps its ids and gains AUTOINCREMENT ----------------------------------

_OLD = [m for m in MIGRATIONS if m.name <= "0009_message_vector_log"]


def _old_rows(run: Callable[[str, tuple], list]) -> None:
    """Three messages and three claims (with evidence) in a store of the old schema; the
    newest of each deleted, as a user of the old code would have."""
    run("INSERT INTO conversations(id, created_at) VALUES ('c', ?)", (T0.isoformat(),))
    for i in (1, 2, 3):
        run(
            "INSERT INTO messages(conversation, msg_id, session, seq, speaker, speaker_key, "
            "role, text, ts, ts_epoch, hash, search_text, scope, embed_hash) "
            "VALUES ('c', ?, 1, ?, 'Ana', 'ana', 'user', ?, ?, ?, ?, ?, 'c', ?)",
            (f"m{i}", i, f"word{i} here", T0.isoformat(), T0.timestamp(), f"h{i}", f"word{i}", "e"),
        )
        run("INSERT INTO message_people(msg_rowid, person) VALUES (?, 'ana')", (i,))
        run(
            "INSERT INTO claims(conversation, text, speaker, speaker_key, subject, subject_key, "
            "kind, source, importance, salience, said_at, said_epoch, evidence, n_evidence, "
            "method, search_text, scope, embed_hash, created_at) VALUES ('c', ?, 'Ana', 'ana', "
            "'Ana', 'ana', 'fact', 'said', 1, 1, ?, ?, ?, 1, 'heuristic', ?, 'c', 'e', ?)",
            (f"claim {i}", T0.isoformat(), T0.timestamp(), json.dumps([f"m{i}"]), "w", "t"),
        )
        run("INSERT INTO claim_evidence(claim_id, msg_rowid) VALUES (?, ?)", (i, i))
    run("DELETE FROM claims WHERE id = 3", ())
    run("DELETE FROM messages WHERE rowid = 3", ())


def _old_sqlite(path: Path) -> None:
    con = sqlite3.connect(str(path), isolation_level=None)
    con.execute("PRAGMA foreign_keys=ON")
    con.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for m in _OLD:
        for stmt in m.render("sqlite"):
            con.execute(stmt)  # type: ignore[arg-type]
        con.execute("INSERT INTO _migrations VALUES (?, ?)", (m.name, T0.isoformat()))
    _old_rows(lambda sql, p: con.execute(sql, p).fetchall())
    con.close()


def _check_old_store_migrated(store) -> None:
    assert store.migrations()[-5:] == [
        "0014_claim_facet",
        "0015_claim_edit_fields",
        "0016_claims_closed_by",
        "0017_pg_message_vector_log",
        "0018_pg_term_rows",
    ]
    assert sorted(rowids(store, "c").items()) == [("m1", 1), ("m2", 2)]
    assert sorted(store.claims_by_id([1, 2, 3])) == [1, 2]
    assert store.claim_evidence_rowids([1, 2]) == {1: [1], 2: [2]}  # children kept
    assert [r for r, _ in store.keyword_search("word2", Filters(), 5)] == [2]
    put(store, make_conversation("d", [[("Lee", "A new message.")]]))
    assert min(rowids(store, "d").values()) > 3  # above the message deleted before
    store.forget_claims([2])
    assert store.delete_conversation("c") == 2  # cascades still reach the children
    assert store.claims_by_id([1]) == {} and store.claim_evidence_rowids([1]) == {1: []}


def test_an_old_sqlite_store_keeps_its_ids_and_gets_autoincrement(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_sqlite(path)
    store = SQLiteStore(path)
    try:
        schema = dict(store._db.execute("SELECT name, sql FROM sqlite_master").fetchall())
        assert all("AUTOINCREMENT" in schema[t] for t in REKEYED)
        assert "AUTOINCREMENT" not in schema["vectors"]  # the internal cache keeps its key
        assert {"messages_ai", "messages_vec_ad", "claims_ad", "claims_conv"} <= set(schema)
        assert store._db.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert store._db.execute("PRAGMA foreign_key_check").fetchall() == []
        seq = dict(store._db.execute("SELECT name, seq FROM sqlite_sequence").fetchall())
        assert seq["claims"] == 2 + REKEY_MARGIN  # claim 3 left no trace: a margin over it
        assert seq["messages"] >= 3  # message 3 did (vector_fills): the sequence is past it
        put(store, ana_lee())
        assert min(extract(store, ana_lee(), 1)) > 3
        _check_old_store_migrated(store)
    finally:
        store.close()
    again = SQLiteStore(path)  # reopening rebuilds nothing
    try:
        assert again.migrate() == []
    finally:
        again.close()


def test_an_old_postgres_store_keeps_its_ids(pg_dsn: str) -> None:
    import psycopg

    from archivist.store.postgres import PostgresStore

    schema = f"old{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{schema}"')
        con.execute(f'SET search_path TO "{schema}", public')
        con.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        for m in _OLD:
            for stmt in m.render("postgres"):
                con.execute(stmt)  # type: ignore[arg-type]
            con.execute("INSERT INTO _migrations VALUES (%s, %s)", (m.name, T0.isoformat()))
        _old_rows(lambda sql, p: con.execute(to_format_style(sql), p or None))  # type: ignore[arg-type]
    store = PostgresStore(pg_dsn, schema=schema)
    try:
        _check_old_store_migrated(store)
    finally:
        store.close()
        with psycopg.connect(pg_dsn, autocommit=True) as con:
            con.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_every_integer_key_of_a_new_sqlite_store_is_autoincrement(tmp_path: Path) -> None:
    """New tables take ``{serial}``; the vector cache alone hands out plain keys (internal)."""
    store = SQLiteStore(tmp_path / "new.db")
    try:
        keyed = dict(
            store._db.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                "AND sql LIKE '%INTEGER PRIMARY KEY%'"
            ).fetchall()
        )
        ours = {name: sql for name, sql in keyed.items() if "_fts_" not in name}  # FTS5's own
        plain = {name for name, sql in ours.items() if "AUTOINCREMENT" not in sql}
        # deleted_claims is keyed by the claim ids it keeps: none is handed out there
        assert plain == {"vectors", "deleted_claims"} and set(REKEYED) < set(ours)
    finally:
        store.close()


def test_rekey_sql_rebuilds_from_the_stored_ddl_and_only_once() -> None:
    schema = [
        ("table", "t", "CREATE TABLE t (\n  id INTEGER PRIMARY KEY,\n  x TEXT\n, y INTEGER)"),
        ("index", "t_x", "CREATE INDEX t_x ON t (x)"),
        ("index", "sqlite_autoindex_t_1", None),
        ("trigger", "t_ad", "CREATE TRIGGER t_ad AFTER DELETE ON t BEGIN SELECT 1; END"),
    ]
    sql = rekey_sql(Rekey("t", "id", ("(SELECT max(a) FROM u)",)), schema)  # type: ignore[arg-type]
    assert sql[:4] == [
        "CREATE TABLE t__rekeyed (\n  id INTEGER PRIMARY KEY AUTOINCREMENT,"
        "\n  x TEXT\n, y INTEGER)",
        "INSERT INTO t__rekeyed SELECT * FROM t",
        "DROP TABLE t",
        "ALTER TABLE t__rekeyed RENAME TO t",
    ]
    assert sql[4:6] == [schema[1][2], schema[3][2]]
    assert "(SELECT max(a) FROM u)" in sql[-1] and f"max(id) + {REKEY_MARGIN}" in sql[-1]
    done = [("table", "t", 'CREATE TABLE "t" (id INTEGER PRIMARY KEY AUTOINCREMENT)')]
    assert rekey_sql(Rekey("t", "id"), done) == []  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        rekey_sql(Rekey("t", "key"), schema)  # type: ignore[arg-type]


# -- the service and the mem0 facade ------------------------------------------------------


@pytest.fixture
def m0(tmp_path: Path):
    memory = Memory(MemoryService(tmp_path / "m0.db", embedder=FakeEmbedder()))
    yield memory
    memory.memory.close()


def test_mem0_deleting_the_newest_memory_frees_no_id(m0: Memory) -> None:
    (a,) = m0.add("I adopted a cat called Pixel.", user_id="ana")["results"]
    (b,) = m0.add("I work as a nurse at the city hospital.", user_id="ana")["results"]
    m0.delete(b["id"])
    (c,) = m0.add("I moved to Lisbon last spring.", user_id="ana")["results"]
    assert int(c["id"]) > int(b["id"]) > int(a["id"])
    assert m0.get(b["id"]) is None and m0.get(c["id"])["memory"].endswith("Lisbon last spring.")
    assert m0.delete_all(run_id="never-stored") == {"message": "Memories deleted successfully!"}


def test_a_deleted_memory_answers_none_notfound_and_a_history_ending_in_delete(
    m0: Memory,
) -> None:
    (a,) = m0.add("I live in Paris.", user_id="ana")["results"]
    m0.update(a["id"], "ana lives in Lyon.")
    newer = m0.get(a["id"])["id"]
    live = m0.history(a["id"])
    m0.delete(a["id"])
    for held in (a["id"], newer, int(newer)):
        assert m0.get(held) is None
        with pytest.raises(NotFound):
            m0.update(held, "anything")
        with pytest.raises(NotFound):
            m0.delete(held)
        history = m0.history(held)
        assert [h["event"] for h in history] == ["ADD", "UPDATE", "DELETE"]
        assert [h["memory_id"] for h in history] == [a["id"], newer, newer]
        assert all(h["old_memory"] is None and h["new_memory"] is None for h in history)
        assert [h["is_deleted"] for h in history] == [False, False, True]
        assert history[0]["created_at"] == live[0]["created_at"]  # when it was said
        assert history[1]["created_at"][:16] == live[1]["created_at"][:16]  # corrected then
    entry = m0.memory.audit_log(1)[0]
    assert (entry.actor, entry.kind, entry.claims) == ("mem0", "claim", 2)
    with pytest.raises(NotFound):
        m0.history("424242")  # never stored


@pytest.mark.parametrize(
    "held", [2**63, "9223372036854775808", 2**64, -1, "-1", 0, "0", "+0", "9" * 5000]
)
def test_ids_no_memory_can_have_are_not_found(m0: Memory, held) -> None:
    assert m0.get(held) is None
    for call in (m0.delete, m0.history, lambda i: m0.update(i, "x")):
        with pytest.raises(NotFound) as e:
            call(held)
        assert "\n" not in str(e.value) and len(str(e.value)) < 80
    with pytest.raises(NotFound):
        m0.memory.get(held)
    with pytest.raises(NotFound):
        m0.memory.forget_claim(held)


@pytest.mark.parametrize("held", ["abc", "1.5", "²", "", "1e3", 1.5, True, None, [1]])
def test_ids_that_are_not_integers_are_input_errors(m0: Memory, held) -> None:
    for call in (m0.get, m0.delete, m0.history):
        with pytest.raises(InputError):
            call(held)


def test_claim_history_and_claims_by_id_of_huge_ids_find_nothing(m0: Memory) -> None:
    assert m0.memory.store.claims_by_id([2**63, -(2**70)]) == {}
    with pytest.raises(NotFound):
        m0.memory.claim_history(2**63)


@pytest.mark.parametrize("text", ["a" * 255, "a" * 300, "é" * 5000, "word " * 1000])
def test_a_long_sentence_is_never_taken_for_a_file_name(m0: Memory, text: str) -> None:
    with pytest.raises(InputError, match="user_id"):
        m0.add(text)
    with pytest.raises(InputError, match="user_id"):
        m0.memory.add(text)
    assert m0.memory.stats()["messages"] == 0
    m0.add(text, user_id="ana")
    assert m0.memory.stats()["messages"] == 1


SURROGATE = "bad \ud800 text"


def _facade_calls(m: Memory) -> dict[str, Callable[[], object]]:
    return {
        "add user_id": lambda: m.add("hello", user_id=SURROGATE),
        "add agent_id": lambda: m.add("hello", agent_id=SURROGATE),
        "add run_id": lambda: m.add("hello", user_id="ana", run_id=SURROGATE),
        "add text": lambda: m.add(SURROGATE, user_id="ana"),
        "search query": lambda: m.search(SURROGATE, user_id="ana"),
        "search user": lambda: m.search("cat", user_id=SURROGATE),
        "get_all": lambda: m.get_all(user_id=SURROGATE),
        "get": lambda: m.get(SURROGATE),
        "history": lambda: m.history(SURROGATE),
        "delete": lambda: m.delete(SURROGATE),
        "update id": lambda: m.update(SURROGATE, "x"),
        "update text": lambda: m.update("1", SURROGATE),
        "delete_all user": lambda: m.delete_all(user_id=SURROGATE),
        "delete_all run": lambda: m.delete_all(run_id=SURROGATE),
        "service add conversation": lambda: m.memory.add("hi", conversation=SURROGATE),
        "service get conversation": lambda: m.memory.get(SURROGATE, "m1"),
        "service get message": lambda: m.memory.get("user:ana", SURROGATE),
        "service timeline owner": lambda: m.memory.timeline("Pixel", owner=SURROGATE),
        "service timeline entity": lambda: m.memory.timeline(SURROGATE),
        "service forget_message": lambda: m.memory.forget_message(SURROGATE, "m1"),
        "service delete person": lambda: m.memory.delete(person=SURROGATE),
        "service delete conversation": lambda: m.memory.delete(conversation=SURROGATE),
        "store keyword search": lambda: m.memory.search(SURROGATE),
    }


@pytest.mark.parametrize("name", list(_facade_calls(None)))  # type: ignore[arg-type]
def test_a_lone_surrogate_anywhere_is_an_input_error(m0: Memory, name: str) -> None:
    (a,) = m0.add("I adopted a cat called Pixel.", user_id="ana")["results"]
    before = m0.memory.stats()["messages"]
    with pytest.raises(InputError) as e:
        _facade_calls(m0)[name]()
    assert "\n" not in str(e.value)
    assert m0.memory.stats()["messages"] == before and m0.get(a["id"]) is not None


def test_service_deletions_name_their_actor_and_refuse_a_bad_one(tmp_path: Path) -> None:
    with MemoryService(tmp_path / "m.db", embedder=FakeEmbedder()) as mem:
        mem.add([ana_lee(), ana_bob(), cara_dan()])
        claim = mem.claims(conversation="ana-lee")[0].id
        for bad in ("", "x\ud800", 3):
            with pytest.raises(InputError):
                mem.delete(conversation="ana-bob", actor=bad)  # type: ignore[arg-type]
        assert "ana-bob" in {c["id"] for c in mem.conversations()}
        mem.delete(conversation="ana-bob")
        with pytest.raises(NotFound):  # deleted: the id answers NotFound, and no line is added
            mem.delete(conversation="ana-bob")
        mem.delete(claim, actor="tester")
        mem.forget_message("ana-lee", "D1:2", actor="ui")
        mem.delete(person="Cara", actor="mcp")
        mem.rebuild(["ana-lee"], actor="cli")
        mem.reset(actor="rest (10.0.0.1)")
        assert [(e.actor, e.kind) for e in reversed(mem.audit_log())] == [
            ("python", "conversation"),
            ("tester", "claim"),
            ("ui", "message"),
            ("mcp", "person"),
            ("cli", "rebuild"),
            ("rest (10.0.0.1)", "reset"),
        ]


def test_forgetting_a_message_brings_no_claim_id_back(tmp_path: Path) -> None:
    with MemoryService(tmp_path / "m.db", embedder=FakeEmbedder()) as mem:
        mem.add(ana_lee())
        before = {c.id for c in mem.claims(limit=1000)}
        mem.forget_message("ana-lee", "D2:3")
        after = {c.id for c in mem.claims(limit=1000)}
        assert after - before and min(after - before) > max(before)


def test_the_cli_names_itself_and_audit_lists_the_lines(capsys, tmp_path: Path) -> None:
    path = tmp_path / "cli.db"
    with MemoryService(path, embedder=FakeEmbedder()) as mem:
        mem.add([ana_lee(), ana_bob()])
        claim = mem.claims(conversation="ana-lee")[0].id
    base = ("--db", str(path), "--embedder", "fake")
    code, out, _ = run_main(capsys, *base, "audit")
    assert code == 0 and out.strip() == "no deletions recorded"
    assert run_main(capsys, *base, "forget", "--conversation", "ana-bob")[0] == 0
    assert run_main(capsys, *base, "forget", "--claim", str(claim))[0] == 0
    assert run_main(capsys, *base, "forget", "--message", "ana-lee:D1:2")[0] == 0
    assert run_main(capsys, *base, "rebuild")[0] == 0
    assert run_main(capsys, *base, "reset", "--yes")[0] == 0
    code, out, _ = run_main(capsys, *base, "audit", "--json")
    lines = json.loads(out)
    assert [(x["actor"], x["kind"]) for x in reversed(lines)] == [
        ("cli", "conversation"),
        ("cli", "claim"),
        ("cli", "message"),
        ("cli", "rebuild"),
        ("cli", "reset"),
    ]
    assert lines[-1]["scope"] == {"conversation": "ana-bob"} and lines[-1]["messages"] == 3
    code, out, _ = run_main(capsys, *base, "audit", "--limit", "1")
    assert code == 0 and len(out.strip().splitlines()) == 1 and "cli: reset" in out
    code, _, err = run_main(capsys, *base, "audit", "--limit", "0")
    assert code == 2 and "--limit" in err


def test_browse_claims_filters_counts_and_pages_on_both_backends(store) -> None:
    conv = make_conversation(
        "b", [[("Ana", "I drink 100% oat milk."), ("Lee", "Oat milk is fine."), ("Ana", "Bye.")]]
    )
    put(store, conv)
    extract(store, conv, 1)
    page, total = store.browse_claims(Filters(), limit=2)
    assert total == 3 and len(page) == 2
    assert page[0].said_at >= page[1].said_at  # newest first
    oat, n = store.browse_claims(Filters(person="Ana"), text="OAT")
    assert n == 1 and "oat milk" in oat[0].text
    assert store.browse_claims(Filters(), text="100%")[1] == 1  # % is a character, not a wildcard
    assert store.browse_claims(Filters(), text="1_0")[1] == 0
    assert store.browse_claims(Filters(), kind="event")[1] == 0
    assert store.browse_claims(Filters(), current=False)[1] == 0
    assert store.browse_claims(Filters(), current=True, limit=1, offset=2)[0][0].speaker == "Ana"
