"""Snapshot tests of the rendered LLM prompts (one module per task in archivist.prompts).

The expected renderings live in ``tests/snapshots/<task name>.txt``; each test
compares the builder's output with its file exactly. When a prompt changes on
purpose, bump the task module's VERSION (it is part of the response-cache key)
and rewrite the snapshots with

    UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_prompts.py

then review the diff of ``tests/snapshots/`` like any other code change.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel

from archivist.model import Attachment, Claim, Message
from archivist.prompts import extract, judge_claims, rewrite, same_entity, segment

SNAPSHOTS = Path(__file__).parent / "snapshots"
NOW = datetime(2023, 7, 14, 9, 30, tzinfo=UTC)
START = datetime(2023, 7, 12, 18, 5, tzinfo=UTC)  # a Wednesday
PEOPLE = ("Ana", "Lee", "Archie")
CID = "prompt-demo"


def _msg(n: int, speaker: str, text: str, **kw) -> Message:
    return Message(
        id=f"D7:{n}",
        conversation=CID,
        session=7,
        speaker=speaker,
        text=text,
        timestamp=START + timedelta(minutes=2 * n),
        session_start=START,
        seq=n,
        **kw,
    )


# Raw ids are D7:1..D7:5: distinctive, so a leak into a prompt is easy to spot.
MESSAGES = (
    _msg(1, "Ana", "Morning both! I ran the charity 10k yesterday.", addressees=("Lee", "Archie")),
    _msg(
        2,
        "Lee",
        "Well done! Here is my new balcony garden.",
        addressees=("Ana",),
        attachments=(Attachment("image", "tomato plants on a small balcony", "file:///g.jpg"),),
    ),
    _msg(
        3,
        "Archie",
        "Ana, you could log the race in your training plan.",
        role="assistant",
        addressees=("Ana",),
    ),
    _msg(4, "Ana", "Good idea. I'm on antibiotics for ten days, so no beer for now."),
    _msg(5, "Lee", "Get well soon; the tomatoes will wait for you.", addressees=("Ana",)),
)

# (task module, its response schema, the builder called with the fixed inputs)
TASKS = [
    pytest.param(
        segment, segment.SegmentOut, lambda now: segment.build(MESSAGES, now), id="segment"
    ),
    pytest.param(
        extract,
        extract.ExtractOut,
        lambda now: extract.build(MESSAGES, PEOPLE, now),
        id="extract",
    ),
    pytest.param(
        judge_claims,
        judge_claims.JudgeOut,
        lambda now: judge_claims.build([(CLAIMS[1], [CLAIMS[0]])], now),
        id="judge_claims",
    ),
    pytest.param(
        same_entity,
        same_entity.SameEntityOut,
        lambda now: same_entity.build(
            [
                (
                    "Ana",
                    "Sam (person) friend — in: Ana's friend Sam is a nurse.",
                    "Sam Lopez (other)",
                )
            ],
            now,
        ),
        id="same_entity",
    ),
    pytest.param(
        rewrite,
        rewrite.RewriteOut,
        lambda now: rewrite.build("When did Ana adopt Pixel?", ["Ana adopted a cat."], now),
        id="rewrite",
    ),
]


CLAIMS = (
    Claim(
        text="Ana works as a software engineer at Acme.",
        speaker="Ana",
        subject="Ana",
        conversation="c",
        evidence=("D1:1",),
        said_at=datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
        id=41,
    ),
    Claim(
        text="Ana was promoted to team lead.",
        speaker="Ana",
        subject="Ana",
        conversation="c",
        evidence=("D2:1",),
        said_at=datetime(2023, 6, 8, 13, 56, tzinfo=UTC),
        valid_from=datetime(2023, 6, 7, tzinfo=UTC),
        id=42,
    ),
)


def render(module: ModuleType, prompt: list[dict]) -> str:
    """The chat messages as reviewable text, headed by the task's name and version."""
    parts = [f"# {module.NAME} v{module.VERSION}"]
    parts += [f"=== {m['role']} ===\n{m['content']}" for m in prompt]
    return "\n\n".join(parts) + "\n"


def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"no snapshot {path}; run with UPDATE_SNAPSHOTS=1 to create it"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, (
        f"the rendered {name} prompt changed; if intended, bump VERSION and rerun with "
        "UPDATE_SNAPSHOTS=1"
    )


@pytest.mark.parametrize(("module", "schema", "build"), TASKS)
def test_rendered_prompt_matches_its_snapshot(module, schema, build) -> None:
    check_snapshot(module.NAME, render(module, build(NOW)))


@pytest.mark.parametrize(("module", "schema", "build"), TASKS)
def test_builders_are_pure_and_use_the_now_passed_in(module, schema, build) -> None:
    first, again = build(NOW), build(NOW)
    assert first == again
    assert [m["role"] for m in first] == ["system", "user"]
    long_ago = datetime(1999, 12, 31, 23, 59, tzinfo=UTC)
    old = build(long_ago)
    assert "Current time: 2023-07-14 09:30." in first[1]["content"]
    assert "Current time: 1999-12-31 23:59." in old[1]["content"]
    assert "1999-12-31" not in first[1]["content"]
    # only the clock line depends on ``now``
    strip = lambda p: re.sub(r"Current time: [^.]*\.", "", p[1]["content"])  # noqa: E731
    assert strip(old) == strip(first)
    assert old[0] == first[0]


@pytest.mark.parametrize(("module", "schema", "build"), TASKS[:2])  # the prompts that show messages
def test_messages_are_shown_by_short_aliases_never_raw_ids(module, schema, build) -> None:
    text = "\n".join(m["content"] for m in build(NOW))
    aliases = [int(a) for a in re.findall(r"^\[(\d+)\] ", text, flags=re.MULTILINE)]
    assert aliases == list(range(1, len(MESSAGES) + 1))
    for m in MESSAGES:
        assert m.id not in text
    assert "D7" not in text
    # every message appears once, on its alias's line, with speaker, role and addressees
    for alias, m in enumerate(MESSAGES, start=1):
        (line,) = [ln for ln in text.splitlines() if ln.startswith(f"[{alias}] ")]
        assert f" {m.speaker}" in line and m.text in line
    assert "Ana → Lee, Archie: Morning both!" in text
    assert "[image: tomato plants on a small balcony]" in text
    assert "Archie (assistant) → Ana:" in text
    assert "file:///g.jpg" not in text  # the caption is shown, not the url


@pytest.mark.parametrize(("module", "schema", "build"), TASKS)
def test_each_task_module_has_name_version_and_a_serialisable_schema(module, schema, build) -> None:
    assert isinstance(module.NAME, str) and re.fullmatch(r"[a-z_]+", module.NAME)
    assert isinstance(module.VERSION, str) and module.VERSION
    assert issubclass(schema, BaseModel)
    doc = schema.model_json_schema()
    assert json.loads(json.dumps(doc)) == doc
    assert doc["type"] == "object" and doc["properties"]


def test_task_names_are_unique() -> None:
    assert segment.NAME != extract.NAME


def test_extract_prompt_names_participants_and_session_start() -> None:
    user = extract.build(MESSAGES, PEOPLE, NOW)[1]["content"]
    assert "Participants: Ana, Lee, Archie." in user
    assert "Session started Wednesday 12 July 2023 18:05." in user
    assert f"Episode ({len(MESSAGES)} messages):" in user


def test_extract_prompt_shows_context_without_aliases() -> None:
    """An appended tail's prompt: the messages before it are shown, but cannot be cited."""
    prompt = extract.build(MESSAGES[2:], PEOPLE, NOW, context=MESSAGES[:2])
    check_snapshot(f"{extract.NAME}_context", render(extract, prompt))
    user = prompt[1]["content"]
    earlier, episode = user.split("Episode (3 messages):\n")
    assert extract.CONTEXT_NOTE in earlier
    assert "Ana → Lee, Archie: Morning both!" in earlier and "balcony garden" in earlier
    assert not re.search(r"^\[\d+\]", earlier, flags=re.MULTILINE)  # nothing to cite there
    aliases = [int(a) for a in re.findall(r"^\[(\d+)\] ", episode, flags=re.MULTILINE)]
    assert aliases == [1, 2, 3] and "log the race" in episode.splitlines()[0]
    assert "D7" not in user
    assert extract.build(MESSAGES, PEOPLE, NOW, context=()) == extract.build(MESSAGES, PEOPLE, NOW)
