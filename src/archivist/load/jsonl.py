"""Generic JSON Lines: the format to use for your own conversations.

One JSON object per line, UTF-8; blank lines are skipped. Fields:

============== ======================================== =========================
field          type                                     required / default
============== ======================================== =========================
conversation   string, non-empty                        required
id             string, non-empty, unique within its     required
               conversation
speaker        string, non-empty                        required
text           string (at most 1 MB UTF-8)              required
timestamp      ISO 8601 string, e.g.                    required; a time without
               "2023-05-08T13:56:00+02:00"              offset gets the default
                                                        zone (UTC unless set)
session        integer, 1 to 2**31-1                    1
role           "user", "assistant" or "system"          "user"
addressees     list of strings                          []
attachments    list of {"kind": str, "caption": str,    []
               "url": str} (caption and url optional)
session_start  ISO 8601 string                          the session's earliest
                                                        timestamp
metadata       JSON object (at most 16,000 characters)  {}
============== ======================================== =========================

Timestamps must fall in the years 1900..2200, and text fields must hold
no NUL byte and no lone surrogate (see archivist.load). Other fields are
ignored, and so are lines with a ``record`` field other than
"message" (``archivist export`` writes declared identities that way). Lines
are grouped into conversations by ``conversation`` in first-seen order.
Within a conversation messages are ordered by session, then by line, and
numbered in that order; a session's start is ``session_start`` if given,
else the earliest timestamp among its messages. Errors name the line
(1-based) and the field, and nothing is loaded from a file with any error.

Example line::

    {"conversation": "trip", "id": "m1", "speaker": "Ana", "text": "Booked Lisbon!",
     "timestamp": "2024-03-02T09:15:00Z", "addressees": ["Ben"]}
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, tzinfo

from archivist.errors import LoadError
from archivist.load import _common as common
from archivist.model import MAX_SESSION, ROLES, Attachment, Conversation, Message


def parse(text: str, *, source: str, default_tz: tzinfo) -> list[Conversation]:
    """Parse JSON Lines text into conversations, all or nothing."""
    grouped: dict[str, list[Message]] = {}
    ids: dict[str, set[str]] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip() or _other_record(line):
            continue
        msg = _line(line, number, source, default_tz)
        common.claim_id(ids.setdefault(msg.conversation, set()), msg.id, source, number, "id")
        grouped.setdefault(msg.conversation, []).append(msg)
    if not grouped:
        raise LoadError(source, None, None, "file is empty")
    return [_finish(conv_id, msgs, source) for conv_id, msgs in grouped.items()]


def _other_record(line: str) -> bool:
    """A line of an export that is not a message (cheap test first, then JSON)."""
    if '"record"' not in line:
        return False
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):  # ValueError: also a number of over 4300 digits
        return False  # reported by _line with its line number
    return isinstance(obj, dict) and obj.get("record", "message") != "message"


def _line(line: str, number: int, source: str, default_tz: tzinfo) -> Message:
    """Parse one line into a Message whose seq and session_start are filled in later."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as e:
        raise LoadError(source, number, None, f"invalid JSON at column {e.colno}: {e.msg}") from e
    except RecursionError as e:
        raise LoadError(source, number, None, "JSON is nested too deeply") from e
    except ValueError as e:  # an integer too long to convert
        raise LoadError(source, number, None, f"invalid JSON: {e}") from e
    obj = common.expect_dict(raw, source, number, None)
    role = common.get_str(obj, "role", source, number, default="user")
    if role not in ROLES:
        raise LoadError(source, number, "role", f"expected one of {', '.join(ROLES)}, got {role!r}")
    return Message(
        id=common.get_str(obj, "id", source, number, nonempty=True),
        conversation=common.get_str(obj, "conversation", source, number, nonempty=True),
        session=_session(obj, source, number),
        speaker=common.get_str(obj, "speaker", source, number, nonempty=True),
        text=common.get_text(obj, "text", source, number),
        timestamp=_timestamp(obj, source, number, default_tz),
        role=role,  # type: ignore[arg-type]  # checked against ROLES above
        addressees=_addressees(obj, source, number),
        attachments=_attachments(obj, source, number),
        session_start=(
            common.parse_iso(obj["session_start"], source, number, "session_start", default_tz)
            if obj.get("session_start") is not None
            else None
        ),
        metadata=_metadata(obj, source, number),
    )


def _metadata(obj: dict, source: str, number: int) -> dict:
    """The caller's own labels of the message (a JSON object), stored as given."""
    from ..model import metadata_problem

    value = obj.get("metadata")
    if value is None:
        return {}
    if problem := metadata_problem(value):
        raise LoadError(source, number, "metadata", problem)
    return value


def _timestamp(obj: dict, source: str, number: int, default_tz: tzinfo) -> datetime:
    """Every message needs an explicit time: it is what makes recall temporal."""
    if obj.get("timestamp") is None:
        raise LoadError(source, number, "timestamp", "missing")
    return common.parse_iso(obj["timestamp"], source, number, "timestamp", default_tz)


def _session(obj: dict, source: str, number: int) -> int:
    """Read the optional session number, a positive integer."""
    value = obj.get("session", 1)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SESSION:
        shown = value if isinstance(value, int) else common.type_name(value)
        raise LoadError(
            source,
            number,
            "session",
            f"expected an integer >= 1 (at most {MAX_SESSION}), got {shown}",
        )
    return value


def _addressees(obj: dict, source: str, number: int) -> tuple[str, ...]:
    """Read the optional list of people the message was said to."""
    value = common.expect_list(obj.get("addressees") or [], source, number, "addressees")
    if not all(isinstance(a, str) and a.strip() for a in value):
        raise LoadError(source, number, "addressees", "expected a list of non-empty strings")
    return tuple(value)


def _attachments(obj: dict, source: str, number: int) -> tuple[Attachment, ...]:
    """Read the optional attachments; their captions get indexed with the text."""
    value = common.expect_list(obj.get("attachments") or [], source, number, "attachments")
    result = []
    for i, raw in enumerate(value):
        field = f"attachments[{i}]"
        item = common.expect_dict(raw, source, number, field)
        parts = {}
        for key, default in (("kind", None), ("caption", ""), ("url", "")):
            try:
                parts[key] = common.get_str(
                    item, key, source, number, default=default, nonempty=key == "kind"
                )
            except LoadError as e:
                raise LoadError(source, number, f"{field}.{key}", e.problem) from None
        result.append(Attachment(**parts))
    return tuple(result)


def _finish(conv_id: str, msgs: list[Message], source: str) -> Conversation:
    """Order one conversation's messages by session and fill in seq and session_start."""
    ordered = sorted(msgs, key=lambda m: m.session)  # stable: line order within a session
    starts: dict[int, datetime | None] = {}
    for m in ordered:
        start = starts.get(m.session)
        first = m.session_start or m.timestamp  # a stated start (an export's) wins
        starts[m.session] = first if start is None else min(start, first)
    final = [replace(m, seq=seq, session_start=starts[m.session]) for seq, m in enumerate(ordered)]
    return common.conversation(conv_id, source, final, starts)
