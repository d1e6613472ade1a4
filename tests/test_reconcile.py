"""Layers 1-2: entities per speaker, duplicates, refinements, conflicts with history.

Small conversations written here, the heuristic archivist, real SQLite files.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from archivist.config import Settings
from archivist.lang.attributes import attribute_of
from archivist.llm.base import LLMTimeout
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder, FakeLLM
from archivist.write.archivist import HeuristicArchivist
from conftest import make_conversation


def memory(path: Path, policy: str = "newest_wins", llm: FakeLLM | None = None) -> MemoryService:
    settings = Settings(
        judge="rules", consolidate_mode="manual", conflict_policy=policy, reconcile_on_write=False
    )
    return MemoryService(
        path, settings=settings, embedder=FakeEmbedder(), llm=llm, archivist=HeuristicArchivist()
    )


def current(mem: MemoryService, text: str) -> list[str]:
    return [c.text for c in mem.claims(limit=1000) if text in c.text and c.status == "current"]


def snapshot(path: Path) -> dict[str, list]:
    db = sqlite3.connect(path)
    out = {
        t: db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
        for t in ("claim_events", "conflicts", "entities", "claim_entities")
    }
    out["claims"] = db.execute(
        "SELECT id, status, replaced_by, closed_at, reconciled FROM claims ORDER BY id"
    ).fetchall()
    db.close()
    return out


def test_promotion_is_evolution_with_a_conflict_and_history(tmp_path: Path) -> None:
    conv = make_conversation(
        "work",
        [
            [("Ana", "I work as a software engineer at Acme."), ("Lee", "Cool!")],
            [("Ana", "Big news: I was promoted to team lead yesterday!"), ("Lee", "Congrats!")],
        ],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        report = mem.reconcile()
        assert report["conflicts"] == 1
        (conflict,) = mem.conflicts()
        assert (conflict.attribute, conflict.old_value, conflict.new_value) == (
            "job",
            "software engineer",
            "team lead",
        )
        assert conflict.kind == "evolution" and conflict.resolution == "newest_wins"
        old, new = mem.store.claims_by_id([conflict.old_claim, conflict.new_claim]).values()
        assert old.status == "superseded" and old.replaced_by == new.id
        # the old job holds until the promotion (the day before session 2)
        assert old.valid_to == new.valid_from and new.status == "current"
        assert [e.action for e in mem.claim_history(old.id)] == ["superseded"]
        timeline = mem.timeline("Ana")
        texts = [c.text for c, _ in timeline]
        assert texts.index(old.text) < texts.index(new.text)


def test_diet_evolution_logs_two_conflicts_in_order(tmp_path: Path) -> None:
    conv = make_conversation(
        "diet",
        [
            [("Ana", "I eat meat most days, steak is my favourite."), ("Lee", "Yum.")],
            [("Ana", "I went pescatarian this month."), ("Lee", "Fish only then!")],
            [("Ana", "I am now vegan, no more fish."), ("Lee", "Wow, good for you.")],
        ],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        mem.reconcile()
        conflicts = mem.conflicts(subject="Ana")
        assert [(c.attribute, c.old_value, c.new_value) for c in conflicts] == [
            ("diet", "omnivore", "pescatarian"),
            ("diet", "pescatarian", "vegan"),
        ]
        assert current(mem, "vegan") and not current(mem, "pescatarian")
        assert not current(mem, "eats meat")


def test_two_partners_are_two_relationships(tmp_path: Path) -> None:
    conv = make_conversation(
        "love",
        [
            [("Ana", "I'm dating Ben, we met at the climbing gym."), ("Lee", "Nice.")],
            [("Ana", "Ben and I broke up in spring."), ("Lee", "Sorry to hear.")],
            [("Ana", "My boyfriend Carl took me to Porto."), ("Lee", "Carl sounds great.")],
        ],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        mem.reconcile()
        names = {e.name for e in mem.entities(owner="Ana")}
        assert {"Ben", "Carl"} <= names  # two people, not one "partner" entity
        (conflict,) = [c for c in mem.conflicts() if c.attribute == "partner"]
        assert (conflict.old_value, conflict.new_value) == ("Ben", "Carl")


def test_entities_are_per_speaker_and_merge_by_alias(tmp_path: Path) -> None:
    conv = make_conversation(
        "ents",
        [
            [
                ("Ana", "My friend Sam Lopez is a nurse at Lisbon General."),
                ("Lee", "My neighbour Sam fixes bikes."),
            ],
            [("Ana", "On Sunday Sam visited me."), ("Lee", "Yesterday Sam lent me a pump.")],
        ],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        report = mem.reconcile()
        ana = [e for e in mem.entities(owner="Ana") if e.name.startswith("Sam")]
        lee = [e for e in mem.entities(owner="Lee") if e.name.startswith("Sam")]
        assert len(ana) == 1 and len(lee) == 1 and ana[0].id != lee[0].id
        assert ana[0].mentions == 2 and "Sam" in ana[0].aliases + (ana[0].name,)
        assert report["entity_mentions"] >= 4
        claims = mem.store.entity_claims(ana[0].id)
        assert {c.speaker for c in claims} == {"Ana"}


def test_contradiction_later_corrected(tmp_path: Path) -> None:
    conv = make_conversation(
        "home",
        [
            [("Ana", "I live in Lisbon with my cat."), ("Lee", "Lovely city.")],
            [("Ana", "I live in Oslo these days."), ("Lee", "Cold!")],
            [("Ana", "Actually I live in Lisbon, I was only visiting Oslo."), ("Lee", "Ah ok.")],
        ],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        mem.reconcile()
        conflicts = mem.conflicts()
        assert [(c.old_value, c.new_value, c.kind) for c in conflicts] == [
            ("Lisbon", "Oslo", "evolution"),  # "these days": it changed
            ("Oslo", "Lisbon", "correction"),  # "actually": the older one was a mistake
        ]
        now = [c for c in mem.claims(limit=100) if c.status == "current" and "live" in c.text]
        assert [c.text for c in now] == [
            "Actually Ana lives in Lisbon, Ana was only visiting Oslo."
        ]
        first = mem.store.claims_by_id([conflicts[0].old_claim])[conflicts[0].old_claim]
        assert first.status == "superseded"  # history kept, nothing deleted
        assert len([c for c in mem.claims(limit=100) if c.speaker == "Ana"]) == 3


def test_duplicates_merge_evidence_into_the_older_claim(tmp_path: Path) -> None:
    conv = make_conversation(
        "dup",
        [
            [("Ana", "I adopted a grey cat called Pixel."), ("Lee", "Cute!")],
            [("Ana", "I adopted a grey cat called Pixel."), ("Lee", "You told me!")],
        ],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        assert mem.reconcile()["duplicates"] == 1
        pixel = [c for c in mem.claims(limit=100) if "Pixel" in c.text]
        old, new = sorted(pixel, key=lambda c: c.said_at)
        assert new.status == "duplicate" and new.replaced_by == old.id
        assert [e.action for e in mem.claim_history(old.id)] == ["absorbed"]


def test_policies_oldest_wins_and_keep_both(tmp_path: Path) -> None:
    conv = make_conversation(
        "pol",
        [[("Ana", "I live in Lisbon.")], [("Ana", "I live in Oslo.")]],
    )
    with memory(tmp_path / "a.db", "oldest_wins") as mem:
        mem.add(conv)
        mem.reconcile()
        assert current(mem, "lives in") == ["Ana lives in Lisbon."]
        assert mem.conflicts()[0].resolution == "oldest_wins"
    with memory(tmp_path / "b.db", "keep_both") as mem:
        mem.add(conv)
        mem.reconcile()
        assert sorted(current(mem, "lives in")) == ["Ana lives in Lisbon.", "Ana lives in Oslo."]
        assert mem.conflicts()[0].resolution == "keep_both"


def test_reconciling_again_changes_nothing_and_rebuild_reproduces(tmp_path: Path) -> None:
    conv = make_conversation(
        "again",
        [
            [("Ana", "I work as a nurse in Lisbon."), ("Lee", "My sister Mia is a nurse too.")],
            [("Ana", "I was promoted to head nurse last week."), ("Lee", "Mia says hi.")],
        ],
    )
    path = tmp_path / "m.db"
    with memory(path) as mem:
        mem.add(conv)
        mem.reconcile()
        before = snapshot(path)
        assert mem.reconcile() == {"skipped": "no new claims to reconcile"}
        assert snapshot(path) == before
        conflicts = [(c.old_value, c.new_value) for c in mem.conflicts()]
        mem.rebuild()
        mem.reconcile()
        assert [(c.old_value, c.new_value) for c in mem.conflicts()] == conflicts


def test_new_session_reconciles_against_stored_claims(tmp_path: Path) -> None:
    first = make_conversation("grow", [[("Ana", "I live in Lisbon.")]])
    later = make_conversation("grow", [[("Ana", "I moved to Berlin.")]], first_session=2)
    with memory(tmp_path / "m.db") as mem:
        mem.add(first)
        mem.reconcile()
        mem.add(later)
        mem.reconcile()
        (c,) = mem.conflicts()
        assert (c.old_value, c.new_value, c.kind) == ("Lisbon", "Berlin", "evolution")


def judge_llm(verdict: str, target: int | None = 1) -> FakeLLM:
    def respond(messages: list[dict], schema: dict | None) -> dict:
        assert schema is not None and schema.get("title") == "JudgeOut", schema
        return {"judgements": [{"item": 1, "verdict": verdict, "target": target}]}

    return FakeLLM(responder=respond)


def near_pair() -> object:
    return make_conversation(
        "near",
        [
            [("Ana", "I love hiking in the mountains near Sintra.")],
            [("Ana", "I love hiking in the hills near Sintra every weekend.")],
        ],
    )


def test_llm_judges_what_the_heuristics_leave_open(tmp_path: Path) -> None:
    llm = judge_llm("refinement")
    with memory(tmp_path / "m.db", llm=llm) as mem:
        mem.add(near_pair())
        report = mem.reconcile()
        assert report["judged_by_llm"] == 1 and report["refinements"] == 1
        old, new = sorted(mem.claims(limit=10), key=lambda c: c.said_at)
        assert old.status == "superseded" and old.replaced_by == new.id
        assert len(llm.calls) == 1
        prompt = llm.calls[0]["messages"][1]["content"]
        assert "[1.1]" in prompt and str(old.id) not in prompt.split("[1.1]")[0][-5:]
        assert mem.llm_summary()["tasks"]["judge_claims"]["calls"] == 1


def test_llm_contradiction_is_logged_with_its_attribute(tmp_path: Path) -> None:
    def respond(messages: list[dict], schema: dict | None) -> dict:
        return {
            "judgements": [
                {
                    "item": 1,
                    "verdict": "contradiction",
                    "target": 1,
                    "attribute": "hobby",
                    "old_value": "mountains",
                    "new_value": "hills",
                }
            ]
        }

    with memory(tmp_path / "m.db", llm=FakeLLM(responder=respond)) as mem:
        mem.add(near_pair())
        mem.reconcile()
        (c,) = mem.conflicts()
        assert (c.attribute, c.old_value, c.new_value, c.method) == (
            "hobby",
            "mountains",
            "hills",
            "llm",
        )


@pytest.mark.parametrize(
    "answers",
    [
        ["{not json", "{still not", "nope"],
        [LLMTimeout("slow"), LLMTimeout("slow"), LLMTimeout("slow")],
        [{"judgements": [{"item": 1, "verdict": "duplicate", "target": 9}]}],  # out of range
        [{"judgements": [{"item": 7, "verdict": "duplicate", "target": 1}]}],  # unknown item
    ],
)
def test_llm_failures_leave_claims_new_and_lose_nothing(
    tmp_path: Path, answers: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("archivist.llm.structured.time.sleep", lambda s: None)
    llm = FakeLLM(*answers)
    with memory(tmp_path / "m.db", llm=llm) as mem:
        mem.add(near_pair())
        report = mem.reconcile()
        assert report["judged_by_llm"] == 0 and report["conflicts"] == 0
        assert all(c.status == "current" for c in mem.claims(limit=10))
        assert mem.store.reconcile_stats()["claims_unreconciled"] == 0
        assert mem.stats()["messages"] == 2


def test_attribute_patterns_need_the_subject() -> None:
    assert attribute_of("Ana's sister Mia lives in Porto.", "Ana") is None
    assert attribute_of("Mia lives in Porto.", "Mia").value == "Porto"
    got = attribute_of("Big news: Ana was promoted to team lead yesterday!", "Ana")
    assert (got.attribute, got.value, got.change) == ("job", "team lead", "promotion")
    assert attribute_of("Ana is happy today.", "Ana") is None
    assert attribute_of("Ana is 30 years old.", "Ana").value == "30"
    assert attribute_of("Ana has 30 plants.", "Ana") is None


def test_deleting_one_conversation_keeps_the_others_episode_and_entity_vectors(
    tmp_path: Path,
) -> None:
    keep = make_conversation("keep", [[("Ana", "My friend Sam Lopez moved to Porto.")]])
    drop = make_conversation("drop", [[("Lee", "I sold my bike.")]], people=("Lee", "Mia"))
    with memory(tmp_path / "m.db") as mem:
        mem.add([keep, drop])
        mem.reconcile()
        db = mem.store._db
        held = (
            "SELECT count(*) FROM {t} t JOIN vectors v ON v.id = t.vec_id "
            "WHERE t.conversation = 'keep'"
        )
        before = {t: db.execute(held.format(t=t)).fetchone()[0] for t in ("episodes", "entities")}
        assert all(before.values())
        mem.delete(conversation="drop")
        after = {t: db.execute(held.format(t=t)).fetchone()[0] for t in ("episodes", "entities")}
        assert after == before


def test_add_reconciles_what_it_extracts_before_any_consolidation(tmp_path: Path) -> None:
    """Issue 13: a read right after add() sees the new truth; no round has run."""
    settings = Settings(
        judge="rules", consolidate_mode="manual"
    )  # reconcile_on_write is the default
    embedder, archivist = FakeEmbedder(), HeuristicArchivist()
    with MemoryService(
        tmp_path / "m.db", settings=settings, embedder=embedder, archivist=archivist
    ) as mem:
        mem.add(make_conversation("diet", [[("Ana", "I went pescatarian this month.")]]))
        assert current(mem, "pescatarian")
        mem.add(make_conversation("diet", [[], [("Ana", "I am now vegan, no more fish.")]]))
        assert mem.job_counts().get("done", 0) == 0  # no consolidation job has run
        assert [(c.old_value, c.new_value) for c in mem.conflicts()] == [("pescatarian", "vegan")]
        assert current(mem, "vegan") and not current(mem, "pescatarian")


def test_a_change_of_kind_logs_the_kinds_so_old_mentions_read_as_history(tmp_path: Path) -> None:
    """'soy milk' -> 'almond milk', 'window table' -> 'corner tables': the conflict's
    values are the aspect with the word naming its kind, short enough for every line
    naming the old kind to be marked; 'From now on, X' names its change in the next
    clause."""
    conv = make_conversation(
        "habits",
        [
            [("Ana", "I drink my coffee with soy milk."), ("Lee", "Noted.")],
            [("Ana", "Please book a window table at Lumi for Friday."), ("Lee", "Booked.")],
            [("Ana", "I switched my coffee to almond milk."), ("Lee", "Fancy.")],
            [("Ana", "From now on, corner tables please, the window is too cold."), ("Lee", "OK.")],
        ],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        mem.reconcile()
        found = {(c.attribute, c.old_value, c.new_value) for c in mem.conflicts()}
        assert ("milk", "soy milk", "almond milk") in found
        assert ("tabl", "window table", "corner tables") in found
        ctx = mem.context("How does Ana take her coffee?", person="Ana", budget_tokens=400)
        soy = [line for line in ctx.text.splitlines() if "soy milk" in line]
        assert soy and all("[history]" in line for line in soy)
