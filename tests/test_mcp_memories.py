"""The MCP memory tools through the SDK's own client, on a real SQLite file."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")

from test_mcp import anyio_backend, call, client, error  # noqa: E402, F401 - fixtures

pytestmark = pytest.mark.anyio


async def test_add_list_update_history_delete_and_context(client) -> None:  # noqa: F811
    turns = [{"role": "user", "content": "I have a dog called Rex."}]
    added = await call(client, "add_memory", messages=turns, user_id="alice")
    (rex,) = [r for r in added["results"] if "Rex" in r["memory"]]
    listed = await call(client, "get_memories", user_id="alice")
    assert [r["id"] for r in listed["results"]] == [rex["id"]]
    found = await call(client, "get_memories", user_id="alice", query="dog")
    assert found["results"][0]["id"] == rex["id"]
    one = await call(client, "get_memory", memory_id=rex["id"])
    assert one == listed["results"][0]  # one shape: the item get_memories lists
    fixed = await call(client, "update_memory", memory_id=rex["id"], text="alice has a dog, Max.")
    assert fixed["id"] == rex["id"] and fixed["memory"] == "alice has a dog, Max."
    history = await call(client, "memory_history", memory_id=rex["id"])
    assert [e["event"] for e in history["results"]] == ["ADD", "UPDATE"]
    ctx = await call(client, "context", turn="What is my dog called?", person="alice")
    assert "Rex" in ctx["text"] and ctx["items"]  # the words were said; the claim is history
    gone = await call(client, "delete_memory", memory_id=rex["id"])
    assert gone == {"message": "Memory deleted successfully!"}
    history = await call(client, "memory_history", memory_id=rex["id"])
    assert [e["event"] for e in history["results"]] == ["ADD", "UPDATE", "DELETE"]
    assert "no memory" in await error(client, "get_memory", memory_id=rex["id"])
    assert "integer" in await error(client, "get_memory", memory_id="abc")
