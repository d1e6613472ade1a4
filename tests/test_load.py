"""Loaders: each format's happy path, auto-detection, and every way a file can be bad."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from archivist.errors import LoadError
from archivist.load import FORMATS, detect_format, load_file, parse
from archivist.load.locomo import load_qa, normalise_evidence, parse_date
from archivist.model import Attachment, Session, message_problem, text_problem

SCRIPT = Path(sys.executable).with_name("archivist")
LOCOMO_DEV = Path("/work/shared/data/locomo/locomo-dev.json")
NOW = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
PLUS2 = timezone(timedelta(hours=2))


def locomo_sample(sample_id: str = "s1") -> dict:
    """A two-session LoCoMo-shaped sample written for these tests."""
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat."},
                {
                    "speaker": "Ben",
                    "dia_id": "D1:2",
                    "text": "Look at mine!",
                    "blip_caption": "a photo of a grey cat",
                    "img_url": ["https://example.org/cat.jpg"],
                    "query": "grey cat",
                },
            ],
            "session_2_date_time": "10:37 am on 27 June, 2023",
            "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "How is the cat?"}],
            "session_3_date_time": "9:00 am on 1 July, 2023",  # a spare date, no session
        },
        "qa": [{"question": "What did Ana adopt?", "answer": "a cat", "evidence": ["D1:1"]}],
    }


def longmemeval_item(question_id: str | None = "q1") -> dict:
    """A two-session LongMemEval-shaped item written for these tests."""
    item = {
        "question": "What colour is my bike?",
        "haystack_session_ids": ["sess_a", "sess_b"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/22 (Mon) 18:05"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "I bought a red bike.", "has_answer": True},
                {"role": "assistant", "content": "Nice choice!"},
            ],
            [{"role": "user", "content": "Any route tips?"}],
        ],
    }
    if question_id is not None:
        item["question_id"] = question_id
    return item


def jsonl_lines(*records: dict) -> str:
    """Serialise records as JSON Lines text."""
    return "".join(json.dumps(r) + "\n" for r in records)


def jline(**fields) -> dict:
    """One valid JSONL record, overridable field by field (None removes a field)."""
    base = {
        "conversation": "c1",
        "id": "m1",
        "speaker": "Ana",
        "text": "hello",
        "timestamp": "2024-03-02T09:15:00Z",
    }
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def write(tmp_path: Path, name: str, content: str | bytes | object) -> Path:
    """Write text, bytes or a JSON value to a real file."""
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return path


# --- happy paths -------------------------------------------------------------------------


def test_locomo_happy_path(tmp_path: Path) -> None:
    path = write(tmp_path, "loco.json", [locomo_sample()])
    [conv] = load_file(path, "locomo")
    assert conv.id == "s1"
    assert conv.source == str(path)
    assert conv.participants == ("Ana", "Ben")
    start1 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    start2 = datetime(2023, 6, 27, 10, 37, tzinfo=UTC)
    assert conv.sessions == (Session("s1", 1, start1), Session("s1", 2, start2))
    m1, m2, m3 = conv.messages
    assert [m.id for m in conv.messages] == ["D1:1", "D1:2", "D2:1"]
    assert [m.seq for m in conv.messages] == [0, 1, 2]
    assert [m.session for m in conv.messages] == [1, 1, 2]
    assert m1.timestamp == start1 and m2.timestamp == start1 + timedelta(seconds=30)
    assert m3.timestamp == start2 and m3.session_start == start2
    assert m1.addressees == ("Ben",) and m2.addressees == ("Ana",)
    assert m1.role == "user" and m1.attachments == ()
    assert m2.attachments == (
        Attachment("image", caption="a photo of a grey cat", url="https://example.org/cat.jpg"),
    )


def test_locomo_dates_follow_the_12_hour_clock() -> None:
    assert parse_date("10:37 am on 27 June, 2023") == datetime(2023, 6, 27, 10, 37)
    assert parse_date("12:05 am on 1 January, 2024") == datetime(2024, 1, 1, 0, 5)
    assert parse_date("12:30 pm on 1 January, 2024") == datetime(2024, 1, 1, 12, 30)
    for bad in ("13:00 pm on 1 May, 2023", "1:00 pm on 31 February, 2023", "May 8, 2023"):
        with pytest.raises(ValueError):
            parse_date(bad)


def test_locomo_timestamps_get_the_default_zone(tmp_path: Path) -> None:
    path = write(tmp_path, "loco.json", [locomo_sample()])
    [conv] = load_file(path, default_tz=PLUS2)
    assert conv.messages[0].timestamp == datetime(2023, 5, 8, 13, 56, tzinfo=PLUS2)


def test_locomo_qa_is_normalised(tmp_path: Path) -> None:
    sample = locomo_sample()
    sample["qa"] = [
        {"question": "Q1?", "answer": 2022, "category": 2, "evidence": ["D8:6; D9:17"]},
        {"question": "Q2?", "adversarial_answer": "a dog", "category": 5, "evidence": ["D:11:26"]},
        {"question": "Q3?", "category": 5, "evidence": ["D", "D9:1 D4:4", "D9:1"]},
    ]
    qa = load_qa(write(tmp_path, "loco.json", [sample]))
    assert qa == {
        "s1": [
            {"question": "Q1?", "answer": "2022", "category": 2, "evidence": ["D8:6", "D9:17"]},
            {"question": "Q2?", "answer": "a dog", "category": 5, "evidence": ["D11:26"]},
            {"question": "Q3?", "answer": "", "category": 5, "evidence": ["D9:1", "D4:4"]},
        ]
    }


def test_evidence_normalisation_drops_what_cannot_be_repaired() -> None:
    assert normalise_evidence(["D8:6; D9:17", "D:11:26", "D", "", "D3", "x1:2"]) == [
        "D8:6",
        "D9:17",
        "D11:26",
    ]


def test_longmemeval_happy_path(tmp_path: Path) -> None:
    path = write(tmp_path, "lme.json", [longmemeval_item(), longmemeval_item(None)])
    first, second = load_file(path, "longmemeval")
    assert (first.id, second.id) == ("q1", "longmemeval-1")
    assert first.participants == ("assistant", "user")
    start1 = datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    start2 = datetime(2023, 5, 22, 18, 5, tzinfo=UTC)
    assert first.sessions == (Session("q1", 1, start1), Session("q1", 2, start2))
    assert [m.id for m in first.messages] == ["sess_a:0", "sess_a:1", "sess_b:0"]
    assert [m.seq for m in first.messages] == [0, 1, 2]
    user, assistant, later = first.messages
    assert (user.speaker, user.role, user.addressees) == ("user", "user", ("assistant",))
    assert (assistant.speaker, assistant.role, assistant.addressees) == (
        "assistant",
        "assistant",
        ("user",),
    )
    assert assistant.timestamp == start1 + timedelta(seconds=30)
    assert later.session == 2 and later.session_start == start2 and later.timestamp == start2


def test_longmemeval_single_item_object(tmp_path: Path) -> None:
    [conv] = load_file(write(tmp_path, "one.json", longmemeval_item()))
    assert conv.id == "q1" and len(conv.messages) == 3


def test_jsonl_happy_path(tmp_path: Path) -> None:
    text = (
        jsonl_lines(
            jline(id="a1", session=2, timestamp="2024-03-05T10:00:00+02:00"),
            jline(conversation="c2", id="b1", speaker="Cy", role="assistant"),
        )
        + "\n   \n"
        + jsonl_lines(
            jline(
                id="a2",
                speaker="Ben",
                text="see photo",
                timestamp="2024-03-01T08:00:00",
                addressees=["Ana"],
                attachments=[{"kind": "image", "caption": "a beach"}],
            ),
            jline(id="a3", session=2, timestamp="2024-03-05T07:00:00Z"),
        )
    )
    c1, c2 = load_file(write(tmp_path, "mine.jsonl", text), default_tz=PLUS2)
    assert (c1.id, c2.id) == ("c1", "c2")
    assert c1.participants == ("Ana", "Ben") and c2.participants == ("Cy",)
    assert [m.id for m in c1.messages] == ["a2", "a1", "a3"]  # session 1 first, then lines
    assert [m.seq for m in c1.messages] == [0, 1, 2]
    a2, a1, a3 = c1.messages
    assert a2.timestamp == datetime(2024, 3, 1, 8, 0, tzinfo=PLUS2)
    assert a2.addressees == ("Ana",)
    assert a2.attachments == (Attachment("image", caption="a beach"),)
    session2_start = datetime(2024, 3, 5, 7, 0, tzinfo=UTC)  # earliest, not first line
    assert a1.session_start == a3.session_start == session2_start
    assert c1.sessions == (
        Session("c1", 1, a2.timestamp),
        Session("c1", 2, session2_start),
    )
    assert c2.messages[0].role == "assistant" and c2.messages[0].session == 1


def test_openai_list_happy_path(tmp_path: Path) -> None:
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi, I'm Ana."},
        {"role": "assistant", "content": "Hello Ana."},
    ]
    [conv] = load_file(write(tmp_path, "chat-7.json", chat), now=NOW)
    assert conv.id == "chat-7"
    assert conv.participants == ("assistant", "system", "user")
    assert conv.sessions == (Session("chat-7", 1, NOW),)
    system, user, assistant = conv.messages
    assert [m.id for m in conv.messages] == ["m1", "m2", "m3"]
    assert system.role == "system" and system.addressees == ()
    assert user.addressees == ("assistant",) and assistant.addressees == ("user",)
    assert assistant.timestamp == NOW + timedelta(seconds=2)
    assert all(m.session == 1 and m.session_start == NOW for m in conv.messages)


def test_openai_object_with_names_parts_and_skips(tmp_path: Path) -> None:
    chat = {
        "conversation": "support-1",
        "user": "Ana",
        "assistant": "Helper",
        "timestamp": "2024-05-01T12:00:00",
        "messages": [
            {"role": "developer", "content": "Be kind."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": "https://example.org/x.png"}},
                    {"type": "text", "text": "Thanks."},
                ],
            },
            {"role": "assistant", "content": None, "tool_calls": [{"id": "t1"}]},
            {"role": "tool", "content": "lookup result", "tool_call_id": "t1"},
            {"role": "assistant", "content": "A bird.", "name": "Bot"},
        ],
    }
    [conv] = load_file(write(tmp_path, "x.json", chat))
    start = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    assert conv.id == "support-1"
    assert [m.id for m in conv.messages] == ["m1", "m2", "m5"]
    assert [m.seq for m in conv.messages] == [0, 1, 2]
    dev, user, bot = conv.messages
    assert dev.role == "system" and dev.speaker == "system"
    assert user.speaker == "Ana" and user.addressees == ("Helper",)
    assert user.text == "What is this?\nThanks."
    assert user.attachments == (Attachment("image", url="https://example.org/x.png"),)
    assert bot.speaker == "Bot" and bot.addressees == ("Ana",)
    assert bot.timestamp == start + timedelta(seconds=4)


def test_openai_without_timestamp_uses_the_current_time(tmp_path: Path) -> None:
    path = write(tmp_path, "c.json", [{"role": "user", "content": "hi"}])
    before = datetime.now(UTC)
    [conv] = load_file(path)
    assert before <= conv.messages[0].timestamp <= datetime.now(UTC)


def test_parse_accepts_decoded_data_text_and_bytes() -> None:
    sample = [locomo_sample()]
    from_value = parse(sample, "locomo", source="mem")
    from_text = parse(json.dumps(sample), "locomo", source="mem")
    from_bytes = parse(json.dumps(sample).encode(), "locomo", source="mem")
    assert from_value == from_text == from_bytes
    assert from_value[0].source == "mem"
    [conv] = parse(jsonl_lines(jline()), "jsonl", source="mem")
    assert conv.messages[0].text == "hello"


# --- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("a.json", [locomo_sample()], "locomo"),
        ("b.json", [longmemeval_item()], "longmemeval"),
        ("c.json", longmemeval_item(), "longmemeval"),
        ("d.jsonl", jsonl_lines(jline()), "jsonl"),
        ("e.json", [{"role": "user", "content": "hi"}], "openai"),
        ("f.json", {"messages": [{"role": "user", "content": "hi"}]}, "openai"),
    ],
)
def test_format_is_detected(tmp_path: Path, name: str, content: object, expected: str) -> None:
    path = write(tmp_path, name, content)
    data = None if expected == "jsonl" else json.loads(path.read_text())
    assert detect_format(path, data) == expected
    assert expected in FORMATS
    assert load_file(path, now=NOW) == load_file(path, expected, now=NOW)


def test_undetectable_format_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "odd.json", [{"foo": 1}])
    with pytest.raises(LoadError, match="cannot tell the format") as info:
        load_file(path)
    assert str(path) in str(info.value)


def test_unknown_format_name_and_missing_file(tmp_path: Path) -> None:
    path = write(tmp_path, "x.json", [])
    with pytest.raises(LoadError, match="unknown format 'csv'"):
        load_file(path, "csv")
    with pytest.raises(LoadError, match="cannot read file"):
        load_file(tmp_path / "absent.json")


# --- bad inputs --------------------------------------------------------------------------


def locomo_with(**changes) -> list[dict]:
    """A LoCoMo file whose conversation (or first turn, for turn_* keys) is changed."""
    sample = locomo_sample()
    conv = sample["conversation"]
    for key, value in changes.items():
        target, key = (conv["session_1"][0], key[5:]) if key.startswith("turn_") else (conv, key)
        if value is None:
            del target[key]
        else:
            target[key] = value
    return [sample]


def lme_with(**changes) -> list[dict]:
    """A LongMemEval file whose item is changed."""
    return [{**longmemeval_item(), **changes}]


BIG = "x" * 1_000_001
T0 = "s1 session_1[0]"
LME0 = "q1 haystack_sessions[0][0]"

BAD_INPUTS = [
    # name, content, format, record, field, problem
    ("empty.json", b"", None, None, None, "file is empty"),
    ("blank.json", b"  \n\t\n", None, None, None, "file is empty"),
    ("blank.jsonl", b"\n  \n", None, None, None, "file is empty"),
    ("garbled.json", '[{"a": 1},\n {"b": }]', None, None, None, "line 2, column 8"),
    ("bytes.json", b'[{"a"\xff: 1}]', None, None, None, "invalid UTF-8 at byte offset 5"),
    ("garbled.jsonl", jsonl_lines(jline()) + "{oops\n", None, 2, None, "invalid JSON at column 2"),
    ("top.json", {"sample_id": "s1"}, "locomo", None, None, "expected a list, got an object"),
    ("strs.json", ["s1"], "locomo", 0, None, "expected an object, got a string"),
    ("dup.json", locomo_with(turn_dia_id="D1:2"), None, "s1 session_1[1]", "dia_id", "duplicate"),
    ("who.json", locomo_with(turn_speaker="Cy"), None, T0, "speaker", "unknown speaker 'Cy'"),
    ("nospk.json", locomo_with(turn_speaker=None), None, T0, "speaker", "missing"),
    (
        "nodate.json",
        locomo_with(session_2_date_time=None),
        None,
        "s1",
        "session_2_date_time",
        "missing",
    ),
    (
        "baddate.json",
        locomo_with(session_1_date_time="May 8"),
        None,
        "s1",
        "session_1_date_time",
        "expected a time like",
    ),
    ("notext.json", locomo_with(turn_text=None), None, T0, "text", "missing"),
    ("numtext.json", locomo_with(turn_text=5), None, T0, "text", "expected a string, got a number"),
    ("big.json", locomo_with(turn_text=BIG), None, T0, "text", "1000001 bytes"),
    (
        "lens.json",
        lme_with(haystack_dates=["2023/05/20 (Sat) 02:21"]),
        None,
        "q1",
        "haystack_sessions",
        "lengths differ",
    ),
    (
        "lmedate.json",
        lme_with(haystack_dates=["yesterday", "2023/05/22 (Mon) 18:05"]),
        None,
        "q1",
        "haystack_dates[0]",
        "expected a date like",
    ),
    (
        "lmedup.json",
        lme_with(haystack_session_ids=["s", "s"]),
        None,
        "q1 haystack_sessions[1][0]",
        "haystack_session_ids",
        "duplicate",
    ),
    (
        "lmetext.json",
        lme_with(haystack_sessions=[[{"role": "user"}], []]),
        None,
        LME0,
        "content",
        "missing",
    ),
    (
        "lmerole.json",
        lme_with(haystack_sessions=[[{"role": "bot", "content": "x"}], []]),
        None,
        LME0,
        "role",
        "unknown role",
    ),
    (
        "dup.jsonl",
        jsonl_lines(jline(), jline(text="again")),
        None,
        2,
        "id",
        "duplicate message id 'm1'",
    ),
    ("notext.jsonl", jsonl_lines(jline(text=None)), None, 1, "text", "missing"),
    ("nospeaker.jsonl", jsonl_lines(jline(speaker="")), None, 1, "speaker", "must not be empty"),
    (
        "nots.jsonl",
        jsonl_lines(jline(), jline(id="m2", timestamp=None)),
        None,
        2,
        "timestamp",
        "missing",
    ),
    (
        "badts.jsonl",
        jsonl_lines(jline(timestamp="8 May 2023")),
        None,
        1,
        "timestamp",
        "not an ISO 8601",
    ),
    (
        "session.jsonl",
        jsonl_lines(jline(session="two")),
        None,
        1,
        "session",
        "expected an integer >= 1",
    ),
    ("zero.jsonl", jsonl_lines(jline(session=0)), None, 1, "session", "got 0"),
    ("role.jsonl", jsonl_lines(jline(role="bot")), None, 1, "role", "expected one of"),
    ("addr.jsonl", jsonl_lines(jline(addressees="Ben")), None, 1, "addressees", "expected a list"),
    (
        "att.jsonl",
        jsonl_lines(jline(attachments=[{"caption": "c"}])),
        None,
        1,
        "attachments[0].kind",
        "missing",
    ),
    ("array.jsonl", "[1, 2]\n", None, 1, None, "expected an object, got a list"),
    ("big.jsonl", jsonl_lines(jline(text=BIG)), None, 1, "text", "the limit is 1000000"),
    ("role.json", [{"role": "robot", "content": "x"}], "openai", 0, "role", "unknown role 'robot'"),
    ("nocontent.json", [{"role": "user"}], "openai", 0, "content", "missing"),
    (
        "numcontent.json",
        [{"role": "user", "content": 3}],
        "openai",
        0,
        "content",
        "expected a list",
    ),
    (
        "part.json",
        [{"role": "user", "content": [{"type": "audio"}]}],
        "openai",
        0,
        "content[0].type",
        "unsupported",
    ),
    *[
        (
            f"parttype{i}.json",
            [{"role": "user", "content": [{"type": kind}]}],
            "openai",
            0,
            "content[0].type",
            f"expected a string, got {shown}",
        )
        for i, (kind, shown) in enumerate(
            [(["text"], "a list"), ({"a": 1}, "an object"), (3, "a number"), (None, "null")]
            + [(True, "a boolean")]
        )
    ],
    (
        "notype.json",
        [{"role": "user", "content": [{"text": "x"}]}],
        None,
        0,
        "content[0].type",
        "missing",
    ),
    (
        "badtype.json",
        [{"role": "user", "content": [{"type": "te\ud800xt"}]}],
        "openai",
        0,
        "content[0].type",
        "unsupported content part 'te\\ud800xt'",
    ),
    (
        "speaker_b.json",
        locomo_with(speaker_b="B\ud800", session_1=[], session_2=[]),
        None,
        "'s1'",
        "participants[1]",
        "lone surrogate",
    ),
    ("onlytools.json", [{"role": "tool", "content": "x"}], "openai", None, "messages", "no user"),
    ("msgs.json", {"messages": "hi"}, "openai", None, "messages", "expected a list"),
    (
        "chatts.json",
        {"messages": [], "timestamp": "soon"},
        "openai",
        None,
        "timestamp",
        "not an ISO",
    ),
    ("bigchat.json", [{"role": "user", "content": BIG}], None, 0, "content", "the limit"),
]


@pytest.mark.parametrize(
    ("name", "content", "fmt", "record", "field", "problem"),
    BAD_INPUTS,
    ids=[case[0] for case in BAD_INPUTS],
)
def test_bad_input_names_file_record_and_field(
    tmp_path: Path, name: str, content: object, fmt: str | None, record, field, problem: str
) -> None:
    path = write(tmp_path, name, content)
    with pytest.raises(LoadError) as info:
        load_file(path, fmt, now=NOW)
    err = info.value
    assert (err.path, err.record, err.field) == (str(path), record, field)
    assert problem in err.problem
    message = str(err)
    assert message.startswith(str(path))
    if record is not None:
        assert f"record {record}" in message
    if field is not None:
        assert f"field '{field}'" in message


@pytest.mark.parametrize("fmt", ["locomo", "jsonl", "openai", "longmemeval"])
def test_a_100_kb_message_is_fine(tmp_path: Path, fmt: str) -> None:
    text = "word " * 20_000
    content = {
        "locomo": locomo_with(turn_text=text),
        "jsonl": jsonl_lines(jline(text=text)),
        "openai": [{"role": "user", "content": text}],
        "longmemeval": lme_with(haystack_sessions=[[{"role": "user", "content": text}], []]),
    }[fmt]
    path = write(tmp_path, f"big.{'jsonl' if fmt == 'jsonl' else 'json'}", content)
    [conv] = load_file(path, now=NOW)
    assert conv.messages[0].text == text


def test_one_bad_line_loads_nothing(tmp_path: Path) -> None:
    good = [jline(conversation=f"c{i}", id=f"m{i}") for i in range(20)]
    path = write(tmp_path, "mixed.jsonl", jsonl_lines(*good, jline(id="x", text=None)))
    with pytest.raises(LoadError, match="record 21"):
        load_file(path)


# --- the real dataset --------------------------------------------------------------------


@pytest.mark.skipif(not LOCOMO_DEV.exists(), reason="LoCoMo dev file not available")
def test_real_locomo_dev_file_loads() -> None:
    conversations = load_file(LOCOMO_DEV)
    assert [c.id for c in conversations] == [
        "conv-26",
        "conv-30",
        "conv-41",
        "conv-42",
        "conv-44",
        "conv-49",
    ]
    total = sum(len(c.messages) for c in conversations)
    assert 2_000 < total < 5_000
    for conv in conversations:
        assert len(conv.participants) == 2
        assert [m.seq for m in conv.messages] == list(range(len(conv.messages)))
        assert all(m.timestamp.tzinfo is not None for m in conv.messages)
        assert len(conv.sessions) == len({m.session for m in conv.messages})
    qa = load_qa(LOCOMO_DEV)
    assert set(qa) == {c.id for c in conversations}
    evidence = [(c.id, e) for c in conversations for q in qa[c.id] for e in q["evidence"]]
    known = {(c.id, m.id) for c in conversations for m in c.messages}
    assert len(evidence) > 1_000
    assert sum(pair in known for pair in evidence) >= 0.99 * len(evidence)  # one dangling id


# --- odd values in every field --------------------------------------------------------------

DEEP = "__nested_too_deeply__"
ODD_VALUES = [[], ["x"], {}, {"a": 1}, 0, 1.5, True, None, "\ud800", "a\x00b", "", DEEP, 10**30]
ODD_SAMPLES = {
    "locomo": [locomo_sample()],
    "longmemeval": [longmemeval_item()],
    "openai": {
        "conversation": "c",
        "user": "Ana",
        "timestamp": "2024-01-01T00:00:00Z",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "name": "Ana",
                "content": [
                    {"type": "text", "text": "Look."},
                    {"type": "image_url", "image_url": {"url": "https://example.org/a.png"}},
                    {"type": "image_url", "image_url": "https://example.org/b.png"},
                ],
            },
            {"role": "assistant", "content": "Nice."},
            {"role": "tool", "content": "t"},
        ],
    },
    "jsonl": jline(
        addressees=["Ben"],
        attachments=[{"kind": "image", "caption": "c", "url": "u"}],
        session_start="2024-03-02T09:00:00Z",
        role="user",
        session=2,
    ),
}


def _paths(value: object, at: tuple = ()):
    """Every position in a JSON value, the root included."""
    yield at
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, inner in items:
        yield from _paths(inner, (*at, key))


def _with(value: object, at: tuple, new: object) -> object:
    """A copy of ``value`` with ``new`` at position ``at``."""
    copy = json.loads(json.dumps(value))
    if not at:
        return new
    target = copy
    for key in at[:-1]:
        target = target[key]
    target[at[-1]] = new
    return copy


def _text(value: object, fmt: str) -> str:
    """The file's text, ``DEEP`` written as arrays nested past what JSON can decode."""
    text = json.dumps(value) + ("\n" if fmt == "jsonl" else "")
    return text.replace(json.dumps(DEEP), "[" * 5000 + "]" * 5000)


@pytest.mark.parametrize("fmt", sorted(ODD_SAMPLES))
def test_an_odd_value_anywhere_is_a_load_error_or_stored_as_is(fmt: str) -> None:
    """Each field (and each key's value) in turn replaced by a list, an object, a number, a
    boolean, null, a lone surrogate, a NUL byte, arrays nested too deep: the file loads
    into storable messages or is a LoadError, never another exception."""
    sample = ODD_SAMPLES[fmt]
    refused = 0
    for at in _paths(sample):
        for odd in ODD_VALUES:
            text = _text(_with(sample, at, odd), fmt)
            try:
                convs = parse(text, fmt, source=f"odd.{fmt}", now=NOW)
            except LoadError as e:
                refused += 1
                assert e.path == f"odd.{fmt}" and e.problem
                continue
            for c in convs:
                assert all(message_problem(m) is None for m in c.messages), (at, odd)
                assert not any(text_problem(p) for p in c.participants), (at, odd)
    assert refused > 50


def test_a_file_name_that_is_not_utf8_is_stored_repaired(tmp_path: Path) -> None:
    name = os.fsdecode(b"chat-\xff")
    try:
        path = write(tmp_path, name + ".json", [{"role": "user", "content": "hi"}])
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system takes only valid UTF-8 names")
    [conv] = load_file(path, now=NOW)
    assert conv.id == "chat-\ufffd" and text_problem(conv.source) is None
    assert conv.source.endswith("chat-\ufffd.json")


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ([{"role": "user", "content": [{"type": ["text"]}]}], "record 0, field 'content[0].type'"),
        ([{"role": "user", "content": [{"type": None}]}], "record 0, field 'content[0].type'"),
        ([{"role": ["user"], "content": "hi"}], "record 0, field 'role'"),
        ([{"role": "user", "content": "a\ud800"}], "field 'text'"),
        ([{"role": "user", "content": [{"type": "text", "text": {}}]}], "'content[0].text'"),
    ],
)
def test_ingest_of_a_bad_openai_file_exits_3_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, content: object, where: str
) -> None:
    from archivist.cli.main import main

    path = write(tmp_path, "chat.json", content)
    with pytest.raises(SystemExit) as exited:
        main(["--db", str(tmp_path / "x.db"), "--embedder", "fake", "ingest", str(path)])
    err = capsys.readouterr().err
    assert exited.value.code == 3 and err.count("\n") == 1, err
    assert err.startswith(f"error: {path}") and where in err and "Traceback" not in err


@pytest.mark.skipif(not SCRIPT.exists(), reason="console script not installed in this venv")
def test_the_console_script_exits_3_on_a_list_as_a_part_type(tmp_path: Path) -> None:
    path = write(tmp_path, "chat.json", [{"role": "user", "content": [{"type": ["text"]}]}])
    done = subprocess.run(
        [str(SCRIPT), "--db", str(tmp_path / "x.db"), "ingest", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr == (
        f"error: {path}, record 0, field 'content[0].type': expected a string, got a list\n"
    )
