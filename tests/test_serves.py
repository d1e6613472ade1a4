"""What serves a goal, the judge's fifth task: the shipped head, an LLM and FakeJudge; a
person model's goals linked to what serves them and what works against them, in the
profile and in key info; ``bench judge`` items; and ``archivist train serves``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from archivist.cli.main import cli
from archivist.config import Settings
from archivist.judge import GoalPair, LLMJudge, TrainedJudge, Verdict
from archivist.judge.items import parse_item
from archivist.judge.serves import load_head
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
    """No head ships (the one fitted reads the item, not the pair: docs/judge.md), so the
    trained judge answers an unsure unrelated and a profile shows no link."""
    model = TrainedJudge()
    (v,) = model.serves([GoalPair("run a half marathon", "signed up for couch to 5k", "Tom")])
    assert v == Verdict("unrelated", 0.0, "no serves head in this model")
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


def test_a_judge_folder_without_the_head_links_nothing(tmp_path: Path) -> None:
    bare = TrainedJudge(tmp_path)
    (v,) = bare.serves([GoalPair("save for a deposit", "cancelled netflix", "Ana")])
    assert v.label == "unrelated" and v.p == 0.0


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


def test_train_serves_fits_a_head_the_judge_reads(tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    goals = ["save for a deposit", "run a marathon", "learn spanish", "quit smoking", "sleep more"]
    steps = ["cut takeaways", "long run sunday", "duolingo daily", "nicotine patches", "bed by ten"]
    rows = []
    for i, (goal, step) in enumerate(zip(goals, steps, strict=True)):
        for j, (item, label) in enumerate(
            [
                (step, "serves"),
                (f"binge spent on {i} things", "hinders"),
                ("nice weather", "unrelated"),
            ]
        ):
            rows.append(
                {"id": f"t{i}{j}", "task": "serves", "speaker": "Ana", "goal": goal,
                 "item": item, "label": label}
            )  # fmt: skip
    (data / "serves-a.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    (data / "fresh.jsonl").write_text(json.dumps(rows[0]), encoding="utf-8")
    (data / "fresh2.jsonl").write_text(json.dumps(rows[1]), encoding="utf-8")
    r = CliRunner().invoke(cli, ["train", "serves", "--data", str(data), "--out", str(out)])
    assert r.exit_code == 0, r.output
    card = json.loads((out / "serves.json").read_text(encoding="utf-8"))
    assert card["train_items"] + card["dev"]["n"] == len(rows)
    assert card["fresh"]["n"] == card["fresh2"]["n"] == 1
    assert "majority" in card["dev"] and "cosine" in card["dev"]
    assert 0.0 <= card["dev"]["another_goal_linked"] <= 1.0
    pair = GoalPair("learn spanish", "duolingo daily", "Ana")
    for control, used in ((0.5, False), (0.0, True)):  # a head is used only past its control
        card["dev"]["another_goal_linked"] = control
        (out / "serves.json").write_text(json.dumps(card), encoding="utf-8")
        load_head.cache_clear()
        (v,) = TrainedJudge(out).serves([pair])
        assert (v.p > 0.0) is used, (control, v)
    first = (out / "serves.npz").read_bytes()
    CliRunner().invoke(cli, ["train", "serves", "--data", str(data), "--out", str(out)])
    assert (out / "serves.npz").read_bytes() == first  # the same data, the same head


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
