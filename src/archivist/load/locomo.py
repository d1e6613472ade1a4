"""LoCoMo (Maharana et al., ACL 2024): the benchmark's conversations and QA.

The file is a list of samples, each with ``sample_id``, ``conversation``
(``speaker_a``, ``speaker_b``, ``session_<n>`` turn lists and
``session_<n>_date_time`` strings like "1:56 pm on 8 May, 2023") and ``qa``.
Every ``session_<n>`` key must hold a list of turns (conv-26's spare
``session_<n>_date_time`` keys without turns are ignored).
Turns carry no time of their own, so turn i of a session is stamped
session start + 30 s * i: order is kept and the day is right.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from archivist.errors import LoadError
from archivist.load import _common as common
from archivist.model import Attachment, Conversation, Message

TURN_SPACING = timedelta(seconds=30)

_SESSION_KEY = re.compile(r"session_([1-9]\d*)")
_DATE = re.compile(
    r"(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<ampm>am|pm)\s+on\s+"
    r"(?P<day>\d{1,2})\s+(?P<month>[A-Za-z]+),\s*(?P<year>\d{4})",
    re.IGNORECASE,
)
_MONTHS = {
    name: i + 1
    for i, name in enumerate(
        "january february march april may june july august"
        " september october november december".split()
    )
}
_EVIDENCE = re.compile(r"D\d+:\d+")


def parse_date(text: str) -> datetime:
    """Parse LoCoMo's "1:56 pm on 8 May, 2023" strictly; ValueError on anything else."""
    m = _DATE.fullmatch(text.strip())
    if not m:
        raise ValueError(f"expected a time like '1:56 pm on 8 May, 2023', got {text!r}")
    hour, minute = int(m["hour"]), int(m["minute"])
    month = _MONTHS.get(m["month"].lower())
    if month is None:
        raise ValueError(f"unknown month {m['month']!r} in {text!r}")
    if not 1 <= hour <= 12:
        raise ValueError(f"hour {hour} is not on a 12-hour clock in {text!r}")
    hour = hour % 12 + (12 if m["ampm"].lower() == "pm" else 0)
    return datetime(int(m["year"]), month, int(m["day"]), hour, minute)  # ValueError if invalid


def parse(data: Any, *, source: str, default_tz: tzinfo) -> list[Conversation]:
    """Turn a decoded LoCoMo file into conversations, one per sample."""
    samples = common.expect_list(data, source, None, None)
    if not samples:
        raise LoadError(source, None, None, "no samples in file")
    result: list[Conversation] = []
    seen: set[str] = set()
    for index, raw in enumerate(samples):
        sample = common.expect_dict(raw, source, index, None)
        sample_id = common.get_str(sample, "sample_id", source, index, nonempty=True)
        if sample_id in seen:
            raise LoadError(source, sample_id, "sample_id", "duplicate sample id")
        seen.add(sample_id)
        result.append(_sample(sample, sample_id, source, default_tz))
    return result


def _sample(sample: dict, sample_id: str, source: str, default_tz: tzinfo) -> Conversation:
    """Parse one sample's sessions into a conversation."""
    conv = common.expect_dict(sample.get("conversation"), source, sample_id, "conversation")
    speaker_a = common.get_str(conv, "speaker_a", source, sample_id, nonempty=True)
    speaker_b = common.get_str(conv, "speaker_b", source, sample_id, nonempty=True)
    if speaker_a == speaker_b:
        raise LoadError(source, sample_id, "speaker_b", f"same as speaker_a ({speaker_a!r})")
    other = {speaker_a: speaker_b, speaker_b: speaker_a}
    keys = [m[1] for key in conv if (m := _SESSION_KEY.fullmatch(key))]
    if long := next((k for k in keys if len(k) > 10), None):
        raise LoadError(source, sample_id, f"session_{long[:12]}...", "session number too large")
    numbers = sorted(int(k) for k in keys)
    for n in numbers:
        common.expect_list(conv[f"session_{n}"], source, sample_id, f"session_{n}")
    if not numbers:
        raise LoadError(source, sample_id, "conversation", "no session_<n> lists")
    messages: list[Message] = []
    starts: dict[int, datetime | None] = {}
    ids: set[str] = set()
    for n in numbers:
        start = _session_start(conv, n, source, sample_id, default_tz)
        starts[n] = start
        for i, raw in enumerate(conv[f"session_{n}"]):
            record = f"{sample_id} session_{n}[{i}]"
            turn = common.expect_dict(raw, source, record, None)
            speaker = common.get_str(turn, "speaker", source, record, nonempty=True)
            if speaker not in other:
                raise LoadError(
                    source,
                    record,
                    "speaker",
                    f"unknown speaker {speaker!r} (expected {speaker_a!r} or {speaker_b!r})",
                )
            msg_id = common.get_str(turn, "dia_id", source, record, nonempty=True)
            common.claim_id(ids, msg_id, source, record, "dia_id")
            messages.append(
                Message(
                    id=msg_id,
                    conversation=sample_id,
                    session=n,
                    speaker=speaker,
                    text=common.get_text(turn, "text", source, record),
                    timestamp=start + TURN_SPACING * i,
                    role="user",
                    addressees=(other[speaker],),
                    attachments=_attachments(turn, source, record),
                    session_start=start,
                    seq=len(messages),
                )
            )
    return common.conversation(
        sample_id, source, messages, starts, participants=(speaker_a, speaker_b)
    )


def _session_start(conv: dict, n: int, source: str, sample_id: str, default_tz: tzinfo) -> datetime:
    """Read and parse ``session_<n>_date_time``, which every session needs."""
    key = f"session_{n}_date_time"
    text = common.get_str(conv, key, source, sample_id)
    try:
        return parse_date(text).replace(tzinfo=default_tz)
    except ValueError as e:
        raise LoadError(source, sample_id, key, str(e)) from e


def _attachments(turn: dict, source: str, record: str) -> tuple[Attachment, ...]:
    """Keep a shared image as its BLIP caption, which is the only part we can index."""
    if turn.get("blip_caption") is None:
        return ()
    caption = common.get_str(turn, "blip_caption", source, record)
    url = turn.get("img_url")
    if isinstance(url, list):
        url = url[0] if url else ""
    if url is None:
        url = ""
    if not isinstance(url, str):
        raise LoadError(
            source, record, "img_url", f"expected a string, got {common.type_name(url)}"
        )
    return (Attachment("image", caption=caption, url=url),)


def load_qa(path: str | Path) -> dict[str, list[dict]]:
    """Read the QA items per sample, normalised for scoring (bench code uses this)."""
    source = str(path)
    return parse_qa(common.load_json(common.read_text(path), source), source=source)


def parse_qa(data: Any, *, source: str) -> dict[str, list[dict]]:
    """Map sample_id to QA dicts {question, answer, category, evidence}."""
    samples = common.expect_list(data, source, None, None)
    result: dict[str, list[dict]] = {}
    for index, raw in enumerate(samples):
        sample = common.expect_dict(raw, source, index, None)
        sample_id = common.get_str(sample, "sample_id", source, index, nonempty=True)
        items = common.expect_list(sample.get("qa"), source, sample_id, "qa")
        result[sample_id] = [
            _qa_item(item, source, f"{sample_id} qa[{i}]") for i, item in enumerate(items)
        ]
    return result


def _qa_item(raw: Any, source: str, record: str) -> dict:
    """Normalise one QA item; category-5 items fall back to their adversarial answer."""
    item = common.expect_dict(raw, source, record, None)
    question = common.get_str(item, "question", source, record)
    answer = item.get("answer")
    if answer is None:
        answer = common.get_str(item, "adversarial_answer", source, record, default="")
    elif not isinstance(answer, str | int | float) or isinstance(answer, bool):
        raise LoadError(
            source, record, "answer", f"expected a string, got {common.type_name(answer)}"
        )
    category = item.get("category")
    if not isinstance(category, int) or isinstance(category, bool):
        raise LoadError(
            source, record, "category", f"expected an integer, got {common.type_name(category)}"
        )
    evidence = common.expect_list(item.get("evidence", []), source, record, "evidence")
    if not all(isinstance(e, str) for e in evidence):
        raise LoadError(source, record, "evidence", "expected a list of strings")
    return {
        "question": question,
        "answer": str(answer),
        "category": category,
        "evidence": normalise_evidence(evidence),
    }


def normalise_evidence(raw: list[str]) -> list[str]:
    """Repair the dataset's malformed dia ids ("D8:6; D9:17", "D:11:26") and drop the rest."""
    result: list[str] = []
    for entry in raw:
        for token in re.split(r"[;,\s]+", entry):
            token = re.sub(r"^D:(?=\d+:\d+$)", "D", token.strip())
            if _EVIDENCE.fullmatch(token) and token not in result:
                result.append(token)
    return result
