"""The memory browser in a real headless Chromium (Debian's package, driven by Playwright).

A user opens a person, sees the vegan fact current and pescatarian as history,
corrects a claim, forgets a message; afterwards the pages and the REST API
agree. Every page visited is saved as a screenshot under test-artifacts/ui/
(or $ARCHIVIST_TEST_ARTIFACTS) for a person to look at. Without Chromium the
module is skipped with the reason in pytest's summary (.ci/run installs it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
CHROMIUM = os.environ.get("ARCHIVIST_CHROMIUM") or shutil.which("chromium")
if CHROMIUM is None:
    pytest.skip(
        "BROWSER TESTS SKIPPED: no chromium on PATH (apt-get install chromium, "
        "or set ARCHIVIST_CHROMIUM)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="BROWSER TESTS SKIPPED: pip install playwright"
)

from archivist.bench.load import LoopbackServer  # noqa: E402
from archivist.cli.demo import sample_path  # noqa: E402
from archivist.config import Settings  # noqa: E402
from archivist.server.app import ServerSettings, create_app  # noqa: E402
from archivist.service import MemoryService  # noqa: E402
from archivist.store.sql import Filters  # noqa: E402
from archivist.testing import FakeEmbedder  # noqa: E402

KEY = "key-browser-0001"
ARGS = [  # headless on a machine without a network: nothing phones home
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHOTS = Path(
    os.environ.get("ARCHIVIST_TEST_ARTIFACTS") or Path(__file__).parents[1] / "test-artifacts"
)
SHOTS = SHOTS / "ui"


def fake_memory(tenant: str, path: Path) -> MemoryService:
    settings = Settings(judge="rules", consolidate_mode="inline")
    return MemoryService(path, embedder=FakeEmbedder(), settings=settings)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory):
    """The server on loopback with the shipped sample, one proxied turn's context logged."""
    data = tmp_path_factory.mktemp("ui")
    settings = ServerSettings(
        data_dir=data, keys=((KEY, "t"),), extract_delay=0, background="thread"
    )
    app = create_app(settings, memory_factory=fake_memory)
    server = LoopbackServer(app).start()
    memory = app.state.registry.tenant("t").memory
    memory.add(sample_path(), format="jsonl")
    memory.consolidate()
    ctx = memory.context("What does Lee eat these days?", person="Lee", budget_tokens=300)
    memory.record_context(
        ctx.records(), "Lee is vegan now.", person="Lee", conversation="ana-lee", turn_id="S4:1"
    )
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield f"http://127.0.0.1:{server.port}", memory
    server.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


UNNAMED = """() => [...document.querySelectorAll(
    'input:not([type=hidden]), select, textarea, button')]
  .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')
               && !(e.tagName === 'BUTTON' && e.textContent.trim()))
  .map(e => e.outerHTML)"""


def shot(page, name: str, ours: bool = True) -> None:
    """Save the page as a screenshot; ours: check the basics of accessible markup too."""
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    if ours:
        assert page.evaluate("document.documentElement.lang") == "en"
        assert page.locator("h1").count() == 1, f"{name}: one h1 per page"
        assert page.locator("main#main").count() == 1
        assert page.evaluate(UNNAMED) == [], f"{name}: form controls without a label"


def test_see_correct_and_forget_in_the_browser(site, browser) -> None:
    base, memory = site
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(base + "/")
    assert page.url.startswith(base + "/login")
    shot(page, "01-login")
    page.get_by_label("API key").fill(KEY)
    page.get_by_role("button", name="Open memory").click()
    assert page.get_by_role("heading", name="Memory").is_visible()
    shot(page, "02-overview")

    # a person: vegan holds now, pescatarian is history with its dates
    page.get_by_role("link", name="Lee", exact=True).click()
    profile = page.locator("section[aria-labelledby=profile-h]")
    diet = profile.locator("li.fact", has_text="vegan")
    assert "since 1 Jun 2024" in diet.inner_text()
    assert "was pescatarian" in diet.locator(".was").inner_text()
    assert "4 Mar 2024 – 1 Jun 2024" in diet.locator(".was").inner_text()
    assert profile.locator("li.fact", has_text="pescatarian for years").count() == 0
    shot(page, "03-person")

    # correct a claim from its page
    profile.get_by_role("link", name="Lee passed Lee's type rating for the Airbus A330").click()
    shot(page, "04-claim")
    old_url = page.url
    page.get_by_label("What is true instead").fill(
        "Lee passed the type rating for the Airbus A350."
    )
    page.get_by_role("button", name="Save correction").click()
    assert page.get_by_role("status").inner_text().startswith("corrected")
    assert page.get_by_role("heading", level=1).inner_text() == (
        "Lee passed the type rating for the Airbus A350."
    )
    shot(page, "05-corrected")
    # its kind and the span it holds, too: a date picker, only what changed is sent
    page.get_by_label("Kind").select_option("foresight")
    page.get_by_label("Holds until (empty: no end)").fill("2030-08-01")
    page.get_by_role("button", name="Save correction").click()
    assert page.get_by_role("status").inner_text().startswith("corrected")
    facts = page.locator("dl.facts").inner_text()
    assert "foresight" in facts and "until 1 Aug 2030" in facts, facts
    assert page.get_by_label("What is true instead").input_value() == (
        "Lee passed the type rating for the Airbus A350."
    )
    shot(page, "05b-corrected-span")
    page.get_by_role("button", name="Save correction").click()
    assert page.get_by_role("status").inner_text().startswith("nothing changed")
    page.goto(old_url)
    assert "superseded" in page.locator("dl.facts").inner_text()

    # forget a message from its conversation
    page.goto(base + "/conversations/ana-lee")
    message = page.locator("li#m-S3\\:4")
    assert "Sao Paulo right now" in message.inner_text()
    shot(page, "06-conversation")
    message.get_by_role("button", name="Forget message S3:4").click()
    # it asks first, saying what goes
    assert page.get_by_role("heading", level=1).inner_text() == "Forget message S3:4?"
    assert "Sao Paulo right now" in page.locator("blockquote").inner_text()
    shot(page, "07-confirm")
    page.get_by_role("button", name="Yes, forget message S3:4").click()
    assert page.get_by_role("status").inner_text() == "forgot message S3:4"
    assert page.locator("li#m-S3\\:4").count() == 0
    shot(page, "07-forgotten")

    # the pages and the API agree
    api = context.request
    auth = {"Authorization": f"Bearer {KEY}"}
    now = api.get(base + "/v1/memory/profile", params={"person": "Lee"}, headers=auth).json()
    texts = [e["text"] for group in now["groups"].values() for e in group]
    assert "Lee passed the type rating for the Airbus A350." in texts
    assert not any("A330 freighter" in t for t in texts)
    found = api.get(
        base + "/v1/memory/search", params={"q": "Sao Paulo rotation", "k": 50}, headers=auth
    ).json()
    assert found and "S3:4" not in {h["id"] for h in found}
    conflicts = api.get(base + "/v1/memory/conflicts", params={"subject": "Lee"}, headers=auth)
    assert "correction" in {c["kind"] for c in conflicts.json()}
    page.goto(base + "/")
    assert "correction" in page.locator("section[aria-labelledby=changes-h]").inner_text()
    context.close()


def test_every_other_page_renders_with_the_sample(site, browser) -> None:
    base, memory = site
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies([{"name": "archivist_key", "value": KEY, "url": base}])
    page = context.new_page()
    page.goto(base + "/search?q=fish&person=Lee")
    assert page.locator("ol.items > li").count() > 0
    shot(page, "08-search")
    page.goto(base + "/ask?q=Does+Lee+eat+fish%3F&person=Lee")
    assert page.locator("section.answer").is_visible()
    shot(page, "09-ask")
    page.goto(base + "/contexts")
    card = page.locator("article.card").first.inner_text()
    assert "Lee is vegan now." in card and " asked: " in card
    shot(page, "10-what-the-assistant-saw")
    for name in ("docs", "redoc"):  # rendered from packaged assets, with no network
        page.goto(f"{base}/{name}")
        page.get_by_text("/v1/memory/search").first.wait_for(timeout=15_000)
        shot(page, f"11-{name}", ours=False)
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    phone.add_cookies([{"name": "archivist_key", "value": KEY, "url": base}])
    small = phone.new_page()
    lee = memory.person("Lee")
    small.goto(f"{base}/people/{lee.id}")
    width = small.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the person page scrolls sideways on a phone ({width}px)"
    shot(small, "12-person-phone")
    phone.close()
    context.close()


def test_the_memories_list_filters_pages_and_forgets_in_bulk(site, browser) -> None:
    base, memory = site
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies([{"name": "archivist_key", "value": KEY, "url": base}])
    page = context.new_page()
    page.goto(base + "/memories")
    assert page.title() == "Memories · archivist"
    total = memory.store.browse_claims(Filters())[1]
    assert page.get_by_role("heading", level=2).first.inner_text().startswith(f"{total} memories")
    shot(page, "13-memories")
    page.get_by_label("Words").fill("coffee")
    page.get_by_label("About").select_option("Lee")
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("ol.items > li")
    assert rows.count() > 0
    assert all("coffee" in t.lower() for t in rows.all_inner_texts())
    picked = rows.count()
    shot(page, "14-memories-filtered")
    for box in page.get_by_role("checkbox").all():
        box.check()
    page.get_by_role("button", name="Forget the selected memories…").click()
    assert page.get_by_role("heading", level=1).inner_text().startswith(f"Forget {picked} memor")
    shot(page, "15-memories-confirm")
    page.get_by_role("button", name=f"Yes, forget {picked} memor", exact=False).click()
    assert page.get_by_role("status").inner_text().startswith(f"forgot {picked} memor")
    assert "coffee" in page.get_by_label("Words").input_value()  # back on the same filter
    assert page.locator("ol.items > li").count() == 0
    audit = memory.audit_log(5)
    assert audit[0].actor == "browser" and audit[0].kind == "claim"
    context.close()


def test_changes_page_and_adding_a_memory_by_hand(site, browser) -> None:
    base, memory = site
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies([{"name": "archivist_key", "value": KEY, "url": base}])
    page = context.new_page()
    page.goto(base + "/conflicts")
    rows = page.locator("table tbody tr")
    assert rows.count() == len(memory.conflicts())
    assert "pescatarian" in page.locator("table").inner_text()
    shot(page, "16-changes")
    page.get_by_label("About").select_option("Lee")
    page.get_by_role("button", name="Filter").click()
    assert all("Lee" in t for t in page.locator("table tbody tr").all_inner_texts())

    page.goto(base + "/memories")
    page.get_by_label("Whose").fill("Lee")
    page.get_by_label("What they said").fill("I moved to Lisbon with my partner last week.")
    page.get_by_label("When").fill("2024-08-01T10:00:00+00:00")
    page.get_by_role("button", name="Add", exact=True).click()
    assert page.get_by_role("status").inner_text().startswith("added ")
    assert "Lisbon" in page.locator("ol.items").inner_text()
    shot(page, "17-added-by-hand")
    (m,) = [m for _, m in memory.store.conversation_messages("notes:Lee")]
    assert m.speaker == "Lee" and m.timestamp.isoformat().startswith("2024-08-01")
    context.close()
