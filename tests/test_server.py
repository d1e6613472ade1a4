"""The REST API: every endpoint once, API keys, tenant isolation, export/import round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from archivist.config import Settings  # noqa: E402
from archivist.errors import ConfigError  # noqa: E402
from archivist.server.app import ServerSettings, create_app  # noqa: E402
from archivist.server.tenants import Key, TenantRegistry, load_keys_file, parse_keys  # noqa: E402
from archivist.service import MemoryService  # noqa: E402
from archivist.testing import FakeEmbedder  # noqa: E402
from conftest import ana_bob, ana_lee, jsonl_records  # noqa: E402

ALPHA = {"Authorization": "Bearer key-alpha-000001"}
BETA = {"X-API-Key": "key-beta-0000002"}
KEYS = (("key-alpha-000001", "alpha"), ("key-beta-0000002", "beta"))


def fake_memory(tenant: str, path: Path) -> MemoryService:
    return MemoryService(
        path, embedder=FakeEmbedder(), settings=Settings(consolidate_mode="background")
    )


@pytest.fixture
def client(tmp_path: Path):
    settings = ServerSettings(data_dir=tmp_path, keys=KEYS, extract_delay=0)
    app = create_app(settings, memory_factory=fake_memory)
    with TestClient(app) as c:
        yield c


def drain(client: TestClient, tenant: str = "alpha") -> None:
    assert client.app.state.registry.tenant(tenant).drain(30)


def add_ana_lee(client: TestClient, headers: dict = ALPHA) -> dict:
    r = client.post(
        "/v1/memory/messages", json={"messages": jsonl_records(ana_lee())}, headers=headers
    )
    assert r.status_code == 200, r.text
    return r.json()


def test_openapi_document_and_docs_are_served(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert "/v1/memory/search" in doc["paths"] and "/v1/chat/completions" in doc["paths"]
    assert client.get("/docs").status_code == 200


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong-key-123"}, {"X-API-Key": "x"}]
)
def test_missing_or_wrong_key_is_401(client: TestClient, headers: dict) -> None:
    assert client.get("/v1/memory/search", params={"q": "cat"}, headers=headers).status_code == 401


def test_add_is_idempotent_and_search_ask_context_work(client: TestClient) -> None:
    first = add_ana_lee(client)
    assert first["results"][0]["added"] == 7
    again = add_ana_lee(client)
    assert again["results"][0]["added"] == 0 and again["results"][0]["unchanged"] == 7
    hits = client.get("/v1/memory/search", params={"q": "grey cat Pixel"}, headers=ALPHA).json()
    assert hits and "Pixel" in hits[0]["text"]
    answer = client.post(
        "/v1/memory/ask", json={"question": "What is Ana's cat called?"}, headers=ALPHA
    )
    assert answer.status_code == 200 and "abstain" in answer.json()
    ctx = client.post(
        "/v1/memory/context", json={"turn": "How is Pixel?", "person": "Ana"}, headers=ALPHA
    ).json()
    assert "Pixel" in ctx["text"] and ctx["tokens"] <= ctx["budget"]


def test_derived_memory_listings(client: TestClient) -> None:
    add_ana_lee(client)
    drain(client)
    for path in ("claims", "entities", "people", "conflicts", "decisions", "conversations"):
        r = client.get(f"/v1/memory/{path}", headers=ALPHA)
        assert r.status_code == 200 and isinstance(r.json(), list), path
    assert client.get("/v1/memory/claims", headers=ALPHA).json()
    timeline = client.get("/v1/memory/timeline", params={"entity": "Ana"}, headers=ALPHA)
    assert timeline.status_code == 200 and timeline.json()[0]["claim"]["text"]
    missing = client.get("/v1/memory/timeline", params={"entity": "Nobody"}, headers=ALPHA)
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "NotFound"


def test_consolidate_runs_off_the_request_path_and_status_reports(client: TestClient) -> None:
    add_ana_lee(client)
    r = client.post("/v1/memory/consolidate", headers=ALPHA)
    assert r.status_code == 202 and r.json() == {"scheduled": ["ana-lee"]}
    drain(client)
    status = client.get("/v1/memory/status", headers=ALPHA).json()
    assert status["tenant"] == "alpha" and status["stats"]["messages"] == 7
    assert status["background_errors"] == []
    assert client.post("/v1/memory/consolidate?conversation=nope", headers=ALPHA).status_code == 404


def test_bad_input_is_400_and_stores_nothing(client: TestClient) -> None:
    bad = jsonl_records(ana_lee())
    bad[3]["timestamp"] = "yesterday-ish"
    r = client.post("/v1/memory/messages", json={"messages": bad}, headers=ALPHA)
    assert r.status_code == 400 and "timestamp" in r.json()["error"]["message"]
    assert client.get("/v1/memory/conversations", headers=ALPHA).json() == []


def test_delete_by_conversation_and_by_person(client: TestClient) -> None:
    add_ana_lee(client)
    both = {"messages": jsonl_records(ana_bob())}
    assert client.post("/v1/memory/messages", json=both, headers=ALPHA).status_code == 200
    said = client.delete("/v1/memory/people/Bob", headers=ALPHA)
    assert said.status_code == 200 and said.json()["deleted"] == 2  # Ana's message to Bob stays
    r = client.delete("/v1/memory/people/Bob", params={"received": True}, headers=ALPHA)
    assert r.status_code == 200 and r.json()["deleted"] == 1
    hits = client.get("/v1/memory/search", params={"q": "tomatoes"}, headers=ALPHA).json()
    assert all(h["conversation"] == "ana-lee" for h in hits)
    assert client.delete("/v1/memory/conversations/ana-lee", headers=ALPHA).json()["deleted"] == 7
    assert client.get("/v1/memory/conversations", headers=ALPHA).json() == []


def test_a_tenant_never_reads_or_changes_another_tenants_memory(client: TestClient) -> None:
    add_ana_lee(client, ALPHA)
    assert client.get("/v1/memory/search", params={"q": "Pixel"}, headers=BETA).json() == []
    assert client.get("/v1/memory/conversations", headers=BETA).json() == []
    assert client.get("/v1/memory/export", headers=BETA).text == ""
    client.delete("/v1/memory/conversations/ana-lee", headers=BETA)
    client.delete("/v1/memory/people/Ana", headers=BETA)
    assert client.get("/v1/memory/search", params={"q": "Pixel"}, headers=ALPHA).json()
    assert len(client.get("/v1/memory/export", headers=ALPHA).text.splitlines()) == 7
    data = client.app.state.registry.data_dir
    assert sorted(p.name for p in data.glob("*.db")) == ["alpha.db", "beta.db"]


def test_export_then_import_into_another_tenant_round_trips(client: TestClient) -> None:
    add_ana_lee(client, ALPHA)
    exported = client.get("/v1/memory/export", headers=ALPHA)
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    r = client.post(
        "/v1/memory/import",
        content=exported.content,
        headers={**BETA, "content-type": "application/x-ndjson"},
    )
    assert r.status_code == 200 and r.json()["messages_added"] == 7
    assert client.get("/v1/memory/export", headers=BETA).text == exported.text
    one = client.get("/v1/memory/export", params={"conversation": "ana-lee"}, headers=BETA)
    assert one.text == exported.text
    assert client.get("/v1/memory/export?conversation=nope", headers=BETA).status_code == 404
    ndjson = {**BETA, "content-type": "application/x-ndjson"}
    bad = client.post("/v1/memory/import", content=b'{"oops": 1}\n', headers=ndjson)
    assert bad.status_code == 400
    # only as JSON Lines: a page on another site cannot send that type (server/guard.py)
    plain = client.post("/v1/memory/import", content=exported.content, headers=BETA)
    assert plain.status_code == 415 and "application/x-ndjson" in plain.json()["error"]["message"]


def test_keys_parsing_and_constant_time_lookup(tmp_path: Path) -> None:
    k1, k2, k3 = "key-000000000001", "key-000000000002", "key-000000000003"
    assert parse_keys(f"a:{k1}, b/Priya Shah:{k2}") == (
        Key(k1, "a"),
        Key(k2, "b", "Priya Shah"),
    )
    for spec in ("nokey", "a:key-0000001", "../x:" + k1, f"a:{k1},b:{k1}", "a/ :" + k1):
        with pytest.raises(ConfigError):
            parse_keys(spec)
    f = tmp_path / "tenants.json"
    f.write_text(json.dumps({"a": k1, "b": [k2, {"key": k3, "user": "Priya"}]}))
    pairs = load_keys_file(f)
    reg = TenantRegistry(pairs, tmp_path, fake_memory)
    assert [reg.authenticate(k) for k in (k3, k2, k1, "nope", None)] == [
        ("b", "Priya"),
        ("b", None),
        ("a", None),
        None,
        None,
    ]
    assert TenantRegistry((), tmp_path, fake_memory, open_access=True).authenticate(None) == (
        "default",
        None,
    )
    f.write_text(json.dumps({"a": [{"key": k1, "role": "admin"}]}))
    with pytest.raises(ConfigError, match="strings or"):
        load_keys_file(f)
    with pytest.raises(ConfigError, match="given twice"):  # across the file and the variable
        ServerSettings(keys=(*parse_keys(f"a:{k1}"), *parse_keys(f"c/Ann:{k1}")))


def test_server_settings_from_env(tmp_path: Path) -> None:
    env = {
        "ARCHIVIST_DATA_DIR": str(tmp_path),
        "ARCHIVIST_SERVER_KEYS": "alpha:key-alpha-000001",
        "ARCHIVIST_UPSTREAM_BASE_URL": "http://up/v1",
        "ARCHIVIST_CONTEXT_BUDGET": "800",
        "ARCHIVIST_DRIFT_GUARD": "true",
        "ARCHIVIST_EMBEDDER": "fake",
    }
    s = ServerSettings.from_env(env)
    assert s.data_dir == tmp_path and s.keys == (Key("key-alpha-000001", "alpha"),)
    assert (s.upstream_base_url, s.context_budget, s.drift_guard) == ("http://up/v1", 800, True)
    assert s.memory.embedder == "fake" and not ServerSettings.from_env({}).drift_guard
    with pytest.raises(ConfigError):
        ServerSettings.from_env({"ARCHIVIST_CONTEXT_BUDGET": "lots"})
