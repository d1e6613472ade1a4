"""What one caller may cost the server: body size, wrong keys, and --open on loopback only."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from click.testing import CliRunner  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from archivist.cli.main import cli  # noqa: E402
from archivist.server.app import ServerSettings, create_app  # noqa: E402
from test_server import ALPHA, KEYS, fake_memory  # noqa: E402


def make_client(tmp_path: Path, **kw) -> TestClient:
    settings = ServerSettings(data_dir=tmp_path, keys=KEYS, extract_delay=0, **kw)
    return TestClient(create_app(settings, memory_factory=fake_memory))


def test_a_body_over_the_limit_is_413_before_it_is_read(tmp_path: Path) -> None:
    with make_client(tmp_path, max_request_bytes=4096) as client:
        big = {
            "messages": [
                {
                    "conversation": "c",
                    "id": "1",
                    "speaker": "Ana",
                    "text": "x" * 5000,
                    "timestamp": "2024-01-01T10:00:00Z",
                }
            ]
        }
        r = client.post("/v1/memory/messages", json=big, headers=ALPHA)
        assert r.status_code == 413
        assert r.json()["error"]["type"] == "RequestTooLarge"

        def chunks():  # no Content-Length: counted as it arrives
            for _ in range(10):
                yield b"x" * 1000

        r = client.post(
            "/v1/chat/completions",
            content=chunks(),
            headers={**ALPHA, "content-type": "application/json"},
        )
        assert r.status_code == 413 and "4096 bytes" in r.json()["error"]["message"]
        small = {"messages": [{**big["messages"][0], "text": "hello"}]}
        assert client.post("/v1/memory/messages", json=small, headers=ALPHA).status_code == 200
        assert client.app.state.registry.tenant("alpha").memory.stats()["messages"] == 1


def test_wrong_keys_from_one_address_are_answered_429_for_a_while(tmp_path: Path) -> None:
    with make_client(tmp_path, auth_failures_per_minute=3) as client:
        for i in range(3):
            r = client.get(
                "/v1/memory/search", params={"q": "x"}, headers={"X-API-Key": f"guess-{i}"}
            )
            assert r.status_code == 401
        r = client.get("/v1/memory/search", params={"q": "x"}, headers={"X-API-Key": "guess-3"})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        # the address is locked out for the window, even with the right key
        assert client.get("/v1/memory/search", params={"q": "x"}, headers=ALPHA).status_code == 429


def test_requests_without_any_key_do_not_count_as_guesses(tmp_path: Path) -> None:
    with make_client(tmp_path, auth_failures_per_minute=2) as client:
        for _ in range(5):
            assert client.get("/v1/memory/search", params={"q": "x"}).status_code == 401
        assert client.get("/v1/memory/search", params={"q": "x"}, headers=ALPHA).status_code == 200


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::"])
def test_open_access_refuses_any_host_but_loopback(tmp_path: Path, host: str) -> None:
    result = CliRunner().invoke(
        cli, ["serve", "--open", "--host", host, "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "loopback only" in result.output and "API keys" in result.output


def test_limits_come_from_the_environment(tmp_path: Path) -> None:
    env = {"ARCHIVIST_MAX_REQUEST_BYTES": "1000", "ARCHIVIST_AUTH_FAILURES_PER_MINUTE": "0"}
    settings = ServerSettings.from_env(env)
    assert (settings.max_request_bytes, settings.auth_failures_per_minute) == (1000, 0)


def test_bodies_the_api_cannot_read_get_the_common_error_body(tmp_path: Path) -> None:
    json_type = {**ALPHA, "content-type": "application/json"}
    with make_client(tmp_path) as client:
        deep = "[" * 100_000 + "]" * 100_000
        r = client.post("/v1/memory/ask", content=deep, headers=json_type)
        assert r.status_code == 400 and "nested too deeply" in r.json()["error"]["message"]
        # the proxy forwards what it cannot read as it came: here no upstream answers
        r = client.post("/v1/chat/completions", content=deep, headers=json_type)
        assert r.status_code == 502 and r.json()["error"]["message"]
        r = client.post("/v1/memory/ask", content='{"question": NaN}', headers=json_type)
        assert r.status_code == 422
        assert r.json()["error"] == {
            "type": "InputError",
            "message": "question: Input should be a valid string",
        }


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/v1/memory/context", {"person": "\ud800", "turn": "0"}),
        ("/v1/memory/context", {"turn": "a\ud800"}),
        ("/v1/memory/ask", {"question": "x\ud800"}),
        ("/v1/memory/ask", {"question": "x", "conversation": "\ud800"}),
        ("/v1/memory/ask", {"question": "x", "person": "a\x00"}),
    ],
)
def test_text_the_store_cannot_bind_is_a_400_on_reads(tmp_path: Path, route: str, body) -> None:
    """Found by the reliability script's fuzz run (700 inputs a target): these were 500s."""
    import json

    with make_client(tmp_path) as client:
        r = client.post(
            route, content=json.dumps(body), headers={**ALPHA, "content-type": "application/json"}
        )
        assert r.status_code == 400
        assert r.json()["error"]["type"] == "InputError"
