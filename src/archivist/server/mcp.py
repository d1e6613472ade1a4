"""MCP server: twelve tools (remember, recall, ask, profile, context, forget, and the
mem0-shaped memory tools of mcp_memories.py); people and timelines as resources.

``build_server(memory)`` wraps one MemoryService (no global state, nothing runs
at import) in the official SDK's ``MCPServer`` (mcp>=2). The SDK is imported
only here and by ``archivist mcp``, so it stays an optional extra. Errors from
the ArchivistError tree reach the client as tool errors (or resource errors)
carrying their message; anything else is a bug and the SDK logs its traceback.

Tools (all synchronous; the SDK runs them in worker threads, and the store is
thread-safe):

- ``remember(text, speaker, conversation, addressees, timestamp, role)``: store
  one message; its id is derived from its content, so re-sending it stores
  nothing. Returns the id and whether it was new.
- ``recall(query, person, conversation, k, at)``: routed, time-aware search; hits
  with provenance and the claims found with them.
- ``ask(question, person, conversation, at)``: an answer with evidence, speaker and
  confidence, or an abstention with its reason.
- ``profile(person, at)``: what holds for a person, grouped (home, work, ...),
  with since when, who said it and what it replaced.
- ``forget(conversation | person)``: delete; returns the number of messages.
- ``add_memory``, ``get_memories``, ``get_memory``, ``update_memory``,
  ``delete_memory``, ``memory_history``, ``context``: server/mcp_memories.py.

``at`` (ISO 8601 with a timezone) reads memory as it stood then, with the same
rules as the CLI's ``--at`` and REST's ``at`` (model.parse_at).

Resources: ``archivist://people``, ``archivist://people/{person}/timeline``,
``archivist://conversations`` (JSON).
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from ..clock import Clock
from ..errors import ArchivistError, InputError, NotFound
from ..load._common import check_size
from ..model import (
    ROLES,
    Claim,
    ClaimEvent,
    Conversation,
    Message,
    Person,
    Session,
    content_hash,
    parse_at,
)
from ..service import MemoryService
from ..write.sessions import SESSION_GAP, next_session  # noqa: F401 - re-exported

ID_PREFIX = "mcp-"
JSON = "application/json"

INSTRUCTIONS = (
    "Long-term, speaker-attributed memory. Call `remember` for each message worth "
    "keeping (say who said it and in which conversation), `recall` to find what was "
    "said, and `ask` for an answer with evidence; `ask` abstains when memory does not "
    "support the question; `profile` tells what holds for a person now. Pass `at` "
    "(ISO 8601 with timezone) to any of them for memory as it stood then. Read "
    "archivist://people for who is known and archivist://people/{person}/timeline for "
    "what is known about someone over time."
)

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
AtArg = Annotated[
    str | None,
    Field(
        description="Memory as it stood at this time: ISO 8601 with a timezone, e.g. "
        "'2023-06-01T12:00Z', or a date, '2023-06-01', read as that day ended in UTC "
        "(default: now). Nothing said later counts."
    ),
]


# -- pure helpers ---------------------------------------------------------------------


def parse_time(value: str | None, now: datetime) -> datetime:
    """A message's ISO 8601 time (naive ones read as UTC), or ``now``: stored times must be
    explicit. An ``at`` argument is stricter (model.parse_at: a timezone, no default),
    as on every front end."""
    if value is None or not value.strip():
        return now
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError as e:
        raise InputError(f"timestamp {value!r} is not ISO 8601 (e.g. 2023-05-08T13:56:00Z)") from e
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def message_id(
    conversation: str, speaker: str, role: str, text: str, timestamp: datetime | None
) -> str:
    """The same message always gets the same id, which makes re-sending it a no-op.

    Without a timestamp the id covers who said what where, so a repeated
    identical line is one message; give timestamps to keep repeats apart.
    """
    parts = [conversation, speaker, role, text]
    if timestamp is not None:
        parts.append(timestamp.astimezone(UTC).isoformat())
    return ID_PREFIX + content_hash(*parts)[:16]


def person_dict(p: Person) -> dict[str, Any]:
    """A person as JSON: id, name and the (conversation, name) identities it goes by."""
    return {
        "id": p.id,
        "name": p.name,
        "identities": [{"conversation": c, "name": n} for c, n in p.identities],
        "declared": p.declared,
        "key_info": p.key_info,
    }


def timeline_item(c: Claim, history: Sequence[ClaimEvent]) -> dict[str, Any]:
    """One claim of a timeline: what, who said it, when it holds, and what became of it."""
    return {**c.to_dict(), "history": [e.to_dict() for e in history]}


def _dumps(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str)


# -- operations over a MemoryService ------------------------------------------------------


def remember_message(
    memory: MemoryService,
    *,
    text: str,
    speaker: str,
    conversation: str,
    addressees: Sequence[str] = (),
    timestamp: str | None = None,
    role: str = "user",
    now: datetime,
) -> dict[str, Any]:
    """Store one message unless it is already stored; say which id it has and whether it was new."""
    for name, value in (("text", text), ("speaker", speaker), ("conversation", conversation)):
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"remember() needs a non-empty {name}")
    if role not in ROLES:
        raise InputError(f"role must be one of {', '.join(ROLES)}; got {role!r}")
    check_size(text, "remember", None, "text")  # the same 1 MB limit as every loader
    speaker, conversation = speaker.strip(), conversation.strip()
    at = parse_time(timestamp, now)
    mid = message_id(conversation, speaker, role, text, at if timestamp else None)
    found = memory.store.get_message(conversation, mid)
    if found is not None:
        return {"id": mid, "conversation": conversation, "session": found.session, "stored": False}
    stored = [m for _, m in memory.store.conversation_messages(conversation)]
    session, started = next_session(stored, at)
    to = tuple(dict.fromkeys(a.strip() for a in addressees if a.strip() and a.strip() != speaker))
    msg = Message(
        id=mid,
        conversation=conversation,
        session=session,
        speaker=speaker,
        text=text,
        timestamp=at,
        role=role,  # type: ignore[arg-type]
        addressees=to,
        session_start=started,
    )
    people = to if role == "system" else (speaker, *to)
    conv = Conversation(
        id=conversation,
        participants=people,
        messages=(msg,),
        sessions=(Session(conversation, session, started),),
        source="mcp",
    )
    added = memory.add(conv)[0].added
    return {"id": mid, "conversation": conversation, "session": session, "stored": added > 0}


def person_timeline(memory: MemoryService, person: str) -> dict[str, Any]:
    """A person's claims over time across their identities (namesakes stay out)."""
    p = memory.person(person)
    found: dict[int | None, tuple[Claim, list[ClaimEvent]]] = {}
    for conv, name in p.identities:
        try:
            entries = memory.timeline(name, conversation=conv)
        except NotFound:
            continue
        for claim, history in entries:
            found[claim.id] = (claim, history)
    ordered = sorted(found.values(), key=lambda ch: (ch[0].valid_from or ch[0].said_at, ch[0].id))
    return {"person": person_dict(p), "claims": [timeline_item(c, h) for c, h in ordered]}


@contextmanager
def _tool_errors() -> Iterator[None]:
    """Archivist errors become tool errors whose message the client (and its model) reads."""
    try:
        yield
    except ArchivistError as e:
        raise ToolError(str(e)) from e


@contextmanager
def _resource_errors() -> Iterator[None]:
    """Archivist errors become resource errors carrying their message (NotFound: not found)."""
    try:
        yield
    except NotFound as e:
        raise ResourceNotFoundError(str(e)) from e
    except ArchivistError as e:
        raise ResourceError(str(e)) from e


# -- the server ---------------------------------------------------------------------------


def build_server(
    memory: MemoryService,
    *,
    name: str = "archivist",
    clock: Clock | None = None,
    log_level: LogLevel = "WARNING",
) -> MCPServer:
    """An MCP server over ``memory``; ``clock`` times messages sent without a timestamp."""
    now: Clock = clock or memory.core.clock
    server = MCPServer(name, instructions=INSTRUCTIONS, log_level=log_level)
    writing = threading.Lock()
    _add_write_tools(server, memory, now, writing)
    _add_read_tools(server, memory)
    from .mcp_memories import add_memory_tools  # mem0-style memory tools and context

    add_memory_tools(server, memory, writing, _tool, _tool_errors)
    _add_resources(server, memory)
    return server


def _tool(server: MCPServer, **hints: bool) -> Callable[[Callable[..., Any]], Any]:
    """Register a tool whose description is its docstring, dedented for clients to show."""

    def register(fn: Callable[..., Any]) -> Any:
        server.add_tool(
            fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=ToolAnnotations(**hints)
        )
        return fn

    return register


def _resource(server: MCPServer, uri: str, name: str) -> Callable[[Callable[..., str]], Any]:
    """Register a JSON resource whose description is its docstring, dedented."""

    def register(fn: Callable[..., str]) -> Any:
        doc = inspect.cleandoc(fn.__doc__ or "")
        return server.resource(uri, name=name, description=doc, mime_type=JSON)(fn)

    return register


def _add_write_tools(
    server: MCPServer, memory: MemoryService, now: Clock, writing: threading.Lock
) -> None:
    # Tools run in worker threads; writes go one at a time so two messages of one
    # conversation never pick their session or extract it concurrently.
    @_tool(server, idempotent_hint=True, destructive_hint=False)
    def remember(
        text: Annotated[str, Field(description="What was said, verbatim.")],
        speaker: Annotated[str, Field(description="Who said it (a name, e.g. 'Ana').")],
        conversation: Annotated[str, Field(description="Conversation id, e.g. 'ana-lee'.")],
        addressees: Annotated[
            list[str] | None, Field(description="Whom it was said to (names).")
        ] = None,
        timestamp: Annotated[
            str | None,
            Field(description="When it was said, ISO 8601 (naive = UTC); default: now."),
        ] = None,
        role: Annotated[
            Literal["user", "assistant", "system"], Field(description="The speaker's role.")
        ] = "user",
    ) -> dict[str, Any]:
        """Store one message in long-term memory; re-sending the same message stores nothing.

        Returns the message id and ``stored`` (false when it was already there).
        """
        with _tool_errors(), writing:
            return remember_message(
                memory,
                text=text,
                speaker=speaker,
                conversation=conversation,
                addressees=addressees or (),
                timestamp=timestamp,
                role=role,
                now=now(),
            )

    @_tool(server, destructive_hint=True, idempotent_hint=True)
    def forget(
        conversation: Annotated[
            str | None, Field(description="Delete this whole conversation.")
        ] = None,
        person: Annotated[
            str | None,
            Field(description="Delete what this person (a name) said and every claim about them."),
        ] = None,
        received: Annotated[
            bool, Field(description="With person: also the messages others sent them.")
        ] = False,
    ) -> dict[str, Any]:
        """Delete a conversation or everything about a person from memory (give exactly one).

        Returns the number of messages deleted.
        """
        with _tool_errors():
            if (conversation is None) == (person is None):
                raise InputError("forget takes exactly one of conversation or person")
            with writing:
                n = memory.delete(
                    conversation=conversation, person=person, received=received, actor="mcp"
                )
            return {"deleted": n, "conversation": conversation, "person": person}


def _add_read_tools(server: MCPServer, memory: MemoryService) -> None:
    @_tool(server, read_only_hint=True)
    def recall(
        query: Annotated[str, Field(description="What to look for, in plain words.")],
        person: Annotated[
            str | None, Field(description="Only messages this person sent or received.")
        ] = None,
        conversation: Annotated[str | None, Field(description="Only this conversation.")] = None,
        k: Annotated[int, Field(ge=1, le=100, description="How many messages.")] = 10,
        at: AtArg = None,
    ) -> dict[str, Any]:
        """Find the remembered messages that best match a query, with who said them, when,
        and the claims extracted from them."""
        with _tool_errors():
            when = parse_at(at)
            found = memory.recall(query, person=person, conversation=conversation, k=k, at=when)
            return {
                "query": query,
                "queries": list(found.queries),
                "hits": [h.to_dict() for h in found.hits],
            }

    @_tool(server, read_only_hint=True)
    def ask(
        question: Annotated[str, Field(description="A question about what was said.")],
        person: Annotated[str | None, Field(description="Whom the question is about.")] = None,
        conversation: Annotated[str | None, Field(description="Only this conversation.")] = None,
        at: AtArg = None,
    ) -> dict[str, Any]:
        """Answer a question from memory with evidence message ids, the speaker and a
        confidence, or abstain (``abstain`` true, ``reason`` says why)."""
        with _tool_errors():
            when = parse_at(at)
            return memory.ask(question, person=person, conversation=conversation, at=when).to_dict()

    @_tool(server, read_only_hint=True)
    def profile(
        person: Annotated[str, Field(description="The person's name, e.g. 'Ana'.")],
        at: AtArg = None,
    ) -> dict[str, Any]:
        """What holds for a person now (or at ``at``), grouped: home, work, relationships,
        family, health and diet, pets, possessions and hobbies, plans, other. Each entry
        says since when, who said it (first-hand or reported), its evidence message ids
        and the values it replaced, with their dates."""
        with _tool_errors():
            return memory.profile(person, at=parse_at(at)).to_dict()


def _add_resources(server: MCPServer, memory: MemoryService) -> None:
    @_resource(server, "archivist://people", "people")
    def people() -> str:
        """Everyone memory knows, each with the (conversation, name) identities they go by."""
        with _resource_errors():
            return _dumps([person_dict(p) for p in memory.persons()])

    @_resource(server, "archivist://people/{person}/timeline", "timeline")
    def timeline(person: str) -> str:
        """A person's claims over time (person id or unambiguous name): validity, speaker,
        status (current / superseded / duplicate) and history."""
        with _resource_errors():
            return _dumps(person_timeline(memory, person))

    @_resource(server, "archivist://conversations", "conversations")
    def conversations() -> str:
        """Stored conversations with their participants and message and session counts."""
        with _resource_errors():
            return _dumps(memory.conversations())
