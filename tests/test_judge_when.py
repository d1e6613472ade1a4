"""The judge's fourth task, ``when``: does a time named without its direction ("the 10k in
May", "on Thursday") lie ahead of when it was said or behind it? Its implementations, the
time reader that asks it, and ``archivist bench judge`` on when items."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from archivist.cli.main import cli
from archivist.errors import InputError
from archivist.judge import WHEN_LABELS, LLMJudge, TimeMention, TrainedJudge, Verdict
from archivist.judge.items import parse_item
from archivist.lang.timeground import ground, undirected_times
from archivist.model import Message
from archivist.prompts import judge_pairs
from archivist.testing import FakeJudge, FakeLLM
from archivist.write.heuristic import heuristic_claims

MARCH = datetime(2025, 3, 2, 9, tzinfo=UTC)


def said(text: str, at: datetime = MARCH) -> Message:
    return Message("1", "c", 1, "Tom", text, at)


@pytest.mark.parametrize(
    "text, times",
    [
        ("signed up for the sheffield 10k in may 🏃 send help", ["in may"]),
        ("the Sheffield 10k in May", ["in May"]),
        ("went to the dentist on thursday", ["on thursday"]),
        ("booked the dentist for thursday", ["for thursday"]),
        ("since April", ["since April"]),
        ("you may be right", []),  # the modal verb is no month
        ("I may go", []),
        ("this may be the one", []),
        ("last May was wet", []),  # the word says which May
        ("next Thursday then", []),
        ("in 3 weeks", []),
    ],
)
def test_times_whose_place_depends_on_direction_are_found(text: str, times: list[str]) -> None:
    assert undirected_times(text, MARCH) == times


@pytest.mark.parametrize(
    "label, start",
    [("ahead", datetime(2025, 5, 1, tzinfo=UTC)), ("behind", datetime(2024, 5, 1, tzinfo=UTC))],
)
def test_the_judges_direction_places_a_yearless_month(label: str, start: datetime) -> None:
    judge = FakeJudge(when=lambda m: Verdict(label, 0.56))  # leaning is enough
    (claim,) = heuristic_claims([said("I signed up for the sheffield 10k in may")], judge=judge)
    assert claim.valid_from == start
    (asked,) = [a for a in judge.asked if isinstance(a, TimeMention)]
    assert asked.time == "in may" and asked.speaker == "Tom" and asked.said_at == MARCH


def test_an_unsure_direction_leaves_the_date_to_the_kind_and_the_tense() -> None:
    unsure = FakeJudge(when=lambda m: Verdict("ahead", 0.5))
    (claim,) = heuristic_claims([said("I did the 10k in May")], judge=unsure)
    assert claim.valid_from == datetime(2024, 5, 1, tzinfo=UTC)  # "did": the last May
    sure_plan = FakeJudge(kind=lambda s: Verdict("plan", 0.9), when=lambda m: None)
    (claim,) = heuristic_claims([said("I signed up for the 10k in May")], judge=sure_plan)
    assert claim.valid_from == datetime(2025, 5, 1, tzinfo=UTC)


def test_a_sentence_without_such_a_time_is_not_asked() -> None:
    judge = FakeJudge()
    heuristic_claims([said("moving to Leeds next month for the new job")], judge=judge)
    assert not [a for a in judge.asked if isinstance(a, TimeMention)]


def test_since_a_month_read_back_is_last_years() -> None:
    assert ground("sober since April", MARCH, "past")[0] == datetime(2024, 4, 1, tzinfo=UTC)


def test_the_shipped_model_answers_when_with_a_probability() -> None:
    model = TrainedJudge()
    verdicts = model.whens(
        [
            TimeMention("booked the dentist for thursday", "thursday", "Amira", MARCH),
            TimeMention("went to the dentist on thursday, two fillings", "on thursday", "Amira"),
        ]
    )
    assert len(verdicts) == 2
    assert all(v.label in WHEN_LABELS and 0.0 <= v.p <= 1.0 for v in verdicts)


def test_the_llm_judges_when_with_its_reason_first() -> None:
    def respond(messages, schema):
        assert schema.get("title") == "WhensOut"
        assert "TIME: in May" in messages[1]["content"]
        return {"judgements": [{"item": 1, "reason": "the race is to come", "verdict": "ahead"}]}

    llm = FakeLLM(responder=respond)

    def call(prompt, messages, out):
        return out.model_validate_json(llm.complete(messages, schema=out.model_json_schema()).text)

    judge = LLMJudge(call, fallback=FakeJudge(when=lambda m: Verdict("behind", 0.6)))
    got = judge.whens(
        [
            TimeMention("signed up for the 10k in May", "in May", "Tom", MARCH),
            TimeMention("ran it in May", "in May", "Tom", MARCH),  # left out: the fallback's
        ]
    )
    assert got == [Verdict("ahead", 0.8, "the race is to come"), Verdict("behind", 0.6)]
    props = list(judge_pairs.WhenOut.model_json_schema()["properties"])
    assert props.index("reason") < props.index("verdict")


def when_item(**kw) -> dict:
    base = {
        "id": "w1",
        "task": "when",
        "speaker": "Tom",
        "sentence": "signed up for the 10k in may",
        "time": "in may",
        "said_at": "2025-03-02",
        "label": "ahead",
    }
    return {**base, **kw}


def test_when_items_are_checked_with_one_line_errors() -> None:
    it = parse_item(when_item(), "x")
    assert isinstance(it.pair, TimeMention) and it.pair.time == "in may"
    with pytest.raises(InputError, match="'time' must be a part of 'sentence'"):
        parse_item(when_item(time="in June"), "x")
    with pytest.raises(InputError, match="label is one of ahead, behind"):
        parse_item(when_item(label="now"), "x")


@pytest.mark.parametrize("judge", ["model", "rules"])
def test_bench_judge_scores_when_items(tmp_path: Path, judge: str) -> None:
    items = [
        when_item(),
        when_item(id="w2", sentence="did the 10k in May, 54 mins", time="in May", label="behind"),
    ]
    path = tmp_path / "when.json"
    path.write_text(json.dumps({"items": items}))
    out = CliRunner().invoke(cli, ["bench", "judge", str(path), "--judge", judge, "--json"])
    assert out.exit_code == 0, out.output
    when = json.loads(out.output)["tasks"]["when"]
    assert when["n"] == 2 and set(when["by_label"]) == set(WHEN_LABELS)
    if judge == "rules":  # the tense reads "signed up" as past: the old reader's mistake
        assert [w["id"] for w in when["wrong"]] == ["w1"]


def test_a_model_trained_before_the_task_answers_unsure(tmp_path: Path) -> None:
    from archivist.judge.trained import CARD_FILE, MODEL_DIR, MODEL_FILE

    card = json.loads((MODEL_DIR / CARD_FILE).read_text(encoding="utf-8"))
    del card["labels"]["when"], card["offsets"]["when"]
    (tmp_path / CARD_FILE).write_text(json.dumps(card), encoding="utf-8")
    (tmp_path / MODEL_FILE).symlink_to(MODEL_DIR / MODEL_FILE)
    older = TrainedJudge(tmp_path)
    (v,) = older.whens([TimeMention("booked the dentist for thursday", "thursday", "Amira")])
    assert v.p == 0.0  # below any threshold: the tense places the date, as before
    (claim,) = heuristic_claims([said("I did the 10k in May")], judge=older)
    assert claim.valid_from == datetime(2024, 5, 1, tzinfo=UTC)


@pytest.mark.parametrize("label, said", [("ahead", "May 2025"), ("behind", "May 2024")])
def test_answers_and_context_give_the_date_the_judge_placed(
    tmp_path: Path, label: str, said: str
) -> None:
    from archivist.config import Settings
    from archivist.model import Conversation
    from archivist.service import MemoryService
    from archivist.testing import FakeEmbedder
    from archivist.write.archivist import HeuristicArchivist

    msg = Message("1", "c", 1, "Tom", "I signed up for the Sheffield 10k in May", MARCH)
    judge = FakeJudge(when=lambda m: Verdict(label, 0.9))
    with MemoryService(
        tmp_path / "m.db",
        settings=Settings(judge="model"),
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(judge=judge),
    ) as mem:
        mem.add(Conversation("c", ("Tom", "Priya"), (msg,)))
        answer = mem.ask("When is Tom's 10k?", at=MARCH.replace(day=20))
        shown = mem.context("how's the training?", person="Tom", at=MARCH.replace(day=20))
    # the date the claim took from the judge, not the one the tense ("signed") gives
    assert answer.answer == said and answer.said_at == msg.timestamp
    assert f"in May [{said}]" in shown.text
