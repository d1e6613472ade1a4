"""Messages as mem0 users pass them to ``add``: a string, one ``{"role", "content"}`` dict
or a list of them, for a ``user_id`` and/or an ``agent_id``.

Pure: ``turns_conversation`` turns them into a Conversation appended to what is
stored (ids continue the conversation's ``m<n>`` sequence, timestamps default to
the caller's clock, a long pause opens a new session as for live chats). A user
turn's speaker is ``user_id`` (else "user"), an assistant turn's ``agent_id``
(else "assistant"); each is addressed to the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..errors import InputError
from ..model import ROLES, Conversation, Message, Session
from .sessions import next_session

ASSISTANT = "assistant"
USER = "user"


@dataclass(frozen=True)
class Turn:
    role: str
    text: str
    name: str | None = None  # a speaker name the dict gave ("name"), else from the ids


def read_turns(data: object) -> list[Turn]:
    """The turns of a mem0-style ``messages`` argument; InputError names what is wrong."""
    if isinstance(data, str):
        items: Sequence[object] = [{"role": USER, "content": data}]
    elif isinstance(data, Mapping):
        items = [data]
    elif isinstance(data, (list, tuple)):
        items = data
    else:
        raise InputError(f"add() takes a string, a message dict or a list of them; got {data!r}")
    if not items:
        raise InputError("add() got an empty list of messages")
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            item = {"role": USER, "content": item}
        if not isinstance(item, Mapping):
            raise InputError(f"message {i}: expected a dict with role and content; got {item!r}")
        role, text = item.get("role", USER), item.get("content")
        if role not in ROLES:
            raise InputError(f"message {i}: role must be one of {', '.join(ROLES)}; got {role!r}")
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"message {i}: content must be a non-empty string")
        name = item.get("name")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise InputError(f"message {i}: name must be a non-empty string")
        out.append(Turn(role, text, name.strip() if name else None))
    return out


def read_timestamp(value: object, now: datetime) -> datetime:
    """``timestamp`` as mem0 callers give it (epoch seconds, ISO text, datetime) or ``now``."""
    if value is None:
        return now
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        when = datetime.fromtimestamp(value, UTC)
    elif isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InputError(f"timestamp {value!r} is not ISO 8601 or epoch seconds") from None
    else:
        raise InputError(f"timestamp must be epoch seconds, ISO text or a datetime; got {value!r}")
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def default_conversation(user_id: str | None, agent_id: str | None) -> str:
    """Where plain turns go when no conversation is named: one per user (else per agent)."""
    if user_id:
        return f"user:{user_id}"
    if agent_id:
        return f"agent:{agent_id}"
    raise InputError("add() of plain messages needs user_id, agent_id or conversation")


def turns_conversation(
    turns: Sequence[Turn],
    stored: Sequence[Message],
    *,
    conversation: str,
    user_id: str | None,
    agent_id: str | None,
    at: datetime,
    metadata: dict | None = None,
) -> Conversation:
    """The turns as new messages of ``conversation`` after its ``stored`` messages, each
    carrying ``metadata`` (the caller's labels)."""
    user, agent = user_id or USER, agent_id or ASSISTANT
    first = 1 + max((_number(m.id) for m in stored), default=0)
    top = max((m.seq for m in stored), default=-1)
    session, started = next_session(stored, at)
    messages = []
    for i, t in enumerate(turns):
        speaker = t.name or {USER: user, ASSISTANT: agent}.get(t.role, "system")
        to = () if t.role == "system" else ((agent,) if t.role == USER else (user,))
        messages.append(
            Message(
                id=f"m{first + i}",
                conversation=conversation,
                session=session,
                seq=top + 1 + i,
                speaker=speaker,
                text=t.text,
                timestamp=at + timedelta(milliseconds=i),  # the caller's order, kept
                role=t.role,  # type: ignore[arg-type]
                addressees=tuple(a for a in to if a != speaker),
                session_start=started,
                metadata=dict(metadata or {}),
            )
        )
    people = tuple(dict.fromkeys(p for m in messages for p in (m.speaker, *m.addressees)))
    return Conversation(
        id=conversation,
        participants=tuple(p for p in people if p != "system"),
        messages=tuple(messages),
        sessions=(Session(conversation, session, started),),
        source="add",
    )


def _number(msg_id: str) -> int:
    """n of an ``m<n>`` id (0 for any other id)."""
    return int(msg_id[1:]) if msg_id[:1] == "m" and msg_id[1:].isdigit() else 0
