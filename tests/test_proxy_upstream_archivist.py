"""Issue 14, item 7: the proxy's upstream as the background archivists' LLM.

A user who points `archivist serve` at a model endpoint gets the LLM archivist
with one more flag (`--archivist-llm upstream --archivist-model NAME`), not a
second configuration. The upstream here is a real HTTP server on loopback (the
archivists reach it through the official `openai` client, as they would a
hosted model); it echoes, so the archivists' JSON is broken and their repair
path runs. Their calls and tokens are reported apart from the chat's.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")

from archivist.bench.load import FakeUpstream, LoopbackServer  # noqa: E402
from archivist.config import Settings  # noqa: E402
from archivist.errors import ConfigError  # noqa: E402
from archivist.server import proxy  # noqa: E402
from archivist.server.app import ServerSettings, create_app  # noqa: E402

httpx = proxy.httpx
KEY = "key-alpha-000001"
TURNS = [
    "I went pescatarian in March, fish but no meat.",
    "Update: I'm fully vegan now, no fish anymore.",
]


@pytest.fixture
def upstream():
    fake = FakeUpstream()
    server = LoopbackServer(fake.app).start()
    yield fake, server.url
    server.stop()


def _settings(tmp_path: Path, url: str, **kw) -> ServerSettings:
    memory = Settings(judge="rules", embedder="fake", consolidate_mode="inline", llm_timeout=10)
    return ServerSettings(
        data_dir=tmp_path,
        keys=((KEY, "alpha"),),
        upstream_base_url=url,
        extract_delay=0,
        background="thread",
        memory=memory,
        **kw,
    )


def test_the_upstream_serves_the_archivists_and_their_use_is_reported_apart(
    tmp_path: Path, upstream
) -> None:
    fake, url = upstream
    settings = _settings(tmp_path, url, archivist_llm="upstream", archivist_model="memory-model")
    assert settings.memory.llm == "openai" and settings.memory.llm_base_url == url
    app = create_app(settings)
    try:
        asyncio.run(_chat(app, TURNS))
        tenant = app.state.registry.tenant("alpha")
        assert tenant.drain(60)
        tenant.memory.consolidate()
        status = _status(app)
    finally:
        app.state.registry.close()
    models = [body.get("model") for body in fake.received]
    # the chat went upstream with the client's model, the archivists with theirs
    assert models.count("chat-model") == len(TURNS)
    assert "memory-model" in models
    llm = status["llm"]
    assert llm["chat"] == {"calls": len(TURNS), "input_tokens": len(TURNS), "output_tokens": 2}
    assert llm["archivist"]["model"].startswith("openai:memory-model@127.0.0.1")
    assert llm["archivist"]["calls"] == models.count("memory-model")
    # an echo is not the JSON asked for: the archivists' repair path ran, nothing was lost
    assert llm["archivist"]["failures"] >= 1
    assert status["stats"]["messages"] == 2 * len(TURNS)


def test_without_the_flag_the_archivists_keep_their_own_llm(tmp_path: Path, upstream) -> None:
    fake, url = upstream
    app = create_app(_settings(tmp_path, url))
    try:
        asyncio.run(_chat(app, TURNS))
        assert app.state.registry.tenant("alpha").drain(60)
        status = _status(app)
    finally:
        app.state.registry.close()
    assert {body.get("model") for body in fake.received} == {"chat-model"}
    assert status["llm"]["archivist"] == {
        "model": None,
        "calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "failures": 0,
    }
    assert status["llm"]["chat"]["calls"] == len(TURNS)


@pytest.mark.parametrize(
    "kw, named",
    [
        ({"archivist_llm": "upstream"}, "--archivist-model"),
        (
            {"archivist_llm": "upstream", "archivist_model": "m", "upstream_base_url": ""},
            "--upstream",
        ),
        ({"archivist_llm": "downstream"}, "archivist_llm"),
    ],
)
def test_an_incomplete_upstream_archivist_is_refused(tmp_path: Path, kw: dict, named: str) -> None:
    base = {"data_dir": tmp_path, "keys": ((KEY, "alpha"),), "upstream_base_url": "http://x/v1"}
    with pytest.raises(ConfigError, match=named):
        ServerSettings(**{**base, **kw})


def test_the_flag_on_the_command_line(capsys) -> None:
    from archivist.cli.main import main

    with pytest.raises(SystemExit) as exit:
        main(["serve", "--open", "--archivist-llm", "upstream", "--upstream", "http://x/v1"])
    err = capsys.readouterr().err
    assert exit.value.code != 0
    assert err.startswith("error: ") and "--archivist-model" in err
    assert "Traceback" not in err


async def _chat(app, turns: list[str]) -> None:
    client = openai.AsyncOpenAI(
        base_url="http://proxy/v1",
        api_key=KEY,
        max_retries=0,
        default_headers={"X-Archivist-Conversation": "diet"},
        http_client=httpx.AsyncClient(transport=httpx.ASGITransport(app=app)),
    )
    history: list[dict] = []
    for text in turns:
        history.append({"role": "user", "content": text})
        r = await client.chat.completions.create(model="chat-model", messages=history, user="Ana")
        history.append({"role": "assistant", "content": r.choices[0].message.content})
        assert app.state.registry.tenant("alpha").drain(60)


def _status(app) -> dict:
    async def get() -> dict:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as c:
            r = await c.get("/v1/memory/status", headers={"Authorization": f"Bearer {KEY}"})
            assert r.status_code == 200, r.text
            return r.json()

    return asyncio.run(get())
