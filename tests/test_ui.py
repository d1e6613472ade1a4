"""The memory browser over HTTP (no browser): keys, tokens, error pages, what pages show,
and the offline API docs. tests/test_ui_browser.py drives the same pages in Chromium."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("jinja2")

from fastapi.testclient import TestClient  # noqa: E402

from archivist.cli.demo import sample_path  # noqa: E402
from archivist.config import Settings  # noqa: E402
from archivist.server.app import ServerSettings, create_app  # noqa: E402
from archivist.service import MemoryService  # noqa: E402
from archivist.testing import FakeEmbedder  # noqa: E402

KEY = "key-alpha-000001"
KEYS = ((KEY, "alpha"), ("key-bound-000001", "alpha", "Lee"))


def fake_memory(tenant: str, path: Path) -> MemoryService:
    settings = Settings(judge="rules", consolidate_mode="inline")
    return MemoryService(path, embedder=FakeEmbedder(), settings=settings)


def text_of(html: str) -> str:
    """The page's words, tags dropped, whitespace squeezed."""
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()


@pytest.fixture
def client(tmp_path: Path):
    settings = ServerSettings(data_dir=tmp_path, keys=KEYS, extract_delay=0, background="thread")
    app = create_app(settings, memory_factory=fake_memory)
    with TestClient(app) as c:
        memory = app.state.registry.tenant("alpha").memory
        memory.add(sample_path(), format="jsonl")
        memory.consolidate()
        yield c


def login(client: TestClient, key: str = KEY) -> None:
    r = client.post("/login", data={"key": key, "next": "/"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"


def memory_of(client: TestClient) -> MemoryService:
    return client.app.state.registry.tenant("alpha").memory


def token_of(html: str) -> str:
    return re.search(r'name="token" value="([0-9a-f]+)"', html).group(1)


def test_pages_need_a_tenant_key(client: TestClient) -> None:
    r = client.get("/people/x", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/login?next=/people/x"
    bad = client.post("/login", data={"key": "nope", "next": "/"})
    assert bad.status_code == 401 and "not valid" in bad.text
    login(client, "key-bound-000001")  # a key bound to one user sees only that user: no browser
    r = client.get("/")
    assert r.status_code == 403 and "needs a tenant key" in text_of(r.text)
    login(client)
    assert client.get("/").status_code == 200
    # a "next" elsewhere is not followed after logging in
    for elsewhere in ("//evil.example", "/\\evil.example", "https://evil.example"):
        r = client.post("/login", data={"key": KEY, "next": elsewhere}, follow_redirects=False)
        assert r.headers["location"] == "/", elsewhere
    assert "httponly" in r.headers["set-cookie"].lower()
    assert "samesite=strict" in r.headers["set-cookie"].lower()


def test_open_access_needs_no_login(tmp_path: Path) -> None:
    settings = ServerSettings(data_dir=tmp_path, open_access=True, background="thread")
    app = create_app(settings, memory_factory=fake_memory)
    with TestClient(app, base_url="http://127.0.0.1:8090") as c:
        r = c.get("/")
        assert r.status_code == 200 and "Nobody yet" in r.text and "Log out" not in r.text
    # without keys, only loopback names reach a page (DNS rebinding: server/guard.py)
    with TestClient(app, base_url="http://attacker.example:8090") as c:
        r = c.get("/")
        assert r.status_code == 403 and "attacker.example" in r.json()["error"]["message"]


def test_the_person_page_shows_what_holds_and_what_it_replaced(client: TestClient) -> None:
    login(client)
    lee = memory_of(client).person("Lee")
    page = client.get(f"/people/{lee.id}").text
    now = text_of(page.split('id="profile-h"')[1].split('id="timeline-h"')[0])
    assert "Lee went vegan last month" in now and "since 1 Jun 2024" in now
    assert "history: was pescatarian 4 Mar 2024 – 1 Jun 2024" in now
    conflicts = text_of(page.split('id="conflicts-h"')[1].split('id="ident-h"')[0])
    assert "diet pescatarian 4 Mar 2024 vegan 1 Jun 2024" in conflicts
    # as of April the diet was pescatarian, and veganism not yet known
    april = text_of(client.get(f"/people/{lee.id}", params={"at": "2024-04-30T12:00Z"}).text)
    april_now = april.split("What holds")[1].split("Timeline")[0]
    assert "pescatarian" in april_now and "vegan" not in april_now


def test_a_conversation_shows_claims_per_message_and_highlights_evidence(
    client: TestClient,
) -> None:
    login(client)
    memory = memory_of(client)
    vegan = next(c for c in memory.claims(person="Lee", limit=1000) if "vegan" in c.text)
    page = client.get("/conversations/ana-lee", params={"claim": vegan.id}).text
    block = page.split('<li id="m-S4:2" class="message evidence">')[1].split('id="m-S4:3"')[0]
    assert "<mark>Not for me this time. I went vegan" in block
    assert page.count("message evidence") == len(vegan.evidence)
    assert f'href="/claims/{vegan.id}"' in block  # the claims extracted from it, listed under it


def test_claim_search_ask_and_context_pages(client: TestClient) -> None:
    login(client)
    memory = memory_of(client)
    vegan = next(c for c in memory.claims(person="Lee", limit=1000) if "vegan" in c.text)
    claim = text_of(client.get(f"/claims/{vegan.id}").text)
    assert "Said by Lee, 9 Jul 2024, 19:41" in claim and "Not for me this time" in claim
    hits = text_of(client.get("/search", params={"q": "fish", "person": "Lee"}).text)
    assert "ana-lee S4:2" in hits and "found by" in hits
    answer = text_of(client.get("/ask", params={"q": "What does Lee eat?", "person": "Lee"}).text)
    assert "vegan" in answer.split("Answer")[1] and "ana-lee S4:2" in answer
    assert "No context logged yet" in client.get("/contexts").text
    ctx = memory.context("What does Lee eat now?", person="Lee", budget_tokens=300)
    memory.record_context(ctx.records(), "Vegan.", person="Lee", conversation="ana-lee")
    seen = text_of(client.get("/contexts").text)
    assert "Reply: Vegan." in seen and "not reviewed yet" in seen and "0.50" in seen


def test_a_plan_called_off_shows_as_called_off(client: TestClient) -> None:
    from datetime import UTC, datetime

    from conftest import make_conversation

    login(client)
    memory = memory_of(client)
    memory.add(
        make_conversation(
            "plan",
            [
                [("Lee", "Running the Dublin marathon in October, hopefully.")],
                [("Lee", "Knee surgeon says no more running for me. Marathon is off.")],
            ],
            people=("Lee", "Ana"),
            start=datetime(2024, 5, 13, 9, tzinfo=UTC),
        )
    )
    memory.consolidate()
    plan = next(c for c in memory.claims(person="Lee", limit=1000) if "Dublin" in c.text)
    page = text_of(client.get(f"/claims/{plan.id}").text)
    assert "planned for 1 Oct 2024, called off 20 May 2024" in page


def test_failures_are_pages_with_their_status(client: TestClient) -> None:
    login(client)
    for url, status, words in [
        ("/claims/99999", 404, "no claim 99999"),
        ("/claims/abc", 400, "claim_id"),
        ("/conversations/nope", 404, "no conversation 'nope'"),
        ("/people/nobody", 404, "no person 'nobody'"),
        ("/people/x?at=yesterday", None, "at"),
    ]:
        r = client.get(url)
        assert r.headers["content-type"].startswith("text/html")
        assert status is None or r.status_code == status
        assert words in text_of(r.text) and "Traceback" not in r.text


def test_changes_need_the_page_token(client: TestClient) -> None:
    login(client)
    before = memory_of(client).stats()["messages"]
    r = client.post("/conversations/ana-lee/messages/S1:1/forget", data={"token": "0" * 64})
    assert r.status_code == 403 and "stale or came from another site" in text_of(r.text)
    r = client.post("/conversations/ana-lee/forget", data={})
    assert r.status_code == 400
    assert memory_of(client).stats()["messages"] == before


def test_api_docs_render_from_packaged_assets(client: TestClient) -> None:
    for page, asset in [("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")]:
        html = client.get(page).text
        assert f"/docs-assets/{asset}" in html
        assert not re.search(r"(src|href)=\"https?://", html), "docs must not load from a CDN"
        assert "fonts.googleapis" not in html
        r = client.get(f"/docs-assets/{asset}")
        assert r.status_code == 200 and len(r.content) > 100_000


def test_forget_a_claim_and_a_conversation(client: TestClient) -> None:
    login(client)
    memory = memory_of(client)
    claim = next(c for c in memory.claims(person="Lee", limit=1000) if "A330" in c.text)
    page = client.get(f"/claims/{claim.id}").text
    # the claim page's button asks first: a page saying what goes, then a confirmed POST
    asked = client.get(f"/claims/{claim.id}/forget")
    assert asked.status_code == 200 and f"Forget claim {claim.id}?" in text_of(asked.text)
    assert claim.text in text_of(asked.text)
    r = client.post(f"/claims/{claim.id}/forget", data={"token": token_of(page)})
    assert f"Forget claim {claim.id}?" in text_of(r.text)  # an unconfirmed form only asks
    assert client.get(f"/claims/{claim.id}").status_code == 200
    r = client.post(
        f"/claims/{claim.id}/forget", data={"token": token_of(asked.text), "confirm": "yes"}
    )
    assert r.status_code == 200 and f"forgot claim {claim.id}" in r.text
    assert client.get(f"/claims/{claim.id}").status_code == 404
    memory.rebuild(["ana-lee"])  # re-deriving from the messages does not bring it back
    assert not any(c.text == claim.text for c in memory.claims(person="Lee", limit=1000))
    asked = client.get("/conversations/ana-lee/forget")
    assert "40 messages of conversation ana-lee" in text_of(asked.text)
    assert memory.conversations() != []
    r = client.post(
        "/conversations/ana-lee/forget", data={"token": token_of(asked.text), "confirm": "yes"}
    )
    assert "forgot conversation ana-lee (40 messages)" in text_of(r.text)
    assert memory.conversations() == [] and "No conversations stored" in r.text


def test_merge_and_split_people_are_the_users_decisions(client: TestClient) -> None:
    login(client)
    memory = memory_of(client)
    ana, lee = memory.person("Ana"), memory.person("Lee")
    page = client.get(f"/people/{ana.id}").text
    r = client.post(
        "/people/merge",
        data={"token": token_of(page), "keep": ana.id, "drop": lee.id, "reason": "test merge"},
    )
    shown = text_of(r.text)
    assert r.status_code == 200 and "merged" in shown
    assert "MERGE" in shown and "test merge" in shown and "user" in shown
    merged = memory.person(ana.id)
    assert len(merged.identities) == 2
    r = client.post(
        f"/people/{ana.id}/split",
        data={"token": token_of(r.text), "identity": "ana-lee/Lee", "reason": "two people"},
    )
    assert r.status_code == 200 and "SEPARATE" in text_of(r.text)
    assert len(memory.person("Ana").identities) == 1 and memory.person("Lee").id != ana.id
    r = client.post("/people/merge", data={"token": token_of(r.text), "keep": ana.id, "drop": ""})
    assert r.status_code == 400 and "the person to merge is empty" in text_of(r.text)


def test_too_many_wrong_keys_is_a_page_too(tmp_path: Path) -> None:
    settings = ServerSettings(data_dir=tmp_path, keys=KEYS, auth_failures_per_minute=2)
    with TestClient(create_app(settings, memory_factory=fake_memory)) as c:
        codes = [c.post("/login", data={"key": "wrong"}).status_code for _ in range(4)]
        assert codes[:2] == [401, 401] and codes[-1] == 429
        r = c.post("/login", data={"key": KEY})
        assert r.status_code == 429 and r.headers["content-type"].startswith("text/html")
