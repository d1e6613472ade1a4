"""Context assembly: budget, section order, summaries, continuity, coverage, foresight expiry."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from archivist.cli.main import cli
from archivist.config import Settings
from archivist.errors import InputError
from archivist.lang.text import stem
from archivist.model import Message
from archivist.read.context import (
    DEFAULT_CONTEXT,
    SECTIONS,
    Candidate,
    ContextItem,
    assemble_context,
    estimate_tokens,
    pack,
)
from archivist.read.context_lines import days_once, excerpt, message_line
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder
from conftest import make_conversation

SESSIONS = (
    (
        ("Ana", "I adopted a cat yesterday, a grey one called Pixel."),
        ("Lee", "Pixel is adorable. Is he friendly?"),
        ("Ana", "Very, he already sleeps on my pillow."),
    ),
    (
        ("Ana", "The night shifts at the hospital are tiring me out."),
        ("Lee", "You should ask your head nurse for fewer consecutive nights."),
    ),
    (
        ("Ana", "My sister Marta and I are planning a trip to the Azores next month."),
        ("Lee", "The Azores are beautiful in June."),
    ),
    (
        ("Ana", "I'm on antibiotics for 10 days, so no alcohol for me."),
        ("Lee", "Get well soon, Ana."),
    ),
    (
        ("Ana", "Pixel knocked my coffee off the table this morning."),
        ("Lee", "Cats love gravity experiments."),
        ("Ana", "I started learning Portuguese for the Azores trip."),
    ),
)
AFTER = datetime(2023, 6, 6, tzinfo=UTC)  # the day after the last session
QUESTION = "How is the Azores trip planning going?"


def _memory(path: Path, mode: str = "inline") -> MemoryService:
    m = MemoryService(path, embedder=FakeEmbedder(), settings=Settings(consolidate_mode=mode))
    m.add(make_conversation("c1", SESSIONS))
    return m


@pytest.fixture
def mem(tmp_path: Path):
    m = _memory(tmp_path / "ctx.db")
    yield m
    m.close()


@pytest.fixture
def raw(tmp_path: Path):
    """Claims extracted, but no consolidation (no summaries, dossiers or key info)."""
    m = _memory(tmp_path / "raw.db", mode="manual")
    yield m
    m.close()


# Every section shown, whatever the budget: this small chat would otherwise be shown
# whole (it fits), and summaries and entities need a budget of 2,000 tokens. Claims
# and messages ranked by score alone: in a chat this small a turn's message is often
# shorter than its claim, and these tests are about what a claim shows.
STRUCTURED = replace(DEFAULT_CONTEXT, whole_history=False, overview_from=0, cost_weight=0.0)


def ctx_for(mem: MemoryService, budget: int = 1500, **kw):
    kw.setdefault("at", AFTER)
    return mem.context(QUESTION, person="Ana", conversation="c1", budget_tokens=budget, **kw)


def structured(mem: MemoryService, question: str = QUESTION, budget: int = 1500, **kw):
    kw.setdefault("at", AFTER)
    kw.setdefault("conversation", "c1")
    return assemble_context(
        mem.core, question, person="Ana", budget_tokens=budget, config=STRUCTURED, **kw
    )


def test_a_history_that_fits_is_shown_whole_in_order(mem) -> None:
    """Everything said fits the budget: the context is that history, dated, oldest
    first, and no longer than it; nothing restates it (no key info, no claims)."""
    ctx = ctx_for(mem, 1500)
    assert {i.kind for i in ctx.items} == {"message"}
    assert ctx.text.startswith("## Earlier messages, oldest first")
    shown = [i.id for i in ctx.items]
    said = [f"c1/{m.id}" for _, m in mem.store.conversation_messages("c1")]
    assert shown == said
    # too small a budget for all of it: the sections come back, most relevant first
    small = ctx_for(mem, 120)
    assert small.items and not small.text.startswith("## Earlier messages")
    assert len(small.items) < len(said)


@pytest.mark.parametrize("budget", [20, 60, 150, 400, 1500, 40_000])  # 40,000: 1,600 hits asked
def test_context_stays_within_its_budget(mem, budget: int) -> None:
    ctx = ctx_for(mem, budget)
    assert ctx.tokens <= budget
    assert estimate_tokens(ctx.text) <= budget
    assert sum(i.tokens for i in ctx.items) <= ctx.tokens


def test_sections_come_in_design_order(mem) -> None:
    ctx = structured(mem)
    titles = [t for _, t in SECTIONS]
    shown = [line[3:] for line in ctx.text.splitlines() if line.startswith("## ")]
    assert shown == [t for t in titles if t in shown]
    assert {"Key info", "Summaries", "Messages"} <= set(shown)
    order = [k for k, _ in SECTIONS]
    ranks = [order.index(i.kind) for i in ctx.items]
    assert ranks == sorted(ranks)


def test_items_match_the_text(mem) -> None:
    ctx = ctx_for(mem, 400)
    lines = [line[2:] for line in ctx.text.splitlines() if line.startswith("- ")]
    assert lines == [i.text for i in ctx.items]
    assert len({(i.kind, i.id) for i in ctx.items}) == len(ctx.items)
    assert ctx.records() == [(i.kind, i.id, i.text, round(i.score, 4)) for i in ctx.items]
    log_id = mem.record_context(ctx.records(), "Going well, thanks!", "Ana", "c1")
    assert log_id > 0


def test_summaries_run_from_the_longest_span_to_the_most_recent(mem) -> None:
    ctx = structured(mem)
    by_id = {str(s.id): s for s in mem.summaries("c1")}
    shown = [by_id[i.id] for i in ctx.items if i.kind == "summary"]
    assert [s.level for s in shown] == [2, 1]  # sessions 1-4 rolled up, then session 5
    assert shown[1].covers == (5,)


def test_what_a_shown_summary_says_is_skipped(mem, raw) -> None:
    ctx = structured(mem, "Did Ana adopt a cat?")
    summaries = " ".join(i.text for i in ctx.items if i.kind == "summary")
    assert "adopted a cat" in summaries
    assert not [i for i in ctx.items if i.kind == "claim" and "adopted a cat" in i.text]
    assert not [i for i in ctx.items if i.kind == "message" and "adopted a cat" in i.text]
    # with nothing summarised, the same claim is there to be shown
    bare = structured(raw, "Did Ana adopt a cat?")
    assert [i for i in bare.items if i.kind == "claim" and "adopted a cat" in i.text]


def test_key_info_dossiers_and_claims_carry_who_and_when(mem, raw) -> None:
    ctx = structured(mem)
    assert any(i.kind == "key_info" and i.text.startswith("Ana: ") for i in ctx.items)
    assert any(i.kind == "dossier" and i.text.startswith("Azores") for i in ctx.items)
    bare = structured(raw)
    claim = next(i for i in bare.items if i.kind == "claim" and "Azores next month" in i.text)
    assert claim.text.startswith("[22 May 2023] Ana (foresight)")
    assert "the Azores next month [June 2023]" in claim.text  # resolved where it stands
    message = next(i for i in bare.items if i.kind == "message")
    # a two-person chat: every message is to the other one, so no arrow says so
    assert re.match(r"\[\d{1,2} \w+ 2023\] \w+: ", message.text)


def test_an_arrow_names_the_addressees_only_when_they_are_not_everyone_else() -> None:
    said = Message(
        id="1",
        conversation="c",
        session=1,
        speaker="Ana",
        text="See you tomorrow.",
        timestamp=datetime(2023, 5, 8, 9, tzinfo=UTC),
        addressees=("Lee",),
    )
    assert message_line(said, ["Ana", "Lee"]) == "[8 May 2023] Ana: See you tomorrow [9 May 2023]."
    assert message_line(said, ["Ana", "Lee", "Mia"]).startswith("[8 May 2023] Ana → Lee: ")
    assert message_line(said).startswith("[8 May 2023] Ana → Lee: ")  # participants unknown


def test_the_last_turns_are_always_offered(mem) -> None:
    ctx = ctx_for(mem, 400)
    shown = {i.id for i in ctx.items if i.kind == "message"}
    assert {"c1/D5:2", "c1/D5:3"} <= shown


def test_expired_foresight_leaves_the_context(raw) -> None:
    q = "Can Ana drink alcohol?"
    # person only: no last turns pinned, which would show the message and not its claim
    during = structured(raw, q, conversation=None, at=datetime(2023, 6, 1, tzinfo=UTC))
    later = structured(raw, q, conversation=None, at=datetime(2023, 6, 20, tzinfo=UTC))
    assert any(i.kind == "claim" and "antibiotics" in i.text for i in during.items)
    assert not any(i.kind == "claim" and "antibiotics" in i.text for i in later.items)
    # the whole history: the message stays, marked as history once the window is over
    during = raw.context(q, person="Ana", at=datetime(2023, 6, 1, tzinfo=UTC))
    later = raw.context(q, person="Ana", at=datetime(2023, 6, 20, tzinfo=UTC))
    (now,) = [i.text for i in during.items if "antibiotics" in i.text]
    (then,) = [i.text for i in later.items if "antibiotics" in i.text]
    assert "[history]" not in now and "[history]" in then


def test_nothing_said_after_the_turn_is_shown(mem) -> None:
    ctx = ctx_for(mem, at=datetime(2023, 5, 23, tzinfo=UTC))
    assert "Portuguese" not in ctx.text and "gravity" not in ctx.text
    assert all(i.id not in {"5", "6"} for i in ctx.items if i.kind == "summary")


def _claim(i: int, text: str) -> Candidate:
    when = datetime(2023, 5, 8, tzinfo=UTC)
    return Candidate("claim", str(i), text, relevance=0.5, when=when, conversation="c")


def test_continuity_prefers_last_turns_item_over_an_equal_one() -> None:
    a = _claim(1, "Ana likes green tea with honey in the morning.")
    b = _claim(2, "Ana likes black tea with lemon in the evening.")
    # header 10 + one line 13 tokens; below 2,000 tokens claims get 20 % of 120 = 24:
    # room for one line only
    budget = 120
    first = pack({"claim": [a, b]}, budget, AFTER)
    assert [i.id for i in first.items] == ["1"]  # equal scores: a stable choice
    again = pack({"claim": [a, b]}, budget, AFTER, previous=frozenset({("claim", "2")}))
    assert [i.id for i in again.items] == ["2"]


def test_continuity_through_the_service(mem) -> None:
    first = ctx_for(mem, 300)
    again = ctx_for(mem, 300, previous=first.items)
    before = {(i.kind, i.id): i.score for i in first.items}
    for item in again.items:
        if (item.kind, item.id) in before and item.kind in ("dossier", "claim", "message"):
            assert item.score == pytest.approx(before[(item.kind, item.id)] + 0.1)
    assert {(i.kind, i.id) for i in again.items} == set(before)


def test_pack_skips_a_summary_spanned_by_a_shown_one_and_covered_claims() -> None:
    big = Candidate("summary", "9", "Ana adopted Pixel. Ana works night shifts.", conversation="c")
    big = Candidate(**{**big.__dict__, "covers": frozenset({1, 2})})
    small = Candidate("summary", "3", "Ana works night shifts.", conversation="c")
    small = Candidate(**{**small.__dict__, "covers": frozenset({2})})
    said = Candidate("claim", "1", "[x] Ana adopted Pixel.", conversation="c", skippable=True)
    said = Candidate(**{**said.__dict__, "body": "Ana adopted Pixel."})
    new = Candidate("claim", "2", "Ana plans a trip to Lisbon.", conversation="c", skippable=True)
    ctx = pack({"summary": [big, small], "claim": [said, new]}, 500, AFTER, config=STRUCTURED)
    assert [(i.kind, i.id) for i in ctx.items] == [("summary", "9"), ("claim", "2")]


def test_previous_accepts_items_or_triples(mem) -> None:
    first = ctx_for(mem, 300)
    triples = ctx_for(mem, 300, previous=first.records())
    items = ctx_for(mem, 300, previous=first.items)
    assert triples.items == items.items
    assert isinstance(first.items[0], ContextItem)


def test_bad_arguments(mem) -> None:
    with pytest.raises(InputError):
        mem.context(QUESTION, budget_tokens=0)
    with pytest.raises(InputError):
        mem.context(QUESTION, at=datetime(2023, 6, 1))


def test_an_empty_question_still_gives_recent_context(mem) -> None:
    ctx = mem.context("", person="Ana", conversation="c1", at=AFTER)
    assert any(i.kind == "message" and i.id == "c1/D5:3" for i in ctx.items)


def test_cli_context_json(mem, tmp_path: Path) -> None:
    from archivist.cli import context as commands

    if "context" not in cli.commands:
        commands.register(cli)
    mem.close()
    args = ["--db", str(tmp_path / "ctx.db"), "--embedder", "fake", "context", QUESTION]
    opts = ["--person", "Ana", "--conversation", "c1", "--budget", "200"]
    result = CliRunner().invoke(cli, [*args, *opts, "--at", "2023-06-06T00:00+00:00", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["tokens"] <= 200 and data["items"]
    assert {i["kind"] for i in data["items"]} <= {k for k, _ in SECTIONS} - {"log"}
    plain = CliRunner().invoke(cli, [*args, *opts, "--at", "2023-06-06T00:00+00:00"])
    assert "\n- [" in plain.stdout and "items, ~" in plain.stdout  # dated lines, a footer


def test_context_for_someone_only_talked_about_finds_what_was_said_of_them(
    tmp_path: Path,
) -> None:
    """Ingrid never speaks; her brother tells of her. A context asked for her finds
    those messages by her name instead of a speaker filter that matches nothing."""
    from archivist.service import MemoryService
    from archivist.testing import FakeEmbedder

    chat = [
        [("Lars", "My sister Ingrid drove us up to the cabin in her old Volvo."), ("Ana", "Fun")]
    ]
    with MemoryService(tmp_path / "c.db", embedder=FakeEmbedder()) as m:
        m.add(make_conversation("cabin", chat, people=("Lars", "Ana")))
        shown = m.context("What did Ingrid drive?", person="Ingrid")
    assert "Volvo" in shown.text


def test_a_short_reply_comes_with_its_question_or_not_at_all() -> None:
    when = datetime(2023, 5, 8, 9, tzinfo=UTC)
    ask = Candidate("message", "c/1", "[8 May 2023] Lee → Ana: How many cats do you have now?")
    ask = replace(ask, when=when, body="How many cats do you have now?")
    reply = Candidate("message", "c/2", "[8 May 2023] Ana → Lee: Two of them.", relevance=1.0)
    reply = replace(reply, when=when.replace(hour=10), body="Two of them.", prompt=ask)
    both = pack({"message": [reply]}, 100, AFTER)
    assert [i.id for i in both.items] == ["c/1", "c/2"]  # the question first
    # room for the reply alone: a bare "Two of them." is not shown
    alone = estimate_tokens("## Messages") + estimate_tokens(f"- {reply.text}")
    assert pack({"message": [reply]}, alone + 2, AFTER).items == ()


def test_a_found_short_reply_brings_its_question(tmp_path: Path) -> None:
    chat = make_conversation(
        "cats",
        [
            [("Lee", "How many cats do you have now?"), ("Mei", "Two of them.")],
            [("Mei", "The vet visit went fine, the grey one is healthy.")],
        ],
    )
    with MemoryService(tmp_path / "m.db", embedder=FakeEmbedder()) as m:
        m.add(chat)
        found = m.search("Two of them", conversation="cats", k=1)
        assert [h.message.text for h in found] == ["Two of them."]
        hits_only = replace(STRUCTURED, search_k=1, tokens_per_hit=10**6, recent_messages=0)
        ctx = assemble_context(
            m.core, "Two of them", conversation="cats", budget_tokens=400, config=hits_only
        )
    texts = [i.text for i in ctx.items if i.kind == "message"]
    assert any("Two of them." in t for t in texts)
    reply = next(i for i, t in enumerate(texts) if "Two of them." in t)
    assert reply > 0 and "How many cats" in texts[reply - 1]


def test_a_line_cut_to_fit_says_so() -> None:
    text = " ".join(f"word{i}" for i in range(60))
    long = Candidate("message", "c/D1:1", text, relevance=0.5, when=AFTER, conversation="c")
    (item,) = pack({"message": [long]}, 60, AFTER).items
    assert item.text.endswith("… [cut]") and len(item.text.split()) < 60


def test_a_long_turn_that_does_not_fit_whole_shows_what_bears_on_the_question() -> None:
    filler = " ".join(f"Sentence {i} is about the garden." for i in range(12))
    text = f"[3 May 2024] Ana: {filler} The plumber comes on Friday. {filler}"
    short = excerpt(text, {stem("plumber")}, 40)
    assert short == "[3 May 2024] Ana: … The plumber comes on Friday. …"
    assert excerpt(text, {stem("piano")}, 40) == text  # nothing bears on it: whole
    assert excerpt("Ana: The plumber comes on Friday.", {stem("plumber")}, 40).startswith(
        "Ana: The"
    )
    cand = Candidate(
        "message", "c/D1:1", text, relevance=0.5, when=AFTER, conversation="c", excerpt=short
    )
    (item,) = pack({"message": [cand]}, 40, AFTER).items
    assert item.text == "[3 May 2024] Ana: … The plumber comes on Friday. …"
    (whole,) = pack({"message": [cand]}, 400, AFTER).items  # it fits: shown whole
    assert whole.text.startswith("[3 May 2024] Ana: Sentence 0") and "…" not in whole.text


def test_context_excerpts_a_long_found_turn_only_where_it_would_not_fit(tmp_path: Path) -> None:
    chatter = " ".join(f"Day {i} of the trip was sunny and calm." for i in range(15))
    chat = make_conversation(
        "trip", [[("Ana", f"{chatter} My passport is in the blue drawer. {chatter}")]]
    )
    with MemoryService(tmp_path / "m.db", embedder=FakeEmbedder()) as m:
        m.add(chat)
        question = "Where is Ana's passport?"
        no_log = replace(DEFAULT_CONTEXT, whole_history=False)
        small = assemble_context(
            m.core, question, conversation="trip", budget_tokens=60, config=no_log
        )
        large = assemble_context(
            m.core, question, conversation="trip", budget_tokens=400, config=no_log
        )
    (line,) = [i.text for i in small.items if i.kind == "message"]
    assert "… My passport is in the blue drawer. …" in line and "[cut]" not in line
    assert [i.text.count("Day") for i in large.items if i.kind == "message"] == [30]


def _long_chat() -> list:
    """Enough small talk that no budget below shows the whole history."""
    filler = [
        ("Lee", f"Weekend {i}: I repaired the shed roof and painted fence panel {i}.")
        for i in range(30)
    ]
    told = (
        "Ana",
        'I loved "Becoming Nicole" by Amy Ellis Nutt. It is a true story about a '
        "family finding its way. It made me feel hopeful. Highly recommend it for sure!",
    )
    return [filler[:15], [told, ("Lee", "Lee's words mean a lot to Ana, says Lee.")], filler[15:]]


def test_a_claim_of_one_sentence_brings_its_whole_turn(tmp_path: Path) -> None:
    """A claim that is a fragment of its turn ("Highly recommend it for sure!") is not
    shown alone: the turn is, naming the book, and nothing of it twice."""
    m = MemoryService(tmp_path / "m.db", embedder=FakeEmbedder())
    m.add(make_conversation("c1", _long_chat()))
    ctx = m.context("What book did Ana recommend to Lee?", conversation="c1", budget_tokens=220)
    assert "Becoming Nicole" in ctx.text
    lines = [line for line in ctx.text.splitlines() if line.startswith("- ")]
    assert not any(
        line.endswith("Highly recommend it for sure!") and "Nicole" not in line for line in lines
    )
    assert sum("Becoming Nicole" in line for line in lines) == 1  # one line per turn
    m.close()


def test_key_info_is_shown_whole_or_not_at_all() -> None:
    fact = Candidate("key_info", "p1", "Ana: Work: " + " ".join(["word"] * 40))
    ctx = pack({"key_info": [fact]}, 200, AFTER)
    assert not any(i.kind == "key_info" for i in ctx.items)  # 10 tokens of room: no cut fact
    ctx = pack({"key_info": [fact]}, 2000, AFTER)
    assert [i.kind for i in ctx.items] == ["key_info"] and "[cut]" not in ctx.text


def _said(i: int, day: int, hour: int, text: str, relevance: float = 0.5) -> Candidate:
    when = datetime(2023, 5, day, hour, tzinfo=UTC)
    line = f"[{day} May 2023] Ana → Lee: {text}"
    return Candidate(
        "message",
        f"c/{i}",
        line,
        relevance=relevance,
        when=when,
        conversation="c",
        skippable=True,
        body=text,
        evidence=frozenset({("c", str(i))}),
    )


def test_days_once_writes_each_day_on_its_first_line() -> None:
    lines = ["[8 May 2023] Ana: a", "[8 May 2023] Lee: b", "[9 May 2023] Ana: c", "Lee: d"]
    assert days_once(lines) == ["[8 May 2023] Ana: a", "Lee: b", "[9 May 2023] Ana: c", "Lee: d"]


def test_a_day_is_written_once_and_its_lines_cost_what_they_show() -> None:
    """Whatever order the lines are chosen in, the day is on the first line of it."""
    lines = [
        _said(2, 8, 11, "The Azores trip is booked for June.", relevance=1.0),
        _said(1, 8, 9, "Marta is coming to the Azores too.", relevance=0.9),
        _said(3, 9, 9, "I started learning Portuguese.", relevance=0.8),
    ]
    ctx = pack({"message": lines}, 200, AFTER)
    assert ctx.text.splitlines() == [
        "## Messages",
        "- [8 May 2023] Ana → Lee: Marta is coming to the Azores too.",
        "- Ana → Lee: The Azores trip is booked for June.",
        "- [9 May 2023] Ana → Lee: I started learning Portuguese.",
    ]
    assert ctx.tokens == estimate_tokens("## Messages") + sum(i.tokens for i in ctx.items)
    assert all(i.tokens == estimate_tokens(f"- {i.text}") for i in ctx.items)
    for budget in range(20, 60):  # packed to any budget, the text never costs more
        small = pack({"message": lines}, budget, AFTER)
        assert small.tokens <= budget
        assert small.tokens == sum(estimate_tokens(x) for x in small.text.splitlines())


def test_a_claim_does_not_push_out_a_message_that_outranks_it() -> None:
    """Claims and messages are ranked together: a claims section filled first left out
    search hits that held what a LoCoMo question needed."""
    hit = _said(1, 8, 9, "The store is doing great, sales doubled this month.", relevance=1.0)
    weak = replace(_claim(7, "[8 May 2023] Ana (fact): Ana likes her job."), relevance=0.2)
    strong = replace(_claim(8, "[8 May 2023] Ana (plan): Ana opens a second store."), relevance=1)
    one_line = estimate_tokens("## Messages") + estimate_tokens(f"- {hit.text}") + 2
    ctx = pack({"claim": [weak], "message": [hit]}, one_line, AFTER)
    assert [i.id for i in ctx.items] == ["c/1"]
    both = pack({"claim": [weak, strong], "message": [hit]}, 120, AFTER)
    assert [i.id for i in both.items] == ["8", "c/1"]  # claims first in the text


def test_a_message_is_not_dropped_for_words_other_lines_hold() -> None:
    """Only an assistant's echo is judged against everything shown: "The store's doing
    great!" says something new even when 'store' and 'great' are on other lines."""
    lines = [
        _said(1, 8, 9, "My store opened, a great day.", relevance=1.0),
        _said(2, 8, 10, "The store is doing great!", relevance=0.9),
    ]
    assert [i.id for i in pack({"message": lines}, 200, AFTER).items] == ["c/1", "c/2"]
    echo = replace(lines[1], reply=True)
    assert [i.id for i in pack({"message": [lines[0], echo]}, 200, AFTER).items] == ["c/1"]


def test_a_claim_of_a_shown_turn_is_not_shown() -> None:
    hit = _said(1, 8, 9, "I'm on antibiotics for 10 days, so no alcohol for me.", relevance=1)
    claim = replace(
        _claim(5, "[8 May 2023] Ana (foresight): Ana takes no alcohol (until 18 May 2023)."),
        relevance=0.9,
        evidence=frozenset({("c", "1")}),
    )
    assert [i.id for i in pack({"claim": [claim], "message": [hit]}, 200, AFTER).items] == ["c/1"]
