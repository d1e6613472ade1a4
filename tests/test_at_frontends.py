"""``at`` at every front end: memory as it stood then, on the CLI, REST and MCP.

Ana works as a nurse (8 May 2023) and as a teacher from 15 May. As of 10 May
every front end gives the nurse and nothing said later; by default (now) the
teacher. A bad ``at`` is one line naming it: exit code 3 on the CLI, 400 on
REST, a tool error on MCP. Real SQLite files, the FakeEmbedder, no LLM.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from archivist.cli.main import cli, main
from archivist.config import Settings
from archivist.errors import InputError
from archivist.model import parse_at
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder
from conftest import jsonl_records, make_conversation, write_jsonl

START = datetime(2023, 5, 8, 9, 0, tzinfo=UTC)
EARLY = "2023-05-10T00:00:00+00:00"
OLD, NEW = "nurse", "teacher"
QUESTION = "What does Ana work as?"
BAD = [
    ("yesterday", "must be an ISO date or time; got 'yesterday'"),
    ("2023-05-10T00:00", "needs a timezone"),
    ("9999-01-01T00:00Z", "outside the years"),
]


def job_change():
    return make_conversation(
        "ana-lee",
        (
            (
                ("Ana", "I live in Lisbon."),
                ("Ana", "I work as a nurse at the city hospital."),
                ("Lee", "Lisbon sounds lovely."),
            ),
            (
                ("Ana", "I moved to Porto."),
                ("Ana", "I now work as a teacher."),
                ("Lee", "Congratulations!"),
            ),
        ),
        start=START,
    )


def test_parse_at_is_one_rule() -> None:
    assert parse_at(None) is None and parse_at("  ") is None
    assert parse_at("2023-05-10T00:00Z") == datetime(2023, 5, 10, tzinfo=UTC)
    # a bare date is memory as that day ended: what was said that day counts
    day_end = datetime(2023, 5, 10, 23, 59, 59, 999999, tzinfo=UTC)
    assert parse_at("2023-05-10") == day_end
    for value, says in BAD:
        with pytest.raises(InputError, match=says) as e:
            parse_at(value, "--at")
        assert str(e.value).startswith("--at ") and "\n" not in str(e.value)


# -- CLI ------------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> list[str]:
    """The CLI's global options over a store holding the job change."""
    base = ["--db", str(tmp_path / "cli.db"), "--embedder", "fake"]
    conv = write_jsonl(tmp_path / "ana-lee.jsonl", jsonl_records(job_change()))
    assert CliRunner().invoke(cli, [*base, "ingest", str(conv)]).exit_code == 0
    return base


def cli_json(base: list[str], *args: str) -> dict | list:
    result = CliRunner().invoke(cli, [*base, *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_cli_at_on_search_ask_context_timeline(db: list[str]) -> None:
    for at in (["--at", EARLY], []):
        hits = " ".join(h["text"] for h in cli_json(db, "search", "Ana work as", *at)["hits"])
        answer = cli_json(db, "ask", QUESTION, *at)["answer"]
        context = cli_json(db, "context", QUESTION, "--person", "Ana", *at)["text"]
        timeline = cli_json(db, "timeline", "Ana", *at)
        if at:
            assert OLD in hits and NEW not in hits
            assert OLD in answer and NEW not in answer
            assert OLD in context and NEW not in context
            assert [c["text"] for c in timeline] == [
                "Ana lives in Lisbon.",
                "Ana works as a nurse at the city hospital.",
            ]
            assert {c["status"] for c in timeline} == {"current"}  # replaced only later
            assert all(c["valid_to"] is None and c["history"] == [] for c in timeline)
        else:
            assert NEW in hits and NEW in answer and NEW in context
            nurse = next(c for c in timeline if OLD in c["text"])
            assert nurse["status"] == "superseded" and nurse["history"]


@pytest.mark.parametrize("command", ["search", "ask", "context", "timeline", "profile"])
@pytest.mark.parametrize(("value", "says"), BAD)
def test_cli_bad_at_is_one_line(
    db: list[str], capsys: pytest.CaptureFixture, command: str, value: str, says: str
) -> None:
    arg = "Ana" if command in ("timeline", "profile") else QUESTION
    with pytest.raises(SystemExit) as e:
        main([*db, command, arg, "--at", value])
    err = capsys.readouterr().err
    assert e.value.code == 3
    assert err.startswith("error: --at ") and says in err and err.count("\n") == 1


# -- REST -------------------------------------------------------------------------------------

KEY = {"Authorization": "Bearer key-alpha-000001"}


@pytest.fixture
def client(tmp_path: Path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from archivist.server.app import ServerSettings, create_app

    def memory(tenant: str, path: Path) -> MemoryService:
        settings = Settings(consolidate_mode="background")
        return MemoryService(path, embedder=FakeEmbedder(), settings=settings)

    keys = (("key-alpha-000001", "alpha"),)
    settings = ServerSettings(data_dir=tmp_path, keys=keys, extract_delay=0)
    app = create_app(settings, memory_factory=memory)
    with TestClient(app) as c:
        body = {"messages": jsonl_records(job_change())}
        r = c.post("/v1/memory/messages", json=body, headers=KEY)
        assert r.status_code == 200, r.text
        assert app.state.registry.tenant("alpha").drain(30)
        yield c


def rest(client, route: str, at: str | None):
    """One REST read of the job change, as of ``at`` (None: not sent)."""
    when = {"at": at} if at is not None else {}
    if route == "search":
        r = client.get("/v1/memory/search", params={"q": "Ana work as", **when}, headers=KEY)
    elif route == "ask":
        r = client.post("/v1/memory/ask", json={"question": QUESTION, **when}, headers=KEY)
    elif route == "context":
        body = {"turn": QUESTION, "person": "Ana", **when}
        r = client.post("/v1/memory/context", json=body, headers=KEY)
    elif route == "timeline":
        r = client.get("/v1/memory/timeline", params={"entity": "Ana", **when}, headers=KEY)
    else:
        r = client.get("/v1/memory/profile", params={"person": "Ana", **when}, headers=KEY)
    return r


def words(route: str, body) -> str:
    """The words a route's answer gives, to look for the old and the new job in."""
    if route == "search":
        return " ".join(h["text"] for h in body)
    if route == "ask":
        return body["answer"]
    if route == "context":
        return body["text"]
    if route == "timeline":  # what held: the claims current as of then
        return " ".join(e["claim"]["text"] for e in body if e["claim"]["status"] == "current")
    return " ".join(e["text"] for e in body["groups"]["work"])


ROUTES = ["search", "ask", "context", "timeline", "profile"]


@pytest.mark.parametrize("route", ROUTES)
def test_rest_at_gives_the_old_value_and_default_the_new(client, route: str) -> None:
    early = rest(client, route, EARLY)
    assert early.status_code == 200, early.text
    said = words(route, early.json())
    assert OLD in said and NEW not in said
    now = rest(client, route, None)
    assert now.status_code == 200, now.text
    assert NEW in words(route, now.json())


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(("value", "says"), BAD)
def test_rest_bad_at_is_400_naming_it(client, route: str, value: str, says: str) -> None:
    r = rest(client, route, value)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "InputError" and error["message"].startswith("at ")
    assert says in error["message"] and "\n" not in error["message"]


# -- MCP --------------------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def memory(tmp_path: Path):
    m = MemoryService(tmp_path / "mcp.db", embedder=FakeEmbedder())
    m.add(job_change())
    yield m
    m.close()


async def tool(client, name: str, **args: object):
    return await client.call_tool(name, {k: v for k, v in args.items() if v is not None})


@pytest.mark.anyio
async def test_mcp_at_on_recall_ask_and_profile(memory: MemoryService) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from archivist.server.mcp import build_server

    async with Client(build_server(memory)) as client:
        for at in (EARLY, None):
            recall = await tool(client, "recall", query="Ana work as", at=at)
            ask = await tool(client, "ask", question=QUESTION, at=at)
            profile = await tool(client, "profile", person="Ana", at=at)
            assert not (recall.is_error or ask.is_error or profile.is_error)
            hits = " ".join(h["text"] for h in recall.structured_content["hits"])
            answer = ask.structured_content["answer"]
            work = " ".join(e["text"] for e in profile.structured_content["groups"]["work"])
            for said in (hits, answer, work):
                if at:
                    assert OLD in said and NEW not in said
                else:
                    assert NEW in said


@pytest.mark.anyio
@pytest.mark.parametrize(("value", "says"), BAD)
async def test_mcp_bad_at_is_a_tool_error(memory: MemoryService, value: str, says: str) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from archivist.server.mcp import build_server

    async with Client(build_server(memory)) as client:
        for name, args in (
            ("recall", {"query": "job"}),
            ("ask", {"question": QUESTION}),
            ("profile", {"person": "Ana"}),
        ):
            result = await tool(client, name, at=value, **args)
            assert result.is_error, name
            text = " ".join(c.text for c in result.content if c.type == "text")
            assert text.startswith(f"Error executing tool {name}: at ")  # the SDK's prefix
            assert says in text and "\n" not in text
