"""LongMemEval (Wu et al., 2024): each question's haystack becomes one conversation.

An item has ``question_id``, ``haystack_sessions`` (lists of turns
``{role, content, has_answer?}``), ``haystack_dates`` ("2023/05/20 (Sat) 02:21")
and ``haystack_session_ids``, the three lists in step. Session k is numbered
k + 1; turn j gets id "<session_id>:<j>", speaker = role, and is stamped
session start + 30 s * j, as turns carry no time of their own.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, tzinfo
from typing import Any

from archivist.errors import LoadError
from archivist.load import _common as common
from archivist.model import ROLES, Conversation, Message

TURN_SPACING = timedelta(seconds=30)

_DATE = re.compile(r"(\d{4})/(\d{2})/(\d{2})\s*(?:\([A-Za-z]{3}\))?\s*(\d{2}):(\d{2})")
_OTHER = {"user": ("assistant",), "assistant": ("user",), "system": ()}


def parse_date(text: str) -> datetime:
    """Parse "2023/05/20 (Sat) 02:21" (or ISO 8601); ValueError on anything else."""
    m = _DATE.fullmatch(text.strip())
    if m:
        year, month, day, hour, minute = (int(g) for g in m.groups())
        return datetime(year, month, day, hour, minute)
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"expected a date like '2023/05/20 (Sat) 02:21', got {text!r}") from None


def parse(data: Any, *, source: str, default_tz: tzinfo) -> list[Conversation]:
    """Turn a decoded LongMemEval file (a list of items, or one item) into conversations."""
    items = [data] if isinstance(data, dict) else common.expect_list(data, source, None, None)
    if not items:
        raise LoadError(source, None, None, "no items in file")
    result: list[Conversation] = []
    seen: set[str] = set()
    for index, raw in enumerate(items):
        item = common.expect_dict(raw, source, index, None)
        conv_id = _question_id(item, index, source)
        if conv_id in seen:
            raise LoadError(source, conv_id, "question_id", "duplicate question id")
        seen.add(conv_id)
        result.append(_item(item, conv_id, source, default_tz))
    return result


def _question_id(item: dict, index: int, source: str) -> str:
    """Use the question id as conversation id, or a positional one when it is absent."""
    value = item.get("question_id")
    if value is None:
        return f"longmemeval-{index}"
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise LoadError(
            source, index, "question_id", f"expected a string, got {common.type_name(value)}"
        )
    if not str(value).strip():
        raise LoadError(source, index, "question_id", "must not be empty")
    return str(value)


def _item(item: dict, conv_id: str, source: str, default_tz: tzinfo) -> Conversation:
    """Parse one item's haystack sessions into a conversation."""
    sessions = common.expect_list(
        item.get("haystack_sessions"), source, conv_id, "haystack_sessions"
    )
    dates = common.expect_list(item.get("haystack_dates"), source, conv_id, "haystack_dates")
    session_ids = common.expect_list(
        item.get("haystack_session_ids"), source, conv_id, "haystack_session_ids"
    )
    if not len(sessions) == len(dates) == len(session_ids):
        raise LoadError(
            source,
            conv_id,
            "haystack_sessions",
            f"lengths differ: {len(sessions)} sessions, {len(dates)} dates, "
            f"{len(session_ids)} session ids",
        )
    messages: list[Message] = []
    starts: dict[int, datetime | None] = {}
    ids: set[str] = set()
    for k, (turns, date, session_id) in enumerate(zip(sessions, dates, session_ids, strict=True)):
        start = _start(date, source, conv_id, k, default_tz)
        sid = _session_id(session_id, source, conv_id, k)
        starts[k + 1] = start
        turns = common.expect_list(turns, source, conv_id, f"haystack_sessions[{k}]")
        for j, raw in enumerate(turns):
            record = f"{conv_id} haystack_sessions[{k}][{j}]"
            turn = common.expect_dict(raw, source, record, None)
            role = common.get_str(turn, "role", source, record)
            if role not in ROLES:
                raise LoadError(source, record, "role", f"unknown role {role!r}")
            msg_id = f"{sid}:{j}"
            common.claim_id(ids, msg_id, source, record, "haystack_session_ids")
            messages.append(
                Message(
                    id=msg_id,
                    conversation=conv_id,
                    session=k + 1,
                    speaker=role,
                    text=common.get_text(turn, "content", source, record),
                    timestamp=start + TURN_SPACING * j,
                    role=role,  # type: ignore[arg-type]  # checked against ROLES above
                    addressees=_OTHER[role],
                    session_start=start,
                    seq=len(messages),
                )
            )
    return common.conversation(conv_id, source, messages, starts)


def _start(date: Any, source: str, conv_id: str, k: int, default_tz: tzinfo) -> datetime:
    """Parse one entry of ``haystack_dates``."""
    field = f"haystack_dates[{k}]"
    if not isinstance(date, str):
        raise LoadError(source, conv_id, field, f"expected a string, got {common.type_name(date)}")
    try:
        return common.aware(parse_date(date), default_tz)
    except ValueError as e:
        raise LoadError(source, conv_id, field, str(e)) from e


def _session_id(value: Any, source: str, conv_id: str, k: int) -> str:
    """Session ids become part of message ids, so they must be plain strings."""
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
        raise LoadError(
            source, conv_id, f"haystack_session_ids[{k}]", "expected a non-empty string"
        )
    return str(value)
