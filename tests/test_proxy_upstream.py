"""A broken upstream never reaches the client as a 200: the official openai client sees an
error it knows (and retries it as it does any 5xx), and the user's turn is still stored."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")

from archivist.bench.load import chunks, completion  # noqa: E402
from archivist.server import proxy  # noqa: E402
from archivist.server.app import ServerSettings, create_app  # noqa: E402
from test_proxy import KEY, KEYS, client, fake_memory, stored  # noqa: E402

httpx = proxy.httpx
AUTH = {"Authorization": f"Bearer {KEY}", "content-type": "application/json"}
HTML = b"<html><head><title>500 Internal Server Error</title></head><body>nginx</body></html>"
SSE = {"content-type": "text/event-stream"}
REPLY = "Noted: the kayak is red."


class Upstream:
    """An upstream answering each chat with what a test scripts; records what it was sent."""

    def __init__(self, answer: Callable[[], httpx.Response]) -> None:
        self.answer = answer
        self.received: list[dict] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return self.answer()
        self.received.append(json.loads(request.content))
        return self.answer()


class Pieces(httpx.AsyncByteStream):
    """A response body sent in the given pieces, then (optionally) a dropped connection."""

    def __init__(self, pieces: list[bytes], drop: bool = False) -> None:
        self.pieces, self.drop = pieces, drop

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece
        if self.drop:
            raise httpx.ReadError("connection reset by peer")


def events(text: str = REPLY) -> bytes:
    """A whole, well-formed OpenAI stream of ``text``."""
    return "".join(chunks("m", text)).encode("utf-8")


@pytest.fixture
def make(tmp_path: Path):
    apps = []

    def build(answer: Callable[[], httpx.Response]):
        upstream = Upstream(answer)
        settings = ServerSettings(
            data_dir=tmp_path, keys=KEYS, upstream_base_url="http://upstream/v1", extract_delay=0
        )
        transport = httpx.MockTransport(upstream.handle)
        app = create_app(settings, memory_factory=fake_memory, upstream_transport=transport)
        apps.append(app)
        return app, upstream

    yield build
    for app in apps:
        app.state.registry.close()


MESSAGES = [{"role": "user", "content": "My kayak is red."}]


def _ask(app, stream: bool = False, retries: int = 0) -> str:
    """One chat turn through the official client; the reply's text."""

    async def go() -> str:
        c = client(app, **{"X-Archivist-Conversation": "c1"}).with_options(max_retries=retries)
        r = await c.chat.completions.create(model="m", messages=MESSAGES, stream=stream)
        if not stream:
            return r.choices[0].message.content
        return "".join([ch.choices[0].delta.content or "" async for ch in r if ch.choices])

    return asyncio.run(go())


def _raw(app, path: str = "/v1/chat/completions", **body) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as raw:
            if path.endswith("models"):
                return await raw.get(path, headers=AUTH)
            payload = {"model": "m", "messages": MESSAGES, **body}
            return await raw.post(path, content=json.dumps(payload), headers=AUTH)

    return asyncio.run(go())


def _user_turn_kept(app) -> None:
    """Nothing the user said is lost: the turn is stored once, the broken reply not at all."""
    msgs = stored(app, "c1")
    assert [(m.role, m.text) for m in msgs] == [("user", "My kayak is red.")]


def _error_of(r: httpx.Response) -> dict:
    assert r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]
    assert set(error) == {"message", "type", "code"} and error["type"] == "upstream_error"
    return error


@pytest.mark.parametrize(
    "body",
    [b'{"id": "chatcmpl-1", "choices": [', b"[1, 2]", b"", HTML],
    ids=["cut_json", "array", "empty", "html"],
)
def test_a_2xx_body_that_is_not_a_json_object_is_a_502_the_sdk_retries(make, body) -> None:
    app, upstream = make(lambda: httpx.Response(200, content=body, headers=SSE))
    with pytest.raises(openai.InternalServerError) as caught:
        _ask(app, retries=1)
    assert caught.value.status_code == 502 and "not a JSON object" in caught.value.message
    assert len(upstream.received) == 2  # retried, as the SDK does every 5xx
    _user_turn_kept(app)
    r = _raw(app)
    assert r.status_code == 502 and _error_of(r)["code"] == "upstream_invalid_body"
    assert "<html" not in r.text
    status = app.state.proxy_counters["alpha"]
    assert status["upstream_errors"] == 3


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("status", "body"), [(500, HTML), (503, b""), (302, b"moved")], ids=["html", "empty", "302"]
)
def test_an_error_page_that_is_not_json_becomes_an_openai_error(make, stream, status, body):
    headers = {"content-type": "text/html; charset=utf-8", "retry-after": "0"}
    app, _ = make(lambda: httpx.Response(status, content=body, headers=headers))
    expected = status if status >= 400 else 502
    with pytest.raises(openai.APIStatusError) as caught:
        _ask(app, stream=stream)
    assert caught.value.status_code == expected and "upstream answered" in caught.value.message
    r = _raw(app, stream=stream)
    assert r.status_code == expected and "<html" not in r.text
    assert str(status) in _error_of(r)["message"] and r.headers["retry-after"] == "0"
    _user_turn_kept(app)


def test_a_json_error_from_upstream_passes_through_unchanged(make) -> None:
    error = {"error": {"message": "slow down", "type": "rate_limit", "code": "rl"}}
    app, _ = make(lambda: httpx.Response(429, json=error))
    r = _raw(app)
    assert (r.status_code, r.json()) == (429, error)


def test_a_broken_model_list_is_an_openai_error(make) -> None:
    app, _ = make(lambda: httpx.Response(200, content=b"<html>", headers=SSE))
    r = _raw(app, "/v1/models")
    assert r.status_code == 502 and _error_of(r)["code"] == "upstream_invalid_body"
    app, _ = make(lambda: httpx.Response(500, content=HTML, headers=SSE))
    assert _raw(app, "/v1/models").status_code == 500


BROKEN_STREAMS = {
    # the first two events, then one that is not JSON, then the rest
    "not_json": lambda: Pieces([*events().split(b"\n\n")[:2], b"\n\ndata: {oops\n\n", events()]),
    "not_an_object": lambda: Pieces([events()[:300].rsplit(b"\n\n", 1)[0], b'\n\ndata: "x"\n\n']),
    "dropped": lambda: Pieces([events()[:200]], drop=True),
    "cut_short": lambda: Pieces([events().split(b"data: [DONE]")[0].rsplit(b"data:", 1)[0]]),
    "html_200": lambda: Pieces([HTML]),
}


@pytest.mark.parametrize("broken", sorted(BROKEN_STREAMS))
def test_a_broken_stream_ends_with_an_error_event(make, broken: str) -> None:
    app, _ = make(lambda: httpx.Response(200, headers=SSE, stream=BROKEN_STREAMS[broken]()))
    with pytest.raises(openai.APIError) as caught:
        _ask(app, stream=True)
    assert "upstream" in caught.value.message
    r = _raw(app, stream=True)
    last = r.text.rstrip("\n").rsplit("\n\n", 1)[-1]
    assert last.startswith("data: ") and "{oops" not in r.text and '"x"' not in r.text
    error = json.loads(last[6:])["error"]
    assert error["type"] == "upstream_error" and error["code"] == "upstream_incomplete_stream"
    assert r.status_code == 200  # the stream had begun; its error travels inside it
    _user_turn_kept(app)
    assert app.state.proxy_counters["alpha"]["upstream_errors"] == 2


@pytest.mark.parametrize("size", [1, 7, 64, 10_000])
def test_a_sound_stream_passes_through_byte_for_byte_in_any_pieces(make, size: int) -> None:
    body = events().replace(b"\n\n", b"\r\n\r\n", 2) + b": keep-alive\n\n"
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    app, _ = make(lambda: httpx.Response(200, headers=SSE, stream=Pieces(pieces)))
    assert _ask(app, stream=True) == REPLY
    assert _raw(app, stream=True).content == body
    msgs = stored(app, "c1")
    assert [(m.role, m.text) for m in msgs] == [("user", "My kayak is red."), ("assistant", REPLY)]
    assert app.state.proxy_counters["alpha"]["upstream_errors"] == 0


def test_a_stream_without_done_but_finished_is_complete(make) -> None:
    body = events().split(b"data: [DONE]")[0]  # ends at the finish_reason: some servers do
    app, _ = make(lambda: httpx.Response(200, headers=SSE, stream=Pieces([body])))
    assert _ask(app, stream=True) == REPLY
    assert _raw(app, stream=True).content == body


def test_the_upstreams_own_error_event_passes_through_alone(make) -> None:
    error = b'data: {"error": {"message": "overloaded", "type": "server_error", "code": null}}\n\n'
    app, _ = make(lambda: httpx.Response(200, headers=SSE, stream=Pieces([error])))
    with pytest.raises(openai.APIError, match="overloaded"):
        _ask(app, stream=True)
    assert _raw(app, stream=True).content == error


def test_a_sound_reply_is_unchanged(make) -> None:
    body = json.dumps(completion("m", REPLY)).encode()
    app, _ = make(lambda: httpx.Response(200, content=body, headers={"x-request-id": "r1"}))
    r = _raw(app)
    assert (r.status_code, r.content, r.headers["x-request-id"]) == (200, body, "r1")
    assert _ask(app) == REPLY
