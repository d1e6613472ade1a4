"""What serves a goal, the judge's fifth task: the shipped model, an LLM and FakeJudge; a
person model's goals linked to what serves them and what works against them, in the
profile and in key info; and ``bench judge`` items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from archivist.cli.main import cli
from archivist.config import Settings
from archivist.judge import GoalPair, LLMJudge, Statement, TrainedJudge, Verdict
from archivist.judge.base import SERVES_LABELS, encode_serves
from archivist.judge.items import parse_item
from archivist.prompts import judge_pairs
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder, FakeJudge, FakeLLM
from archivist.write.archivist import HeuristicArchivist
from conftest import make_conversation, person_page

KINDS = {"japan": "goal", "overtime": "habit", "ibiza": "plan", "kettle": "event"}
CHAT = [
    [("Ana", "Saving every penny to take my mum to Japan one day."), ("Lee", "Aww.")],
    [("Ana", "I do overtime every Saturday now."), ("Lee", "Respect.")],
    [
        ("Ana", "I bought a blue kettle at the market."),
        ("Ana", "Booked Ibiza for the hen do, 900 quid gone."),
    ],
]


def kind_of(statement) -> Verdict:
    found = [k for w, k in KINDS.items() if w in statement.sentence.casefold()]
    return Verdict(found[0], 0.95) if found else Verdict("chit-chat", 0.9)


def serve_of(pair: GoalPair) -> Verdict | None:
    if "japan" not in pair.goal.casefold():
        return None
    if "overtime" in pair.item.casefold():
        return Verdict("serves", 0.9)
    if "ibiza" in pair.item.casefold():
        return Verdict("hinders", 0.8)
    return None


def memory(path: Path, judge=None, **kw) -> MemoryService:
    judge = judge or FakeJudge(kind=kind_of, serve=serve_of)
    return MemoryService(
        path,
        settings=Settings().with_(consolidate_mode="manual"),
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(judge=judge),
        judge=judge,
        **kw,
    )


def test_a_goal_is_linked_to_what_serves_it_and_what_works_against_it(tmp_path: Path) -> None:
    judge = FakeJudge(kind=kind_of, serve=serve_of)
    with memory(tmp_path / "m.db", judge) as m:
        m.add(make_conversation("c", CHAT))
        profile = m.profile("Ana")
    (goal,) = dict(profile.model())["goals"]
    assert "Japan" in goal.text
    assert [x.text for x in goal.serves] == [
        e.text for e in profile.entries() if "overtime" in e.text
    ]
    assert [x.text for x in goal.hinders] == [
        e.text for e in profile.entries() if "Ibiza" in e.text
    ]
    assert goal.serves[0].p == pytest.approx(0.9)
    asked = [p for p in judge.asked if isinstance(p, GoalPair)]
    assert asked and all("Japan" in p.goal for p in asked)  # a goal against each other entry
    assert not any("Japan" in p.item for p in asked)
    text = profile.text()
    assert "serving it: " in text and "overtime" in text.split("serving it: ")[1]
    assert "against it: " in text and "Ibiza" in text.split("against it: ")[1]
    as_json = profile.to_dict()["model"]["goals"][0]
    assert as_json["serves"][0]["claim"] == goal.serves[0].claim
    assert as_json["hinders"][0]["text"] == goal.hinders[0].text
    others = [e for e in profile.entries() if e is not goal]
    assert all(not e.serves and not e.hinders for e in others)  # only a goal has links


def test_an_unsure_judge_links_nothing(tmp_path: Path) -> None:
    unsure = FakeJudge(kind=kind_of, serve=lambda p: Verdict("serves", 0.55))
    with memory(tmp_path / "m.db", unsure) as m:
        m.add(make_conversation("c", CHAT))
        (goal,) = dict(m.profile("Ana").model())["goals"]
    assert goal.serves == () and goal.hinders == ()


def test_key_info_names_what_serves_a_goal(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db") as m:
        m.add(make_conversation("c", CHAT))
        m.consolidate()
        (ana,) = [p for p in m.persons() if p.name == "Ana"]
        text = m.key_info(ana.id)
    goal = text[text.index("Goal: ") :]
    assert "Japan" in goal and "serving it: " in goal
    assert "overtime" in goal[goal.index("serving it: ") :].split(").")[0]


def serves_llm() -> FakeLLM:
    """Answers judge_pairs: kinds by KINDS, overtime serves the goal, no ending."""

    def respond(messages: list[dict], schema: dict | None) -> dict:
        title = (schema or {}).get("title")
        blocks = messages[1]["content"].split("\n\nItem ")
        out = []
        for n, block in enumerate(blocks, start=1):
            low = block.casefold()
            if title == "KindsOut":
                label = next((k for w, k in KINDS.items() if w in low), "chit-chat")
            elif title == "ServesOut":
                goal, item = low.split("goal: ")[1].split("\n  item: ")
                label = "serves" if "japan" in goal and "overtime" in item else None
            else:  # relations: nothing here ends anything
                label = "continues" if title == "RelationsOut" else None
            if label is not None:
                out.append({"item": n, "reason": f"because {label}", "verdict": label})
        return {"judgements": out}

    return FakeLLM(responder=respond)


def test_the_llm_judges_what_serves_a_goal_reason_first_and_falls_back() -> None:
    llm = serves_llm()
    calls: list = []

    def call(prompt, messages, out):
        calls.append(messages)
        return out.model_validate_json(llm.complete(messages, schema=out.model_json_schema()).text)

    fallback = FakeJudge(serve=lambda p: Verdict("hinders", 0.7))
    judge = LLMJudge(call, fallback=fallback)
    pairs = [GoalPair("take mum to Japan", "overtime every Saturday", "Ana")] * 11
    pairs.append(GoalPair("take mum to Japan", "booked Ibiza", "Ana"))
    verdicts = judge.serves(pairs)
    assert len(calls) == 2  # BATCH = 10 pairs a call
    assert [v.label for v in verdicts] == ["serves"] * 11 + ["hinders"]
    assert verdicts[0].reason == "because serves"
    assert verdicts[11].reason == ""  # left out by the LLM: the fallback's verdict
    props = list(judge_pairs.ServeOut.model_json_schema()["properties"])
    assert props.index("reason") < props.index("verdict")


def test_with_an_llm_the_profile_links_goals_through_it(tmp_path: Path) -> None:
    with MemoryService(
        tmp_path / "m.db",
        settings=Settings().with_(consolidate_mode="manual"),
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(judge=FakeJudge(kind=kind_of)),  # the facets
        llm=serves_llm(),
    ) as m:
        assert isinstance(m.core.judge, LLMJudge)
        m.add(make_conversation("c", CHAT))
        (goal,) = dict(m.profile("Ana").model())["goals"]
        assert [x.text for x in goal.serves] and "overtime" in goal.serves[0].text
        assert m.llm_summary()["tasks"]["judge_pairs"]["calls"] >= 1


def test_offline_the_shipped_judge_links_no_goal(tmp_path: Path) -> None:
    """The shipped model was trained without the task (docs/judge.md: the models trained
    with it cost LoCoMo recall), so it answers an unsure unrelated and links nothing."""
    model = TrainedJudge()
    assert "serves" not in model.card["labels"]
    (v,) = model.serves([GoalPair("run a half marathon", "long run sunday, 18k done", "Tom")])
    assert v == Verdict("unrelated", 0.0, "no serves task in this model")
    assert model.serves([]) == []
    with MemoryService(
        tmp_path / "m.db",
        settings=Settings().with_(consolidate_mode="manual"),
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(judge=FakeJudge(kind=kind_of)),
        judge=model,
    ) as m:
        m.add(make_conversation("c", CHAT))
        (goal,) = dict(m.profile("Ana").model())["goals"]
    assert goal.serves == () and goal.hinders == ()


def test_a_model_trained_with_the_task_reads_it_at_its_offset(tmp_path: Path) -> None:
    """A card that lists ``serves`` is read at its offset, as its three labels (here the
    shipped network's first three logits stand in for a trained head: the reading, not
    the verdict, is under test); the other tasks read as before."""
    shipped = TrainedJudge().folder
    card = json.loads((shipped / "judge.json").read_text(encoding="utf-8"))
    card["labels"]["serves"], card["offsets"]["serves"] = list(SERVES_LABELS), 0
    (tmp_path / "judge.json").write_text(json.dumps(card), encoding="utf-8")
    (tmp_path / "judge.onnx").symlink_to(shipped / "judge.onnx")
    trained = TrainedJudge(tmp_path)
    pair = GoalPair("save for a deposit", "cancelled netflix", "Ana")
    (v,) = trained.serves([pair])
    probs = trained.probabilities("serves", [encode_serves(pair)])[0]
    assert v.label == SERVES_LABELS[int(probs.argmax())] and v.p == pytest.approx(probs.max())
    assert probs.sum() == pytest.approx(1.0, abs=1e-5)
    (k,) = trained.kinds([Statement("I love jazz.", "Ana")])
    assert k == TrainedJudge().kinds([Statement("I love jazz.", "Ana")])[0]


def test_serves_items_parse_and_bench(tmp_path: Path) -> None:
    raw = {
        "id": "s1",
        "task": "serves",
        "speaker": "Ana",
        "goal": "save for a deposit",
        "item": "picked up weekend shifts at the pub",
        "label": "serves",
        "hard": "none",
    }
    item = parse_item(raw, "x")
    assert item.pair == GoalPair("save for a deposit", "picked up weekend shifts at the pub", "Ana")
    assert item.extra == {"hard": "none"}
    bad = dict(raw, label="ends")
    with pytest.raises(Exception, match="serves label is one of serves, hinders, unrelated"):
        parse_item(bad, "x")
    unrelated = dict(raw, id="s2", item="my sister bought a flat", label="unrelated")
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps({"items": [raw, unrelated]}), encoding="utf-8")
    r = CliRunner().invoke(cli, ["bench", "judge", str(path), "--judge", "rules", "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)["tasks"]["serves"]
    assert got["n"] == 2 and got["accuracy"] == 0.5  # no rule links a goal


def test_the_person_page_shows_what_serves_a_goal(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("jinja2")
    page = person_page(tmp_path, memory, make_conversation("c", CHAT), "Ana")
    model = page.split('id="model-h"')[1].split('id="key-h"')[0]
    goal = model.split("<h4>Goals</h4>")[1].split("<h4>")[0]
    assert "Japan" in goal
    assert "serving it:" in goal and "overtime" in goal.split("serving it:")[1]
    assert "against it:" in goal and "Ibiza" in goal.split("against it:")[1]
    assert "judged 0.90" in goal
