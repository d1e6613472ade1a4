"""Issue 14: what the proxy injects, driven end to end by the official openai client.

Two conversations of one user through `archivist serve`'s proxy, against an
upstream that records what it received (and echoes the user, as a careless
assistant would): the injected system message must bring what the earlier
conversation said when it is asked about, repeat nothing the request already
holds, mark what no longer holds, and stay within its budget.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")

from archivist.bench.load import FakeUpstream  # noqa: E402
from archivist.config import Settings  # noqa: E402
from archivist.lang.text import query_terms  # noqa: E402
from archivist.read.context import estimate_tokens  # noqa: E402
from archivist.read.history import HISTORY_MARK  # noqa: E402
from archivist.server import proxy  # noqa: E402
from archivist.server.app import ServerSettings, create_app  # noqa: E402
from archivist.service import MemoryService  # noqa: E402
from archivist.testing import FakeEmbedder  # noqa: E402

httpx = proxy.httpx
KEY = "key-alpha-000001"
BUDGET = 400
EARLIER = [
    "I went pescatarian in March, fish but no meat.",
    "My sister Maya lives in Porto and teaches chemistry.",
    "Update: I'm fully vegan now, no fish anymore.",
]
LATER = [
    "Maya is visiting me next weekend.",
    "What should I cook for Maya and me on Saturday?",
    "Something warming would be good to cook for Maya, it's cold here on Saturday.",
]


def _memory(tenant: str, path: Path) -> MemoryService:
    return MemoryService(
        path, embedder=FakeEmbedder(), settings=Settings(consolidate_mode="inline")
    )


@pytest.fixture
def served(tmp_path: Path):
    upstream = FakeUpstream()
    settings = ServerSettings(
        data_dir=tmp_path,
        keys=((KEY, "alpha"),),
        upstream_base_url="http://upstream/v1",
        extract_delay=0,
        context_budget=BUDGET,
    )
    transport = httpx.ASGITransport(app=upstream.app)
    app = create_app(settings, memory_factory=_memory, upstream_transport=transport)
    yield app, upstream
    app.state.registry.close()


def _client(app, conversation: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url="http://proxy/v1",
        api_key=KEY,
        max_retries=0,
        default_headers={"X-Archivist-Conversation": conversation},
        http_client=httpx.AsyncClient(transport=httpx.ASGITransport(app=app)),
    )


async def _chat(app, conversation: str, turns: list[str]) -> None:
    """One user turn at a time, the whole history re-sent each time, as chat apps do."""
    c = _client(app, conversation)
    history: list[dict] = []
    for text in turns:
        history.append({"role": "user", "content": text})
        r = await c.chat.completions.create(model="m", messages=history, user="Ana")
        history.append({"role": "assistant", "content": r.choices[0].message.content})
        assert app.state.registry.tenant("alpha").drain(30)  # stored and read before the next


def _memory_lines(sent: list[dict]) -> list[str]:
    memory = next(m["content"] for m in sent if str(m.get("content", "")).startswith("Memory"))
    assert memory.startswith(proxy.MEMORY_HEADER)
    return [line for line in memory.splitlines() if line.startswith("- ")]


def test_the_injected_context_adds_only_what_the_chat_does_not_hold(served) -> None:
    app, upstream = served
    asyncio.run(_chat(app, "earlier", EARLIER))
    asyncio.run(_chat(app, "later", LATER))
    sent = upstream.received[-1]["messages"]
    lines = _memory_lines(sent)
    text = "\n".join(lines)
    # from the earlier conversation: the diet now and the sister, asked about
    assert "vegan" in text and "Maya" in text
    # what no longer holds is marked wherever it shows
    assert all(HISTORY_MARK in line for line in lines if "pescatarian" in line)
    # nothing the request holds is injected again: no turn of this chat, in its words or
    # as a claim of it ("Maya is visiting Ana next weekend")
    request = [m["content"] for m in sent if m["role"] in ("user", "assistant")]
    for said in request:
        words = set(query_terms(said))
        assert not any(words <= set(query_terms(line)) for line in lines), said
    # the upstream echoed every turn ("Noted (2): My sister Maya…"): no echo is shown,
    # and no fact became the assistant's
    assert not any("Noted (" in line for line in lines)
    assert "assistant's sister" not in text and "as assistant tells it" not in text
    # no line twice, and the budget holds
    assert len(lines) == len(set(lines))
    assert sum(estimate_tokens(line[2:]) for line in lines) <= BUDGET
