"""Checks every loader shares, so each format reports problems the same way.

Each helper takes ``source`` (the file), ``record`` and ``field`` and raises
:class:`~archivist.errors.LoadError` naming all three.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from archivist.errors import LoadError
from archivist.model import (
    MAX_YEAR,
    MIN_YEAR,
    Conversation,
    Message,
    Session,
    date_in_range,
    text_problem,
)

MAX_TEXT_BYTES = 1_000_000  # one message's text, UTF-8 encoded; larger is surely a mistake
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # what text_problem refuses

Record = str | int | None


def read_text(path: str | Path) -> str:
    """Read a file as UTF-8, reporting the byte offset of any invalid sequence."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise LoadError(str(path), None, None, f"cannot read file: {e.strerror or e}") from e
    return decode(data, str(path))


def decode(data: bytes, source: str) -> str:
    """Decode UTF-8 (a leading BOM is dropped) so bad bytes fail with their offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LoadError(source, None, None, f"invalid UTF-8 at byte offset {e.start}") from e
    return text.removeprefix("\ufeff")


def load_json(text: str, source: str) -> Any:
    """Parse one JSON document, turning decoder errors into located LoadErrors."""
    if not text.strip():
        raise LoadError(source, None, None, "file is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        hint = (
            " (for JSON Lines use a .jsonl name or format 'jsonl')" if e.msg == "Extra data" else ""
        )
        raise LoadError(
            source, None, None, f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}{hint}"
        ) from e
    except RecursionError as e:
        raise LoadError(source, None, None, "JSON is nested too deeply") from e
    except ValueError as e:  # an integer too long to convert
        raise LoadError(source, None, None, f"invalid JSON: {e}") from e


def expect_dict(value: Any, source: str, record: Record, field: str | None) -> dict:
    """Insist on a JSON object where the format needs one."""
    if not isinstance(value, dict):
        raise LoadError(source, record, field, f"expected an object, got {type_name(value)}")
    return value


def expect_list(value: Any, source: str, record: Record, field: str | None) -> list:
    """Insist on a JSON array where the format needs one."""
    if not isinstance(value, list):
        raise LoadError(source, record, field, f"expected a list, got {type_name(value)}")
    return value


def get_str(
    obj: dict,
    key: str,
    source: str,
    record: Record,
    *,
    default: str | None = None,
    nonempty: bool = False,
) -> str:
    """Fetch a string field; missing is an error unless a default is given."""
    if key not in obj or (obj[key] is None and default is not None):
        if default is None:
            raise LoadError(source, record, key, "missing")
        return default
    value = obj[key]
    if not isinstance(value, str):
        raise LoadError(source, record, key, f"expected a string, got {type_name(value)}")
    if nonempty and not value.strip():
        raise LoadError(source, record, key, "must not be empty")
    return value


def get_text(obj: dict, key: str, source: str, record: Record) -> str:
    """Fetch a message's text and enforce the size limit."""
    return check_size(get_str(obj, key, source, record), source, record, key)


def check_size(text: str, source: str, record: Record, field: str) -> str:
    """Reject a single message above MAX_TEXT_BYTES; anything smaller is fine."""
    if len(text) > MAX_TEXT_BYTES // 4:
        size = len(text.encode("utf-8"))
        if size > MAX_TEXT_BYTES:
            raise LoadError(
                source, record, field, f"text is {size} bytes; the limit is {MAX_TEXT_BYTES}"
            )
    return text


def aware(value: datetime, default_tz: tzinfo) -> datetime:
    """Give naive times the default zone, because stored times must be explicit."""
    return value if value.tzinfo is not None else value.replace(tzinfo=default_tz)


def parse_iso(value: Any, source: str, record: Record, field: str, default_tz: tzinfo) -> datetime:
    """Parse an ISO 8601 timestamp string into an aware datetime."""
    if not isinstance(value, str):
        raise LoadError(
            source, record, field, f"expected an ISO 8601 string, got {type_name(value)}"
        )
    try:
        when = aware(datetime.fromisoformat(value.strip()), default_tz)
    except ValueError as e:
        raise LoadError(source, record, field, f"not an ISO 8601 timestamp: {value!r}") from e
    if not date_in_range(when):
        raise LoadError(
            source, record, field, f"{value!r} is outside the years {MIN_YEAR}..{MAX_YEAR}"
        )
    return when


def claim_id(seen: set[str], msg_id: str, source: str, record: Record, field: str) -> None:
    """Record a message id, refusing a second message with the same id."""
    if msg_id in seen:
        raise LoadError(source, record, field, f"duplicate message id {msg_id!r}")
    seen.add(msg_id)


def from_file_name(name: str) -> str:
    """A label taken from a file's name (its stem, its path), storable: a name that is not
    valid UTF-8 reaches Python with lone surrogates, which become U+FFFD."""
    return name if text_problem(name) is None else _UNSTORABLE.sub("\ufffd", name)


def conversation(
    conv_id: str,
    source: str,
    messages: list[Message],
    starts: dict[int, datetime | None],
    participants: Iterable[str] | None = None,
) -> Conversation:
    """Assemble a Conversation with its sessions and sorted participants."""
    people = participants if participants is not None else (m.speaker for m in messages)
    return Conversation(
        id=conv_id,
        participants=tuple(sorted(set(people))),
        messages=tuple(messages),
        sessions=tuple(Session(conv_id, n, starts[n]) for n in sorted(starts)),
        source=from_file_name(source),
    )


def type_name(value: Any) -> str:
    """Name a JSON value's type the way a user who wrote the file would."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, bool):
        return names[bool]
    if isinstance(value, int | float):
        return "a number"
    return names.get(type(value), type(value).__name__)
