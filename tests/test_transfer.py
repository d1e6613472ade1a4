"""Export/import as JSON Lines: SQLite -> PostgreSQL -> SQLite loses nothing (compared)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from archivist.config import Settings
from archivist.errors import LoadError
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder
from archivist.write.archivist import HeuristicArchivist
from conftest import make_conversation

CONVS = [
    make_conversation(
        "work",
        [
            [("Ana", "I work as a software engineer at Acme."), ("Lee", "Cool! Café later?")],
            [("Ana", "I was promoted to team lead yesterday!"), ("Lee", "Congrats, Ana!")],
        ],
    ),
    make_conversation(
        "other", [[("Ana", "I teach yoga on Sundays."), ("Mia", "Nice.")]], people=("Ana", "Mia")
    ),  # fmt: skip
]


def memory(**kw: object) -> MemoryService:
    return MemoryService(
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(),
        settings=Settings(consolidate_mode="inline", **kw),
    )


def state(mem: MemoryService) -> dict:
    """What must survive a move: the log, declared people, and what is re-derived from them."""
    msgs = [
        (m.conversation, m.id, m.session, m.seq, m.hash, m.session_start, m.addressees)
        for c in mem.conversations()
        for _, m in mem.store.conversation_messages(c["id"])
    ]
    claims = sorted((c.conversation, c.text, c.status, c.valid_to) for c in mem.claims(limit=999))
    conflicts = [(c.attribute, c.old_value, c.new_value) for c in mem.conflicts()]
    persons = sorted((p.id, p.identities, p.declared) for p in mem.persons())
    return {"messages": msgs, "claims": claims, "conflicts": conflicts, "persons": persons}


def test_round_trip_sqlite_postgres_sqlite(tmp_path: Path, pg_dsn: str) -> None:
    src = memory(db_path=tmp_path / "a.db")
    src.add(CONVS)
    src.declare_identity("user-ana", "work", "Ana")
    src.declare_identity("user-ana", "other", "Ana")
    first = list(src.export_jsonl())
    pg = memory(store="postgres", pg_dsn=pg_dsn, pg_schema=f"t{uuid.uuid4().hex[:10]}")
    assert pg.import_jsonl(first)["identities"] == 2
    second = list(pg.export_jsonl())
    back = memory(db_path=tmp_path / "b.db")
    back.import_jsonl(second)
    assert first == second == list(back.export_jsonl())
    for other in (pg, back):
        assert state(other) == state(src)
    assert [p for p in back.persons() if p.id == "user-ana"][0].identities == (
        ("other", "Ana"),
        ("work", "Ana"),
    )
    assert back.import_jsonl(second)["messages_added"] == 0  # idempotent
    for m in (src, pg, back):
        m.close()


def test_an_export_ingests_as_plain_jsonl_and_bad_identity_lines_are_refused(
    tmp_path: Path,
) -> None:
    with memory(db_path=tmp_path / "a.db") as src:
        src.add(CONVS)
        src.declare_identity("u1", "work", "Lee")
        lines = list(src.export_jsonl(conversation="work"))
    assert sum('"record": "identity"' in line for line in lines) == 1
    path = tmp_path / "export.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    with memory(db_path=tmp_path / "b.db") as dst:
        assert dst.add(path)[0].added == 4  # the loader skips the identity line
        bad = lines[:-1] + [json.dumps({"record": "identity", "user_id": "", "name": "Lee"})]
        with pytest.raises(LoadError, match="user_id"):
            dst.import_jsonl(bad)


def test_message_metadata_travels_with_the_export(tmp_path: Path) -> None:
    with MemoryService(tmp_path / "a.db", embedder=FakeEmbedder()) as a:
        a.add("I keep bees on the allotment.", user_id="ana", metadata={"app": "web", "n": 2})
        a.add("I also grow leeks there.", user_id="ana")
        lines = list(a.export_jsonl())
    records = [json.loads(line) for line in lines]
    said = [r for r in records if "record" not in r]  # the messages; then ana, declared
    assert [r.get("metadata") for r in said] == [{"app": "web", "n": 2}, None]
    assert [r["user_id"] for r in records if r.get("record") == "identity"] == ["ana"]
    with MemoryService(tmp_path / "b.db", embedder=FakeEmbedder()) as b:
        b.import_jsonl(lines)
        again = [m for _, m in b.store.conversation_messages("user:ana")]
        assert [m.metadata for m in again] == [{"app": "web", "n": 2}, {}]
        assert list(b.export_jsonl()) == lines
    bad = said[0] | {"metadata": ["not", "an", "object"]}
    with MemoryService(tmp_path / "c.db", embedder=FakeEmbedder()) as c:
        with pytest.raises(LoadError, match="metadata"):
            c.import_jsonl([json.dumps(bad) + "\n"])
