"""Memory views and selection: views, GOLDFISH, caps, criteria by LLM and by retrieval."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from archivist.cli.main import cli
from archivist.config import Settings
from archivist.errors import InputError
from archivist.llm.base import LLMRefused
from archivist.model import Conversation, Message, Session
from archivist.read.select import (
    ALL_INVOLVING,
    GOLDFISH,
    REQUEST_RESPONSE,
    SENT_BY_ME,
    SENT_TO_ME,
    SYSTEM_AND_ME,
    SelectConfig,
    get_view,
    request_pairs,
    select,
)
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder, FakeLLM
from conftest import T0, cara_dan, table_counts

# (id, speaker, role, addressees, text); ids are distinctive so a leak into a prompt shows.
TURNS = (
    ("Q9:1", "system", "system", (), "You are Archie, an assistant for API design work."),
    ("Q9:2", "Ana", "user", ("Archie",), "We need requirements for the billing API: invoices."),
    ("Q9:3", "Archie", "assistant", ("Ana",), "Noted. Should refunds be partial or full?"),
    ("Q9:4", "Ana", "user", ("Archie",), "Partial refunds. Also my cat Pixel is sick today."),
    ("Q9:5", "Archie", "assistant", ("Ana",), "Sorry about Pixel. I suggest REST endpoints."),
    ("Q9:6", "Lee", "user", ("Archie",), "Can you draft the deployment checklist?"),
    ("Q9:7", "Archie", "assistant", ("Lee",), "Here is a deployment checklist draft."),
    ("Q9:8", "Lee", "user", ("Ana",), "Lunch at noon at the noodle bar?"),
    ("Q9:9", "Ana", "user", ("Lee",), "Sure, see you there."),
    ("Q9:10", "Ana", "user", ("Archie",), "Thanks, talk tomorrow."),
)


def chat(cid: str = "chat") -> Conversation:
    msgs = tuple(
        Message(
            id=mid,
            conversation=cid,
            session=1,
            speaker=speaker,
            text=text,
            timestamp=T0 + timedelta(minutes=n),
            role=role,  # type: ignore[arg-type]
            addressees=to,
            session_start=T0,
            seq=n,
        )
        for n, (mid, speaker, role, to, text) in enumerate(TURNS)
    )
    return Conversation(
        id=cid,
        participants=("Ana", "Archie", "Lee", "system"),
        messages=msgs,
        sessions=(Session(cid, 1, T0),),
    )


def ids(found) -> list[str]:
    return [m.id for m in found]


@pytest.fixture
def mem(tmp_path: Path):
    m = MemoryService(tmp_path / "sel.db", embedder=FakeEmbedder(), settings=Settings())
    m.add([chat(), cara_dan()])
    yield m
    m.close()


@pytest.mark.parametrize(
    ("view", "person", "expected"),
    [
        (ALL_INVOLVING, "Ana", ["Q9:1", "Q9:2", "Q9:3", "Q9:4", "Q9:5", "Q9:8", "Q9:9", "Q9:10"]),
        (SENT_BY_ME, "Ana", ["Q9:2", "Q9:4", "Q9:9", "Q9:10"]),
        (SENT_TO_ME, "Ana", ["Q9:3", "Q9:5", "Q9:8"]),
        (SYSTEM_AND_ME, "Ana", ["Q9:1", "Q9:2", "Q9:4", "Q9:9", "Q9:10"]),
        (REQUEST_RESPONSE, "Ana", ["Q9:1", "Q9:2", "Q9:3", "Q9:4", "Q9:5", "Q9:8", "Q9:9"]),
        (SENT_TO_ME, "Archie", ["Q9:2", "Q9:4", "Q9:6", "Q9:10"]),
        (SENT_BY_ME, "archie", ["Q9:3", "Q9:5", "Q9:7"]),  # names match case-insensitively
        (REQUEST_RESPONSE, "Lee", ["Q9:1", "Q9:6", "Q9:7", "Q9:8", "Q9:9"]),
    ],
)
def test_each_view_returns_its_messages(mem, view, person, expected) -> None:
    found = select(mem.core, person, view)
    assert ids(found) == expected
    assert found.view == view.name and found.method == "view"


def test_views_are_frozen_and_named() -> None:
    assert get_view("sent_to_me") is SENT_TO_ME
    with pytest.raises(InputError, match="unknown view"):
        get_view("everything")
    with pytest.raises(AttributeError):
        ALL_INVOLVING.sent = False  # type: ignore[misc]


def test_goldfish_remembers_nothing(mem) -> None:
    assert list(select(mem.core, "Ana", GOLDFISH)) == []
    assert list(select(mem.core, "Ana", "goldfish", memorize_to="billing", at_most=3)) == []


def test_other_conversations_system_messages_are_not_mine(mem) -> None:
    mem.add(Conversation("cd2", ("Cara",), (_system("cd2"),), (Session("cd2", 1, T0),)))
    assert ids(select(mem.core, "Cara", ALL_INVOLVING)) == ["D1:1", "D1:2"]
    assert "S:1" not in ids(select(mem.core, "Ana"))


def _system(cid: str) -> Message:
    return Message("S:1", cid, 1, "system", "Be terse.", T0, role="system", seq=0)


def test_system_messages_survive_at_most(mem) -> None:
    assert ids(select(mem.core, "Ana", at_most=2)) == ["Q9:1", "Q9:9", "Q9:10"]
    assert ids(select(mem.core, "Ana", at_most=0)) == ["Q9:1"]
    assert ids(select(mem.core, "Ana", SENT_BY_ME, at_most=1)) == ["Q9:10"]


def test_at_most_keeps_request_response_pairs_whole(mem) -> None:
    assert ids(select(mem.core, "Ana", REQUEST_RESPONSE, at_most=3)) == ["Q9:1", "Q9:8", "Q9:9"]
    assert ids(select(mem.core, "Ana", REQUEST_RESPONSE, at_most=1)) == ["Q9:1"]


def test_request_pairs_do_not_overlap() -> None:
    pairs = request_pairs(chat().messages, "ana")
    assert [(a.id, b.id) for a, b in pairs] == [
        ("Q9:2", "Q9:3"),
        ("Q9:4", "Q9:5"),
        ("Q9:8", "Q9:9"),
    ]


def test_selection_never_changes_the_stored_log(mem, tmp_path: Path) -> None:
    db = tmp_path / "sel.db"
    before = (table_counts(db), mem.store.existing_hashes("chat"), len(mem.claims(limit=1000)))
    for view in (ALL_INVOLVING, SENT_BY_ME, SENT_TO_ME, SYSTEM_AND_ME, REQUEST_RESPONSE, GOLDFISH):
        select(mem.core, "Ana", view, memorize_to="billing API", at_most=2)
        select(mem.core, "Ana", view)
    after = (table_counts(db), mem.store.existing_hashes("chat"), len(mem.claims(limit=1000)))
    assert after == before


def test_memorize_to_with_an_llm_validates_aliases(mem) -> None:
    llm = FakeLLM({"matches": [2, 5, 99, 0]})
    found = select(mem.core, "Ana", memorize_to="requirements, API design", llm=llm)
    # candidates: Q9:1 Q9:2 Q9:3 Q9:4 Q9:5 Q9:8 Q9:9 Q9:10 -> aliases 2 and 5 are Q9:2, Q9:5
    assert ids(found) == ["Q9:2", "Q9:5"]
    assert found.method == "llm:fake-llm" and found.dropped_aliases == 2
    prompt = llm.calls[0]["messages"][-1]["content"]
    assert "requirements, API design" in prompt
    assert "[1]" in prompt and "[8]" in prompt and "[9]" not in prompt
    assert "Q9:" not in prompt  # aliases, never raw ids
    assert llm.calls[0]["schema"]["properties"]["matches"]["type"] == "array"


def test_memorize_to_with_an_llm_batches_long_candidate_lists(mem) -> None:
    llm = FakeLLM({"matches": [1]}, {"matches": [3]}, {"matches": [2]})
    found = select(mem.core, "Ana", memorize_to="anything", llm=llm, config=SelectConfig(batch=3))
    assert len(llm.calls) == 3  # 8 candidates in batches of 3
    # batches Q9:1-3 | Q9:4,5,8 | Q9:9,10: alias 1 of the first, 3 of the second, 2 of the third
    assert ids(found) == ["Q9:1", "Q9:8", "Q9:10"]


def test_a_failed_llm_falls_back_to_retrieval_and_says_so(mem) -> None:
    found = select(mem.core, "Ana", memorize_to="billing invoices", llm=FakeLLM(LLMRefused("no")))
    assert found.method.startswith("retrieval (llm failed")
    assert "Q9:2" in ids(found)


def test_memorize_to_without_an_llm_uses_retrieval(mem) -> None:
    found = select(mem.core, "Ana", memorize_to="billing API refunds")
    assert found.method == "retrieval"
    assert {"Q9:2", "Q9:3", "Q9:4"} <= set(ids(found))
    assert not {"Q9:8", "Q9:9", "Q9:10"} & set(ids(found))
    assert ids(found) == sorted(ids(found), key=lambda i: int(i.split(":")[1]))  # log order


def test_criteria_keep_request_response_pairs_whole(mem) -> None:
    found = select(mem.core, "Ana", REQUEST_RESPONSE, memorize_to="lunch noodle bar")
    assert ids(found) == ["Q9:8", "Q9:9"]  # "Sure, see you there." comes with its request


def test_at_most_with_criteria_keeps_the_most_relevant(mem) -> None:
    found = select(mem.core, "Ana", memorize_to="refunds", at_most=1)
    assert ids(found) in (["Q9:3"], ["Q9:4"])


def test_bad_arguments(mem) -> None:
    with pytest.raises(InputError):
        select(mem.core, "Ana", at_most=-1)
    with pytest.raises(InputError):
        select(mem.core, " ")


@pytest.fixture
def with_cli():
    """The command group with this module's commands (main.py registers them in the build)."""
    from archivist.cli import context as commands

    if "select" not in cli.commands:
        commands.register(cli)
    return cli


def test_service_select_and_cli(mem, tmp_path: Path, with_cli) -> None:
    assert ids(mem.select("Ana", "sent_by_me", conversation="chat")) == [
        "Q9:2",
        "Q9:4",
        "Q9:9",
        "Q9:10",
    ]
    mem.close()
    base = ["--db", str(tmp_path / "sel.db"), "--embedder", "fake", "select"]
    result = CliRunner().invoke(cli, [*base, "Ana", "--at-most", "1", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [m["id"] for m in data["messages"]] == ["Q9:1", "Q9:10"]
    assert data["view"] == "all_involving" and data["method"] == "view"
    result = CliRunner().invoke(cli, [*base, "Ana", "--view", "goldfish"])
    assert result.exit_code == 0 and "0 of 0 messages" in result.stdout
