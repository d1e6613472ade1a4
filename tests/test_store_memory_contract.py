"""Reconciliation, people, consolidation and jobs persistence on both backends.

Two layers of checks, all against real databases (conftest's ``pg_dsn``: a
pgserver PostgreSQL 18 with pgvector in a temporary directory, or
ARCHIVIST_TEST_PG_DSN; the PostgreSQL cases skip, saying why, without one):

- the store body's groups called directly on each backend (conftest's
  ``store_factory``), rows seeded with the same ``?`` SQL the body itself uses,
  so one piece of SQL is checked on both engines;
- MemoryService scenarios on both backends, read back through the store's
  methods only (no SQL in asserts).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from archivist.config import Settings
from archivist.core import Core
from archivist.errors import ConfigError
from archivist.jobs import ROUND, JobRunner
from archivist.model import (
    ClaimEvent,
    Conflict,
    Decision,
    Entity,
    Scene,
    Summary,
)
from archivist.service import MemoryService
from archivist.store import sql as q
from archivist.store.base import ReconcileBatch
from archivist.store.people import person_id_for
from archivist.store.sql import Filters
from archivist.testing import FakeEmbedder, FixedClock
from archivist.write.archivist import HeuristicArchivist
from conftest import T0, make_conversation

try:
    import psycopg
except ImportError:  # the SQLite cases still run
    psycopg = None  # type: ignore[assignment]

# -- a fresh schema per test on conftest's pg_dsn server -------------------------------------


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[tuple[str, str]]:
    """(dsn, schema): an empty schema, dropped afterwards (pgvector lives in public)."""
    schema = f"mem_{uuid.uuid4().hex[:12]}"
    yield pg_dsn, schema
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def mini(store_factory):
    """A real store of either backend, empty: the body's groups are called on it directly."""
    return store_factory()


def _one(store, sql: str, params: Sequence = ()) -> tuple:
    with store._write() as db:
        return db.execute(sql, params).fetchone()


def seed(store, conv: str, turns: Sequence[tuple[str, str]]) -> None:
    """A conversation with its messages (speaker, role) and one episode."""
    with store._write() as db:
        db.execute(
            "INSERT INTO conversations(id, created_at) VALUES (?, ?)", (conv, T0.isoformat())
        )
        for i, (speaker, role) in enumerate(turns):
            db.execute(
                "INSERT INTO messages(conversation, msg_id, session, seq, speaker, speaker_key, "
                "role, text, ts, ts_epoch, hash, search_text, scope, embed_hash) "
                "VALUES (?, ?, 1, ?, ?, ?, ?, '', ?, ?, '', '', '', '')",
                (conv, f"m{i}", i, speaker, q.person_key(speaker), role, T0.isoformat(), 0.0),
            )
        db.execute(
            "INSERT INTO episodes(conversation, session, message_ids, n_messages, start_ts, "
            "end_ts, method, search_text, scope, created_at) "
            "VALUES (?, 1, '[]', 0, ?, ?, 'heuristic', '', '', '')",
            (conv, T0.isoformat(), T0.isoformat()),
        )


def add_claim(store, conv: str, text: str, speaker: str, days: int, **kw: object) -> int:
    """One extracted claim said ``days`` after T0 (subject: the speaker, first hand)."""
    said = T0 + timedelta(days=days)
    subject = str(kw.get("subject", speaker))
    row = _one(
        store,
        "INSERT INTO claims(conversation, episode_id, text, speaker, speaker_key, subject, "
        "subject_key, kind, source, importance, salience, said_at, said_epoch, valid_from, "
        "evidence, n_evidence, method, search_text, scope, embed_hash, created_at) "
        "VALUES (?, (SELECT min(id) FROM episodes WHERE conversation = ?), "
        "?, ?, ?, ?, ?, ?, 'first_hand', 3, 3, ?, ?, ?, '[\"m1\"]', 1, 'heuristic', "
        "'', '', '', '') RETURNING id",
        (
            conv,
            conv,
            text,
            speaker,
            q.person_key(speaker),
            subject,
            q.person_key(subject),
            kw.get("kind", "fact"),
            said.isoformat(),
            said.timestamp(),
            said.isoformat(),
        ),
    )
    return int(row[0])


def entity(conv: str, owner: str, name: str, **kw: object) -> Entity:
    return Entity(
        conversation=conv,
        owner=owner,
        name=name,
        kind=str(kw.get("kind", "person")),
        aliases=tuple(kw.get("aliases", ())),  # type: ignore[arg-type]
        roles=("friend",),
        states=(("nurse", "2023-05-08"),),
        first_seen=T0,
        last_seen=T0 + timedelta(days=7),
        mentions=int(kw.get("mentions", 1)),  # type: ignore[call-overload]
        id=kw.get("id"),  # type: ignore[arg-type]
    )


# -- the schema ------------------------------------------------------------------------------


def test_both_schemas_have_the_same_tables_and_columns(pg_schema, tmp_path) -> None:
    """One migration list: every table SQLite has, PostgreSQL has, with the same columns
    in the same order (PostgreSQL adds only its generated search columns)."""
    from archivist.store.postgres import PostgresStore
    from archivist.store.sqlite import SQLiteStore

    lite, pg = SQLiteStore(tmp_path / "s.db"), PostgresStore(pg_schema[0], schema=pg_schema[1])
    try:
        assert lite.migrations() == pg.migrations()
        tables = [
            t
            for (t,) in lite._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '%fts%' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        assert len(tables) >= 25
        for table in tables:
            want = [r[1] for r in lite._db.execute(f"PRAGMA table_info({table})")]
            got = [
                c
                for (c,) in pg._db.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                    "AND table_schema = current_schema() ORDER BY ordinal_position",
                    (table,),
                )
            ]
            assert [c for c in got if c not in {"search_tsv", "doc_len"}] == want, table
    finally:
        lite.close()
        pg.close()


# -- the body alone: reconciliation ----------------------------------------------------------


def test_reconciliation_writes_reads_and_resets(mini) -> None:
    seed(mini, "c", [("Ana", "user"), ("Lee", "assistant")])
    old = add_claim(mini, "c", "Ana works as a nurse.", "Ana", 0)
    new = add_claim(mini, "c", "Ana was promoted to head nurse.", "Ana", 7)
    sam = add_claim(mini, "c", "Sam Lopez is Ana's friend.", "Ana", 1, subject="Sam Lopez")
    done, todo = mini.claims_to_reconcile("c")
    assert done == [] and [c.id for c in todo] == [old, sam, new]

    vec = np.linspace(-1, 1, 8, dtype=np.float32)
    closed = T0 + timedelta(days=6)
    conflict = Conflict(
        conversation="c",
        subject="Ana",
        attribute="job",
        old_claim=old,
        new_claim=new,
        old_value="nurse",
        new_value="head nurse",
        old_time=T0,
        new_time=T0 + timedelta(days=7),
        kind="evolution",
        resolution="newest_wins",
        method="heuristic",
    )
    event = ClaimEvent(claim=old, action="superseded", other=new, at=closed, detail={"why": "x"})
    batch = ReconcileBatch(
        conversation="c",
        updates={old: ("superseded", new, closed)},
        events=[event],
        conflicts=[conflict, conflict],  # the same pair twice is stored once
        entities=[
            (entity("c", "Ana", "Sam Lopez", aliases=("Sam",), mentions=2), (sam,), "s", "h1")
        ],
        reconciled=[old, new, sam],
        model="fake",
        vectors={"h1": vec},
    )
    mini.save_reconciliation(batch)

    assert mini.claims_to_reconcile("c") == ([], [])  # nothing pending: nothing read
    first = mini.claims_by_id([old])[old]
    assert (first.status, first.replaced_by, first.valid_to) == ("superseded", new, closed)
    (sam_e,) = mini.list_entities(name="sam")  # matched by alias, any casing
    assert sam_e.aliases == ("Sam",) and sam_e.states == (("nurse", "2023-05-08"),)
    assert sam_e.brief.startswith("Sam Lopez (person)") and sam_e.first_seen == T0
    assert mini.list_entities(owner="Lee") == [] and mini.list_entities("c", "ana") == [sam_e]
    assert [c.id for c in mini.entity_claims(sam_e.id)] == [sam]
    (ev,) = mini.claim_history(old)
    assert (ev.action, ev.other, ev.at, ev.detail) == ("superseded", new, closed, {"why": "x"})
    assert mini.claim_histories([old, sam, old]) == {old: [ev]}  # no events: absent
    (got,) = mini.list_conflicts(subject="ANA")
    assert got == Conflict(**{**conflict.__dict__, "id": got.id})
    stats = mini.reconcile_stats()
    assert stats == {
        "entities": 1,
        "entity_mentions": 1,
        "claims_by_status": {"superseded": 1, "current": 2},
        "conflicts": 1,
        "claims_unreconciled": 0,
    }
    (vid,) = _one(mini, "SELECT vec_id FROM entities")
    assert vid is not None

    # an update of a stored entity keeps its id and files one more claim
    more = add_claim(mini, "c", "Sam visited Ana.", "Ana", 3, subject="Sam")
    changed = entity("c", "Ana", "Sam Lopez", aliases=("Sam", "Sammy"), mentions=3, id=sam_e.id)
    mini.save_reconciliation(
        ReconcileBatch("c", {}, [], [], [(changed, (sam, more), "s", "h1")], [more], "fake")
    )
    (again,) = mini.list_entities(name="Sammy")
    assert again.id == sam_e.id and again.mentions == 3
    assert [c.id for c in mini.entity_claims(sam_e.id)] == [sam, more]

    mini.reset_reconciliation("c")
    done, todo = mini.claims_to_reconcile("c")
    assert done == [] and all(c.status == "current" and c.valid_to is None for c in todo)
    assert mini.list_entities() == [] and mini.list_conflicts() == []
    assert mini.claim_history(old) == []


def test_claim_and_episode_vectors(mini) -> None:
    seed(mini, "c", [("Ana", "user")])
    cid = add_claim(mini, "c", "Ana likes tea.", "Ana", 0)
    vec = np.array([0.25, 0.5, -0.75], dtype=np.float32)
    with mini._write() as db:
        mini._put_vectors(db, "fake", {"h": vec})
        mini._put_vectors(db, "fake", {"h": vec * 2})  # cached once, first kept
        db.execute("UPDATE claims SET vec_id = (SELECT id FROM vectors)")
        db.execute("UPDATE episodes SET vec_id = (SELECT id FROM vectors)")
    (eid,) = _one(mini, "SELECT id FROM episodes")
    assert np.array_equal(mini.claim_vectors("fake", [cid, cid])[cid], vec)
    assert np.array_equal(mini.episode_vectors("fake", [eid])[eid], vec)
    assert mini.claim_vectors("other", [cid]) == {} and mini.episode_vectors("fake", []) == {}


# -- the body alone: people ------------------------------------------------------------------


def test_identities_declarations_and_decisions(mini) -> None:
    seed(mini, "a", [("John", "user"), ("ana", "user"), ("Ana", "user"), ("Sys", "system")])
    seed(mini, "b", [("John", "user"), ("Bob", "user")])
    assert mini.ensure_identities() == 4 and mini.ensure_identities() == 0
    ja, jb = person_id_for("a", "John"), person_id_for("b", "John")
    persons = mini.persons()  # codepoint order like SQLite; an identity's first spelling
    assert [(p.name, len(p.identities)) for p in persons] == [
        ("Bob", 1),
        ("John", 1),
        ("John", 1),
        ("ana", 1),
    ]
    assert [p.id for p in persons][1:3] == sorted([ja, jb])
    assert mini.identity_message_counts()[("a", "ana")] == 2

    assert mini.declare_identity("a", "John", "u1") == []
    assert mini.declare_identity("b", "JOHN", "u1") == [("a", "John")]
    assert mini.declare_identity("b", "John", "u1") is None
    (u1,) = [p for p in mini.persons() if p.id == "u1"]
    assert u1.declared and u1.identities == (("a", "John"), ("b", "John"))
    assert mini.persons()[0].id == "u1"  # declared first
    assert mini.declared_identities() == [("a", "John", "u1", "u1"), ("b", "John", "u1", "u1")]
    assert ja not in {p.id for p in mini.persons()}  # emptied persons go

    bob = person_id_for("b", "Bob")
    d = Decision(kind="identity", a="a/ana", b="b/Bob", verdict="MERGE", reasons="same", method="m")
    did = mini.add_decision(d, fingerprint="fp1", merge=(bob, person_id_for("a", "ana")))
    assert did > 0
    (stored,) = mini.decisions("identity")
    assert stored.id == did and stored.steps == () and stored.created_at is not None
    assert mini.decision_keys("identity") == {("a/ana", "b/Bob", "fp1", "m")}
    assert mini.decisions("other") == []
    (merged,) = [p for p in mini.persons() if p.id == bob]
    assert set(merged.identities) == {("a", "ana"), ("b", "Bob")}
    with pytest.raises(ValueError):
        mini.merge_persons(bob, bob)

    _one(mini, "DELETE FROM messages WHERE conversation = 'b' AND speaker = 'Bob'")
    mini.ensure_identities()  # undeclared identity without messages goes
    assert set(next(p for p in mini.persons() if p.id == bob).identities) == {("a", "ana")}
    assert mini.save_key_info([(bob, "Ana: nurse.", "h"), ("nobody", "x", "h")]) == 1
    assert mini.person_key_info(bob) == "Ana: nurse." and mini.person_key_info("zz") is None
    assert [(p, h) for p, _, h, _ in mini.key_info_states("a")] == [(bob, "h"), ("u1", "")]


def test_self_claims_are_current_first_hand_about_oneself(mini) -> None:
    seed(mini, "c", [("Ana", "user")])
    mine = add_claim(mini, "c", "Ana lives in Lisbon.", "Ana", 1)
    add_claim(mini, "c", "Lee lives in Oslo.", "Ana", 2, subject="Lee")
    add_claim(mini, "c", "Ana thinks.", "Ana", 3, kind="opinion")
    gone = add_claim(mini, "c", "Ana lived in Porto.", "Ana", 0)
    _one(mini, "UPDATE claims SET status = 'superseded' WHERE id = ?", (gone,))
    assert [c.id for c in mini.self_claims([("c", "ana")])] == [mine]


# -- the body alone: jobs --------------------------------------------------------------------


def test_job_queue_idempotency_leases_and_failure(mini) -> None:
    first = mini.enqueue_job("reconcile", "c@1", {"conversation": "c"})
    assert first is not None and mini.enqueue_job("reconcile", "c@1", {}) is None
    second = mini.enqueue_job("scenes", "c@1", {"conversation": "c"})
    t = 1_700_000_000.123
    job = mini.take_job(t, 60, 3)
    assert (job.id, job.status, job.attempts, job.payload) == (
        first,
        "running",
        1,
        {"conversation": "c"},
    )
    assert mini.take_job(t + 1, 60, 3).id == second  # the first is leased
    assert mini.take_job(t + 2, 60, 3) is None
    again = mini.take_job(t + 60.5, 60, 3)  # the lease ran out (sub-second precision kept)
    assert again.id == first and again.attempts == 2
    mini.finish_job(first, "queued", {}, "RuntimeError: x", retry_at=t + 100)
    assert mini.take_job(t + 99, 600, 3).id == second  # first is backing off
    third = mini.take_job(t + 101, 60, 3)
    assert third.id == first and third.attempts == 3
    last = mini.take_job(t + 1000, 60, 3)  # first failed; second's third attempt
    assert last.id == second and last.attempts == 3
    assert mini.take_job(t + 2000, 60, 3) is None  # both last attempts expired: failed
    failed = mini.list_jobs("failed")
    assert {j.id for j in failed} == {first, second}
    assert all("lease expired" in j.error for j in failed)
    assert mini.job_counts() == {"failed": 2}
    mini.finish_job(first, "done", {"n": 1, "at": T0})
    assert mini.list_jobs(limit=1)[0].id == second  # newest first
    assert mini.list_jobs("done")[0].result == {"n": 1, "at": str(T0)}


def test_two_workers_never_take_the_same_job(pg_schema: tuple[str, str]) -> None:
    from archivist.store.postgres import PostgresStore

    mini = PostgresStore(pg_schema[0], schema=pg_schema[1])
    ids = {mini.enqueue_job("k", str(i), {}) for i in range(2)}
    other = PostgresStore(pg_schema[0], schema=pg_schema[1])
    try:
        t = 1_700_000_000.0
        with mini._write() as db:  # worker 1 holds its row, mid-transaction
            held = db.execute("SELECT id FROM jobs ORDER BY id LIMIT 1 FOR UPDATE").fetchone()
            taken = other.take_job(t, 60, 3)  # worker 2 skips it instead of waiting
            assert taken is not None and taken.id != held[0]
            assert other.take_job(t, 60, 3) is None
        assert mini.take_job(t, 60, 3).id == held[0] and {held[0], taken.id} == ids
    finally:
        other.close()
        mini.close()


# -- the body alone: consolidation output ----------------------------------------------------


def test_scenes_summaries_dossiers_context_and_usefulness(mini) -> None:
    seed(mini, "c", [("Ana", "user")])
    later = (T0 + timedelta(days=7)).isoformat()
    _one(
        mini,
        "INSERT INTO episodes(conversation, session, message_ids, n_messages, start_ts, end_ts, "
        "method, search_text, scope, created_at) "
        "VALUES ('c', 2, '[]', 0, ?, ?, 'heuristic', '', '', '')",
        (later, later),
    )
    e1, e2 = (r[0] for r in mini._db.execute("SELECT id FROM episodes ORDER BY id"))
    centroid = np.array([1.0, 0.0, -0.5], dtype=np.float32)
    scene = Scene("c", "Pottery", "Clay.", (e2, e1), T0, T0 + timedelta(days=7), "heuristic")
    (sid,) = mini.save_scenes("c", [(scene, centroid, "sh")])
    ((got, vec, h),) = mini.scene_rows("c")
    assert got == Scene(**{**scene.__dict__, "episode_ids": (e1, e2), "id": sid})
    assert np.array_equal(vec, centroid) and h == "sh"
    assert mini.list_scenes() == [got] and mini.list_scenes("other") == []
    moved = Scene(**{**got.__dict__, "title": "Clay", "episode_ids": (e1,)})
    assert mini.save_scenes("c", [(moved, centroid, "sh2")]) == [sid]
    assert mini.list_scenes("c")[0].title == "Clay"
    mini.save_scenes("c", [], delete=[sid])
    assert mini.list_scenes() == []

    s1 = Summary("c", 1, T0, T0 + timedelta(hours=1), "One.", (1,))
    s2 = Summary("c", 1, T0 + timedelta(days=7), T0 + timedelta(days=8), "Two.", (2,))
    ids = mini.replace_summaries("c", 1, [], [(s2, "h2"), (s1, "h1")])
    assert [s.covers for s in mini.list_summaries("c", 1)] == [(1,), (2,)]
    assert mini.summary_rows(level=1)[0] == (Summary(**{**s1.__dict__, "id": ids[1]}), "h1")
    mini.replace_summaries("c", 1, [ids[0]], [])
    assert [s.text for s in mini.list_summaries()] == ["One."] and mini.list_summaries(
        level=2
    ) == []

    cid = add_claim(mini, "c", "Sam is a nurse.", "Ana", 0, subject="Sam")
    old = add_claim(mini, "c", "Sam was a cook.", "Ana", -1, subject="Sam")
    sam = entity("c", "Ana", "Sam")
    mini.save_reconciliation(ReconcileBatch("c", {}, [], [], [(sam, (cid, old), "", "")], [], "m"))
    _one(mini, "UPDATE claims SET status = 'superseded' WHERE id = ?", (old,))
    ((eid, name, dh),) = mini.dossier_states("c")
    assert (name, dh) == ("Sam", "") and mini.entity_dossier(eid) == ""
    assert [c.id for c in mini.current_entity_claims([eid, eid])[eid]] == [cid]
    assert mini.save_dossiers([(eid, "Sam: a nurse.", "dh")]) == 1
    assert mini.entity_dossier(eid) == "Sam: a nurse." and mini.entity_dossier(-1) is None
    assert mini.dossier_states() == [(eid, "Sam", "dh")]

    log1 = mini.log_context("Ana", "c", [("claim", 7, "Sam is a nurse")], "Sam the nurse!")
    log2 = mini.log_context(None, None, [("episode", "3", "x")], "")
    assert mini.unreviewed_context("c") == [
        (log1, [("claim", "7", "Sam is a nurse")], "Sam the nurse!")
    ]
    mini.record_usefulness([log1, log2], [("claim", "7", True), ("episode", "3", False)])
    mini.record_usefulness([], [("claim", "7", False)])
    assert mini.unreviewed_context() == []
    assert mini.usefulness_scores("claim", [7, 8]) == {7: pytest.approx(2 / 4)}
    assert mini.usefulness_scores("episode", ["3"]) == {"3": pytest.approx(1 / 3)}


# -- MemoryService scenarios on both backends ------------------------------------------------


@pytest.fixture
def make_memory(store_factory) -> Iterator:
    """MemoryServices (heuristic archivist, manual consolidation) on conftest's parametrised
    store (SQLite, then PostgreSQL)."""
    opened: list[MemoryService] = []

    def make(**settings: object) -> MemoryService:
        mem = MemoryService(
            store=store_factory(),
            embedder=FakeEmbedder(),
            settings=Settings(**{"consolidate_mode": "manual", **settings}),
            archivist=HeuristicArchivist(),
        )
        opened.append(mem)
        return mem

    yield make
    for mem in opened:
        mem.close()


def test_promotion_is_a_conflict_with_history_and_a_timeline(make_memory) -> None:
    mem = make_memory()
    mem.add(
        make_conversation(
            "work",
            [
                [("Ana", "I work as a software engineer at Acme."), ("Lee", "Cool!")],
                [("Ana", "Big news: I was promoted to team lead yesterday!"), ("Lee", "Congrats!")],
            ],
        )
    )
    mem.reconcile()  # nothing left to do: add() reconciled what it extracted
    assert len(mem.conflicts()) == 1
    (c,) = mem.conflicts()
    assert (c.attribute, c.old_value, c.new_value, c.kind, c.resolution) == (
        "job",
        "software engineer",
        "team lead",
        "evolution",
        "newest_wins",
    )
    old, new = mem.store.claims_by_id([c.old_claim, c.new_claim]).values()
    assert old.status == "superseded" and old.replaced_by == new.id
    assert old.valid_to == new.valid_from and new.status == "current"
    assert [e.action for e in mem.claim_history(old.id)] == ["superseded"]
    texts = [claim.text for claim, _ in mem.timeline("Ana")]
    assert texts.index(old.text) < texts.index(new.text)
    assert mem.reconcile() == {"skipped": "no new claims to reconcile"}
    mem.rebuild()  # re-extraction resets reconciliation and reconciles what it wrote again
    assert mem.store.reconcile_stats()["conflicts"] == 1
    assert [(x.old_value, x.new_value) for x in mem.conflicts()] == [(c.old_value, c.new_value)]


def test_duplicates_merge_into_the_older_claim(make_memory) -> None:
    mem = make_memory()
    mem.add(
        make_conversation(
            "dup",
            [
                [("Ana", "I adopted a grey cat called Pixel."), ("Lee", "Cute!")],
                [("Ana", "I adopted a grey cat called Pixel."), ("Lee", "You told me!")],
            ],
        )
    )
    mem.reconcile()
    assert sum(c.status == "duplicate" for c in mem.claims(limit=100)) == 1
    old, new = sorted(
        (c for c in mem.claims(limit=100) if "Pixel" in c.text), key=lambda c: c.said_at
    )
    assert new.status == "duplicate" and new.replaced_by == old.id
    assert [e.action for e in mem.claim_history(old.id)] == ["absorbed"]
    pixel = mem.entities(name="Pixel")
    assert pixel and {c.id for c in mem.store.entity_claims(pixel[0].id)} == {old.id}


def test_diet_changes_and_entities_per_speaker(make_memory) -> None:
    mem = make_memory()
    mem.add(
        make_conversation(
            "diet",
            [
                [
                    ("Ana", "I eat meat most days, steak is my favourite."),
                    ("Lee", "My neighbour Sam fixes bikes."),
                ],
                [
                    ("Ana", "I went pescatarian this month."),
                    ("Lee", "Yesterday Sam lent me a pump."),
                ],
                [("Ana", "I am now vegan, no more fish."), ("Lee", "Wow, good for you.")],
            ],
        )
    )
    mem.reconcile()
    assert [(c.old_value, c.new_value) for c in mem.conflicts(subject="ana")] == [
        ("omnivore", "pescatarian"),
        ("pescatarian", "vegan"),
    ]
    (sam,) = [e for e in mem.entities(owner="Lee") if e.name.startswith("Sam")]
    assert sam.mentions == 2 and mem.entities(owner="Ana", name="Sam") == []


def test_declared_identity_merges_without_an_llm(make_memory) -> None:
    mem = make_memory()
    for cid, other in (("john-ana", "Ana"), ("john-bob", "Bob"), ("john-lee", "Lee")):
        mem.add(
            make_conversation(
                cid,
                [[("John", "I work as a nurse in Lisbon."), (other, "Nice.")]],
                people=("John", other),
            )
        )
    first = mem.declare_identity("u-john", "john-ana", "John")
    assert first.declared and first.identities == (("john-ana", "John"),)
    p = mem.declare_identity("u-john", "john-bob", "john")
    assert p.identities == (("john-ana", "John"), ("john-bob", "John"))
    mem.declare_identity("u-other", "john-lee", "John")
    result = mem.resolve_people()
    assert result.get("llm_calls", 0) == 0
    johns = sorted(sorted(c for c, _ in p.identities) for p in mem.persons() if p.name == "John")
    assert johns == [["john-ana", "john-bob"], ["john-lee"]]
    merges = [d for d in mem.decisions() if d.verdict == "MERGE"]
    assert [(d.method, d.a, d.b) for d in merges] == [
        ("declared", "john-ana/John", "john-bob/John")
    ]
    assert mem.declare_identity("u-john", "john-bob", "John") == p
    assert mem.resolve_people()["skipped"].startswith("nothing new")


def test_jobs_enqueue_once_retake_after_lease_and_fail_after_retries(
    make_memory,
) -> None:
    mem = make_memory()
    store = mem.store
    assert store.enqueue_job("reconcile", "c@1", {"conversation": "c"}) is not None
    assert store.enqueue_job("reconcile", "c@1", {"conversation": "c"}) is None
    assert mem.job_counts() == {"queued": 1}
    t = 1_700_000_000.0
    taken = store.take_job(t, lease_s=60, max_attempts=3)
    assert taken.status == "running" and store.take_job(t + 1, 60, 3) is None
    again = store.take_job(t + 61, 60, 3)
    assert again.id == taken.id and again.attempts == 2
    store.finish_job(again.id, "done", {"ok": True})
    assert mem.job_counts() == {"done": 1}

    clock = FixedClock(datetime.fromtimestamp(t, UTC))
    calls: list[dict] = []

    def boom(core: Core, payload: dict) -> dict:
        calls.append(payload)
        raise RuntimeError("disk on fire")

    runner = JobRunner(replace(mem.core, clock=clock), handlers={"scenes": boom})
    store.enqueue_job("scenes", "c@1", {"conversation": "c"})
    (job,) = runner.run_pending()
    assert job.status == "queued" and "disk on fire" in job.error
    assert runner.run_pending() == []  # backing off
    for _ in range(2):
        clock.advance(hours=1)
        runner.run_pending()
    (stored,) = store.list_jobs("failed")
    assert stored.error == "RuntimeError: disk on fire" and stored.attempts == 3
    assert len(calls) == 3


def _dump(mem: MemoryService) -> dict:
    """Everything reconciliation and consolidation built, read through the store's methods."""
    s = mem.store
    claims = s.list_claims(Filters(), limit=100_000)
    entities = s.list_entities()
    convs = sorted({c.conversation for c in claims})
    return {
        "claims": claims,
        "history": {c.id: s.claim_history(c.id) for c in claims},
        "conflicts": s.list_conflicts(),
        "entities": entities,
        "mentions": {e.id: [c.id for c in s.entity_claims(e.id, False)] for e in entities},
        "persons": s.persons(),
        "decisions": s.decisions(),
        "scenes": [
            (scene, None if v is None else v.tolist(), h)
            for c in convs
            for scene, v, h in s.scene_rows(c)
        ],
        "summaries": s.summary_rows(),
        "dossiers": s.dossier_states(),
        "dossier_texts": [s.entity_dossier(e.id) for e in entities],
        "key_info": s.key_info_states(),
        "key_info_texts": [s.person_key_info(p.id) for p in s.persons()],
        "context": s.unreviewed_context(),
        "usefulness": s.usefulness_scores("claim", [c.id for c in claims]),
        "stats": s.reconcile_stats(),
    }


NEWS = [
    [
        ("Ana", f"I visited the {place} museum and loved the {thing} exhibit."),
        ("Lee", f"The {thing} exhibit at the {place} museum sounds wonderful."),
        ("Ana", f"I bought a {thing} postcard for my sister Marta at the {place} shop."),
    ]
    for place, thing in [
        ("Lisbon", "tile"),
        ("Porto", "wine"),
        ("Madrid", "painting"),
        ("Seville", "ceramic"),
        ("Granada", "garden"),
        ("Toledo", "sword"),
        ("Bilbao", "steel"),
        ("Valencia", "rice"),
        ("Braga", "chapel"),
        ("Faro", "boat"),
    ]
]


def test_a_second_consolidation_round_changes_nothing(make_memory) -> None:
    mem = make_memory()
    work = make_conversation(
        "work",
        [
            [("Ana", "I work as a barista at Bean There."), ("Lee", "I am a nurse.")],
            [("Ana", "I started working as a teacher at Oak School."), ("Lee", "Nice!")],
            [("Ana", "I was promoted to head teacher yesterday!"), ("Lee", "Congrats, Ana!")],
        ],
    )
    other = make_conversation(
        "other", [[("Ana", "I teach at Oak School."), ("Mia", "Cool.")]], people=("Ana", "Mia")
    )
    mem.add([work, other, make_conversation("d", NEWS)])
    first = mem.consolidate()
    assert {j.kind for j in first} == set(ROUND)
    assert all(j.status in ("done", "skipped") for j in first), [j.error for j in first]
    mem.record_context([("claim", "1", "Ana works as a barista")], "You work as a barista.")
    mem.consolidate()
    before = _dump(mem)
    again = mem.consolidate()
    assert all(j.status in ("done", "skipped") for j in again), [j.error for j in again]
    assert _dump(mem) == before
    jobs = [c for c in mem.conflicts(conversation="work") if c.attribute == "job"]
    assert [(c.old_value, c.new_value, c.kind) for c in jobs] == [
        ("barista", "teacher", "evolution"),  # "I started working as": a change
        ("teacher", "head teacher", "evolution"),
    ]
    assert [p for p in mem.persons() if p.name == "Ana"] and len(mem.persons()) == 6
    assert mem.scenes("d") and mem.summaries("d", level=1)
    assert [s.covers for s in mem.summaries("d", level=1)] == [(n,) for n in range(1, 11)]
    assert any(e.dossier for e in mem.store.list_entities()) or before["dossiers"]
    assert before["usefulness"] and before["context"] == []
    assert mem.store.reconcile_stats()["claims_unreconciled"] == 0


# -- the reads of the link rankers (read/links.py) ------------------------------------------

NEIGHBOURS = [
    [
        ("Ana", "My neighbour Sam fixes bikes in his garage."),
        ("Lee", "Handy!"),
        ("Ana", "Yesterday Sam lent me a pump."),
    ],
    [("Ana", "My brother Robert Brown teaches chemistry."), ("Lee", "Nice.")],
]


def test_link_reads_entities_dossiers_and_scenes(make_memory) -> None:
    mem = make_memory()
    mem.add(make_conversation("links", NEIGHBOURS))
    mem.add(
        make_conversation(
            "else",
            [[("Bo", "Our neighbour Sam sold his bikes."), ("Cy", "Oh.")]],
            people=("Bo", "Cy"),
        )
    )
    mem.consolidate()
    s = mem.store
    here = Filters(conversation="links")
    (sam,) = s.entity_search("Where is Sam now?", here, 10)
    assert (sam.name, sam.conversation, sam.owner) == ("Sam", "links", "Ana")
    assert {e.conversation for e in s.entity_search("Sam", Filters(), 10)} == {"links", "else"}
    assert s.entity_search("the of", here, 10) == [] and s.entity_search("zebra", here, 10) == []
    # the claims mentioning him, more important first, then newer
    mentions = s.entity_claims(sam.id, current_only=False)
    expected = [
        c.id for c in sorted(mentions, key=lambda c: (-c.importance, -c.said_at.timestamp(), -c.id))
    ]
    assert len(expected) == 2 and s.entity_claim_ids([sam.id], 5) == {sam.id: expected}
    assert s.entity_claim_ids([sam.id, 10**9], 1) == {sam.id: expected[:1], 10**9: []}
    assert s.claim_entity_ids([*expected, 10**9]) == {c: [sam.id] for c in expected}
    # dossiers: the written ones of the filtered conversations
    dossiers = dict(s.dossier_texts(here, 10))
    assert dossiers[sam.id] == s.entity_dossier(sam.id) and "bikes" in dossiers[sam.id]
    assert len(s.dossier_texts(here, 1)) == 1 and s.dossier_texts(Filters("nope"), 10) == []
    # scenes: nearest centroid first, within the filters' conversations and window
    scenes = {sc.id: sc for sc in s.list_scenes("links")}
    q = mem.embedder.embed_batch(["Sam fixes bikes"])[0]
    found = s.scene_search(q, here, 10)
    assert {i for i, _ in found} == set(scenes) and [x for _, x in found] == sorted(
        (x for _, x in found), reverse=True
    )
    assert s.scene_search(q, Filters(since=T0 + timedelta(weeks=9)), 10) == []
    rowids = [r for r, _ in s.conversation_messages("links")]
    members = s.scene_message_rowids(scenes)
    assert sorted(r for rs in members.values() for r in rs) == sorted(rowids)
    assert all(rs == sorted(rs, key=rowids.index) for rs in members.values())
    # and the rankers through them, the same on both backends
    got = mem.search("Who fixes bikes in a garage?", conversation="links", preset="dossiers")
    assert {"D1:1", "D1:3"} <= {h.message.id for h in got}
    named = mem.search("Any news of Sam?", preset="entities", person="Ana")
    assert {h.message.id for h in named} == {"D1:1", "D1:3"}


def test_what_is_forgotten_leaves_the_context_log_and_the_llm_cache(make_memory) -> None:
    mem = make_memory()
    mem.add(make_conversation("diet", [[("Ana", "I am vegetarian these days.")]]))
    mem.add(make_conversation("chat", [[("Ana", "Hi Lee."), ("Lee", "Noted, no meat then.")]]))
    (vegetarian,) = [c for c in mem.claims(person="Ana") if "vegetarian" in c.text]
    lee = next(m for _, m in mem.store.conversation_messages("chat") if m.speaker == "Lee")
    items = [
        ("claim", str(vegetarian.id), vegetarian.text, 0.9),
        ("message", f"chat/{lee.id}", lee.text, 0.5),
    ]
    mem.record_context(items, "Vegetarian it is.", person="Lee", conversation="chat")
    mem.record_context(items[1:], "No meat.", person="Lee", conversation="chat")
    mem.store.llm_cache_put("k", "extract", "m", '{"claims": ["Lee notes it"]}')
    mem.forget_message("chat", lee.id)
    (log,) = mem.store.context_logs()  # the log that showed only Lee's message is gone
    assert log["items"] == [("claim", str(vegetarian.id), vegetarian.text, 0.9)]
    assert mem.store.llm_cache_get("k") is None
    mem.forget_claim(vegetarian.id)
    assert mem.store.context_logs() == []


def test_the_context_log_keeps_its_newest_rows_and_never_reuses_an_id(make_memory) -> None:
    mem = make_memory(context_log_keep=3)
    ids = [
        mem.record_context([("message", f"chat/D1:{n}", f"turn {n}")], f"reply {n}")
        for n in range(5)
    ]
    assert ids == sorted(set(ids))
    assert [log["reply"] for log in mem.store.context_logs()] == ["reply 4", "reply 3", "reply 2"]
    again = mem.record_context([("message", "chat/D1:9", "turn 9")], "reply 9")
    assert again > ids[-1]
    assert len(mem.store.context_logs()) == 3
    everything = make_memory(context_log_keep=0)  # the same store, opened keeping all
    for n in range(5):
        everything.record_context([("message", f"c/D1:{n}", "x")], f"r{n}")
    assert len(everything.store.context_logs()) == 3 + 5
    with pytest.raises(ConfigError, match="context_log_keep"):
        Settings(context_log_keep=-1)


def test_a_request_holding_all_its_user_s_memory_is_shown_nothing(make_memory) -> None:
    """Issue 14: the proxy's context adds what the chat does not hold. When every
    stored trace of the user came from the request's own messages there is nothing
    to add, and no search is run; a stored turn the request lacks, another chat of
    theirs, or a claim about them elsewhere is memory again."""
    mem = make_memory()
    chat = make_conversation(
        "chat-a",
        [[("Ana", "I moved to Porto in March."), ("Lee", "Noted!")], [("Ana", "Packing tips?")]],
    )
    mem.add(chat)
    mem.consolidate()
    request = list(chat.messages)
    ids = {m.id for m in request}
    assert not mem.store.holds_beyond("Ana", "chat-a", ids)
    asked = "What should I pack for Porto?"
    assert mem.context(asked, person="Ana", request=request).items == ()
    # the client trimmed its history: the stored first turn is memory the chat lacks
    assert mem.store.holds_beyond("Ana", "chat-a", ids - {request[0].id})
    trimmed = mem.context(asked, person="Ana", request=request[1:])
    assert "Porto in March" in trimmed.text
    # someone memory never heard of is not shown other people's chats with their words
    stranger = make_conversation("chat-z", [[("Zoe", "What should I pack for Porto?")]])
    assert not mem.store.holds_beyond("Zoe", "chat-z", {"D1:1"})
    assert mem.context(asked, person="Zoe", request=list(stranger.messages)).items == ()
    # another chat of Ana's is memory beyond either; Lee, addressed in chat-a, has memory
    mem.add(make_conversation("chat-b", [[("Ana", "Hello again.")]]))
    assert mem.store.holds_beyond("Ana", "chat-a", ids)
    assert mem.store.holds_beyond("Ana", "chat-b", {"D1:1"})
    assert mem.store.holds_beyond("Lee", "chat-z", set())


def _vector_index_results(mem: MemoryService) -> list[dict]:
    """What the vector_index jobs of a consolidation (one round per tag) returned."""
    return [j.result for j in mem.consolidate() if j.kind == "vector_index"]


def test_a_consolidation_round_builds_the_vector_index_once_the_store_is_large(
    make_memory,
) -> None:
    """PostgreSQL keeps no approximate index while it is small (its upkeep was most of an
    insert); the round's vector_index job builds it once the store passes ann_min_rows,
    and search then goes through it. SQLite's job only brings its side file up to date."""
    mem = make_memory()
    conv = make_conversation("d", NEWS)
    mem.add([conv])
    done = _vector_index_results(mem)
    assert done and all("built" not in r for r in done)
    if not hasattr(mem.store, "ann_method"):
        return
    assert mem.store.meta("ann_index") is None and mem.store._ann_index() is None
    mem.store.ann_method = "hnsw"  # the default, "mirror", builds nothing on the server
    mem.store.ann_min_rows = 1  # as if the store were large
    mem.add([make_conversation("e", NEWS)])
    built = [r["built"] for r in _vector_index_results(mem) if "built" in r]
    assert len(built) == 1 and built[0].startswith("hnsw:0:")
    assert mem.store._ann_index() is not None
    vec = mem.embedder.embed_batch([conv.messages[0].text])[0]
    assert mem.store.vector_search(mem.embedder.name, vec, Filters(), 3)
    assert _vector_index_results(mem) == [{"skipped": "no index due"}]
