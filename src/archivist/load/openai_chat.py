"""OpenAI chat transcripts: what people export or log from chat-completions calls.

Either a list of messages ``{role, content, name?}`` or an object
``{"messages": [...], "conversation"?, "user"?, "assistant"?, "timestamp"?}``.
The conversation id is ``conversation`` or the file's stem; message i (0-based,
counting skipped ones) gets id "m<i+1>" and time ``timestamp`` (or the load
time) + i seconds, all in session 1. The speaker is ``name``, else the object's
``user``/``assistant`` name for that role, else the role. ``developer`` is read
as ``system``; ``tool``/``function`` messages and messages with null content
(tool calls) are skipped, since they hold no conversation.
"""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from archivist.errors import LoadError
from archivist.load import _common as common
from archivist.model import Attachment, Conversation, Message

MESSAGE_SPACING = timedelta(seconds=1)

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
_SKIPPED_ROLES = {"tool", "function"}
_TEXT_PARTS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal"}


def parse(data: Any, *, source: str, now: datetime, default_tz: tzinfo) -> list[Conversation]:
    """Turn a decoded chat transcript into one conversation."""
    if isinstance(data, dict):
        messages = common.expect_list(data.get("messages"), source, None, "messages")
        header = data
    else:
        messages = common.expect_list(data, source, None, None)
        header = {}
    conv_id = common.get_str(header, "conversation", source, None, default="", nonempty=True)
    conv_id = conv_id or common.from_file_name(Path(source).stem) or "conversation"
    names = {
        role: common.get_str(header, role, source, None, default=role, nonempty=True)
        for role in ("user", "assistant")
    }
    if header.get("timestamp") is not None:
        start = common.parse_iso(header["timestamp"], source, None, "timestamp", default_tz)
    else:
        start = common.aware(now, default_tz)
    result: list[Message] = []
    for index, raw in enumerate(messages):
        msg = _message(raw, index, source, conv_id, names, start, seq=len(result))
        if msg is not None:
            result.append(msg)
    if not result:
        raise LoadError(source, None, "messages", "no user, assistant or system messages")
    return [common.conversation(conv_id, source, result, {1: start})]


def _message(
    raw: Any,
    index: int,
    source: str,
    conv_id: str,
    names: dict[str, str],
    start: datetime,
    *,
    seq: int,
) -> Message | None:
    """Parse one chat message, or None for the kinds that are skipped."""
    obj = common.expect_dict(raw, source, index, None)
    role_name = common.get_str(obj, "role", source, index)
    if role_name in _SKIPPED_ROLES:
        return None
    role = _ROLES.get(role_name)
    if role is None:
        raise LoadError(source, index, "role", f"unknown role {role_name!r}")
    if "content" not in obj:
        raise LoadError(source, index, "content", "missing")
    if obj["content"] is None:
        return None
    text, attachments = _content(obj["content"], source, index)
    speaker = common.get_str(obj, "name", source, index, default="", nonempty=True)
    speaker = speaker or names.get(role, role)
    addressees = {"user": (names["assistant"],), "assistant": (names["user"],)}.get(role, ())
    return Message(
        id=f"m{index + 1}",
        conversation=conv_id,
        session=1,
        speaker=speaker,
        text=text,
        timestamp=start + MESSAGE_SPACING * index,
        role=role,  # type: ignore[arg-type]  # a value of _ROLES
        addressees=addressees,
        attachments=attachments,
        session_start=start,
        seq=seq,
    )


def _content(content: Any, source: str, index: int) -> tuple[str, tuple[Attachment, ...]]:
    """Flatten string or multi-part content into text plus image attachments."""
    if isinstance(content, str):
        return common.check_size(content, source, index, "content"), ()
    parts = common.expect_list(content, source, index, "content")
    texts: list[str] = []
    attachments: list[Attachment] = []
    for i, raw in enumerate(parts):
        field = f"content[{i}]"
        part = common.expect_dict(raw, source, index, field)
        kind = _part_type(part, source, index, field)
        if kind in _TEXT_PARTS:
            key = _TEXT_PARTS[kind]
            value = part.get(key)
            if not isinstance(value, str):
                problem = f"expected a string, got {common.type_name(value)}"
                raise LoadError(source, index, f"{field}.{key}", problem)
            texts.append(value)
        elif kind == "image_url":
            attachments.append(Attachment("image", url=_image_url(part, source, index, field)))
        else:
            raise LoadError(source, index, f"{field}.type", f"unsupported content part {kind!r}")
    return common.check_size("\n".join(texts), source, index, "content"), tuple(attachments)


def _part_type(part: dict, source: str, index: int, field: str) -> str:
    """A part's ``type`` names what it holds, so it must be a string (a list is no name)."""
    if "type" not in part:
        raise LoadError(source, index, f"{field}.type", "missing")
    kind = part["type"]
    if not isinstance(kind, str):
        problem = f"expected a string, got {common.type_name(kind)}"
        raise LoadError(source, index, f"{field}.type", problem)
    return kind


def _image_url(part: dict, source: str, index: int, field: str) -> str:
    """Accept both {"image_url": {"url": ...}} and the older {"image_url": "..."}."""
    value = part.get("image_url")
    if isinstance(value, dict):
        value = value.get("url")
    if not isinstance(value, str):
        raise LoadError(source, index, f"{field}.image_url", "expected a URL string")
    return value
