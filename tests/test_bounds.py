"""Issue 12: bounded dates, numbers and text; a store holding a bad date still answers."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from archivist.errors import InputError, LoadError, NotFound
from archivist.load import parse
from archivist.model import Conversation, Message, Session
from archivist.service import MemoryService
from conftest import add_direct, ana_lee, jsonl_records, make_conversation


def _far_future(cid: str = "far") -> Conversation:
    """A conversation whose one message is dated where date arithmetic overflows."""
    at = datetime(9999, 12, 31, 10, tzinfo=UTC)
    m = Message("m1", cid, 1, "Ana", "See you tomorrow at the lake.", at, session_start=at)
    return Conversation(cid, ("Ana",), (m,), (Session(cid, 1, at),))


def test_a_stored_far_future_message_breaks_nothing(mem: MemoryService, embedder) -> None:
    mem.add(ana_lee())
    add_direct(mem.store, _far_future(), embedder)  # the store API does not validate
    for q in ("when did Ana adopt the cat?", "what happened last week?"):
        mem.search(q, k=5)
        mem.ask(q)
    report = mem.rebuild()
    assert report.sessions >= 1
    assert mem.rebuild(["far"]).sessions == 0  # extraction skips it, stats count it
    assert mem.stats()["messages_out_of_range"] == 1


def test_timeground_skips_out_of_range_times() -> None:
    from archivist.lang.timeground import find_times, ground

    at = datetime(9999, 12, 31, 10, tzinfo=UTC)
    assert find_times("see you tomorrow, next year", at) == []
    assert ground("for the next three days, from tomorrow", at) == (None, None)
    near = datetime(2200, 12, 31, 10, tzinfo=UTC)
    find_times("see you tomorrow and next year", near)  # no overflow at the edge


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"timestamp": "9999-12-31T10:00:00Z"}, "timestamp"),
        ({"timestamp": "1850-01-01T10:00:00Z"}, "timestamp"),
        ({"session": 10**30}, "session"),
        ({"session": 2**31}, "session"),
        ({"text": "a\u0000b"}, "text"),
        ({"text": "a\ud800b"}, "text"),
        ({"speaker": "An\udc00a"}, "speaker"),
    ],
)
def test_loaders_refuse_out_of_bounds_values(change: dict, field: str) -> None:
    records = jsonl_records(ana_lee())
    records[1].update(change)
    text = "\n".join(json.dumps(r) for r in records)
    with pytest.raises(LoadError) as e:
        parse(text, "jsonl", source="f.jsonl")
    assert e.value.field == field
    assert "\n" not in str(e.value)
    str(e.value).encode("utf-8")  # printable: no lone surrogate in the message


def test_service_refuses_out_of_bounds_messages(mem: MemoryService) -> None:
    conv = _far_future()
    with pytest.raises(InputError, match="timestamp.*1900..2200"):
        mem.add(conv)
    assert mem.conversations() == []


def test_locomo_session_that_is_not_a_list_is_named() -> None:
    sample = {
        "sample_id": "s1",
        "qa": [],
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Lee",
            "session_1": "oops",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
        },
    }
    with pytest.raises(LoadError) as e:
        parse([sample], "locomo", source="l.json")
    assert e.value.field == "session_1"


def test_same_instant_with_another_offset_is_the_same_message(mem: MemoryService) -> None:
    conv = ana_lee()
    mem.add(conv, extract=False)
    plus2 = timezone(timedelta(hours=2))
    moved = Conversation(
        conv.id,
        conv.participants,
        tuple(
            Message(**{**m.__dict__, "timestamp": m.timestamp.astimezone(plus2)})
            for m in conv.messages
        ),
        conv.sessions,
    )
    (result,) = mem.add(moved, extract=False)
    assert (result.added, result.unchanged) == (0, len(conv.messages))


def test_a_multi_conversation_file_is_all_or_nothing(mem: MemoryService, tmp_path: Path) -> None:
    first = make_conversation("b", [[("Ana", "Hello there.")]])
    mem.add(first, extract=False)
    changed = make_conversation("b", [[("Ana", "Hello, changed.")]])
    fresh = make_conversation("a", [[("Ana", "A new conversation.")]])
    with pytest.raises(InputError, match="append-only"):
        mem.add([fresh, changed], extract=False)
    assert [c["id"] for c in mem.conversations()] == ["b"]


def test_unknown_conversation_is_refused_by_export_and_rebuild(mem: MemoryService) -> None:
    mem.add(ana_lee(), extract=False)
    with pytest.raises(NotFound):
        mem.export_jsonl("nope")
    with pytest.raises(NotFound):
        mem.rebuild(["nope"])


@pytest.mark.parametrize("question", [math.nan, 3, None])
def test_a_question_that_is_not_text_is_an_input_error(mem: MemoryService, question) -> None:
    with pytest.raises(InputError):
        mem.ask(question)
    with pytest.raises(InputError):
        mem.search(question)


def test_cli_refuses_unknown_conversations_and_changed_files(tmp_path: Path, capsys) -> None:
    from archivist.cli.main import main
    from conftest import write_jsonl

    def run(*args: str) -> tuple[int, str]:
        try:
            main(["--db", str(tmp_path / "cli.db"), "--embedder", "fake", *args])
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        return code, capsys.readouterr().err

    first = write_jsonl(
        tmp_path / "b.jsonl", jsonl_records(make_conversation("b", [[("Ana", "Hi.")]]))
    )
    assert run("ingest", "--no-extract", str(first))[0] == 0
    fresh = write_jsonl(
        tmp_path / "a.jsonl", jsonl_records(make_conversation("a", [[("Ana", "New.")]]))
    )
    changed = write_jsonl(
        tmp_path / "b2.jsonl", jsonl_records(make_conversation("b", [[("Ana", "Changed.")]]))
    )
    code, err = run("ingest", "--no-extract", str(fresh), str(changed))
    assert code == InputError.exit_code and "append-only" in err
    code, err = run("export", "--conversation", "nope")
    assert code == NotFound.exit_code and "nope" in err
    code, err = run("rebuild", "--conversation", "nope")
    assert code == NotFound.exit_code and "nope" in err
    with MemoryService(tmp_path / "cli.db") as mem:
        assert [c["id"] for c in mem.conversations()] == ["b"]


@pytest.mark.parametrize("session", [10**30, 2**31, -1, math.nan])
def test_a_session_filter_out_of_range_is_an_input_error(mem: MemoryService, session) -> None:
    with pytest.raises(InputError, match="session"):
        mem.search("cat", session=session)


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ('{"conversation": "c", "id": "m", "speaker": "A", "text": "x", '
         '"timestamp": "2024-01-01T00:00:00Z", "session": ' + "9" * 5000 + "}", "jsonl"),
        ("[" + "9" * 5000 + "]", "openai"),
    ],
)  # fmt: skip
def test_an_integer_too_long_to_read_is_a_load_error(text: str, fmt: str) -> None:
    with pytest.raises(LoadError, match="invalid JSON"):
        parse(text, fmt, source="f")
