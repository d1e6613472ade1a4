"""The judge seam: its three implementations, how reconciliation and answers use it, and
``archivist bench judge``. The trained model is the one shipped in the package."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from archivist.cli.main import cli
from archivist.config import Settings
from archivist.errors import ConfigError, InputError
from archivist.judge import (
    KIND_LABELS,
    LLMJudge,
    RelationPair,
    Statement,
    SupportPair,
    TrainedJudge,
    Verdict,
    judge_for,
    kind,
    relation,
    support,
)
from archivist.judge.items import parse_item, read_items
from archivist.mem0 import Memory
from archivist.model import Message
from archivist.prompts import judge_pairs
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder, FakeJudge, FakeLLM
from archivist.write.archivist import HeuristicArchivist
from archivist.write.heuristic import heuristic_claims
from conftest import aiko_priya, make_conversation


@pytest.fixture(scope="module")
def model() -> TrainedJudge:
    return TrainedJudge()


def test_the_shipped_model_labels_every_task_with_probabilities(model: TrainedJudge) -> None:
    rel = model.relations(
        [
            RelationPair("Priya", "I'm pescatarian, fish is my whole protein", "went fully vegan"),
            RelationPair("Tom", "I cycle to work every day", "my sister bought a new car"),
        ]
    )
    sup = model.supports([SupportPair("Is Gil drinking?", "Dry January, not a drop", "Gil")])
    assert [v.label in ("ends", "continues", "unrelated") for v in rel] == [True, True]
    assert sup[0].label in ("yes", "no", "answers", "neither")
    assert all(0.0 <= v.p <= 1.0 for v in (*rel, *sup))
    assert model.relations([]) == [] and model.supports([]) == []
    card = model.card
    assert card["labels"]["relation"] == ["ends", "continues", "unrelated"]
    assert card["offsets"] == {"relation": 0, "support": 3, "kind": 7, "when": 16}
    assert card["labels"]["when"] == ["ahead", "behind"]
    assert card["labels"]["kind"] == list(KIND_LABELS)


def test_the_model_is_deterministic_and_batch_order_free(model: TrainedJudge) -> None:
    pairs = [
        RelationPair(
            "Ana", "I work at the bakery on Rua Augusta", "started at the council monday!"
        ),
        RelationPair("Ana", "keto since march", "keto is going great, down 4kg"),
        RelationPair("Ana", "my dog Milo is 12 now", "finished my shift, so tired"),
    ]
    one_by_one = [relation(model, p.older, p.newer, p.speaker) for p in pairs]
    batched = model.relations(pairs)
    reversed_ = model.relations(pairs[::-1])[::-1]
    assert (
        [v.label for v in one_by_one] == [v.label for v in batched] == [v.label for v in reversed_]
    )
    for a, b in zip(batched, reversed_, strict=True):
        assert a.p == pytest.approx(b.p, abs=1e-4)


def test_a_missing_model_is_a_config_error_naming_the_way_out(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ARCHIVIST_JUDGE=rules"):
        TrainedJudge(tmp_path).relations([RelationPair("A", "x", "y")])


def test_settings_choose_the_judge() -> None:
    assert isinstance(judge_for(Settings()), TrainedJudge)  # auto without an LLM: the model
    assert isinstance(judge_for(Settings(judge="model")), TrainedJudge)
    assert judge_for(Settings(judge="rules")) is None
    calls = []
    chosen = judge_for(Settings(), lambda *a: calls.append(a))
    assert isinstance(chosen, LLMJudge)
    assert isinstance(judge_for(Settings(judge="model"), lambda *a: None), TrainedJudge)
    with pytest.raises(ConfigError, match="judge must be one of"):
        Settings(judge="vibes")
    with pytest.raises(ConfigError, match="needs an LLM"):
        Settings(judge="llm")
    assert Settings.from_env({"ARCHIVIST_JUDGE": "rules"}).judge == "rules"


def pairs_llm(verdicts: dict[str, str]) -> FakeLLM:
    """Answers judge_pairs: each item's verdict is the first key found in its text."""

    def respond(messages: list[dict], schema: dict | None) -> dict:
        title = (schema or {}).get("title")
        assert title in ("RelationsOut", "SupportsOut"), title
        items = messages[1]["content"].split("\n\nItem ")
        out = []
        for n, block in enumerate(items, start=1):
            label = next((v for k, v in verdicts.items() if k in block), None)
            if label is not None:
                out.append({"item": n, "reason": f"because {label}", "verdict": label})
        return {"judgements": out}

    return FakeLLM(responder=respond)


def test_the_llm_judge_batches_puts_reason_first_and_falls_back(model: TrainedJudge) -> None:
    llm = pairs_llm({"vegan": "ends", "steak": "continues"})
    calls: list = []

    def call(prompt, messages, out):
        calls.append(messages)
        raw = llm.complete(messages, schema=out.model_json_schema())
        return out.model_validate_json(raw.text)

    judge = LLMJudge(call, fallback=model)
    pairs = [RelationPair("Li", "pescatarian", "went vegan")] * 12
    pairs.append(RelationPair("Li", "vegetarian", "cheat day, had a steak"))
    pairs.append(RelationPair("Li", "I run", "nothing the model names"))
    verdicts = judge.relations(pairs)
    assert len(calls) == 2  # BATCH = 10 pairs a call
    assert [v.label for v in verdicts[:13]] == ["ends"] * 12 + ["continues"]
    assert verdicts[0].reason == "because ends"
    assert verdicts[13].reason == ""  # left out by the LLM: the trained model's verdict
    props = list(judge_pairs.RelationOut.model_json_schema()["properties"])
    assert props.index("reason") < props.index("verdict")
    props = list(judge_pairs.SupportOut.model_json_schema()["properties"])
    assert props.index("reason") < props.index("verdict")


def memory(path: Path, settings: Settings | None = None, **kw) -> MemoryService:
    settings = (settings or Settings()).with_(consolidate_mode="manual", reconcile_on_write=False)
    return MemoryService(
        path, settings=settings, embedder=FakeEmbedder(), archivist=HeuristicArchivist(), **kw
    )


def leg_break() -> object:
    """An ending no phrase rule sees: a broken leg ends cycling to work."""
    return make_conversation(
        "leg",
        [
            [("Ana", "I cycle to the office every day, forty minutes along the canal.")],
            [("Ana", "Broke my leg skiing, out for three months at least.")],
        ],
    )


def ends_when(word: str):
    return lambda p: Verdict("ends", 0.95) if word in p.newer.casefold() else None


def test_reconciliation_asks_the_judge_and_logs_its_verdict(tmp_path: Path) -> None:
    judge = FakeJudge(relation=ends_when("broke"))
    with memory(tmp_path / "m.db", judge=judge) as mem:
        mem.add(leg_break())
        report = mem.reconcile()
        assert report["judged"] == 1
        (c,) = mem.conflicts()
        assert c.method == "fake-judge" and "cycle" in c.old_value
        old = next(x for x in mem.claims(limit=10) if "cycle" in x.text)
        assert old.status == "superseded"
        asked = [p for p in judge.asked if isinstance(p, RelationPair)]
        assert asked and all(p.speaker == "Ana" for p in asked)
        assert all("cycle" in p.older and "Broke" in p.newer for p in asked)


def test_an_unsure_or_continuing_verdict_closes_nothing(tmp_path: Path) -> None:
    unsure = FakeJudge(relation=lambda p: Verdict("ends", 0.55))
    with memory(tmp_path / "a.db", judge=unsure) as mem:
        mem.add(leg_break())
        mem.reconcile()
        assert mem.conflicts() == []
    goes_on = FakeJudge(relation=lambda p: Verdict("continues", 0.99))
    with memory(tmp_path / "b.db", judge=goes_on) as mem:
        mem.add(leg_break())
        mem.reconcile()
        assert mem.conflicts() == []
        assert {c.status for c in mem.claims(limit=10)} == {"current"}


def test_another_speakers_claims_never_reach_the_judge(tmp_path: Path) -> None:
    judge = FakeJudge(relation=ends_when("broke"))
    conv = make_conversation(
        "two",
        [[("Ana", "I cycle to the office every day.")], [("Lee", "Broke my leg skiing!")]],
    )
    with memory(tmp_path / "m.db", judge=judge) as mem:
        mem.add(conv)
        mem.reconcile()
        assert mem.conflicts() == []
        assert not any(isinstance(p, RelationPair) and p.speaker != "Lee" for p in judge.asked)


def test_with_an_llm_reconciliation_and_answers_use_it(tmp_path: Path) -> None:
    llm = pairs_llm({"leg skiing": "ends"})
    with memory(tmp_path / "m.db", llm=llm) as mem:
        mem.add(leg_break())
        mem.reconcile()
        (c,) = mem.conflicts()
        assert c.method == "llm"
        assert mem.llm_summary()["tasks"]["judge_pairs"]["calls"] >= 1


def test_with_an_llm_whose_words_a_sentence_is_goes_to_it(tmp_path: Path) -> None:
    """Before "that was Priya's", the configured LLM reads the subject-less sentence Aiko
    said; its "answers" makes the sentence hers (read/answer.py verify_speaker)."""
    from archivist.read.answer import answer_from, retrieve

    conv = aiko_priya()
    question = "When did Aiko start her pottery course?"
    settled, unsettled = (
        {"pottery course thursday": "answers"},
        {"pottery course thursday": "neither"},
    )
    for verdicts, abstains in ((settled, False), (unsettled, True)):
        with memory(tmp_path / f"{abstains}.db", llm=pairs_llm(verdicts)) as mem:
            mem.add(conv)
            a = answer_from(mem.core, question, retrieve(mem.core, question), use_llm=False)
            assert a.abstain is abstains, a.answer
            assert mem.llm_summary()["tasks"]["judge_pairs"]["calls"] >= 1


def test_evidence_the_judge_is_sure_answers_nothing_is_read_last(tmp_path: Path) -> None:
    from archivist.read.extractive import shape_of
    from archivist.read.judged import reordered
    from archivist.read.sentences import Sentence

    when = datetime(2024, 1, 5, tzinfo=UTC)
    texts = ["Where I work the coffee machine is always broken.", "First week at the council done!"]
    ranked = [
        Sentence(t, Message(f"S1:{i}", "ines", 1, "Ines", t, when), "Ines", i)
        for i, t in enumerate(texts)
    ]
    question = "Where does Ines work now?"
    shape = shape_of(question, asks_when=False)

    def veto(p: SupportPair):
        return Verdict("neither", 0.97) if "coffee" in p.sentence else Verdict("answers", 0.6)

    judge = FakeJudge(support=veto)
    assert reordered(question, shape, ranked, judge, when) == ranked  # off by default
    moved = reordered(question, shape, ranked, judge, when, sure=0.9)
    assert [s.text for s in moved] == texts[::-1]
    unsure = FakeJudge(support=lambda p: Verdict("neither", 0.6))
    assert reordered(question, shape, ranked, unsure, when, sure=0.9) == ranked


def test_a_yes_or_no_is_read_off_the_judge_only_when_asked_to_trust_it(tmp_path: Path) -> None:
    from archivist.read.extractive import shape_of
    from archivist.read.judged import judged
    from archivist.read.sentences import Sentence

    when = datetime(2024, 1, 5, tzinfo=UTC)
    said = Message("S1:1", "gil", 1, "Gil", "Dry January, not a drop till Feb.", when)
    ranked = [Sentence(said.text, said, "Gil", 1, relevance=0.2, score=0.2)]
    shape = shape_of("Is Gil drinking?", asks_when=False)
    judge = FakeJudge(support=lambda p: Verdict("no", 0.97))
    assert judged("Is Gil drinking?", shape, ranked, judge, when) is None  # the default
    text, used, why = judged("Is Gil drinking?", shape, ranked, judge, when, sure=0.9)
    assert text.startswith("No: Dry January") and used == ranked and "p=0.97" in why


def item(**kw) -> dict:
    base = {"id": "x", "task": "relation", "speaker": "A", "older": "a", "newer": "b"}
    return {**base, "label": "ends", **kw}


def test_items_are_checked_with_one_line_errors(tmp_path: Path) -> None:
    assert parse_item(item(), "f").pair.older == "a"
    for bad, says in (
        (item(task="vibes"), "'task' must be"),
        (item(label="maybe"), "a relation label is one of"),
        (item(older=""), "'older' must be a non-empty string"),
        (item(older_at="soon"), "not an ISO date"),
        ([1], "must be a JSON object"),
    ):
        with pytest.raises(InputError, match=says):
            parse_item(bad, "f")
    path = tmp_path / "bad.json"
    path.write_text('{"items": 3}')
    with pytest.raises(InputError, match="expected"):
        read_items(path)


def test_bench_judge_prints_per_task_figures(tmp_path: Path) -> None:
    items = [
        item(id="r1", older="I'm pescatarian", newer="went fully vegan in June"),
        item(id="r2", older="keto since March", newer="keto is going great", label="continues"),
        {
            "id": "s1",
            "task": "support",
            "speaker": "Gil",
            "question": "Is Gil drinking?",
            "sentence": "Dry January, not a drop till Feb",
            "said_at": "2024-01-03",
            "label": "no",
        },
    ]
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps({"items": items}))
    out = CliRunner().invoke(cli, ["bench", "judge", str(path), "--json"])  # the model
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    assert result["judge"] == "model"
    assert set(result["tasks"]) == {"relation", "support"}
    rel = result["tasks"]["relation"]
    assert rel["n"] == 2 and 0.0 <= rel["accuracy"] <= 1.0 and "macro_f1" in rel
    assert set(rel["by_label"]) == {"ends", "continues", "unrelated"}
    text = CliRunner().invoke(cli, ["bench", "judge", str(path)])
    assert "relation: accuracy" in text.output and "said→" in text.output
    bad = tmp_path / "bad.json"
    bad.write_text('{"items": [{"task": "relation"}]}')
    out = CliRunner().invoke(cli, ["bench", "judge", str(bad)])
    assert out.exit_code != 0 and "Traceback" not in out.output


def test_bench_judge_runs_the_rules_baseline(tmp_path: Path) -> None:
    path = tmp_path / "pairs.json"
    path.write_text(
        json.dumps({"items": [item(older="I live in Lisbon", newer="moved to Berlin")]})
    )
    out = CliRunner().invoke(cli, ["bench", "judge", str(path), "--judge", "rules", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["tasks"]["relation"]["n"] == 1


def test_support_convenience(model: TrainedJudge) -> None:
    v = support(model, "Where does Ines work now?", "First week at the council done!", "Ines")
    assert v.label in ("yes", "no", "answers", "neither")


# -- kind: what kind of memory a sentence is, and which are none --------------------------


def chit_chat_or(label: str):
    """A kind rule: what the user says is ``label``; the assistant's filler is chit-chat."""
    return lambda s: Verdict("chit-chat" if s.role == "assistant" else label, 0.9)


def test_the_judge_decides_which_sentences_become_memories(tmp_path: Path) -> None:
    judge = FakeJudge(kind=chit_chat_or("preference"))
    conv = make_conversation(
        "jazz",
        [[("alice", "I love jazz."), ("assistant", "Sounds lovely, tell me more.")]],
        people=("alice", "assistant"),
    )
    msgs = [m if m.speaker != "assistant" else replace(m, role="assistant") for m in conv.messages]
    conv = replace(conv, messages=tuple(msgs))
    mem = MemoryService(
        tmp_path / "k.db",
        settings=Settings().with_(consolidate_mode="manual"),
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(judge=judge),
    )
    with mem:
        mem.add(conv)
        claims = mem.claims(limit=10)
        # the filler the rules would keep stays searchable, as chatter: never a memory
        assert [(c.text, c.kind) for c in claims] == [
            ("alice loves jazz.", "preference"),
            ("Sounds lovely, tell assistant more.", "chatter"),
        ]
        facade = Memory(mem)
        assert [r["memory"] for r in facade.get_all(user_id="alice")["results"]] == [
            "alice loves jazz."
        ]
    asked = [s for s in judge.asked if isinstance(s, Statement)]
    assert [s.sentence for s in asked] == ["I love jazz.", "Sounds lovely, tell me more."]
    assert [s.role for s in asked] == ["user", "assistant"]
    # the rules keep neither: three words are too few for them, and the filler is long enough
    with MemoryService(
        tmp_path / "r.db",
        settings=Settings().with_(consolidate_mode="manual"),
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(),
    ) as ruled:
        ruled.add(conv)
        assert [c.text for c in ruled.claims(limit=10)] != ["alice loves jazz."]


def test_a_judged_plan_bounded_in_time_stays_foresight() -> None:
    judge = FakeJudge(kind=lambda s: Verdict("state", 0.9))
    when = datetime(2025, 1, 14, 9, tzinfo=UTC)
    msg = Message("1", "c", 1, "Tom", "I'm on antibiotics for 10 days.", when)
    (claim,) = heuristic_claims([msg], judge=judge)
    assert claim.kind == "foresight" and claim.valid_to is not None


def test_the_llm_and_the_model_judge_kinds(model: TrainedJudge) -> None:
    def respond(messages, schema):
        title = schema.get("title")
        assert title == "KindsOut", title
        blocks = messages[1]["content"].split("\n\nItem ")
        return {
            "judgements": [
                {"item": n, "reason": "a taste", "verdict": "preference"}
                for n, b in enumerate(blocks, start=1)
                if "jazz" in b
            ]
        }

    llm = FakeLLM(responder=respond)

    def call(prompt, messages, out):
        return out.model_validate_json(llm.complete(messages, schema=out.model_json_schema()).text)

    judge = LLMJudge(call, fallback=model)
    said = [Statement("I love jazz.", "alice"), Statement("Great question!", "", "assistant")]
    verdicts = judge.kinds(said)
    assert verdicts[0] == Verdict("preference", 0.8, "a taste")
    assert verdicts[1].label in KIND_LABELS and verdicts[1].reason == ""  # the model's
    props = list(judge_pairs.KindOut.model_json_schema()["properties"])
    assert props.index("reason") < props.index("verdict")
    v = kind(model, "I run every morning before work", "Ana")
    assert v.label in KIND_LABELS and 0.0 < v.p <= 1.0


def test_kind_items_parse_and_bench(tmp_path: Path) -> None:
    raw = {
        "id": "k1",
        "task": "kind",
        "speaker": "assistant",
        "role": "assistant",
        "sentence": "Sounds lovely, tell me more.",
        "said_at": "2025-05-01",
        "label": "chit-chat",
    }
    it = parse_item(raw, "f")
    assert isinstance(it.pair, Statement) and it.pair.role == "assistant"
    with pytest.raises(InputError, match="'role' is user or assistant"):
        parse_item({**raw, "role": "bot"}, "f")
    with pytest.raises(InputError, match="a kind label is one of"):
        parse_item({**raw, "label": "fact"}, "f")
    path = tmp_path / "kinds.json"
    path.write_text(
        json.dumps(
            {
                "items": [
                    raw,
                    {
                        **raw,
                        "id": "k2",
                        "role": "user",
                        "speaker": "Ana",
                        "sentence": "I love jazz.",
                        "label": "preference",
                    },
                ]
            }
        )
    )
    out = CliRunner().invoke(cli, ["bench", "judge", str(path), "--judge", "rules", "--json"])
    assert out.exit_code == 0, out.output
    kinds = json.loads(out.output)["tasks"]["kind"]
    assert kinds["n"] == 2 and set(kinds["by_label"]) == set(KIND_LABELS)


@pytest.mark.parametrize(
    "said, label, at, start",
    [
        ("I signed up for the Sheffield 10k in May.", "plan", (2025, 3, 2), (2025, 5, 1)),
        ("I ran the 10k in May.", "event", (2025, 1, 14), (2024, 5, 1)),
        ("I'm flying home on Friday.", "plan", (2025, 1, 14), (2025, 1, 17)),
    ],
)
def test_the_judged_kind_says_whether_a_yearless_date_lies_ahead_or_behind(
    said: str, label: str, at: tuple, start: tuple
) -> None:
    judge = FakeJudge(kind=lambda s: Verdict(label, 0.9))
    msg = Message("1", "c", 1, "Tom", said, datetime(*at, 9, tzinfo=UTC))
    (claim,) = heuristic_claims([msg], judge=judge)
    assert claim.valid_from is not None
    assert claim.valid_from.date() == datetime(*start, tzinfo=UTC).date()


def test_one_new_claim_ends_one_thing_unless_the_judge_is_very_sure(tmp_path: Path) -> None:
    conv = make_conversation(
        "band",
        [
            [("Nell", "I play keys in a covers band called The Tuesdays, weddings mostly.")],
            [("Nell", "Also started teaching piano to two kids on my street.")],
            [("Nell", "Left The Tuesdays after five years, the wedding circuit burned me out.")],
        ],
        people=("Nell", "Gus"),
    )

    def ends(p: RelationPair) -> Verdict | None:
        if "Left" not in p.newer:
            return None
        return Verdict("ends", 0.93 if "Tuesdays" in p.older else 0.88)

    with memory(tmp_path / "m.db", settings=Settings(judge="model"), judge=FakeJudge(ends)) as mem:
        mem.add(conv)
        mem.reconcile()
        status = {c.text.split()[1]: c.status for c in mem.claims(limit=10)}
        assert status["plays"] == "superseded"  # the likeliest ending
        assert status["started"] == "current"  # a second one at 0.88 < ends_p_more


def test_a_second_ending_at_ends_p_more_is_taken(tmp_path: Path) -> None:
    conv = make_conversation(
        "moves",
        [
            [("Ana", "I live in Porto and I work at the Porto city library.")],
            [("Ana", "I drive a blue Fiat to the library every day.")],
            [("Ana", "Emigrated to Canada: left the Porto library, sold the blue Fiat.")],
        ],
    )
    sure = FakeJudge(lambda p: Verdict("ends", 0.99) if "Canada" in p.newer else None)
    with memory(tmp_path / "m.db", judge=sure) as mem:
        mem.add(conv)
        mem.reconcile()
        assert sum(c.status == "superseded" for c in mem.claims(limit=10)) == 2


def test_an_unsure_chit_chat_keeps_the_rules_kind_even_for_an_own_question() -> None:
    unsure = FakeJudge(kind=lambda s: Verdict("chit-chat", 0.6))
    when = datetime(2025, 3, 2, 9, tzinfo=UTC)
    said = "Should I move to Lisbon next year or stay in Porto for good?"
    msg = Message("1", "c", 1, "Ana", said, when)
    ruled = heuristic_claims([msg])
    judged = heuristic_claims([msg], judge=unsure)
    assert [c.kind for c in judged] == [c.kind for c in ruled]


def test_one_sentence_of_a_message_never_ends_another_of_it(tmp_path: Path) -> None:
    """What one message says holds together: "I work at the library too" is not asked
    whether it ends "I work at the bakery" beside it, however sure the judge would be;
    a later message still may end both."""
    judge = FakeJudge(relation=lambda p: Verdict("ends", 0.99))
    conv = make_conversation(
        "work",
        [
            [("Ana", "I work at the bakery on Elm Street. I work at the library too.")],
            [("Ana", "I work at the museum now.")],
        ],
    )
    with memory(tmp_path / "m.db", judge=judge) as mem:
        mem.add(conv)
        mem.reconcile()
        asked = [(p.older, p.newer) for p in judge.asked if isinstance(p, RelationPair)]
        assert not [(o, n) for o, n in asked if "bakery" in o and "library" in n]
        claims = {c.id: c for c in mem.claims(limit=10)}
        ended = {(claims[k.old_claim].text, claims[k.new_claim].text) for k in mem.conflicts()}
        assert ended and all("museum" in new for _, new in ended)
