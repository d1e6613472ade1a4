"""The MCP server end to end: the SDK's own client talks to it in-process (and once over stdio).

Every test uses a real SQLite file and the FakeEmbedder; async tests run on
anyio's pytest plugin with the asyncio backend.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client, MCPError, StdioServerParameters  # noqa: E402

from archivist.model import Message  # noqa: E402
from archivist.server.mcp import (  # noqa: E402
    SESSION_GAP,
    build_server,
    message_id,
    next_session,
    parse_time,
)
from archivist.service import MemoryService  # noqa: E402
from conftest import T0, ana_bob, ana_lee, cara_dan  # noqa: E402

NOW = datetime(2023, 6, 1, 9, 30, tzinfo=UTC)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(mem: MemoryService):
    async with Client(build_server(mem, clock=lambda: NOW), raise_exceptions=True) as c:
        yield c


@pytest.fixture
async def loaded_client(loaded: MemoryService):
    async with Client(build_server(loaded, clock=lambda: NOW)) as c:
        yield c


def counts(mem: MemoryService) -> dict[str, int]:
    return {c["id"]: c["messages"] for c in mem.conversations()}


async def call(client: Client, tool: str, **args: object) -> dict:
    """Call a tool that must succeed; its structured result."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def error(client: Client, tool: str, **args: object) -> str:
    """Call a tool that must fail; the error text the client's model would read."""
    result = await client.call_tool(tool, args)
    assert result.is_error
    return " ".join(c.text for c in result.content if c.type == "text")


async def read_json(client: Client, uri: str) -> object:
    result = await client.read_resource(uri)
    (content,) = result.contents
    assert content.mime_type == "application/json"
    return json.loads(content.text)


# -- pure helpers --------------------------------------------------------------------------


def test_message_id_is_stable_and_content_derived() -> None:
    a = message_id("c", "Ana", "user", "hello", T0)
    assert a == message_id("c", "Ana", "user", "hello", T0.astimezone(UTC))
    assert a.startswith("mcp-")
    assert a != message_id("c", "Ana", "user", "hello", T0 + timedelta(seconds=1))
    assert a != message_id("c", "Lee", "user", "hello", T0)
    assert message_id("c", "Ana", "user", "hello", None) != a


def test_parse_time_reads_iso_and_defaults_to_now() -> None:
    assert parse_time(None, NOW) == NOW
    assert parse_time("2023-05-08T13:56:00Z", NOW) == T0
    assert parse_time("2023-05-08T13:56:00", NOW) == T0  # naive reads as UTC
    with pytest.raises(Exception, match="ISO 8601"):
        parse_time("last tuesday", NOW)


def test_next_session_starts_a_new_one_after_a_pause() -> None:
    def msg(seq: int, session: int, at: datetime) -> Message:
        return Message(f"m{seq}", "c", session, "Ana", "hi", at, seq=seq, session_start=T0)

    assert next_session([], T0) == (1, T0)
    stored = [msg(0, 1, T0), msg(1, 1, T0 + timedelta(minutes=5))]
    assert next_session(stored, T0 + timedelta(minutes=10)) == (1, T0)
    later = T0 + timedelta(minutes=5) + SESSION_GAP + timedelta(seconds=1)
    assert next_session(stored, later) == (2, later)


# -- discovery -----------------------------------------------------------------------------


async def test_lists_tools_and_resources(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"remember", "recall", "ask", "forget", "profile"} | {
        "add_memory",
        "get_memories",
        "get_memory",
        "update_memory",
        "delete_memory",
        "memory_history",
        "context",
    }
    assert tools["recall"].annotations.read_only_hint
    assert tools["forget"].annotations.destructive_hint
    assert "re-sending" in tools["remember"].description
    assert tools["remember"].input_schema["required"] == ["text", "speaker", "conversation"]
    uris = {r.uri for r in (await client.list_resources()).resources}
    assert uris == {"archivist://people", "archivist://conversations"}
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["archivist://people/{person}/timeline"]


# -- remember ------------------------------------------------------------------------------


async def test_remember_stores_once(client: Client, mem: MemoryService) -> None:
    args = dict(
        text="I adopted a grey cat called Pixel.",
        speaker="Ana",
        conversation="chat",
        addressees=["Lee"],
        timestamp="2023-05-08T13:56:00Z",
    )
    first = await call(client, "remember", **args)
    assert first["stored"] is True
    assert first["id"] == message_id("chat", "Ana", "user", args["text"], T0)
    again = await call(client, "remember", **args)
    assert again == {**first, "stored": False}
    assert counts(mem) == {"chat": 1}
    stored = mem.get("chat", first["id"])
    assert (stored.speaker, stored.addressees, stored.timestamp) == ("Ana", ("Lee",), T0)


async def test_remember_refuses_a_message_over_the_loaders_size_limit(
    client: Client, mem: MemoryService
) -> None:
    said = await error(client, "remember", text="x" * 1_000_001, speaker="Ana", conversation="c")
    assert "the limit is 1000000" in said
    assert counts(mem) == {}


async def test_remember_without_timestamp_uses_the_clock_and_dedupes(
    client: Client, mem: MemoryService
) -> None:
    first = await call(client, "remember", text="ok", speaker="Lee", conversation="chat")
    assert mem.get("chat", first["id"]).timestamp == NOW
    again = await call(client, "remember", text="ok", speaker="Lee", conversation="chat")
    assert again["stored"] is False
    assert counts(mem) == {"chat": 1}


async def test_remember_same_words_at_another_time_is_a_new_message(
    client: Client, mem: MemoryService
) -> None:
    base = dict(text="Good morning!", speaker="Ana", conversation="chat")
    a = await call(client, "remember", **base, timestamp=T0.isoformat())
    b = await call(client, "remember", **base, timestamp=(T0 + timedelta(days=1)).isoformat())
    assert a["id"] != b["id"] and b["stored"]
    assert (a["session"], b["session"]) == (1, 2)  # a day apart: a new session
    assert counts(mem) == {"chat": 2}


async def test_remember_continues_a_loaded_conversation(
    loaded_client: Client, loaded: MemoryService
) -> None:
    before = counts(loaded)["ana-lee"]
    last = max((m for _, m in loaded.store.conversation_messages("ana-lee")), key=lambda m: m.seq)
    soon = (last.timestamp + timedelta(minutes=1)).isoformat()
    out = await call(
        loaded_client,
        "remember",
        text="Pixel knocked my coffee over this morning.",
        speaker="Ana",
        conversation="ana-lee",
        addressees=["Lee"],
        timestamp=soon,
    )
    assert out["stored"] and out["session"] == last.session
    assert counts(loaded)["ana-lee"] == before + 1
    msgs = [m for _, m in loaded.store.conversation_messages("ana-lee")]
    assert msgs[-1].id == out["id"]  # numbered after the stored turns


async def test_concurrent_remembers_each_store_once(client: Client, mem: MemoryService) -> None:
    async def send(i: int) -> None:
        at = (T0 + timedelta(minutes=i)).isoformat()
        args = dict(text=f"note {i}", speaker="Ana", conversation="chat", timestamp=at)
        await call(client, "remember", **args)
        await call(client, "remember", **args)

    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(send, i)
    assert counts(mem) == {"chat": 6}
    assert {m.session for _, m in mem.store.conversation_messages("chat")} == {1}


async def test_remember_rejects_bad_input_with_a_clear_error(
    loaded_client: Client, loaded: MemoryService
) -> None:
    before = counts(loaded)
    assert "non-empty text" in await error(
        loaded_client, "remember", text="  ", speaker="Ana", conversation="c"
    )
    assert "ISO 8601" in await error(
        loaded_client, "remember", text="hi", speaker="Ana", conversation="c", timestamp="soon"
    )
    assert "role" in await error(
        loaded_client, "remember", text="hi", speaker="Ana", conversation="c", role="robot"
    )
    assert counts(loaded) == before


# -- recall and ask ------------------------------------------------------------------------


async def test_recall_returns_hits_with_provenance(loaded_client: Client) -> None:
    out = await call(loaded_client, "recall", query="grey cat Pixel", k=3)
    assert out["query"] == "grey cat Pixel"
    top = out["hits"][0]
    assert (top["conversation"], top["id"], top["speaker"]) == ("ana-lee", "D1:1", "Ana")
    assert {"timestamp", "text", "claims", "score"} <= set(top)
    assert len(out["hits"]) <= 3


async def test_recall_filters_by_conversation_and_person(loaded_client: Client) -> None:
    out = await call(loaded_client, "recall", query="seeds garden", conversation="ana-bob")
    assert out["hits"] and {h["conversation"] for h in out["hits"]} == {"ana-bob"}
    out = await call(loaded_client, "recall", query="marathon", person="Cara")
    assert out["hits"] and {h["conversation"] for h in out["hits"]} == {"cara-dan"}


async def test_recall_bad_input_is_a_tool_error(loaded_client: Client) -> None:
    assert "non-empty" in await error(loaded_client, "recall", query=" ")
    assert await error(loaded_client, "recall", query="cat", k=0)  # schema: 1..100


async def test_ask_answers_with_evidence(loaded_client: Client) -> None:
    out = await call(loaded_client, "ask", question="What is the name of Ana's cat?")
    assert {"answer", "abstain", "evidence", "speaker", "confidence", "reason"} <= set(out)
    assert not out["abstain"]
    assert "Pixel" in out["answer"] + out["quote"]
    assert {"conversation": "ana-lee", "id": "D1:1"} in out["evidence"]
    assert out["speaker"] == "Ana"


async def test_ask_empty_question_is_a_tool_error(loaded_client: Client) -> None:
    assert "non-empty question" in await error(loaded_client, "ask", question="")


# -- forget --------------------------------------------------------------------------------


async def test_forget_needs_exactly_one_target(
    loaded_client: Client, loaded: MemoryService
) -> None:
    before = counts(loaded)
    assert "exactly one" in await error(loaded_client, "forget")
    assert "exactly one" in await error(
        loaded_client, "forget", conversation="ana-lee", person="Ana"
    )
    assert counts(loaded) == before


async def test_forget_a_conversation(loaded_client: Client, loaded: MemoryService) -> None:
    out = await call(loaded_client, "forget", conversation="cara-dan")
    assert out["deleted"] == len(cara_dan().messages)
    assert "cara-dan" not in counts(loaded)
    hits = (await call(loaded_client, "recall", query="charity marathon"))["hits"]
    assert all(h["conversation"] != "cara-dan" for h in hits)


async def test_forget_a_person(loaded_client: Client, loaded: MemoryService) -> None:
    out = await call(loaded_client, "forget", person="Bob")
    assert out["deleted"] >= len([m for m in ana_bob().messages if m.speaker == "Bob"])
    hits = (await call(loaded_client, "recall", query="tomatoes greenhouse"))["hits"]
    assert all(h["speaker"] != "Bob" for h in hits)


# -- resources -----------------------------------------------------------------------------


async def test_people_resource_lists_identities(loaded_client: Client) -> None:
    people = await read_json(loaded_client, "archivist://people")
    names = {(i["conversation"], i["name"]) for p in people for i in p["identities"]}
    assert ("ana-lee", "Ana") in names and ("cara-dan", "Dan") in names
    assert all(p["id"].startswith("p-") for p in people)


async def test_timeline_resource_by_name_and_id(
    loaded_client: Client, loaded: MemoryService
) -> None:
    timeline = await read_json(loaded_client, "archivist://people/Cara/timeline")
    assert timeline["person"]["name"] == "Cara"
    claims = timeline["claims"]
    assert claims and all(c["conversation"] == "cara-dan" for c in claims)
    first = claims[0]
    assert {"speaker", "status", "valid_from", "valid_to", "said_at", "history"} <= set(first)
    assert first["speaker"] == "Cara" and first["status"] == "current"
    assert any("marathon" in c["text"] for c in claims)
    pid = timeline["person"]["id"]
    assert await read_json(loaded_client, f"archivist://people/{pid}/timeline") == timeline


async def test_timeline_of_a_name_with_a_space(client: Client) -> None:
    await call(
        client,
        "remember",
        text="I started a new job as a pilot last week.",
        speaker="Mary Ann",
        conversation="chat",
    )
    timeline = await read_json(client, "archivist://people/Mary%20Ann/timeline")
    assert timeline["person"]["name"] == "Mary Ann"
    assert timeline["claims"] and timeline["claims"][0]["speaker"] == "Mary Ann"


async def test_timeline_keeps_namesakes_apart(loaded_client: Client, loaded: MemoryService) -> None:
    # Before people are resolved, Ana of ana-lee and Ana of ana-bob are two persons.
    anas = [p for p in loaded.persons() if p.name == "Ana"]
    assert len(anas) == 2
    for p in anas:
        timeline = await read_json(loaded_client, f"archivist://people/{p.id}/timeline")
        (conv,) = {c for c, _ in p.identities}
        assert {c["conversation"] for c in timeline["claims"]} <= {conv}


async def test_timeline_errors_carry_the_message(loaded_client: Client) -> None:
    with pytest.raises(MCPError, match="no person 'Nobody'"):
        await loaded_client.read_resource("archivist://people/Nobody/timeline")
    with pytest.raises(MCPError, match="use an id"):  # two persons are called Ana
        await loaded_client.read_resource("archivist://people/Ana/timeline")


async def test_conversations_resource(loaded_client: Client) -> None:
    convs = await read_json(loaded_client, "archivist://conversations")
    by_id = {c["id"]: c for c in convs}
    assert set(by_id) == {"ana-lee", "ana-bob", "cara-dan"}
    assert by_id["ana-lee"]["messages"] == len(ana_lee().messages)
    assert by_id["ana-lee"]["participants"] == ["Ana", "Lee"]


# -- transports ----------------------------------------------------------------------------


async def test_legacy_session_over_streams(mem: MemoryService) -> None:
    """The initialize-handshake path (JSON-RPC over in-memory streams) serves the same tools."""
    async with Client(build_server(mem, clock=lambda: NOW), mode="legacy") as c:
        out = await call(c, "remember", text="hello there", speaker="Ana", conversation="x")
        assert out["stored"]
        assert "exactly one" in await error(c, "forget")
        people = await read_json(c, "archivist://people")
        assert [p["name"] for p in people] == ["Ana"]


async def test_archivist_mcp_serves_over_stdio(tmp_path: Path) -> None:
    """``archivist mcp`` as a subprocess: stdout carries only the protocol."""
    script = (
        "import sys; from archivist.cli.main import cli; from archivist.cli import mcp; "
        "cli.commands.get('mcp') or mcp.register(cli); "
        "cli(['--db', sys.argv[1], '--embedder', 'fake', 'mcp'])"
    )
    params = StdioServerParameters(
        command=sys.executable, args=["-c", script, str(tmp_path / "stdio.db")]
    )
    async with Client(params) as c:
        out = await call(c, "remember", text="I moved to Lisbon.", speaker="Ana", conversation="s")
        assert out["stored"]
        hits = (await call(c, "recall", query="Lisbon"))["hits"]
        assert hits[0]["id"] == out["id"]
