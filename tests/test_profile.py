"""Profiles: what holds for a person at a time, grouped, with sources and replaced values.

Ana moves from Lisbon to Porto and from nursing to teaching, gets a puppy and
says a plan; Bob reports her allergy in another conversation; the assistant
suggests something. Real SQLite files, the FakeEmbedder, the heuristic archivist.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from archivist.errors import InputError, NotFound
from archivist.lang.attributes import attribute_of
from archivist.model import Claim, ClaimEvent
from archivist.profile import GROUPS, Profile, claim_as_of, group_of, source_of
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder, FixedClock
from conftest import RULES, jsonl_records, make_conversation, write_jsonl

START = datetime(2023, 5, 8, 9, 0, tzinfo=UTC)  # session 1; session 2 a week later
BOB_DAY = datetime(2023, 5, 20, 9, 0, tzinfo=UTC)
NOW = datetime(2024, 1, 1, tzinfo=UTC)  # the marathon plan (June 2023) is over by then
EARLY = datetime(2023, 5, 10, tzinfo=UTC)  # before the move and the new job
MIDDLE = datetime(2023, 5, 16, tzinfo=UTC)  # after them, before the ana-bob chat
LATE = datetime(2023, 5, 25, tzinfo=UTC)  # after everything, the plan still ahead


def ana_lee():
    return make_conversation(
        "ana-lee",
        (
            (
                ("Ana", "I live in Lisbon."),
                ("Ana", "I work as a nurse at the city hospital."),
                ("Lee", "Lisbon sounds lovely."),
            ),
            (
                ("Ana", "I moved to Porto."),
                ("Ana", "I now work as a teacher."),
                ("Lee", "Congratulations on the new job!"),
            ),
        ),
        start=START,
    )


def ana_bob():
    return make_conversation(
        "ana-bob",
        (
            (
                ("Ana", "I got a puppy called Rex."),
                ("Bob", "Ana is allergic to peanuts, so no satay at the party."),
                ("Ana", "My daughter Sofia started school."),
                ("Ana", "I plan to run the Porto marathon next month."),
                ("assistant", "Ana should try swimming on rest days."),
            ),
        ),
        people=("Ana", "Bob"),
        start=BOB_DAY,
    )


@pytest.fixture
def mem(tmp_path: Path):
    m = MemoryService(
        tmp_path / "p.db", settings=RULES, embedder=FakeEmbedder(), clock=FixedClock(NOW)
    )
    m.add([ana_lee(), ana_bob()])
    yield m
    m.close()


def texts(p: Profile, group: str) -> list[str]:
    return [e.text for e in p[group]]


def at(day: int, hour: int = 9, minute: int = 0, month: int = 5) -> datetime:
    return datetime(2023, month, day, hour, minute, tzinfo=UTC)


# -- the profile ----------------------------------------------------------------------------


def test_groups_in_order_with_since_sources_and_evidence(mem: MemoryService) -> None:
    p = mem.profile("Ana", at=LATE)
    assert [g for g, _ in p.groups] == list(GROUPS)
    assert texts(p, "home") == ["Ana moved to Porto."]
    assert texts(p, "work") == ["Ana now works as a teacher."]
    assert texts(p, "family") == ["Ana's daughter Sofia started school."]
    assert texts(p, "pets") == ["Ana got a puppy called Rex."]
    assert texts(p, "health and diet") == ["Ana is allergic to peanuts, so no satay at the party."]
    assert texts(p, "plans") == ["Ana plans to run the Porto marathon next month."]
    assert texts(p, "other") == ["Ana should try swimming on rest days."]
    assert p["relationships"] == () and p["possessions and hobbies"] == ()

    (home,) = p["home"]
    assert home.since == at(15, minute=1) and home.speaker == "Ana"
    assert home.source == "first-hand" and home.evidence == (("ana-lee", "D2:1"),)
    (allergy,) = p["health and diet"]
    assert allergy.source == "reported by Bob" and allergy.evidence == (("ana-bob", "D1:2"),)
    assert p["other"][0].source == "said by the assistant"
    (plan,) = p["plans"]
    assert plan.since == datetime(2023, 6, 1, tzinfo=UTC)
    assert plan.until == datetime(2023, 7, 1, tzinfo=UTC)


def test_replaced_values_with_their_dates(mem: MemoryService) -> None:
    p = mem.profile("Ana", at=LATE)
    (home,) = p["home"]
    (lisbon,) = home.replaced
    assert (lisbon.value, lisbon.text) == ("Lisbon", "Ana lives in Lisbon.")
    assert lisbon.since == at(8, minute=1) and lisbon.until == at(15, minute=1)
    (work,) = p["work"]
    (nurse,) = work.replaced
    assert nurse.value == "nurse" and nurse.until == at(15, minute=2)
    assert mem.claims(limit=100)[0].replaced_by == home.claim  # the store's link, followed


def test_at_an_earlier_time_holds_the_old_values_and_nothing_said_later(
    mem: MemoryService,
) -> None:
    early = mem.profile("Ana", at=EARLY)
    assert early.at == EARLY
    assert texts(early, "home") == ["Ana lives in Lisbon."]
    assert texts(early, "work") == ["Ana works as a nurse at the city hospital."]
    assert all(not e.replaced and e.until is None for e in early.entries())
    said_later = {"Porto", "teacher", "puppy", "peanuts", "Sofia", "marathon"}
    assert not any(w in e.text for e in early.entries() for w in said_later)

    middle = mem.profile("Ana", at=MIDDLE)
    assert texts(middle, "home") == ["Ana moved to Porto."]
    assert [r.value for r in middle["work"][0].replaced] == ["nurse"]
    assert middle["pets"] == () and middle["plans"] == ()


def test_default_is_now_and_a_plan_that_is_over_is_gone(mem: MemoryService) -> None:
    p = mem.profile("ana")  # any case
    assert p.at == NOW and p.person == "ana"
    assert texts(p, "work") == ["Ana now works as a teacher."]
    assert p["plans"] == ()


def test_conversations_narrow_it_and_unknown_or_bad_input_is_refused(
    mem: MemoryService,
) -> None:
    only = mem.profile("Ana", at=LATE, conversations=["ana-lee"])
    assert {c for e in only.entries() for c, _ in e.evidence} == {"ana-lee"}
    assert mem.profile("Bob", at=LATE).entries() == []  # known; nothing about him
    with pytest.raises(NotFound, match="no person 'Nobody'"):
        mem.profile("Nobody")
    with pytest.raises(InputError, match="needs a timezone"):
        mem.profile("Ana", at=datetime(2023, 5, 10))
    with pytest.raises(InputError, match="needs a person"):
        mem.profile("  ")


def test_to_dict_is_json_and_text_reads(mem: MemoryService) -> None:
    p = mem.profile("Ana", at=LATE)
    data = json.loads(json.dumps(p.to_dict()))
    assert list(data["groups"]) == list(GROUPS) and data["at"] == LATE.isoformat()
    home = data["groups"]["home"][0]
    assert home["evidence"] == [{"conversation": "ana-lee", "message": "D2:1"}]
    assert home["replaced"][0]["value"] == "Lisbon"
    assert home["replaced"][0]["until"] == at(15, minute=1).isoformat()
    text = p.text()
    assert "home:\n  - Ana moved to Porto." in text
    assert "replaced: Lisbon (2023-05-08 to 2023-05-15" in text
    assert "reported by Bob" in text and "relationships" not in text


# -- the pure parts ---------------------------------------------------------------------------


def claim(text: str, *, speaker: str = "Ana", kind: str = "fact", **kw) -> Claim:
    return Claim(text, speaker, "Ana", "c", ("m1",), kw.pop("said_at", START), kind=kind, **kw)


@pytest.mark.parametrize(
    ("text", "group"),
    [
        ("Ana lives in Berlin.", "home"),
        ("Ana works at Acme.", "work"),
        ("Ana is vegan now.", "health and diet"),
        ("Ana is dating Carl.", "relationships"),
        ("Ana is 30 years old.", "other"),
        ("Ana's son Tom loves trains.", "family"),
        ("Ana adopted a kitten.", "pets"),
        ("Ana broke her wrist and takes medication.", "health and diet"),
        ("Ana sings in a choir.", "possessions and hobbies"),
        ("Ana bought a new bike.", "possessions and hobbies"),
        ("Ana likes the colour blue.", "other"),
    ],
)
def test_group_of_reads_attributes_then_keywords(text: str, group: str) -> None:
    assert group_of(claim(text), None, attribute_of) == group


def test_group_of_plans_and_conflict_attributes() -> None:
    assert group_of(claim("Ana will sell her car.", kind="plan"), None, attribute_of) == "plans"
    assert group_of(claim("Ana's new thing."), "residence") == "home"
    assert group_of(claim("Ana's new thing."), "choi") == "other"  # an aspect stem


def test_source_of() -> None:
    assert source_of(claim("x"), "user") == "first-hand"
    assert source_of(claim("x", speaker="Bob"), "user") == "reported by Bob"
    assert source_of(claim("x", speaker="Helper"), "assistant") == "said by the assistant"
    assert source_of(claim("x", source="assistant_suggested"), None) == "said by the assistant"


def test_claim_as_of_undoes_a_replacement_said_later() -> None:
    """Ana said on 15 May she had moved "last week" (from 8 May): the store closes Lisbon
    at 8 May, but on 12 May nobody knew yet, so Lisbon still held then."""
    moved_said = at(15)
    lisbon = claim(
        "Ana lives in Lisbon.",
        said_at=at(1),
        status="superseded",
        replaced_by=2,
        valid_to=at(8, hour=0),
        id=1,
    )
    history = [ClaimEvent(1, "superseded", moved_said, other=2, detail={"value": "Lisbon"})]
    assert not lisbon.holds_at(at(12))  # the stored claim, read naively
    then, events = claim_as_of(lisbon, history, at(12))
    assert (then.status, then.replaced_by, then.valid_to, events) == ("current", None, None, [])
    assert then.holds_at(at(12))
    after, events = claim_as_of(lisbon, history, moved_said + timedelta(seconds=1))
    assert after is lisbon and events == history and not after.holds_at(at(16))


def test_profile_as_of_a_move_told_later(tmp_path: Path) -> None:
    conv = make_conversation(
        "ana-lee",
        ((("Ana", "I live in Lisbon."),), (("Ana", "Big news: I moved to Porto last week."),)),
        start=START,
    )
    with MemoryService(tmp_path / "m.db", settings=RULES, embedder=FakeEmbedder()) as m:
        m.add(conv)
        (moved,) = [c for c in m.claims() if "Porto" in c.text]
        assert moved.valid_from is not None and moved.valid_from < moved.said_at
        between = moved.valid_from + (moved.said_at - moved.valid_from) / 2
        assert texts(m.profile("Ana", at=between), "home") == ["Ana lives in Lisbon."]
        home = m.profile("Ana", at=moved.said_at)["home"]
        assert [e.text for e in home] == ["Big news: Ana moved to Porto last week."]


# -- the three front ends -----------------------------------------------------------------------


def test_cli_profile(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from click.testing import CliRunner

    from archivist.cli.main import cli, main

    db = str(tmp_path / "cli.db")
    files = [
        write_jsonl(tmp_path / f"{c.id}.jsonl", jsonl_records(c)) for c in (ana_lee(), ana_bob())
    ]
    base = ["--db", db, "--embedder", "fake"]

    def run(*args: str):
        result = CliRunner().invoke(cli, [*base, *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout

    run("ingest", *map(str, files))
    data = json.loads(run("profile", "Ana", "--at", LATE.isoformat(), "--json"))
    assert data["groups"]["home"][0]["text"] == "Ana moved to Porto."
    assert data["groups"]["home"][0]["replaced"][0]["value"] == "Lisbon"
    assert data["groups"]["health and diet"][0]["source"] == "reported by Bob"
    early = run("profile", "Ana", "--at", "2023-05-10T00:00+00:00")
    assert "Ana lives in Lisbon." in early and "Porto" not in early
    with pytest.raises(SystemExit) as e:
        main([*base, "profile", "Nobody"])
    assert e.value.code == 6 and "no person 'Nobody'" in capsys.readouterr().err


def test_rest_profile(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from archivist.config import Settings
    from archivist.server.app import ServerSettings, create_app

    keys = (("key-tenant-00001", "home"), ("key-ana-00000001", "home", "Ana"))
    tenant = {"Authorization": "Bearer key-tenant-00001"}
    ana = {"X-API-Key": "key-ana-00000001"}

    def memory(name: str, path: Path) -> MemoryService:
        settings = Settings(judge="rules", consolidate_mode="background")
        return MemoryService(path, embedder=FakeEmbedder(), settings=settings)

    app = create_app(
        ServerSettings(data_dir=tmp_path, keys=keys, extract_delay=0), memory_factory=memory
    )
    with TestClient(app) as c:
        msgs = jsonl_records(ana_lee()) + jsonl_records(ana_bob())
        r = c.post("/v1/memory/messages", json={"messages": msgs}, headers=tenant)
        assert r.status_code == 200, r.text
        assert app.state.registry.tenant("home").drain(30)

        def profile(headers: dict, **params: str):
            return c.get("/v1/memory/profile", params=params, headers=headers)

        now = profile(tenant, person="Ana", at=LATE.isoformat()).json()
        assert [e["text"] for e in now["groups"]["work"]] == ["Ana now works as a teacher."]
        assert now["groups"]["work"][0]["replaced"][0]["value"] == "nurse"
        early = profile(tenant, person="Ana", at="2023-05-10T00:00:00Z").json()
        assert [e["text"] for e in early["groups"]["home"]] == ["Ana lives in Lisbon."]
        missing = profile(tenant, person="Nobody")
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "NotFound"
        # a key bound to Ana reads her profile, and nobody else's
        own = profile(ana, person="ana", at=LATE.isoformat())
        assert own.status_code == 200 and own.json()["groups"]["pets"]
        other = profile(ana, person="Lee")
        assert other.status_code == 403 and "'Lee' is not them" in other.json()["error"]["message"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_mcp_profile_tool(mem: MemoryService, anyio_backend: str) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from archivist.server.mcp import build_server

    async with Client(build_server(mem)) as client:
        result = await client.call_tool("profile", {"person": "Ana", "at": LATE.isoformat()})
        assert not result.is_error, result.content
        data = result.structured_content
        assert data["groups"]["pets"][0]["text"] == "Ana got a puppy called Rex."
        assert data["groups"]["home"][0]["replaced"][0]["value"] == "Lisbon"
        early = await client.call_tool("profile", {"person": "Ana", "at": "2023-05-10T00:00Z"})
        assert [e["text"] for e in early.structured_content["groups"]["work"]] == [
            "Ana works as a nurse at the city hospital."
        ]
        missing = await client.call_tool("profile", {"person": "Nobody"})
        assert missing.is_error and "no person 'Nobody'" in missing.content[0].text


def test_key_info_heads_every_group_so_nothing_reads_as_the_group_before() -> None:
    from archivist.profile import Entry
    from archivist.write.consolidate import key_info_text

    def entry(i: int, text: str) -> Entry:
        return Entry(
            i, text, "fact", datetime(2024, 3, i, tzinfo=UTC), None, "Ana", "first-hand", ()
        )

    text = key_info_text(
        [("family", entry(1, "Ana's sister Maya lives in Porto.")),
         ("other", entry(2, "Ana takes a taxi to the airport at six."))],
        500,
    )  # fmt: skip
    assert text == (
        "Family: Ana's sister Maya lives in Porto (since 2024-03-01). "
        "Other: Ana takes a taxi to the airport at six (since 2024-03-02)."
    )
