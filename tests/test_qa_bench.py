"""LoCoMo QA scoring (official F1, BLEU-1), the PNG chart, and a tiny end-to-end run."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from archivist.bench.chart import bar_chart
from archivist.bench.metrics import (
    bleu1,
    locomo_f1,
    normalize_answer,
    porter_stem,
    token_f1,
)
from archivist.bench.qa import run_locomo_qa
from archivist.bench.report import locomo_qa_table
from archivist.cli.main import cli
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder, FakeLLM

# -- official F1 ---------------------------------------------------------------------------


def test_normalisation_drops_commas_punctuation_and_articles() -> None:
    assert normalize_answer("The Cat, and a DOG!") == "cat dog"


@pytest.mark.parametrize(
    ("word", "stemmed"),
    [
        ("running", "run"),
        ("agencies", "agenc"),
        ("adoption", "adopt"),
        ("happiness", "happi"),
        ("relational", "relat"),
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("generously", "gener"),
        ("hopping", "hop"),
        ("hiking", "hike"),
        ("died", "die"),
        ("sky", "sky"),
        ("as", "as"),
    ],
)
def test_porter_stemmer(word: str, stemmed: str) -> None:
    assert porter_stem(word) == stemmed


def test_token_f1_stems_before_matching() -> None:
    assert token_f1("researching adoption agencies", "Adoption agency") == pytest.approx(0.8)
    assert token_f1("nothing", "adoption") == 0.0


def test_category_1_splits_on_commas() -> None:
    # gold parts: "pottery", "camping", "painting"; the prediction's parts each hit one
    score = locomo_f1("painting, pottery", "pottery, camping, painting", 1)
    assert score == pytest.approx(2 / 3)


def test_category_3_cuts_gold_at_semicolon() -> None:
    assert locomo_f1("Likely yes", "Likely yes; since she loves books", 3) == 1.0


def test_category_5_needs_the_official_phrases() -> None:
    assert locomo_f1("Not mentioned: that was Melanie's", "self-care is important", 5) == 1.0
    assert locomo_f1("No information available.", "x", 5) == 1.0
    assert locomo_f1("self-care is important", "self-care is important", 5) == 0.0


def test_bleu1() -> None:
    assert bleu1("7 May 2023", "7 May 2023") == 1.0
    # 2 of 4 unigrams match, no brevity penalty (the prediction is longer)
    assert bleu1("went on 7 May", "7 May") == pytest.approx(0.5)
    assert bleu1("May", "7 May 2023") == pytest.approx(2.718281828 ** (1 - 3))
    assert bleu1("", "x") == 0.0


# -- chart -------------------------------------------------------------------------------


def test_chart_is_a_valid_png() -> None:
    png, colors = bar_chart(["1", "2"], {"a": {"1": 0.5, "2": 1.0}, "b": {"1": 0.2}}, width=200)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", png[8:16])
    width, height = struct.unpack(">II", png[16:24])
    assert (kind, length, width, height) == (b"IHDR", 13, 200, 360)
    idat_len = struct.unpack(">I", png[33:37])[0]
    raw = zlib.decompress(png[41 : 41 + idat_len])
    assert len(raw) == height * (1 + 3 * width)
    assert set(colors) == {"a", "b"}
    assert png.endswith(b"IEND\xaeB`\x82")


# -- end to end ---------------------------------------------------------------------------


def locomo_file(path: Path) -> Path:
    """A two-session conversation in LoCoMo's layout, with one question per category."""
    turns = [
        ("Caroline", "I went to the LGBTQ support group yesterday and it was so powerful."),
        ("Melanie", "That is wonderful, Caroline."),
        ("Caroline", "I am researching adoption agencies for my future family."),
    ]
    later = [
        ("Melanie", "I ran a charity race last Saturday. I realised self-care is important."),
        ("Caroline", "That charity race sounds great, Mel!"),
    ]

    def session(n: int, rows: list[tuple[str, str]]) -> list[dict]:
        return [
            {"speaker": s, "dia_id": f"D{n}:{i}", "text": t} for i, (s, t) in enumerate(rows, 1)
        ]

    sample = {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": session(1, turns),
            "session_2_date_time": "10:37 am on 27 June, 2023",
            "session_2": session(2, later),
        },
        "qa": [
            {"question": "When did Caroline go to the LGBTQ support group?",
             "answer": "7 May 2023", "evidence": ["D1:1"], "category": 2},
            {"question": "What is Caroline researching?", "answer": "Adoption agencies",
             "evidence": ["D1:3"], "category": 4},
            {"question": "What did Melanie realise about self-care?",
             "answer": "self-care is important", "evidence": ["D2:1"], "category": 1},
            {"question": "What did Caroline realise after her charity race?",
             "adversarial_answer": "self-care is important", "evidence": ["D2:1"],
             "category": 5},
        ],
    }  # fmt: skip
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path


def test_run_locomo_qa_without_llm(tmp_path: Path) -> None:
    path = locomo_file(tmp_path / "locomo.json")
    with MemoryService(tmp_path / "qa.db", embedder=FakeEmbedder()) as mem:
        r = run_locomo_qa(mem, path)
    arch = r["systems"]["archivist"]
    assert r["questions"] == 4
    assert arch["f1"]["2"] == 1.0  # "7 May 2023"
    # the whole evidence sentence, not a fragment: "I am also researching adoption
    # agencies for my future family." against "adoption agencies future family"
    assert arch["f1"]["4"] > 0.3
    assert arch["adversarial_abstention"] == 1.0
    assert arch["adversarial_named_owner"] == 1.0
    assert arch["false_abstention"] == 0.0
    assert arch["j"] is None and arch["llm_calls_per_question"] == 0
    assert set(arch["latency_ms"]) == {"search", "answer"}
    assert "plain-rag" in r["systems"]
    assert r["systems"]["full-context"]["status"].startswith("not applicable")
    table = locomo_qa_table(r)
    assert "| archivist | f1 |" in table and "| plain-rag | bleu1 |" in table


def test_run_locomo_qa_with_answer_and_judge_models(tmp_path: Path) -> None:
    def respond(messages: list[dict], schema: dict | None) -> dict:
        if schema and "label" in schema.get("properties", {}):
            return {"reasoning": "same", "label": "CORRECT"}
        return {"answer": "7 May 2023", "evidence": [1], "abstain": False}

    llm = FakeLLM(responder=respond)
    path = locomo_file(tmp_path / "locomo.json")
    with MemoryService(tmp_path / "qa.db", embedder=FakeEmbedder()) as mem:
        r = run_locomo_qa(mem, path, answer_llm=llm, judge_llm=llm, limit=3)
    assert r["questions"] == 3
    systems = r["systems"]
    assert set(systems) == {"archivist", "plain-rag", "full-context"}
    assert systems["full-context"]["j"]["overall"] == 1.0
    assert systems["full-context"]["llm_calls_per_question"] == 1.0
    assert systems["archivist"]["f1"]["2"] == 1.0
    assert r["judge_llm"]["calls"] > 0


def test_cli_writes_json_markdown_and_png(tmp_path: Path) -> None:
    path = locomo_file(tmp_path / "locomo.json")
    out = tmp_path / "out"
    args = ["--db", str(tmp_path / "c.db"), "--embedder", "fake", "bench", "locomo"]
    saved = tmp_path / "results" / "qa.json"
    result = CliRunner().invoke(
        cli,
        [*args, str(path), "--qa", "--no-llm", "--out", str(out), "--save", str(saved)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    full = json.loads((out / "results.json").read_text())
    assert full["benchmark"] == "locomo-qa" and full["items"]
    # the result file keeps the figures, not the per-question records quoting the dataset
    kept = json.loads(saved.read_text())["result"]
    assert "items" not in kept and kept["systems"] == full["systems"]
    assert (out / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "chart.png" in (out / "results.md").read_text()
