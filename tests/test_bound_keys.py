"""Issue 12: a key bound to one user speaks only as that user and reads only that user's
memory, on REST and through the proxy (the official openai client)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")

from fastapi.testclient import TestClient  # noqa: E402

from archivist.bench.load import FakeUpstream  # noqa: E402
from archivist.server.app import ServerSettings, create_app  # noqa: E402
from test_proxy import client as proxy_client  # noqa: E402
from test_proxy import fake_memory, httpx, stored  # noqa: E402

TENANT_KEY = "key-tenant-00001"
PRIYA_KEY = "key-priya-000001"
KEYS = ((TENANT_KEY, "home"), (PRIYA_KEY, "home", "Priya"))
TENANT = {"Authorization": f"Bearer {TENANT_KEY}"}
PRIYA = {"Authorization": f"Bearer {PRIYA_KEY}"}


def turn(conv: str, mid: str, speaker: str, text: str, role: str = "user") -> dict:
    return {
        "conversation": conv,
        "id": mid,
        "speaker": speaker,
        "text": text,
        "timestamp": "2024-05-01T10:00:00Z",
        "role": role,
    }


@pytest.fixture
def app(tmp_path: Path):
    upstream = FakeUpstream()
    settings = ServerSettings(
        data_dir=tmp_path, keys=KEYS, upstream_base_url="http://upstream/v1", extract_delay=0
    )
    app = create_app(
        settings,
        memory_factory=fake_memory,
        upstream_transport=httpx.ASGITransport(app=upstream.app),
    )
    with TestClient(app) as c:
        # the tenant's key stores two users' chats
        r = c.post(
            "/v1/memory/messages",
            json={
                "messages": [
                    turn("p1", "1", "Priya", "My sister Ana plays the cello."),
                    turn("p1", "2", "assistant", "Lovely!", role="assistant"),
                    turn("t1", "1", "Tom", "My bank PIN is 4411, keep it secret."),
                ]
            },
            headers=TENANT,
        )
        assert r.status_code == 200, r.text
        yield app


def refused(r, says: str) -> None:
    assert r.status_code == 403, r.text
    error = r.json()["error"]
    assert error["type"] == "Forbidden" and says in error["message"]


def test_a_bound_key_reads_only_its_users_memory(app) -> None:
    with TestClient(app) as c:
        everyone = c.get("/v1/memory/search", params={"q": "PIN cello"}, headers=TENANT).json()
        assert {h["conversation"] for h in everyone} == {"p1", "t1"}
        mine = c.get("/v1/memory/search", params={"q": "PIN cello"}, headers=PRIYA).json()
        assert mine and {h["conversation"] for h in mine} == {"p1"}
        ctx = c.post("/v1/memory/context", json={"turn": "bank PIN?"}, headers=PRIYA).json()
        assert "4411" not in ctx["text"]
        answer = c.post("/v1/memory/ask", json={"question": "What is the PIN?"}, headers=PRIYA)
        assert answer.status_code == 200 and "4411" not in answer.text
        for r in (
            c.get("/v1/memory/search", params={"q": "PIN", "person": "Tom"}, headers=PRIYA),
            c.post("/v1/memory/ask", json={"question": "PIN?", "person": "Tom"}, headers=PRIYA),
        ):
            refused(r, "'Tom' is not them")
        for r in (
            c.get("/v1/memory/search", params={"q": "PIN", "conversation": "t1"}, headers=PRIYA),
            c.post("/v1/memory/context", json={"turn": "x", "conversation": "t1"}, headers=PRIYA),
        ):
            refused(r, "not in conversation 't1'")
        # the user's own name, in any case, is fine
        ok = c.get("/v1/memory/search", params={"q": "cello", "person": "priya"}, headers=PRIYA)
        assert ok.status_code == 200 and ok.json()


def test_a_bound_key_cannot_use_the_tenant_wide_routes(app) -> None:
    with TestClient(app) as c:
        for method, path in [
            ("GET", "/v1/memory/claims"),
            ("GET", "/v1/memory/people"),
            ("GET", "/v1/memory/conversations"),
            ("GET", "/v1/memory/export"),
            ("GET", "/v1/memory/status"),
            ("DELETE", "/v1/memory/conversations/t1"),
        ]:
            refused(c.request(method, path, headers=PRIYA), "needs a tenant key")
            assert c.request("GET", "/v1/memory/people", headers=TENANT).status_code == 200


def test_a_bound_key_adds_only_its_users_turns(app) -> None:
    with TestClient(app) as c:

        def add(*messages: dict):
            return c.post("/v1/memory/messages", json={"messages": list(messages)}, headers=PRIYA)

        refused(add(turn("p2", "1", "Tom", "I am Tom now")), "spoken by 'Tom'")
        refused(add(turn("t1", "2", "Priya", "hello Tom")), "not in conversation 't1'")
        refused(add(turn("p3", "1", "bot", "hi", role="assistant")), "no message of theirs")
        ok = add(
            turn("p2", "1", "Priya", "I moved to Porto."),
            turn("p2", "2", "bot", "Nice", "assistant"),
        )
        assert ok.status_code == 200, ok.text
        registry = app.state.registry
        assert [
            m.id for _, m in registry.tenant("home").memory.store.conversation_messages("t1")
        ] == ["1"]


def test_the_proxy_speaks_as_the_bound_user_and_refuses_another(app) -> None:
    async def chat() -> None:
        mine = proxy_client(app, PRIYA_KEY, **{"X-Archivist-Conversation": "p-chat"})
        msgs = [{"role": "user", "content": "Remind me what Ana plays?"}]
        await mine.chat.completions.create(model="m", messages=msgs)
        await mine.chat.completions.create(model="m", messages=msgs, user="Priya")
        for kwargs, headers in [
            ({"user": "Tom"}, {}),
            ({}, {"X-Archivist-User": "Tom"}),
            ({}, {"X-Archivist-Conversation": "t1"}),
        ]:
            c = proxy_client(app, PRIYA_KEY, **headers)
            with pytest.raises(openai.PermissionDeniedError, match="bound to user 'Priya'"):
                await c.chat.completions.create(model="m", messages=msgs, **kwargs)

    asyncio.run(chat())
    (m, *_) = stored(app, "p-chat", tenant="home")
    assert m.speaker == "Priya" and m.text == "Remind me what Ana plays?"
    assert stored(app, "t1", tenant="home")[-1].text.startswith("My bank PIN")
