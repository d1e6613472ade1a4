"""MCP tools for memories the way mem0 users know them (a memory is a claim), plus the
context an assistant turn would get: add_memory, get_memories, get_memory,
update_memory, delete_memory, memory_history, context.

Registered by ``server/mcp.py``'s ``build_server``; each tool calls the MemoryService
(or the mem0 facade over it, for mem0-shaped results) and nothing else. Errors from
the ArchivistError tree reach the client as tool errors carrying their message.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from ..errors import NotFound
from ..mem0 import Memory as Mem0
from ..service import MemoryService

Tool = Callable[..., Callable[[Callable[..., Any]], Any]]
MemoryId = Annotated[str, Field(description="A memory id, as get_memories returns it.")]
UserId = Annotated[str | None, Field(description="Whose memories (a name, e.g. 'alice').")]


def add_memory_tools(
    server: MCPServer, memory: MemoryService, writing: threading.Lock, tool: Tool, errors
) -> None:
    """Register the memory tools on ``server`` (``tool``/``errors``: mcp.py's helpers)."""
    mem0 = Mem0(memory)

    @tool(server, idempotent_hint=False, destructive_hint=False)
    def add_memory(
        messages: Annotated[
            list[dict[str, str]] | str,
            Field(description="A string (what the user said) or [{role, content}, ...]."),
        ],
        user_id: UserId = None,
        agent_id: Annotated[str | None, Field(description="The assistant's name.")] = None,
        conversation: Annotated[
            str | None, Field(description="Conversation id (default: user:<user_id>).")
        ] = None,
    ) -> dict[str, Any]:
        """Store messages and return the memories extracted from them (event ADD)."""
        with errors(), writing:
            return mem0.add(messages, user_id=user_id, agent_id=agent_id, run_id=conversation)

    @tool(server, read_only_hint=True)
    def get_memories(
        user_id: UserId = None,
        query: Annotated[str | None, Field(description="Search instead of listing.")] = None,
        filters: Annotated[
            dict[str, Any] | None, Field(description="Match the metadata given to add.")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        """A user's current memories (history stays out), or those best matching ``query``
        (highest score first), as REST /v1/memories lists them."""
        with errors():
            if query is not None:
                return mem0.search(query, user_id=user_id, filters=filters, limit=limit)
            return mem0.get_all(user_id=user_id, filters=filters, limit=limit)

    _one_memory_tools(server, mem0, writing, tool, errors)

    @tool(server, read_only_hint=True)
    def context(
        turn: Annotated[str, Field(description="The user's turn (or a question).")],
        person: Annotated[str | None, Field(description="Whose memory it is.")] = None,
        conversation: Annotated[str | None, Field(description="Only this conversation.")] = None,
        budget_tokens: Annotated[int, Field(ge=50, le=32000)] = 1500,
    ) -> dict[str, Any]:
        """The memory context an assistant turn would get, within a token budget: its text
        and the items shown (messages, claims, key info)."""
        with errors():
            ctx = memory.context(
                turn, person=person, conversation=conversation, budget_tokens=budget_tokens
            )
            return {"text": ctx.text, "items": [list(r) for r in ctx.records()]}


def _one_memory_tools(
    server: MCPServer, mem0: Mem0, writing: threading.Lock, tool: Tool, errors
) -> None:
    """The tools on one memory id: get, correct, forget, and its history."""

    @tool(server, read_only_hint=True)
    def get_memory(memory_id: MemoryId) -> dict[str, Any]:
        """One memory, as get_memories lists it (its latest wording under its first id)."""
        with errors():
            found = mem0.get(memory_id)
            if found is None:
                raise NotFound(f"no memory {memory_id}")
            return found

    @tool(server, idempotent_hint=False, destructive_hint=False)
    def update_memory(
        memory_id: MemoryId,
        text: Annotated[str, Field(description="The corrected memory.")],
    ) -> dict[str, Any]:
        """Correct a memory: it keeps its id and the old wording stays as history; answers
        the memory as it now reads."""
        with errors(), writing:
            mem0.update(memory_id, text)
            return mem0.get(memory_id) or {}

    @tool(server, destructive_hint=True, idempotent_hint=False)
    def delete_memory(memory_id: MemoryId) -> dict[str, Any]:
        """Forget a memory for good (with its corrections); its messages stay."""
        with errors(), writing:
            return mem0.delete(memory_id, actor="mcp")

    @tool(server, read_only_hint=True)
    def memory_history(memory_id: MemoryId) -> dict[str, Any]:
        """mem0's history of a memory: ADD, each UPDATE, and DELETE once it is forgotten."""
        with errors():
            return {"results": mem0.history(memory_id)}
