"""Append-mode extraction: a session that grew at its end is read from where it stopped.

A live chat's session grows by a turn at a time; only the new messages are
read and their claims added, without deleting anything, invalidating cached
vector indexes or resetting reconciliation. Anything else re-reads the session.
Small conversations written here, the heuristic archivist, real SQLite files.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

from archivist.config import Settings
from archivist.model import Claim, Conversation
from archivist.service import MemoryService
from archivist.store.base import ExtractionMark
from archivist.store.sql import Filters
from archivist.testing import FakeEmbedder
from archivist.write.archivist import HeuristicArchivist
from archivist.write.extract_plan import plan_session
from archivist.write.index_text import claim_embed_text
from conftest import indexed, make_conversation

ALL = Filters()
CID = "live"
CHAT = (
    ("Ana", "I adopted a grey cat called Pixel yesterday."),
    ("Lee", "Pixel is a lovely name. Is he settling in well?"),
    ("Ana", "He already sleeps on my pillow every night."),
    ("Lee", "My sister Marta works at the animal shelter on Elm Street."),
    ("Ana", "I eat meat most days, steak is my favourite."),
    ("Lee", "I booked flights to the Azores for October."),
    ("Ana", "You should hike the Sete Cidades rim while you are there."),
    ("Lee", "I plan to bring my camera and a rain jacket."),
    ("Ana", "I went pescatarian this month."),
    ("Lee", "Fish only then! My brother Tom is vegan."),
    ("Ana", "I am now vegan, no more fish."),
    ("Lee", "Wow, Tom will be thrilled to hear that."),
    ("Ana", "Pixel knocked my coffee off the desk this morning."),
    ("Lee", "Cats love gravity experiments, my neighbour's cat does the same."),
)


def memory(path: Path, archivist: HeuristicArchivist | None = None) -> MemoryService:
    return MemoryService(
        path,
        settings=Settings(judge="rules", consolidate_mode="manual", reconcile_on_write=False),
        embedder=FakeEmbedder(),
        archivist=archivist or HeuristicArchivist(),
    )


def chat(n: int) -> Conversation:
    """The live chat's first ``n`` messages, one session."""
    return make_conversation(CID, [CHAT[:n]])


def grow(mem: MemoryService, n: int):
    mem.add(chat(n), extract=False)
    return mem.extract([CID])


def claim_key(c: Claim) -> tuple:
    """What a claim says, apart from the ids the store gave it and its episode."""
    return (
        c.text,
        c.speaker,
        c.subject,
        c.evidence,
        c.kind,
        c.source,
        c.said_at,
        c.valid_from,
        c.valid_to,
        c.importance,
        c.salience,
        c.entities,
    )


def epoch(mem: MemoryService) -> str | None:
    return mem.store.meta("vector_epoch")


def unreconciled(mem: MemoryService) -> int:
    return mem.store.reconcile_stats()["claims_unreconciled"]


# -- the plan -------------------------------------------------------------------------


def test_plan_appends_only_after_the_same_last_message_by_the_same_method() -> None:
    group = list(chat(10).messages)
    people = ["Ana", "Lee"]

    def plan(mark: ExtractionMark | None, method: str = "heuristic", msgs=group):
        return plan_session(CID, 1, msgs, people, mark, method)

    first = plan(None)
    assert (len(first.messages), first.append_after, first.replaces) == (10, None, False)
    assert plan(ExtractionMark(10, "D1:10", "heuristic")) is None  # up to date
    assert plan(ExtractionMark(10, None, "heuristic")) is None  # an old mark, same size

    mark = ExtractionMark(4, "D1:4", "heuristic")
    tail = plan(mark)
    assert [m.id for m in tail.messages] == [f"D1:{i}" for i in range(5, 11)]
    assert [m.id for m in tail.context] == [f"D1:{i}" for i in range(1, 5)]
    assert (tail.n_messages, tail.last_message, tail.append_after) == (10, "D1:10", mark)
    late = plan(ExtractionMark(8, "D1:8", "heuristic"))
    assert [m.id for m in late.context] == [f"D1:{i}" for i in range(3, 9)]  # six at most

    for stale in (
        ExtractionMark(4, "D1:3", "heuristic"),  # a message inserted among those read
        ExtractionMark(4, None, "heuristic"),  # an old mark: no last message to check
        ExtractionMark(12, "D1:12", "heuristic"),  # the session shrank
        ExtractionMark(10, "D1:9", "heuristic"),  # same size, other messages
    ):
        full = plan(stale)
        assert (len(full.messages), full.context, full.append_after, full.replaces) == (
            10,
            (),
            None,
            True,
        )
    assert plan(mark, method="gpt-4o-mini").append_after is None  # another archivist


# -- the service --------------------------------------------------------------------------


def test_appended_steps_give_the_same_claims_as_one_extraction(tmp_path: Path) -> None:
    with memory(tmp_path / "once.db") as once:
        once.add(chat(len(CHAT)), extract=False)
        report = once.extract([CID])
        assert (report.sessions, report.sessions_appended) == (1, 0)
        expected = sorted(claim_key(c) for c in once.claims(limit=1000))
    assert len(expected) >= 10

    with memory(tmp_path / "steps.db") as steps:
        reports = [grow(steps, n) for n in range(2, len(CHAT) + 1, 2)]
        assert [(r.sessions, r.sessions_appended, r.sessions_replaced) for r in reports] == [
            (1, 0, 0)
        ] + [(1, 1, 0)] * (len(reports) - 1)
        assert sorted(claim_key(c) for c in steps.claims(limit=1000)) == expected
        # every message is in exactly one episode; each step made its own
        covered = [m for e in steps.store.list_episodes(CID) for m in e.message_ids]
        assert sorted(covered) == sorted(m.id for m in chat(len(CHAT)).messages)
        assert len(covered) == len(set(covered))
        assert steps.store.extraction_marks(CID) == {
            1: ExtractionMark(len(CHAT), f"D1:{len(CHAT)}", "heuristic")
        }
        assert steps.extract([CID]).sessions_skipped == 1  # nothing new: nothing read


def test_an_append_keeps_the_vector_epoch_and_the_cached_index_finds_new_claims(
    tmp_path: Path,
) -> None:
    with memory(tmp_path / "m.db") as mem:
        grow(mem, 4)
        model = mem.embedder.name
        probe = mem.embedder.embed_batch(["warm the cache"])[0]
        mem.store.claim_vector_search(model, probe, ALL, 1)  # the index is cached now
        before = epoch(mem)
        grow(mem, 6)
        assert epoch(mem) == before
        (azores,) = [c for c in mem.claims(limit=100) if "Azores" in c.text]
        vec = mem.embedder.embed_batch([claim_embed_text(azores)])[0]
        assert mem.store.claim_vector_search(model, vec, ALL, 1)[0][0] == azores.id


def test_an_append_does_not_reset_reconciliation(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db") as mem:
        grow(mem, 10)  # meat, then pescatarian
        first = mem.reconcile()
        assert first["conflicts"] == 1 and unreconciled(mem) == 0
        entities, conflicts = len(mem.entities()), mem.conflicts()
        done = {c.id: c.status for c in mem.claims(limit=1000)}

        report = grow(mem, 12)  # now vegan
        assert report.sessions_appended == 1
        assert unreconciled(mem) == report.claims > 0  # only the new ones wait
        assert len(mem.entities()) == entities and mem.conflicts() == conflicts
        assert {c.id: c.status for c in mem.claims(limit=1000) if c.id in done} == done

        second = mem.reconcile()
        assert second["claims"] == report.claims  # the new claims only, not the conversation
        diet = [(c.old_value, c.new_value) for c in mem.conflicts(subject="Ana")]
        assert diet == [("omnivore", "pescatarian"), ("pescatarian", "vegan")]


def test_a_message_inserted_among_those_read_re_extracts_the_session(tmp_path: Path) -> None:
    sparse = chat(6)
    sparse = replace(sparse, messages=tuple(replace(m, seq=2 * m.seq) for m in sparse.messages))
    with memory(tmp_path / "m.db") as mem:
        mem.add(sparse, extract=False)
        mem.extract([CID])
        old = {c.id for c in mem.claims(limit=1000)}
        mem.reconcile()
        before = epoch(mem)

        # A late import: a message that sorts between the 2nd and the 3rd.
        late = replace(
            sparse.messages[1], id="late", seq=3, text="I also adopted a hamster called Nibbles."
        )
        conv = replace(sparse, messages=(late,))
        rows, vectors = indexed(conv, mem.embedder)
        mem.store.add_conversation(conv, rows, mem.embedder.name, vectors)

        report = mem.extract([CID])
        assert (report.sessions, report.sessions_appended, report.sessions_replaced) == (1, 0, 1)
        claims = mem.claims(limit=1000)
        assert len(claims) == len(old) + 1  # replaced, not added to
        assert [c.text for c in claims if c.evidence == ("late",)] == [
            "Lee also adopted a hamster called Nibbles."
        ]
        assert epoch(mem) != before
        assert unreconciled(mem) == len(claims)  # the conversation is reconciled afresh
        assert mem.store.extraction_marks(CID)[1] == ExtractionMark(7, "D1:6", "heuristic")


def test_another_archivist_re_extracts_a_grown_session(tmp_path: Path) -> None:
    class Other(HeuristicArchivist):
        name = "heuristic-other"

    grow(memory(tmp_path / "m.db"), 4)
    with memory(tmp_path / "m.db", Other()) as mem:
        assert mem.extract([CID]).sessions_skipped == 1  # not grown: kept as it is
        report = grow(mem, 6)
        assert (report.sessions_appended, report.sessions_replaced) == (0, 1)
        assert mem.store.extraction_marks(CID)[1].method == "heuristic-other"
        assert grow(mem, 8).sessions_appended == 1


def test_a_store_from_before_the_last_message_was_kept_replaces_once_then_appends(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.db"
    with memory(path) as mem:
        grow(mem, 4)
    db = sqlite3.connect(path)  # back to the schema before migration 0004
    db.execute("ALTER TABLE extraction_state DROP COLUMN last_msg_id")
    db.execute("DELETE FROM _migrations WHERE name = '0004_extraction_last_message'")
    db.commit()
    db.close()

    with memory(path) as mem:  # reopening migrates: the mark has no last message
        assert mem.store.extraction_marks(CID) == {1: ExtractionMark(4, None, "heuristic")}
        assert mem.extract([CID]).sessions_skipped == 1
        assert (grow(mem, 6).sessions_replaced, grow(mem, 8).sessions_appended) == (1, 1)
        expected = memory(tmp_path / "once.db")
        expected.add(chat(8), extract=False)
        expected.extract([CID])
        assert sorted(claim_key(c) for c in mem.claims(limit=1000)) == sorted(
            claim_key(c) for c in expected.claims(limit=1000)
        )
        expected.close()


def test_an_append_another_process_made_first_is_not_made_twice(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    first = memory(path)
    grow(first, 4)

    class Racing(HeuristicArchivist):
        """Reads the tail while another process extracts and saves the same tail."""

        def process_session(self, messages, participants, context=(), kin=None):
            first.extract([CID])
            return super().process_session(messages, participants, context)

    with memory(path, Racing()) as second:
        report = grow(second, 6)
        assert (report.sessions, report.sessions_skipped) == (0, 1)
        keys = [claim_key(c) for c in second.claims(limit=1000)]
        assert len(keys) == len(set(keys))  # none saved twice
        assert second.store.extraction_marks(CID)[1].n_messages == 6
    first.close()
