"""Memory-level operations: mem0-style add, memories as claims, corrections and forgetting
that survive re-derivation, forgetting one message, reset, people as the user decides.

The edits' store part runs on both backends (``store_factory``); the rest on real
SQLite files with the FakeEmbedder.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count

import pytest

from archivist.errors import InputError, NotFound
from archivist.service import MemoryService
from archivist.store.sql import Filters
from archivist.write.people import _pending
from conftest import ana_bob, ana_lee, make_conversation

T = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def alice(tmp_path, embedder):
    ticks = count()
    m = MemoryService(
        tmp_path / "a.db", embedder=embedder, clock=lambda: T + timedelta(seconds=next(ticks))
    )
    m.add(
        [
            {"role": "user", "content": "I live in Paris and I work as a nurse."},
            {"role": "assistant", "content": "How do you like it?"},
            {"role": "user", "content": "I have a dog called Rex."},
        ],
        user_id="alice",
    )
    yield m
    m.close()


def texts(claims) -> list[str]:
    return [c.text for c in claims]


def find(m: MemoryService, word: str):
    return next(c for c in m.get_all("alice") if word in c.text)


# -- add, the way mem0 users call it ----------------------------------------------------


def test_turns_become_messages_of_the_users_conversation(alice) -> None:
    msgs = [m for _, m in alice.store.conversation_messages("user:alice")]
    assert [(m.id, m.speaker, m.role) for m in msgs] == [
        ("m1", "alice", "user"),
        ("m2", "assistant", "assistant"),
        ("m3", "alice", "user"),
    ]
    assert msgs[0].addressees == ("assistant",) and msgs[0].timestamp.date() == T.date()
    alice.add({"role": "user", "content": "I like sushi."}, user_id="alice", agent_id="bot")
    reply = {"role": "assistant", "content": "Noted."}
    alice.add(reply, agent_id="bot", conversation="user:alice", timestamp="2024-03-02T10:00Z")
    last = [m for _, m in alice.store.conversation_messages("user:alice")][-2:]
    assert [(m.id, m.speaker) for m in last] == [("m4", "alice"), ("m5", "bot")]
    assert last[1].session == 2  # a day later: a new sitting


def test_a_string_is_a_file_only_without_mem0_keywords(alice, tmp_path) -> None:
    with pytest.raises(InputError, match="no file 'I love pizza'.*user_id"):
        alice.add("I love pizza")
    assert alice.add("notes.jsonl", user_id="alice")[0].added == 1  # a message, not a path
    with pytest.raises(InputError, match="message 0: content"):
        alice.add([{"role": "user", "content": ""}], user_id="alice")
    with pytest.raises(InputError, match="metadata must be a dict"):
        alice.add("hi", user_id="alice", metadata=["x"])
    with pytest.raises(InputError, match="user_id must be a non-empty string"):
        alice.add("hi", user_id="  ")


# -- memories: get_all, get, update, delete, history ------------------------------------


def test_get_all_lists_current_memories_and_get_takes_one_or_two_arguments(alice) -> None:
    found = alice.get_all("alice")
    assert any("Paris" in t for t in texts(found)) and any("Rex" in t for t in texts(found))
    assert alice.get(found[0].id) == found[0]
    assert alice.get(str(found[0].id)) == found[0]
    assert alice.get("user:alice", "m1").text.startswith("I live in Paris")
    with pytest.raises(NotFound, match="no memory 999"):
        alice.get(999)
    with pytest.raises(InputError, match="integer"):
        alice.get("abc")
    assert alice.get_all("nobody") == []


def test_update_is_a_correction_that_keeps_history(alice) -> None:
    old = find(alice, "Paris")
    new = alice.update(old.id, "alice lives in Lyon.")
    assert (new.text, new.method, new.speaker, new.evidence) == (
        "alice lives in Lyon.",
        "user-correction",
        old.speaker,
        old.evidence,
    )
    closed = alice.get(old.id)
    assert closed.status == "superseded" and closed.replaced_by == new.id
    assert not closed.holds_at(T)  # a corrected claim never held
    assert [e.action for e in alice.history(old.id)] == ["corrected"]
    assert [e.action for e in alice.history(new.id)] == ["correction_of"]
    (conflict,) = [c for c in alice.conflicts() if c.kind == "correction"]
    assert (conflict.old_claim, conflict.new_claim, conflict.method) == (old.id, new.id, "user")
    assert "Lyon" in texts(alice.get_all("alice"))[-1] or any(
        "Lyon" in t for t in texts(alice.get_all("alice"))
    )
    assert not any("Paris" in t for t in texts(alice.get_all("alice")))
    again = alice.update(old.id, "alice lives in Nice.")  # corrects the latest wording
    assert alice.get(new.id).replaced_by == again.id


def test_edits_survive_rebuild_and_a_growing_conversation(alice) -> None:
    alice.update(find(alice, "Paris").id, "alice lives in Lyon.")
    assert alice.delete(find(alice, "Rex").id) == 1
    for _ in range(2):
        alice.rebuild()
        alice.add("I started learning the violin.", user_id="alice")
        now = texts(alice.get_all("alice"))
        assert any("Lyon" in t for t in now), now
        assert not any("Paris" in t or "Rex" in t for t in now), now
        every = texts(alice.claims(person="alice", limit=1000))
        assert not any("Rex" in t for t in every)  # forgotten: not even as history
        assert sum("Lyon" in t for t in every) == 1


def test_a_correction_sets_kind_subject_and_span_and_survives_rebuild(alice) -> None:
    old = find(alice, "Rex")
    new = alice.update(
        old.id, kind="foresight", subject="Rex", valid_from="2024-02-01", valid_to="2024-02-20"
    )
    assert (new.text, new.kind, new.subject) == (old.text, "foresight", "Rex")
    assert (new.valid_from, new.valid_to) == (
        datetime(2024, 2, 1, tzinfo=UTC),
        datetime(2024, 2, 20, tzinfo=UTC),
    )
    assert not new.holds_at(T)  # a foresight ends at its valid_to: over before now
    assert new.holds_at(datetime(2024, 2, 10, tzinfo=UTC)) is False  # said later (T)
    (event,) = alice.history(old.id)
    assert event.detail["fields"]["kind"] == "foresight"
    alice.rebuild()
    fixed = [c for c in alice.claims(person="alice", limit=100) if c.method == "user-correction"]
    (again,) = fixed
    assert (again.kind, again.subject, again.valid_to) == ("foresight", "Rex", new.valid_to)
    cleared = alice.update(again.id, valid_to="")
    assert cleared.valid_to is None and cleared.kind == "foresight"
    alice.rebuild()  # the two corrections of the same words are one edit, fields merged
    fixed = [c for c in alice.claims(person="alice", limit=100) if c.method == "user-correction"]
    assert [(c.kind, c.subject, c.valid_to, c.status) for c in fixed] == [
        ("foresight", "Rex", None, "current")
    ]


def test_a_correction_with_bad_fields_is_one_error_and_changes_nothing(alice) -> None:
    old = find(alice, "Paris")
    before = alice.claims(person="alice", limit=100)
    for kwargs, message in [
        ({"kind": "mood"}, "kind must be one of"),
        ({"subject": " "}, "subject must be a name"),
        ({"valid_from": "last tuesday"}, "valid_from must be an ISO date"),
        ({"valid_to": "2024-01-01T10:00"}, "valid_to needs a timezone"),
        ({"valid_from": "2024-05-01", "valid_to": "2024-04-01"}, "valid_to is before"),
        ({"text": "a\x00b"}, "NUL byte"),
        ({}, "needs the corrected text, kind, subject or dates"),
    ]:
        with pytest.raises(InputError, match=message):
            alice.update(old.id, **kwargs)
    assert alice.claims(person="alice", limit=100) == before


def test_forgetting_a_correction_forgets_the_whole_chain(alice) -> None:
    old = find(alice, "Paris")
    new = alice.update(old.id, "alice lives in Lyon.")
    assert alice.delete(new.id) == 2
    alice.rebuild()
    assert not any("Paris" in t or "Lyon" in t for t in texts(alice.claims(person="alice")))


# -- forgetting a message, a person, everything -------------------------------------------


def test_forget_message_reaches_every_index_and_rederives(alice) -> None:
    assert alice.forget_message("user:alice", "m3") == 1
    with pytest.raises(NotFound):
        alice.get("user:alice", "m3")
    assert not alice.search("dog called Rex", k=10) or all(
        "Rex" not in h.message.text for h in alice.search("dog called Rex", k=10)
    )
    now = texts(alice.get_all("alice"))
    assert any("Paris" in t for t in now) and not any("Rex" in t for t in now)
    with pytest.raises(NotFound, match="'m3'"):
        alice.forget_message("user:alice", "m3")


def test_delete_person_keeps_what_others_said_to_them(loaded) -> None:
    assert loaded.delete(person="Bob") == 2
    kept = [m for _, m in loaded.store.conversation_messages("ana-bob")]
    assert [(m.speaker, m.text[:10]) for m in kept] == [("Ana", "Save me so")]
    assert loaded.claims(person="bob") == []
    loaded.rebuild()
    assert [c for c in loaded.claims(limit=1000) if c.subject.casefold() == "bob"] == []


def test_delete_person_also_forgets_claims_others_made_about_them(tmp_path, embedder) -> None:
    conv = make_conversation(
        "c", [[("Ana", "Lee adopted a cat called Pixel."), ("Lee", "I did, he is grey.")]]
    )
    with MemoryService(tmp_path / "p.db", embedder=embedder) as m:
        m.add(conv)
        about = [c for c in m.claims(limit=100) if c.subject == "Lee" and c.speaker == "Ana"]
        assert about, texts(m.claims(limit=100))
        assert m.delete(person="Lee") == 1
        m.rebuild()
        assert [c for c in m.claims(limit=100) if c.subject == "Lee"] == []
        assert m.get("c", "D1:1").speaker == "Ana"


def test_reset_forgets_everything(alice) -> None:
    alice.reset()
    assert alice.stats()["messages"] == 0 and alice.get_all() == []
    alice.add("I am back.", user_id="alice")
    assert alice.get("user:alice", "m1").text == "I am back."


# -- people as the user decides them -----------------------------------------------------


def test_merge_and_split_people_are_user_decisions(tmp_path, embedder) -> None:
    with MemoryService(tmp_path / "q.db", embedder=embedder) as m:
        m.add([ana_lee(), ana_bob()])
        a, b = [p for p in m.persons() if p.name == "Ana"]
        merged = m.merge_people(a.id, b.id, reason="same Ana")
        assert len(merged.identities) == 2
        assert m.decisions()[-1].method == "user" and m.decisions()[-1].verdict == "MERGE"
        with pytest.raises(InputError, match="already one person"):
            m.merge_people(a.id, a.id)
        alone = m.split_person(merged.id, "ana-bob", "Ana", reason="another Ana")
        assert alone.identities == (("ana-bob", "Ana"),)
        assert m.decisions()[-1].verdict == "SEPARATE"
        assert _pending(m.store, True, set()) == []  # no candidate for an agent with an LLM
        m.resolve_people()
        assert len([p for p in m.persons() if p.name == "Ana"]) == 2
        with pytest.raises(NotFound):
            m.split_person(alone.id, "ana-lee", "Ana")


# -- the store part on both backends -------------------------------------------------------


def test_edits_on_either_backend(store_factory, embedder) -> None:
    m = MemoryService(store=store_factory(), embedder=embedder)
    m.add(ana_lee())
    cat = next(c for c in m.claims(limit=100) if "Pixel" in c.text)
    new = m.update(cat.id, "Ana adopted a grey cat called Pixel in May.")
    assert m.get(cat.id).replaced_by == new.id
    dated = m.update(new.id, kind="event", valid_from="2024-05-01")
    assert (dated.kind, dated.valid_from, dated.text) == (
        "event",
        datetime(2024, 5, 1, tzinfo=UTC),
        "Ana adopted a grey cat called Pixel in May.",
    )
    shifts = next(c for c in m.claims(limit=100) if "night shifts" in c.text)
    m.delete(shifts.id)
    m.rebuild()
    every = m.claims(limit=100)
    assert not any("night shifts" in c.text for c in every)
    *_, fixed = [c for c in every if c.method == "user-correction"]
    assert (fixed.kind, fixed.valid_from) == ("event", datetime(2024, 5, 1, tzinfo=UTC))
    old = next(c for c in every if c.method != "user-correction" and c.replaced_by)
    assert old.status == "superseded" and m.history(old.id)[0].action == "corrected"
    assert m.store.delete_message("ana-lee", "D1:1") == 1
    assert m.store.list_claims(Filters(conversation="ana-lee"), limit=100)  # others stay
    m.store.reset()
    assert m.stats()["messages"] == 0 and m.stats()["claims"] == 0
    m.close()
