"""Generated bad and odd input, bounded and seeded: a clear error or stored verbatim, never a
traceback or a 500 (issue 12). ``ARCHIVIST_FUZZ_EXAMPLES`` raises the count per target."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from archivist.bench.load import FakeUpstream  # noqa: E402
from archivist.errors import ArchivistError  # noqa: E402
from archivist.load import parse  # noqa: E402
from archivist.server import proxy  # noqa: E402
from archivist.server.app import ServerSettings, create_app  # noqa: E402
from archivist.service import MemoryService  # noqa: E402
from archivist.testing import FakeEmbedder  # noqa: E402
from test_server import ALPHA, KEYS, fake_memory  # noqa: E402

EXAMPLES = int(os.environ.get("ARCHIVIST_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,  # the same inputs on every run: CI never flakes on a new case
    deadline=None,
    suppress_health_check=list(HealthCheck),
)

# Text as clients really send it, and as careless or hostile ones do.
odd_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\x00", "\ud800", "a\udfffb", "é" * 3, "🙂", "\u202e", "x" * 2000]),
)
odd_scalar = st.one_of(
    odd_text,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
odd_value = st.recursive(
    odd_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(odd_text, inner, max_size=3),
    max_leaves=6,
)
timestamps = st.one_of(
    st.sampled_from(
        [
            "2024-03-04T10:00:00Z",
            "2024-03-04T12:00:00+02:00",
            "9999-12-31T10:00:00Z",
            "0001-01-01T00:00:00Z",
            "2024-02-30T10:00:00Z",
            "yesterday",
            "",
        ]
    ),
    odd_value,
)


@st.composite
def jsonl_records(draw) -> dict:
    """A record of the JSONL input format, any field of which may be wrong."""
    record = {
        "conversation": draw(st.one_of(st.sampled_from(["c1", "c2"]), odd_value)),
        "id": draw(st.one_of(st.integers(0, 5).map(str), odd_value)),
        "speaker": draw(st.one_of(st.sampled_from(["Ana", "Lee"]), odd_value)),
        "text": draw(
            st.one_of(st.sampled_from(["I adopted a cat.", "See you tomorrow"]), odd_text)
        ),
        "timestamp": draw(timestamps),
    }
    for key, values in (
        ("session", st.one_of(st.integers(0, 3), odd_value)),
        ("role", st.one_of(st.sampled_from(["user", "assistant", "system", "tool"]), odd_value)),
        ("addressees", st.one_of(st.just(["Lee"]), odd_value)),
    ):
        if draw(st.booleans()):
            record[key] = draw(values)
    return record


def dumps(value, ascii: bool = True) -> str:
    """JSON as a careless client writes it: NaN included, lone surrogates escaped (as they
    travel over HTTP) or, for text handed straight to a loader, raw."""
    return json.dumps(value, allow_nan=True, ensure_ascii=ascii)


def test_the_jsonl_loader_and_the_store_give_a_clear_error_or_store_verbatim(
    tmp_path: Path,
) -> None:
    mem = MemoryService(tmp_path / "fuzz.db", embedder=FakeEmbedder())

    @FUZZ
    @given(st.lists(jsonl_records(), min_size=1, max_size=4), st.booleans())
    def check(records: list[dict], ascii: bool) -> None:
        text = "\n".join(dumps(r, ascii) for r in records)
        try:
            convs = parse(text, "jsonl", source="fuzz")
            mem.add(convs)
        except ArchivistError as e:
            assert "\n" not in str(e).strip(), str(e)  # one line
            return
        for conv in convs:
            for m in conv.messages:
                kept = mem.get(conv.id, m.id)
                assert kept is not None and kept.text == m.text

    try:
        check()
    finally:
        mem.close()


@pytest.fixture
def rest(tmp_path: Path):
    app = create_app(
        ServerSettings(data_dir=tmp_path, keys=KEYS, extract_delay=0), memory_factory=fake_memory
    )
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def test_rest_bodies_never_get_a_500(rest: TestClient) -> None:
    routes = ["/v1/memory/messages", "/v1/memory/ask", "/v1/memory/context"]

    @FUZZ
    @given(
        st.sampled_from(routes),
        st.one_of(
            st.builds(lambda rs: {"messages": rs}, st.lists(jsonl_records(), max_size=3)),
            st.dictionaries(st.sampled_from(["question", "turn", "k", "person"]), odd_value),
            odd_value,
        ),
    )
    def check(route: str, body) -> None:
        r = rest.post(
            route, content=dumps(body), headers={**ALPHA, "content-type": "application/json"}
        )
        assert r.status_code < 500, (route, body, r.text)
        if r.status_code >= 400:
            assert "error" in r.json() or "detail" in r.json()

    check()


@st.composite
def chat_messages(draw) -> list:
    """An OpenAI chat history with odd roles, names and content parts."""
    part = st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, odd_text),
        st.just({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}),
        st.just({"type": "file", "file": {"file_id": "file-1"}}),
        st.just({"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}}),
        st.dictionaries(odd_text, odd_value, max_size=2),
    )
    message = st.fixed_dictionaries(
        {
            "role": st.one_of(
                st.sampled_from(["user", "assistant", "system", "developer", "tool", "critic"]),
                odd_value,
            ),
            "content": st.one_of(odd_text, st.lists(part, max_size=3), odd_value),
        },
        optional={"name": st.one_of(st.sampled_from(["", "Ana"]), odd_value)},
    )
    return draw(st.lists(message, min_size=1, max_size=4))


def test_proxy_bodies_never_get_a_500(tmp_path: Path) -> None:
    upstream = FakeUpstream()
    settings = ServerSettings(
        data_dir=tmp_path, keys=KEYS, upstream_base_url="http://upstream/v1", extract_delay=0
    )
    app = create_app(
        settings,
        memory_factory=fake_memory,
        upstream_transport=proxy.httpx.ASGITransport(app=upstream.app),
    )
    with TestClient(app, raise_server_exceptions=False) as c:
        tenant = app.state.registry.tenant("alpha")
        seen = iter(range(1_000_000))

        @FUZZ
        @given(chat_messages(), st.one_of(st.none(), odd_text))
        def check(messages: list, user) -> None:
            body = {"model": "m", "messages": messages}
            if user is not None:
                body["user"] = user
            conv = f"fuzz-{next(seen)}"
            r = c.post(
                "/v1/chat/completions",
                content=dumps(body),
                headers={
                    **ALPHA,
                    "content-type": "application/json",
                    "X-Archivist-Conversation": conv,
                },
            )
            assert r.status_code < 500, (body, r.text)
            if r.status_code != 200:
                return
            assert tenant.drain(30)
            kept = [m for _, m in tenant.memory.store.conversation_messages(conv)]
            said = [
                m
                for m in messages
                if isinstance(m, dict)
                and m.get("role") not in ("tool", "function")
                and isinstance(m.get("content"), str)
                and m["content"].strip()
            ]
            assert len(kept) >= len(said), (body, kept)  # every turn with words is kept

        check()
        status = c.get("/v1/memory/status", headers=ALPHA).json()
        assert status["proxy"]["store_failures"] == 0, status["proxy"]
