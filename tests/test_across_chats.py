"""One person across chats: what a declared user (a mem0 ``user_id``, the proxy's
``user``) says in one chat ends what they said in another, and only for them.

Real SQLite files, the FakeEmbedder, the old rules as the judge (deterministic);
the store part runs on both backends.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from archivist.config import Settings
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder
from conftest import make_conversation

T = datetime(2025, 3, 1, 9, tzinfo=UTC)
RULES = Settings(judge="rules", consolidate_mode="manual")


def _nurse(m: MemoryService):
    return [c for c in m.claims(limit=100) if "nurse" in c.text]


def _chats(m: MemoryService) -> None:
    m.add(
        "I work as a nurse at St Mary's, mostly nights.",
        user_id="maria",
        conversation="one",
        timestamp=T.isoformat(),
    )
    m.add("I quit St Mary's, no more nights for me.", user_id="maria", conversation="two",
          timestamp=(T + timedelta(days=20)).isoformat())  # fmt: skip


def test_a_declared_users_later_chat_ends_what_an_earlier_chat_said(store_factory) -> None:
    m = MemoryService(store=store_factory(), embedder=FakeEmbedder(), settings=RULES)
    _chats(m)
    (nurse,) = _nurse(m)
    assert nurse.status == "superseded" and not nurse.holds_at(T + timedelta(days=30))
    assert nurse.holds_at(T + timedelta(days=10))  # it held until the later chat
    quit_ = m.get(nurse.replaced_by)
    assert quit_.conversation == "two" != nurse.conversation
    assert any(c.old_claim == nurse.id for c in m.conflicts())
    assert not any("nurse" in c.text for c in m.get_all("maria"))
    m.close()


def test_what_a_forgotten_chat_ended_holds_again_and_a_rebuild_ends_it_again(
    store_factory,
) -> None:
    m = MemoryService(store=store_factory(), embedder=FakeEmbedder(), settings=RULES)
    _chats(m)
    m.rebuild(["two"])
    assert [c.status for c in _nurse(m)] == ["superseded"]  # judged again, closed again
    m.delete(conversation="two")
    assert [c.status for c in _nurse(m)] == ["current"]  # nothing remembered ends it
    m.close()


def test_the_same_name_in_two_chats_nobody_declared_one_person_is_two_people(
    tmp_path,
) -> None:
    m = MemoryService(tmp_path / "m.db", embedder=FakeEmbedder(), settings=RULES)
    m.add(make_conversation("a", [[("Maria", "I work as a nurse at St Mary's.")]], start=T))
    later = T + timedelta(days=20)
    m.add(make_conversation("b", [[("Maria", "I quit St Mary's, no more nights.")]], start=later))
    assert [c.status for c in _nurse(m)] == ["current"]
    m.close()
