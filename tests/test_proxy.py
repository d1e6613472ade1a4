"""The OpenAI-compatible proxy, driven by the official openai client against a fake upstream."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")

from archivist.bench.load import FakeUpstream, LoadConfig, load_table, reply_for, run_load  # noqa: E402
from archivist.config import Settings  # noqa: E402
from archivist.errors import ConfigError  # noqa: E402
from archivist.read.context import ContextItem  # noqa: E402
from archivist.server import proxy  # noqa: E402
from archivist.server.app import ServerSettings, create_app  # noqa: E402
from archivist.service import MemoryService  # noqa: E402
from archivist.testing import FakeEmbedder  # noqa: E402
from conftest import ana_lee  # noqa: E402

httpx = proxy.httpx
KEY = "key-alpha-000001"
KEYS = ((KEY, "alpha"), ("key-beta-0000002", "beta"))
SYSTEM = {"role": "system", "content": "You are terse."}


def fake_memory(tenant: str, path: Path) -> MemoryService:
    return MemoryService(
        path, embedder=FakeEmbedder(), settings=Settings(consolidate_mode="background")
    )


def make_proxy(tmp_path: Path, upstream: FakeUpstream, factory=fake_memory, **kw):
    settings = ServerSettings(
        data_dir=kw.pop("data_dir", tmp_path),
        keys=KEYS,
        upstream_base_url="http://upstream/v1",
        extract_delay=0,
        **kw,
    )
    transport = httpx.ASGITransport(app=upstream.app)
    return create_app(settings, memory_factory=factory, upstream_transport=transport)


def client(app, key: str = KEY, **headers: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url="http://proxy/v1",
        api_key=key,
        max_retries=0,
        default_headers=headers or None,
        http_client=httpx.AsyncClient(transport=httpx.ASGITransport(app=app)),
    )


def stored(app, conversation: str, tenant: str = "alpha") -> list:
    t = app.state.registry.tenant(tenant)
    assert t.drain(30)
    return [m for _, m in t.memory.store.conversation_messages(conversation)]


@pytest.fixture
def upstream() -> FakeUpstream:
    return FakeUpstream()


@pytest.fixture
def app(tmp_path: Path, upstream: FakeUpstream):
    app = make_proxy(tmp_path, upstream)
    yield app
    app.state.registry.close()


def test_chat_stores_both_sides_and_a_resent_history_adds_nothing(app, upstream) -> None:
    async def chat() -> None:
        c = client(app, **{"X-Archivist-Conversation": "c1"})
        history = [SYSTEM, {"role": "user", "content": "I bought a red kayak."}]
        r = await c.chat.completions.create(model="m", messages=history, user="Ana")
        assert r.choices[0].message.content == reply_for(history)
        assert r.model == "m" and r.object == "chat.completion"
        history.append({"role": "assistant", "content": r.choices[0].message.content})
        history.append({"role": "user", "content": "Where should I paddle?"})
        await c.chat.completions.create(model="m", messages=history, user="Ana")
        await c.chat.completions.create(model="m", messages=history, user="Ana")  # a retry

    asyncio.run(chat())
    msgs = stored(app, "c1")
    assert [m.role for m in msgs] == ["system", "user", "assistant", "user", "assistant"]
    assert [m.id.split("-")[0] for m in msgs] == ["0", "1", "2", "3", "4"]
    assert msgs[1].speaker == "Ana" and msgs[2].speaker == "assistant"
    assert app.state.registry.tenant("alpha").counters["messages_added"] == 5


def test_context_is_injected_after_the_clients_system_messages(app, upstream) -> None:
    app.state.registry.tenant("alpha").add([ana_lee()])

    async def chat() -> None:
        c = client(app)
        messages = [SYSTEM, {"role": "user", "content": "How is my grey cat Pixel doing?"}]
        await c.chat.completions.create(model="m", messages=messages, user="Ana")

    asyncio.run(chat())
    sent = upstream.received[-1]["messages"]
    assert sent[0] == SYSTEM and sent[-1]["content"] == "How is my grey cat Pixel doing?"
    assert sent[1]["role"] == "system" and sent[1]["content"].startswith(proxy.MEMORY_HEADER)
    assert "Pixel" in sent[1]["content"] and len(sent) == 3
    tenant = app.state.registry.tenant("alpha")
    assert tenant.drain(30)
    (log,) = tenant.memory.store.context_logs()
    asked = tenant.memory.store.get_message(log["conversation"], log["turn_id"])
    assert asked is not None and asked.text == "How is my grey cat Pixel doing?"


def test_streaming_passes_chunks_through_and_stores_the_reply(app, upstream) -> None:
    messages = [{"role": "user", "content": "Tell me a story about tomatoes."}]

    async def chat() -> str:
        c = client(app, **{"X-Archivist-Conversation": "s1"})
        stream = await c.chat.completions.create(model="m", messages=messages, stream=True)
        parts = [ch.choices[0].delta.content or "" async for ch in stream if ch.choices]
        return "".join(parts)

    text = asyncio.run(chat())
    assert text == reply_for(messages)
    msgs = stored(app, "s1")
    assert [(m.role, m.text) for m in msgs] == [
        ("user", messages[0]["content"]),
        ("assistant", text),
    ]


@pytest.mark.parametrize(
    ("status", "error"), [(429, openai.RateLimitError), (500, openai.InternalServerError)]
)
@pytest.mark.parametrize("stream", [False, True])
def test_upstream_errors_pass_through_with_their_status(app, upstream, status, error, stream):
    body = {"error": {"message": f"upstream says {status}", "type": "x", "code": None}}
    upstream.errors.append((status, body))

    async def chat() -> None:
        c = client(app)
        await c.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=stream
        )

    with pytest.raises(error) as caught:
        asyncio.run(chat())
    assert caught.value.status_code == status and f"upstream says {status}" in str(caught.value)


def _plain_chat(app) -> str:
    async def chat() -> str:
        c = client(app)
        messages = [SYSTEM, {"role": "user", "content": "Still there?"}]
        r = await c.chat.completions.create(model="m", messages=messages)
        return r.choices[0].message.content

    return asyncio.run(chat())


def test_a_failing_memory_degrades_to_plain_forwarding(tmp_path: Path, upstream) -> None:
    def broken(tenant: str, path: Path) -> MemoryService:
        raise RuntimeError("disk on fire")

    app = make_proxy(tmp_path, upstream, factory=broken)
    assert _plain_chat(app) == reply_for([{"role": "user", "content": "Still there?"}])
    assert upstream.received[-1]["messages"] == [
        SYSTEM,
        {"role": "user", "content": "Still there?"},
    ]
    assert app.state.proxy_counters["alpha"]["memory_failures"] == 1


def test_a_store_that_cannot_be_opened_still_forwards(tmp_path: Path, upstream) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the data dir should be")
    app = make_proxy(tmp_path, upstream, factory=None, data_dir=blocker)
    assert _plain_chat(app).startswith("Noted")
    assert app.state.proxy_counters["alpha"]["memory_failures"] == 1


def test_wrong_key_is_refused_and_models_pass_through(app, upstream) -> None:
    async def go() -> list[str]:
        with pytest.raises(openai.AuthenticationError):
            await client(app, key="wrong-key-0001").chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
        return [m.id async for m in client(app).models.list()]

    assert asyncio.run(go()) == ["fake"]
    assert upstream.received == []


def test_conversation_is_derived_from_user_and_first_message_without_a_header(app) -> None:
    body = {"messages": [{"role": "user", "content": "hello there"}], "user": "Ana"}
    user, conv = proxy.identify(body, {}, "alpha")
    assert (user, conv) == ("Ana", proxy.identify(body, {}, "beta")[1])
    assert conv.startswith("chat-") and conv != proxy.identify({**body, "user": "Lee"}, {}, "t")[1]
    headers = {"x-archivist-conversation": "mine", "x-archivist-user": "Bo"}
    assert proxy.identify({"messages": []}, headers, "alpha") == ("Bo", "mine")
    assert proxy.identify({"messages": []}, {}, "alpha")[0] == "alpha"


def test_drift_measure_and_guard(tmp_path: Path, upstream) -> None:
    assert proxy.drift("", "anything") == 0.0
    assert proxy.drift("Pixel sleeps on pillows", "pixel sleeps on my pillows") == 0.0
    assert proxy.drift("Quantum chromodynamics rules", "cats") == 1.0
    app = make_proxy(tmp_path, upstream, drift_guard=True, drift_threshold=0.1)
    app.state.registry.tenant("alpha").add([ana_lee()])
    _plain_chat(app)  # "Noted (1): Still there?" shares no content word with the context
    counters = app.state.registry.tenant("alpha").counters
    assert counters["drift_checked"] == 1 and counters["drift_regenerated"] == 1
    assert len(upstream.received) == 2 and counters["drift_extra_ms"] > 0
    app.state.registry.close()


def test_load_run_loses_and_duplicates_nothing_across_failures_and_a_restart(tmp_path) -> None:
    cfg = LoadConfig(
        chats=4,
        turns=4,
        latency_ms=1,
        fail_rate=0.2,
        restart=True,
        max_seconds=60,
        seed=1,
        chats_per_user=2,
    )
    result = run_load(cfg, tmp_path, memory_factory=fake_memory)
    assert result["completed"] and result["restarts"] == 1
    assert result["upstream"]["failed"] > 0 and result["retries"] > 0, result["upstream"]
    m = result["messages"]
    assert m["sent"] == m["stored"] == 4 * 9 and m["lost"] == m["extra"] == m["duplicated"] == 0
    # memory was injected, and none of it repeated the request or itself
    c = result["context"]
    assert c["requests"] > 0 and c["items"] > 0
    assert c["repeated"] == c["duplicates"] == 0
    assert "context items / repeated / twice" in load_table(result)
    lat = result["latency_ms"]  # a chat's first turn is reported apart from the later ones
    assert lat["first_turn_overhead_p95"] is not None
    assert lat["later_turns_overhead_p95"] is not None
    assert "overhead p95 first / later" in load_table(result)


def test_context_checks_count_items_that_repeat_the_request_or_themselves() -> None:
    from archivist.bench.load import context_checks

    memory = proxy.memory_message(
        [
            ContextItem("message", "c/1", "[1 May 2024] Ana: I moved to Porto in April.", 9),
            ContextItem("claim", "7", "[1 May 2024] Ana: Ana works at the harbour office.", 9),
            ContextItem("claim", "8", "[1 May 2024] Ana: Ana works at the harbour office.", 9),
        ]
    )
    sent = [
        {"role": "system", "content": "You are helpful."},
        {"role": "system", "content": memory},
        {"role": "user", "content": "I moved to Porto in April."},
        {"role": "user", "content": "Ana works at the harbour office these days."},
    ]
    assert context_checks(sent) == {"items": 3, "repeated": 1, "duplicates": 1}
    assert context_checks(sent[2:]) is None  # nothing injected


def test_a_long_pause_in_a_chat_opens_a_new_session(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from archivist.server.tenants import Tenant

    tenant = Tenant("t", fake_memory("t", tmp_path / "t.db"))
    t0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    history = [{"role": "user", "content": "I'm moving to Porto next month."}]
    tenant.add([proxy.chat_conversation(history, "c", "ana", t0)], only_new=True)
    history += [
        {"role": "assistant", "content": "Exciting!"},
        {"role": "user", "content": "Any tips for the move?"},
    ]
    soon = t0 + timedelta(minutes=5)
    tenant.add([proxy.chat_conversation(history, "c", "ana", soon)], only_new=True)
    history += [
        {"role": "assistant", "content": "Label your boxes."},
        {"role": "user", "content": "Back again: I found a flat in Porto."},
    ]
    later = t0 + timedelta(hours=3)
    tenant.add([proxy.chat_conversation(history, "c", "ana", later)], only_new=True)
    tenant.drain(30)
    log = [m for _, m in tenant.memory.store.conversation_messages("c")]
    assert [m.session for m in log] == [1, 1, 1, 2, 2]  # re-sent turns stored once
    assert log[-1].session_start == log[-2].timestamp >= later  # the pause opened it
    tenant.close()


def test_one_user_in_two_chats_is_one_person_and_the_assistant_one_more(app, upstream) -> None:
    async def chat() -> None:
        for cid, said in (("c1", "I bought a red kayak."), ("c2", "My sister lives in Porto.")):
            c = client(app, **{"X-Archivist-Conversation": cid})
            await c.chat.completions.create(
                model="m", messages=[{"role": "user", "content": said}], user="maria"
            )

    asyncio.run(chat())
    t = app.state.registry.tenant("alpha")
    assert t.drain(30)
    people = {p.id: sorted(p.identities) for p in t.memory.persons()}
    assert people["maria"] == [("c1", "maria"), ("c2", "maria")]
    assert people["assistant:m"] == [("c1", "assistant"), ("c2", "assistant")]
    assert len(people) == 2
    sessions = {c["id"]: c for c in t.memory.conversations()}
    assert [sessions[cid]["sessions"] for cid in ("c1", "c2")] == [1, 1]


def test_the_proxy_as_several_processes_on_one_port_loses_and_duplicates_nothing(
    tmp_path,
) -> None:
    """What ``archivist serve --workers 2`` runs: uvicorn's supervisor and two processes
    accepting on one socket, each with its own store connection and background worker."""
    cfg = LoadConfig(chats=6, turns=3, latency_ms=1, max_seconds=60, seed=2, workers=2)
    result = run_load(
        cfg, tmp_path, memory_settings=Settings(embedder="fake"), separate_process=True
    )
    assert result["completed"] and result["turns"]["done"] == 18
    m = result["messages"]
    assert m["sent"] == m["stored"] == 6 * 7 and m["lost"] == m["extra"] == m["duplicated"] == 0
    assert "proxy processes                   2" in load_table(result)


def test_server_settings_reach_worker_processes_in_a_private_file(tmp_path) -> None:
    import os
    import stat

    from archivist.server.workers import SETTINGS_FILE_ENV, app_from_settings_file, settings_file

    settings = ServerSettings(
        data_dir=tmp_path, keys=KEYS, memory=Settings(embedder="fake"), background="thread"
    )
    with settings_file(settings) as path:
        assert os.environ[SETTINGS_FILE_ENV] == str(path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        app = app_from_settings_file()
        assert app.state.settings == settings
        app.state.registry.close()
    assert SETTINGS_FILE_ENV not in os.environ and not path.exists()
    with pytest.raises(ConfigError, match="archivist serve"):
        app_from_settings_file()


@pytest.mark.parametrize("ours", [False, True])
def test_worker_processes_serve_their_connections_without_nagles_delay(ours: bool) -> None:
    """uvicorn binds the socket of several workers without a protocol number, so asyncio
    leaves Nagle's delay on for the connections it accepts (a kept-alive client waited
    40 ms a response); the workers' HTTP protocol turns it off."""
    import asyncio
    import socket

    import uvicorn
    from uvicorn.protocols.http.auto import AutoHTTPProtocol
    from uvicorn.server import ServerState

    from archivist.server.workers import NoDelayHTTPProtocol

    async def app(scope, receive, send) -> None:  # never called: no request is sent
        raise AssertionError

    config = uvicorn.Config(app, log_level="error")
    config.load()
    base = NoDelayHTTPProtocol if ours else AutoHTTPProtocol
    seen: list[int] = []

    class Probe(base):  # type: ignore[misc, valid-type]
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            sock = transport.get_extra_info("socket")
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    async def connect_once() -> None:
        sock = socket.socket(socket.AF_INET)  # as uvicorn.Config.bind_socket makes it
        sock.bind(("127.0.0.1", 0))
        state = ServerState()
        server = await asyncio.get_running_loop().create_server(
            lambda: Probe(config=config, server_state=state, app_state={}), sock=sock
        )
        _, writer = await asyncio.open_connection(*sock.getsockname())
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()
        await server.wait_closed()

    asyncio.run(connect_once())
    assert seen == ([1] if ours else [0])
