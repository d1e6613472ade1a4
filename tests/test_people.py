"""Layer 3: people across conversations — identities, declarations, the identity agent.

Real SQLite files, the FakeEmbedder and a FakeLLM. For the namesake scenarios
the FakeLLM is a *policy* that reads the tool outputs it is shown and decides
from them, so these tests fail when the tools do not surface the evidence.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from archivist.cli import people as people_cli
from archivist.cli.main import cli
from archivist.config import Settings
from archivist.errors import InputError, NotFound
from archivist.llm import structured as structured_module
from archivist.llm.base import LLMTimeout
from archivist.model import Claim
from archivist.prompts import identity
from archivist.service import MemoryService
from archivist.store.people import person_id_for
from archivist.testing import FakeEmbedder, FakeLLM
from archivist.write.archivist import HeuristicArchivist
from archivist.write.people import run_people
from archivist.write.people_tools import Side, compare, contradictions, shown_aliases
from conftest import RULES, T0, ana_lee, jsonl_records, make_conversation, write_jsonl

SNAPSHOTS = Path(__file__).parent / "snapshots"

# -- four conversations with a John in each ------------------------------------------------

NURSE_WITH_ANA = (
    (
        ("John", "I work as a nurse at the children's hospital in Lisbon."),
        ("Ana", "That sounds intense. Do you like it?"),
        ("John", "I love it. My sister Marta is a nurse too."),
        ("John", "I live in Lisbon with my dog Rex."),
    ),
)
PILOT_WITH_LEE = (
    (
        ("John", "I fly cargo planes between Oslo and Reykjavik."),
        ("Lee", "Do you ever get to see the northern lights?"),
        ("John", "All the time. I live in Oslo with my wife Ingrid."),
    ),
)
TEACHER_WITH_MIA = (
    (
        ("John", "I work as a teacher at a primary school in Porto."),
        ("Mia", "Did you always live up north?"),
        ("John", "No, I grew up in Lisbon, but I live in Porto now."),
        ("John", "I play chess every Sunday."),
    ),
)
NURSE_WITH_BOB = (
    (
        ("John", "I work as a nurse in Lisbon, nights all this month."),
        ("Bob", "How is Marta doing?"),
        ("John", "My sister Marta is great, she says hi."),
        ("John", "I still live in Lisbon with my dog Rex."),
    ),
)
CONVERSATIONS = {
    "john-ana": (NURSE_WITH_ANA, ("John", "Ana"), 0),
    "john-lee": (PILOT_WITH_LEE, ("John", "Lee"), 1),
    "john-mia": (TEACHER_WITH_MIA, ("John", "Mia"), 2),
    "john-bob": (NURSE_WITH_BOB, ("John", "Bob"), 3),
}


def conversation(cid: str):
    sessions, people, week = CONVERSATIONS[cid]
    return make_conversation(cid, sessions, people=people, start=T0 + timedelta(weeks=week))


def service(path: Path, llm: FakeLLM | None = None) -> MemoryService:
    """Heuristic claims at ingestion; the LLM (if any) serves the people step alone."""
    return MemoryService(
        path, settings=RULES, embedder=FakeEmbedder(), archivist=HeuristicArchivist(), llm=llm
    )


def loaded(path: Path, cids, llm: FakeLLM | None = None) -> MemoryService:
    mem = service(path, llm)
    mem.add([conversation(c) for c in cids])
    return mem


def johns(mem: MemoryService) -> list[set[str]]:
    """The conversations of each person called John, sorted."""
    return sorted(
        ({c for c, _ in p.identities} for p in mem.persons() if p.name == "John"), key=sorted
    )


# -- a policy that decides from what the tools show it ---------------------------------------


def _section(user: str, tool: str) -> str:
    """The output of the last call of ``tool`` in the prompt's transcript ('' if none)."""
    parts = re.split(r"^--- step \d+: ", user, flags=re.MULTILINE)
    found = [p for p in parts if p.startswith(f"{tool}(")]
    return found[-1] if found else ""


def policy(messages: list[dict], schema: dict | None) -> dict:
    """Compare, then contradictions; MERGE iff none contradict and something is shared."""
    user = messages[1]["content"]
    compared, contra = _section(user, "compare"), _section(user, "contradictions")
    if not compared:
        return {"action": "tool", "tool": "compare", "side": None}
    if not contra:
        return {"action": "tool", "tool": "contradictions", "side": None}
    shared = [
        ln
        for ln in compared.splitlines()
        if ln.startswith(("Shared attributes:", "Shared names:")) and not ln.endswith(": none")
    ]
    if "No contradictions found." in contra and shared:
        cited = re.findall(r"\[([ab]\d+)\]", "\n".join(shared))
        return {
            "action": "decide",
            "verdict": "MERGE",
            "reasons": "; ".join(shared),
            "evidence": cited,
        }
    cited = re.findall(r"\[([ab]\d+)\]", contra)
    return {
        "action": "decide",
        "verdict": "SEPARATE",
        "reasons": contra.strip() or "nothing shared",
        "evidence": cited,
    }


def policy_llm() -> FakeLLM:
    return FakeLLM(responder=policy)


def agent_decisions(mem: MemoryService) -> list:
    return [d for d in mem.decisions() if d.method.startswith("agent:")]


# -- the scenarios ----------------------------------------------------------------------------


def test_three_namesakes_with_different_lives_stay_three_people(tmp_path: Path) -> None:
    llm = policy_llm()
    mem = loaded(tmp_path / "m.db", ["john-ana", "john-lee", "john-mia"], llm)
    result = mem.resolve_people()
    assert johns(mem) == [{"john-ana"}, {"john-lee"}, {"john-mia"}]
    assert result["candidates"] == 3 and result["separate"] == 3 and result["merged"] == 0
    assert result["llm_calls"] == len(llm.calls) == 9  # compare, contradictions, decide
    decided = {(d.a, d.b): d for d in agent_decisions(mem)}
    assert set(decided) == {
        ("john-ana/John", "john-lee/John"),
        ("john-ana/John", "john-mia/John"),
        ("john-lee/John", "john-mia/John"),
    }
    for d in decided.values():
        assert d.verdict == "SEPARATE" and d.method == "agent:fake-llm"
        assert "job" in d.reasons  # nurse / cargo pilot / teacher at the same time
        assert d.steps == (
            {"tool": "compare", "side": None},
            {"tool": "contradictions", "side": None},
        )
    # the nurse and the teacher both name Lisbon, but their jobs and homes contradict
    nurse_teacher = decided[("john-ana/John", "john-mia/John")]
    assert "residence" in nurse_teacher.reasons
    # evidence is the messages that state the contradicting jobs
    assert {"john-ana:D1:1", "john-lee:D1:1"} <= set(
        decided[("john-ana/John", "john-lee/John")].evidence
    )


def test_one_person_met_in_two_conversations_becomes_one(tmp_path: Path) -> None:
    mem = loaded(tmp_path / "m.db", ["john-ana", "john-bob"], policy_llm())
    result = mem.resolve_people()
    assert result["merged"] == 1 and result["separate"] == 0 and result["failed"] == 0
    assert johns(mem) == [{"john-ana", "john-bob"}]
    (d,) = agent_decisions(mem)
    assert (d.a, d.b, d.verdict) == ("john-ana/John", "john-bob/John", "MERGE")
    assert "job=nurse" in d.reasons and "sister Marta" in d.reasons
    # evidence: the messages where each John says he is a nurse and names his sister
    assert {"john-ana:D1:1", "john-bob:D1:1", "john-ana:D1:3", "john-bob:D1:3"} <= set(d.evidence)
    kept = mem.person(person_id_for("john-ana", "John"))
    assert kept.identities == (("john-ana", "John"), ("john-bob", "John"))


def test_namesakes_and_a_returning_person_together(tmp_path: Path) -> None:
    mem = loaded(tmp_path / "m.db", list(CONVERSATIONS), policy_llm())
    result = mem.resolve_people()
    assert johns(mem) == [{"john-ana", "john-bob"}, {"john-lee"}, {"john-mia"}]
    assert result["merged"] == 1 and result["failed"] == 0
    # after the merge the merged person is compared again, under its new label
    labels = {(d.a, d.b) for d in agent_decisions(mem) if d.verdict == "SEPARATE"}
    assert ("john-ana/John + john-bob/John", "john-lee/John") in labels


def test_the_tools_are_what_the_decision_rests_on(tmp_path: Path) -> None:
    """A policy that never calls the tools cannot tell the Johns apart: it merges all."""

    def blind(messages: list[dict], schema: dict | None) -> dict:
        return {"action": "decide", "verdict": "MERGE", "reasons": "same name", "evidence": ["a1"]}

    mem = loaded(tmp_path / "m.db", ["john-ana", "john-lee"], FakeLLM(responder=blind))
    mem.resolve_people()
    assert johns(mem) == [{"john-ana", "john-lee"}]
    (d,) = agent_decisions(mem)
    assert d.evidence == ()  # a1 was never shown by a tool, so it is not evidence


# -- declared identities --------------------------------------------------------------------


def test_declared_identity_merges_without_any_llm_call(tmp_path: Path) -> None:
    llm = FakeLLM()  # no responses: any call would raise
    mem = loaded(tmp_path / "m.db", ["john-ana", "john-bob", "john-lee"], llm)
    first = mem.declare_identity("u-john", "john-ana", "John")
    assert first.id == "u-john" and first.declared and first.identities == (("john-ana", "John"),)
    assert mem.decisions() == []  # nothing joined yet
    p = mem.declare_identity("u-john", "john-bob", "john")  # any casing of the spoken name
    assert p.identities == (("john-ana", "John"), ("john-bob", "John"))
    mem.declare_identity("u-other", "john-lee", "John")  # a different user: never merged
    result = mem.resolve_people()
    assert llm.calls == [] and result.get("llm_calls", 0) == 0
    assert johns(mem) == [{"john-ana", "john-bob"}, {"john-lee"}]
    (d,) = mem.decisions()
    assert (d.verdict, d.method, d.a, d.b) == (
        "MERGE",
        "declared",
        "john-ana/John",
        "john-bob/John",
    )
    assert d.reasons == "declared by the caller as user u-john"
    assert mem.person("u-john").declared and mem.person("u-other").declared
    assert mem.declare_identity("u-john", "john-bob", "John") == p  # again: no change
    assert len(mem.decisions()) == 1


def test_declare_identity_rejects_unknown_conversations_and_participants(tmp_path: Path) -> None:
    mem = loaded(tmp_path / "m.db", ["john-ana"])
    with pytest.raises(NotFound):
        mem.declare_identity("u1", "nowhere", "John")
    with pytest.raises(NotFound):
        mem.declare_identity("u1", "john-ana", "Zed")
    with pytest.raises(InputError):
        mem.declare_identity("  ", "john-ana", "John")


def test_a_user_declared_in_many_chats_is_named_briefly_in_each_decision(
    tmp_path: Path,
) -> None:
    """An assistant is declared in every chat: a new chat's decision names the first
    identities and how many more, not all of them (each was longer than the last)."""
    mem = service(tmp_path / "m.db")
    for n in range(6):
        mem.add(f"Hello from chat {n}.", conversation=f"c{n}", user_id="u-sam")
    merges = [d for d in mem.decisions("identity") if d.verdict == "MERGE"]
    assert [d.b for d in merges] == [f"c{n}/u-sam" for n in range(1, 6)]
    assert merges[1].a == "c0/u-sam + c1/u-sam"
    assert merges[-1].a == "c0/u-sam + c1/u-sam + c2/u-sam and 2 more"
    assert len(mem.person("u-sam").identities) == 6


def test_a_declaration_counts_only_what_the_user_held_before(tmp_path: Path) -> None:
    """Identities that move along with the declared one (merged into its person) were
    not held before it: the decision's "and N more" leaves them out."""
    mem = loaded(tmp_path / "m.db", ["john-ana", "john-lee"])
    for n in range(4):
        mem.add(f"Hello from chat {n}.", conversation=f"c{n}", user_id="u-sam")
    (ana,) = [p for p in mem.persons() if ("john-ana", "John") in p.identities]
    if ("john-lee", "John") not in ana.identities:
        (lee,) = [p for p in mem.persons() if ("john-lee", "John") in p.identities]
        mem.merge_people(ana.id, lee.id)
    mem.declare_identity("u-sam", "john-ana", "John")
    last = [d for d in mem.decisions("identity") if d.b == "john-ana/John"]
    assert [d.a for d in last] == ["c0/u-sam + c1/u-sam + c2/u-sam and 1 more"]
    assert len(mem.person("u-sam").identities) == 6  # John of john-lee came along


def test_redeclaring_an_identity_moves_it_to_the_new_user(tmp_path: Path) -> None:
    mem = loaded(tmp_path / "m.db", ["john-ana", "john-bob"])
    mem.declare_identity("u1", "john-ana", "John")
    mem.declare_identity("u1", "john-bob", "John")
    mem.declare_identity("u2", "john-bob", "John")
    assert mem.person("u1").identities == (("john-ana", "John"),)
    assert mem.person("u2").identities == (("john-bob", "John"),)


def test_without_an_llm_only_declared_identities_merge(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    mem = loaded(path, ["john-ana", "john-bob", "john-lee", "john-mia"])
    assert mem.llm is None
    mem.declare_identity("u-john", "john-ana", "John")
    mem.declare_identity("u-john", "john-bob", "John")
    result = mem.resolve_people()
    assert result["merged"] == 0 and result["llm_calls"] == 0
    assert johns(mem) == [{"john-ana", "john-bob"}, {"john-lee"}, {"john-mia"}]
    no_llm = [d for d in mem.decisions() if d.method == "no_llm"]
    assert {(d.a, d.b) for d in no_llm} == {
        ("john-ana/John + john-bob/John", "john-lee/John"),
        ("john-ana/John + john-bob/John", "john-mia/John"),
        ("john-lee/John", "john-mia/John"),
    }
    assert all(d.verdict == "SEPARATE" and "evidence" in d.reasons for d in no_llm)
    assert mem.resolve_people() == {"skipped": "nothing new: 7 persons, all pairs decided"}
    mem.close()
    # once an LLM is configured the no_llm decisions are decided again, by the agent
    llm = policy_llm()
    again = service(path, llm)
    result = again.resolve_people()
    assert result["candidates"] == 3 and result["separate"] == 3 and len(llm.calls) == 9
    assert len(agent_decisions(again)) == 3
    assert again.resolve_people() == {"skipped": "nothing new: 7 persons, all pairs decided"}
    again.close()


def test_no_llm_with_namesakes_keeps_everyone_apart(tmp_path: Path) -> None:
    mem = loaded(tmp_path / "m.db", ["john-ana", "john-bob"])
    mem.resolve_people()
    assert johns(mem) == [{"john-ana"}, {"john-bob"}]
    (d,) = mem.decisions()
    assert (d.verdict, d.method, d.evidence) == ("SEPARATE", "no_llm", ())


# -- idempotence ------------------------------------------------------------------------------


def dump(db: Path) -> dict[str, list]:
    """Every row of every table, for before/after comparisons."""
    con = sqlite3.connect(str(db))
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"'))) for t in tables}
    finally:
        con.close()


@pytest.mark.parametrize("with_llm", [True, False])
def test_running_again_changes_nothing(tmp_path: Path, with_llm: bool) -> None:
    path = tmp_path / "m.db"
    llm = policy_llm() if with_llm else None
    mem = loaded(path, list(CONVERSATIONS), llm)
    mem.declare_identity("u-mia", "john-mia", "Mia")
    first = run_people(mem.core, {})
    assert first["candidates"] >= 3
    calls = len(llm.calls) if llm else 0
    before = dump(path)
    again = run_people(mem.core, {})
    assert list(again) == ["skipped"] and again["skipped"].startswith("nothing new")
    assert dump(path) == before
    assert (len(llm.calls) if llm else 0) == calls


def test_new_messages_make_a_pair_worth_deciding_again(tmp_path: Path) -> None:
    mem = loaded(tmp_path / "m.db", ["john-ana", "john-lee"], policy_llm())
    mem.resolve_people()
    more = make_conversation(
        "john-lee",
        [[("John", "I bought a sailing boat in Bergen.")]],
        people=("John", "Lee"),
        start=T0 + timedelta(weeks=5),
        first_session=2,
    )
    mem.add(more)
    result = mem.resolve_people()
    assert result["candidates"] == 1 and result["separate"] == 1
    assert len(agent_decisions(mem)) == 2


def test_a_later_turn_gives_only_a_new_speaker_an_identity(tmp_path: Path) -> None:
    mem = loaded(tmp_path / "m.db", ["john-ana"])
    before = {(p.name, p.identities) for p in mem.persons()}
    mem.add("How was the night shift?", conversation="john-ana", user_id="Ana")
    assert {(p.name, p.identities) for p in mem.persons()} == before  # known speakers
    mem.add("Hi both, Ana told me about Lisbon.", conversation="john-ana", user_id="Zoe")
    zoe = [p for p in mem.persons() if p.name == "Zoe"]
    assert [p.identities for p in zoe] == [(("john-ana", "Zoe"),)]
    # declared later, the identity the add made moves to the user
    assert mem.declare_identity("u-zoe", "john-ana", "Zoe").identities == (("john-ana", "Zoe"),)


def test_an_add_that_leaves_identities_to_its_caller_makes_none_until_asked(
    tmp_path: Path,
) -> None:
    """The proxy stores a turn before it answers and gives its speakers identities after
    (``identities=False``, then ``ensure_speakers``): the answer waits for no person."""
    mem = MemoryService(tmp_path / "m.db", settings=Settings(embedder="fake"))
    conv = ana_lee("c1")
    mem.add(conv, extract=False, identities=False)
    assert mem.store.identity_names("c1") == []
    mem.ensure_speakers([conv])
    assert sorted(mem.store.identity_names("c1")) == ["Ana", "Lee"]
    assert {p.name for p in mem.persons()} == {"Ana", "Lee"}
    mem.ensure_speakers([conv])  # nothing new: nothing changes
    assert sorted(mem.store.identity_names("c1")) == ["Ana", "Lee"]
    mem.close()


def test_deleting_a_conversation_removes_its_identities(tmp_path: Path) -> None:
    mem = loaded(tmp_path / "m.db", ["john-ana", "john-lee"])
    mem.resolve_people()
    mem.delete(conversation="john-lee")
    mem.resolve_people()
    assert johns(mem) == [{"john-ana"}]
    assert {p.name for p in mem.persons()} == {"John", "Ana"}


# -- LLM fault weather ------------------------------------------------------------------------


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the retry delays instead of waiting them out."""
    delays: list[float] = []
    monkeypatch.setattr(structured_module.time, "sleep", delays.append)
    return delays


COMPARE = {"action": "tool", "tool": "compare", "side": None}
CONTRA = {"action": "tool", "tool": "contradictions", "side": None}


def decide(verdict: str = "SEPARATE", evidence=("a1", "b1")) -> dict:
    return {
        "action": "decide",
        "verdict": verdict,
        "reasons": "jobs differ",
        "evidence": list(evidence),
    }


def one_pair(tmp_path: Path, llm: FakeLLM) -> MemoryService:
    return loaded(tmp_path / "m.db", ["john-ana", "john-lee"], llm)


def test_invalid_json_is_retried_with_the_error_shown(tmp_path: Path) -> None:
    llm = FakeLLM("this is not json {", COMPARE, decide())
    mem = one_pair(tmp_path, llm)
    result = mem.resolve_people()
    assert result["separate"] == 1 and result["failed"] == 0 and result["llm_calls"] == 3
    assert "Your previous answer was invalid" in llm.calls[1]["messages"][-1]["content"]
    (d,) = agent_decisions(mem)
    assert d.steps == ({"tool": "compare", "side": None},)


def test_an_unknown_tool_is_refused_and_asked_again(tmp_path: Path) -> None:
    llm = FakeLLM({"action": "tool", "tool": "horoscope"}, CONTRA, decide())
    mem = one_pair(tmp_path, llm)
    assert mem.resolve_people()["separate"] == 1
    note = llm.calls[1]["messages"][-1]["content"]
    assert "tool" in note and "invalid" in note
    (d,) = agent_decisions(mem)
    assert d.steps == ({"tool": "contradictions", "side": None},)
    assert {"john-ana:D1:1", "john-lee:D1:1"} == set(d.evidence)


def test_a_timeout_is_waited_out(tmp_path: Path, no_sleep: list[float]) -> None:
    llm = FakeLLM(LLMTimeout("slow"), CONTRA, decide())
    mem = one_pair(tmp_path, llm)
    assert mem.resolve_people()["separate"] == 1
    assert no_sleep == [1.0]


def test_a_persistent_failure_stores_nothing_and_is_retried_next_run(
    tmp_path: Path, no_sleep: list[float]
) -> None:
    llm = FakeLLM(LLMTimeout("slow"), LLMTimeout("slow"), LLMTimeout("slow"))
    mem = one_pair(tmp_path, llm)
    result = mem.resolve_people()
    assert result["failed"] == 1 and result["separate"] == 0 and result["merged"] == 0
    assert mem.decisions() == []
    usage = mem.llm_summary()["lifetime"]
    assert usage  # the failed calls are counted in the store
    llm.enqueue(CONTRA, decide())
    assert mem.resolve_people()["separate"] == 1


def test_evidence_aliases_the_tools_never_showed_are_dropped(tmp_path: Path) -> None:
    timeline_a = {"action": "tool", "tool": "timeline", "side": "a"}
    llm = FakeLLM(timeline_a, decide(evidence=["[a1]", "a99", "b1", "zz", "A3"]))
    mem = one_pair(tmp_path, llm)
    mem.resolve_people()
    (d,) = agent_decisions(mem)
    # b1 exists but only side a's timeline was shown; a99 and zz never existed
    assert d.evidence == ("john-ana:D1:1", "john-ana:D1:4")
    assert d.steps == ({"tool": "timeline", "side": "a"},)


def test_no_valid_evidence_keeps_the_decision_with_none(tmp_path: Path) -> None:
    llm = FakeLLM(decide(evidence=["a1", "b2"]))
    mem = one_pair(tmp_path, llm)
    mem.resolve_people()
    (d,) = agent_decisions(mem)
    assert d.verdict == "SEPARATE" and d.evidence == () and d.steps == ()


def test_an_exhausted_step_budget_keeps_them_separate(tmp_path: Path) -> None:
    llm = FakeLLM(responder=lambda m, s: {"action": "tool", "tool": "timeline", "side": None})
    mem = one_pair(tmp_path, llm)
    result = mem.resolve_people(max_steps=3)
    assert result["separate"] == 1 and len(llm.calls) == 3
    (d,) = agent_decisions(mem)
    assert d.reasons == "undecided within 3 steps" and len(d.steps) == 3
    assert "Steps left: 1. This is your last step" in llm.calls[-1]["messages"][1]["content"]


def test_answers_that_never_validate_fail_the_pair(tmp_path: Path) -> None:
    llm = FakeLLM({"action": "decide"}, {"action": "decide"}, {"action": "decide"})
    mem = one_pair(tmp_path, llm)
    result = mem.resolve_people()
    assert result["failed"] == 1 and mem.decisions() == []


# -- the tools, on claims written by hand --------------------------------------------------------


def claim(text: str, day: int, *, until: int | None = None, conv: str = "c1", speaker="John"):
    when = datetime(2023, 1, 1, tzinfo=UTC) + timedelta(days=day)
    return Claim(
        text=text,
        speaker=speaker,
        subject=speaker,
        conversation=conv,
        evidence=("D1:1",),
        said_at=when,
        valid_to=None if until is None else when + timedelta(days=until),
        id=day,
    )


def side(label: str, *claims: Claim) -> Side:
    from archivist.model import Person

    conv = claims[0].conversation
    return Side(label, Person(f"p-{label}", "John", ((conv, "John"),)), list(claims))


def test_a_job_held_at_different_times_is_no_contradiction() -> None:
    earlier = side("a", claim("John works as a nurse.", 0, until=100))
    later = side("b", claim("John works as a pilot.", 300, conv="c2"))
    same_time = side("b", claim("John works as a pilot.", 50, conv="c2"))
    assert contradictions(earlier, later) == "No contradictions found."
    assert "job: [a1] nurse" in contradictions(earlier, same_time)


def test_a_newer_value_on_one_side_closes_the_older_one() -> None:
    moved = side("a", claim("John lives in Oslo.", 0), claim("John moved to Bergen.", 30))
    other = side("b", claim("John lives in Bergen.", 60, conv="c2"))
    assert contradictions(moved, other) == "No contradictions found."
    assert "residence=Bergen ([a2], [b1])" in compare(moved, other)


def test_someone_elses_attributes_are_not_the_persons() -> None:
    a = side("a", claim("John's sister Marta lives in Porto and works as a teacher.", 0))
    b = side("b", claim("John lives in Lisbon and works as a nurse.", 0, conv="c2"))
    assert contradictions(a, b) == "No contradictions found."
    assert "family: sister Marta [a1]" in compare(a, b)


def test_shown_aliases_are_read_from_tool_outputs() -> None:
    assert shown_aliases(["[a1] x", "y [b12], [a3]", "a4 without brackets"]) == {"a1", "b12", "a3"}


# -- the prompt -----------------------------------------------------------------------------------

NOW = datetime(2023, 7, 14, 9, 30, tzinfo=UTC)
SIDE_A = identity.SideInfo("a", "John", (("john-ana", "John"),), ("Ana",), 4, 3)
SIDE_B = identity.SideInfo("b", "John", (("john-lee", "John"),), ("Lee",), 2, 2, declared=True)
TRANSCRIPT = (
    identity.ToolResult("compare", None, "Shared attributes: none\nShared names: none"),
    identity.ToolResult("timeline", "a", "[a1] 2023-05-08 fact, said by John: John is a nurse."),
)


def render(prompt: list[dict]) -> str:
    parts = [f"# {identity.NAME} v{identity.VERSION}"]
    parts += [f"=== {m['role']} ===\n{m['content']}" for m in prompt]
    return "\n\n".join(parts) + "\n"


def test_identity_prompt_matches_its_snapshot() -> None:
    text = render(identity.build(SIDE_A, SIDE_B, TRANSCRIPT, NOW, 4))
    path = SNAPSHOTS / f"{identity.NAME}.txt"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == text


def test_identity_prompt_is_pure_and_uses_the_now_passed_in() -> None:
    first = identity.build(SIDE_A, SIDE_B, TRANSCRIPT, NOW, 4)
    assert first == identity.build(SIDE_A, SIDE_B, TRANSCRIPT, NOW, 4)
    old = identity.build(SIDE_A, SIDE_B, TRANSCRIPT, datetime(1999, 1, 1, tzinfo=UTC), 4)
    assert "Current time: 2023-07-14 09:30." in first[1]["content"]
    strip = lambda p: re.sub(r"Current time: [^.]*\.", "", p[1]["content"])  # noqa: E731
    assert strip(old) == strip(first)
    empty = identity.build(SIDE_A, SIDE_B, (), NOW, 1)[1]["content"]
    assert "No tools called yet." in empty and "last step" in empty


def test_identity_schema_is_strict_about_tools_and_decisions() -> None:
    doc = identity.IdentityStep.model_json_schema()
    assert json.loads(json.dumps(doc)) == doc
    ok = identity.IdentityStep.model_validate({"action": "tool", "tool": "compare"})
    assert ok.side is None
    for bad in (
        {"action": "tool", "tool": "horoscope"},
        {"action": "tool"},
        {"action": "decide", "verdict": "MERGE"},
        {"action": "decide", "verdict": "MAYBE", "reasons": "x"},
    ):
        with pytest.raises(ValueError):
            identity.IdentityStep.model_validate(bad)


# -- API and CLI ---------------------------------------------------------------------------


def test_person_by_id_or_unique_name(tmp_path: Path) -> None:
    mem = loaded(tmp_path / "m.db", ["john-ana", "john-lee"])
    assert mem.person("Ana").identities == (("john-ana", "Ana"),)
    pid = person_id_for("john-lee", "John")
    assert mem.person(pid).identities == (("john-lee", "John"),)
    with pytest.raises(InputError, match="2 persons"):
        mem.person("john")
    with pytest.raises(NotFound):
        mem.person("Nobody")
    assert mem.people()  # the speaker-name list search uses is still there


def invoke(db: Path, *args: str):
    people_cli.register(cli)
    result = CliRunner().invoke(
        cli, ["--db", str(db), "--embedder", "fake", *args], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def test_cli_people_declare_and_decisions(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    for cid in ("john-ana", "john-bob", "john-lee"):
        conv_file = write_jsonl(tmp_path / f"{cid}.jsonl", jsonl_records(conversation(cid)))
        invoke(db, "ingest", str(conv_file))
    rows = json.loads(invoke(db, "people", "--json"))
    assert sorted(r["name"] for r in rows) == ["Ana", "Bob", "John", "John", "John", "Lee"]
    ana = next(r for r in rows if r["name"] == "Ana")
    assert ana["identities"] == [{"conversation": "john-ana", "name": "Ana", "messages": 1}]
    out = invoke(db, "people", "declare", "u-john", "john-ana", "John")
    assert out.strip() == "u-john: john-ana/John"
    invoke(db, "people", "declare", "u-john", "john-bob", "John")
    resolved = json.loads(invoke(db, "people", "resolve", "--json"))
    assert resolved["separate"] == 1 and resolved["llm_calls"] == 0
    text = invoke(db, "people")
    assert "u-john  John [declared]: 6 messages in john-ana/John (3), john-bob/John (3)" in text
    decisions = json.loads(invoke(db, "decisions", "--json"))
    assert [(d["verdict"], d["method"]) for d in decisions] == [
        ("MERGE", "declared"),
        ("SEPARATE", "no_llm"),
    ]
    assert "SEPARATE" in invoke(db, "decisions", "--verdict", "SEPARATE")
    assert "MERGE" not in invoke(db, "decisions", "--verdict", "SEPARATE")


def test_context_and_timeline_show_the_conversation_and_claims(tmp_path: Path) -> None:
    llm = FakeLLM(
        {"action": "tool", "tool": "context", "side": "b"},
        {"action": "tool", "tool": "timeline", "side": None},
        decide(),
    )
    mem = one_pair(tmp_path, llm)
    mem.resolve_people()
    shown = llm.calls[2]["messages"][1]["content"]
    assert "Conversation 'john-lee' (side b): participants John, Lee;" in shown
    assert "3 messages, 2 by John" in shown
    assert "(2023-05-15) I fly cargo planes between Oslo and Reykjavik." in shown
    assert "Conversation 'john-ana'" not in shown  # context(b) shows side b only
    assert "Timeline of side a (John)" in shown and "Timeline of side b (John)" in shown
    assert "[b1] 2023-05-15 fact, said by John: John fl" in shown
