"""Issue 13: open-ended state changes, and reads that mark what no longer holds as history."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from archivist.config import Settings
from archivist.lang.text import ended_objects
from archivist.model import Claim
from archivist.read.context import DEFAULT_CONTEXT, assemble_context
from archivist.read.history import HISTORY_MARK, Bygones, replaced_since
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder
from archivist.write.archivist import HeuristicArchivist
from archivist.write.reconcile import changed_aspect, reconcile_claims
from conftest import RULES, make_conversation

# every section, not the whole history these small chats fit in
STRUCTURED = replace(DEFAULT_CONTEXT, whole_history=False, overview_from=0)

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def claim(text: str, days: int = 0, kind: str = "fact") -> Claim:
    who = text.split()[0].split("'")[0]
    return Claim(text, who, who, "c", ("1",), T0 + timedelta(days=days), kind=kind)


@pytest.mark.parametrize(
    ("old", "new", "aspect"),
    [
        (
            "Ruth sings in the church choir.",
            "Ruth left the choir; she plays in a band now.",
            "choi",
        ),
        ("Olek smokes a pack a day.", "Olek quit smoking in January.", "smok"),
        ("Aisling is on crutches for six weeks.", "Aisling needs no crutches anymore.", "crut"),
        ("Ingrid drives her minivan to work.", "Ingrid sold the minivan; she cycles.", "mini"),
        ("Ana manages the payments team.", "Ana has moved to lead the fraud team.", "team"),
    ],
)
def test_a_change_cue_over_a_shared_aspect_ends_the_older_state(old, new, aspect) -> None:
    assert changed_aspect(claim(new, 30), claim(old)) == aspect


@pytest.mark.parametrize(
    ("old", "new", "old_kind"),
    [
        ("Rahul plays guitar in a band.", "Rahul also joined a chess club.", "fact"),
        ("Mei has a cat called Miso.", "Mei adopted a second cat, so now she has two.", "fact"),
        ("Rahul ran a marathon in May.", "Rahul is now training for a marathon.", "event"),
        ("Priya works at the bank downtown.", "Priya now walks to work since she moved.", "fact"),
        ("Priya loves her job at the bank.", "Priya is now vegan.", "fact"),
        ("Joanna dances with Andrew.", "Joanna stopped calling Andrew.", "fact"),
        # a negated cue changes nothing; the aspect must be in the cue's own clause
        ("Jon loves seeing his students succeed.", "Jon won't quit, his students succeed.", "fact"),
        ("Rahul plays guitar in a band.", "Rahul left the choir, the band keeps him busy.", "fact"),
        ("Jo waters the garden daily.", "Jo and Sam moved to the garden for drinks.", "fact"),
    ],
)
def test_additions_events_and_unrelated_news_end_nothing(old, new, old_kind) -> None:
    assert changed_aspect(claim(new, 30), claim(old, kind=old_kind)) is None


def memory(path: Path) -> MemoryService:
    return MemoryService(
        path,
        settings=Settings(judge="rules", consolidate_mode="manual"),
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(),
    )


def test_a_quit_choir_is_history_in_context_and_the_band_is_current(tmp_path: Path) -> None:
    conv = make_conversation(
        "ruth",
        [
            [("Ruth", "I sing in the church choir every Thursday."), ("Lee", "Lovely.")],
            [("Ruth", "I left the choir, I play bass in a band now."), ("Lee", "Rock on!")],
        ],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        (c,) = mem.conflicts()
        assert c.attribute == "choi" and c.kind == "evolution"
        ctx = assemble_context(
            mem.core, "Is Ruth in a choir?", person="Ruth", conversation="ruth", config=STRUCTURED
        )
        lines = [line for line in ctx.text.splitlines() if "every Thursday" in line]
        assert lines and all(HISTORY_MARK in line for line in lines)
        # the ending clause is marked where it ends; the band, after it, reads as current
        band = [line for line in ctx.text.splitlines() if "band now" in line]
        assert band and all("no longer holds" not in line for line in band)
        assert all(
            re.search(rf"left the choir {re.escape(HISTORY_MARK)}, \S+ plays? bass", line)
            for line in band
        )
        before = mem.context(
            "Is Ruth in a choir?", person="Ruth", at=c.new_time - timedelta(seconds=1)
        )
        assert "every Thursday" in before.text and HISTORY_MARK not in before.text


def test_an_attribute_the_speaker_holds_conflicts_whatever_the_subject_reads(
    tmp_path: Path,
) -> None:
    """The heuristic reads "Ava" as the subject of Priya's "Before Ava plans the menu:
    I went vegan"; the diet is still Priya's, and it replaces her pescatarian one."""
    conv = make_conversation(
        "diet",
        [
            [("Priya", "Seafood is perfect, I am pescatarian."), ("Ava", "Noted!")],
            [("Priya", "Before Ava plans the menu: I went fully vegan."), ("Ava", "Wow.")],
        ],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        assert [(c.old_value, c.new_value) for c in mem.conflicts()] == [("pescatarian", "vegan")]


def test_a_summary_marks_only_its_sentences_that_no_longer_hold(tmp_path: Path) -> None:
    one_session = [
        ("Ruth", "I sing in the church choir every Thursday."),
        ("Lee", "Lovely."),
        ("Ruth", "Actually scratch that, I left the choir, I play bass in a band now."),
    ]
    with memory(tmp_path / "m.db") as mem:
        mem.add(make_conversation("ruth", [one_session]))
        mem.consolidate()
        ctx = assemble_context(
            mem.core, "Is Ruth in a choir?", person="Ruth", conversation="ruth", config=STRUCTURED
        )
        (line,) = [s for s in ctx.text.splitlines() if "every Thursday." in s and "band now" in s]
        old, new = line.index("every Thursday."), line.index("band now")
        assert line.index(HISTORY_MARK) == old + len("every Thursday. ") < new
        assert HISTORY_MARK not in line[new:]  # the current sentence reads as current


def test_history_marks_keep_the_text_between_sentences() -> None:
    """Marking works sentence by sentence and leaves line breaks where they were."""
    since = datetime(2024, 8, 5, tzinfo=UTC)
    past = Bygones(values=(("lyon", "porto", since),))
    text = "I lived in Lyon.\nNow Porto is home!  Also: Lyon and Porto both."
    assert past.mark(text) == (
        f"I lived in Lyon. {HISTORY_MARK} (no longer holds from 5 August 2024)\n"
        "Now Porto is home!  Also: Lyon and Porto both."
    )
    assert past.mark("I moved on.\nAll good.") == "I moved on.\nAll good."


@pytest.mark.parametrize(
    ("sentence", "ended"),
    [
        ("Cancelled PureGym.", ["PureGym"]),
        ("I'm no longer managing the support team, I moved over.", ["support team"]),
        ("Lucía and I split up last month.", ["Lucía"]),
        ("Inês moved out to live with her boyfriend.", ["Inês"]),
        ("Last day at Nakamura today, there was cake.", ["Nakamura"]),
        ("I quit smoking in March.", ["smoking"]),
        ("Switched from the iPhone to a Pixel.", ["iPhone"]),
        ("Boot's off, crutches handed back to the hospital.", ["Boot", "crutches"]),
        ("Sold the car last week.", ["car"]),  # a short thing after "the", "my", "our"
        ("We had to say goodbye to Mochi yesterday.", ["Mochi"]),
        ("Gave up my job at the bank.", ["job"]),
        ("Honestly I quit the one I had.", []),
        # the new side of a switch, and endings that name nothing, end nothing
        ("Switched to a Pixel 8 last week.", []),
        ("I left early, there are only two left.", []),
        ("I won't quit the band.", []),
        ("Last week Maria dropped off that stuff.", []),
        ("I left work early today.", []),
    ],
)
def test_what_a_sentence_says_ended(sentence: str, ended: list[str]) -> None:
    assert ended_objects(sentence) == ended


def test_an_ending_that_names_an_older_state_closes_it(tmp_path: Path) -> None:
    """No shared lower-case aspect word ("PureGym" is a name) and a two-word sentence:
    the ending still closes what the same speaker said about the thing it names."""
    conv = make_conversation(
        "finn",
        [
            [("Finn", "I go to PureGym on Mondays and Fridays."), ("Lee", "Nice.")],
            [("Finn", "Cancelled PureGym. Joined a running club instead."), ("Lee", "Ha.")],
        ],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        (c,) = mem.conflicts()
        assert (c.attribute, c.old_value) == ("PureGym", "PureGym")
        (old,) = [x for x in mem.claims(conversation="finn") if "Mondays" in x.text]
        assert old.status == "superseded" and old.valid_to == c.new_time
        ctx = mem.context("How does Finn keep fit?", person="Finn", conversation="finn")
        assert all(HISTORY_MARK in line for line in ctx.text.splitlines() if "PureGym" in line)


def test_an_unrelated_mention_after_an_ending_stays_current(tmp_path: Path) -> None:
    """ "I left Tom a message" names no state of Tom's that ended."""
    conv = make_conversation(
        "tom",
        [
            [("Ana", "Tom is my best friend from school."), ("Lee", "Nice.")],
            [("Ana", "I left Tom a message about the party."), ("Lee", "Ok.")],
        ],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        assert mem.conflicts() == []


def test_a_replaced_value_is_found_as_words_not_inside_others() -> None:
    """Lee's fish ended; "a documentary about overfishing" does not say it holds."""
    since = T0 + timedelta(days=30)
    past = Bygones(values=(("fish", "", since),))
    assert HISTORY_MARK not in past.mark("I watched a documentary about overfishing.")
    assert HISTORY_MARK in past.mark("Fish tacos tonight.")
    assert HISTORY_MARK in past.mark("Two fishes from the market.")


def test_the_clause_that_says_something_ended_is_marked_where_it_ends() -> None:
    text = "Lucía and I split up last month. It was mutual."
    assert Bygones().mark(text) == (
        f"Lucía and I split up last month {HISTORY_MARK}. It was mutual."
    )


def test_key_info_is_the_profile_and_is_refreshed_when_a_fact_it_shows_is_replaced(
    tmp_path: Path,
) -> None:
    """Key info is written from the profile (dated facts, grouped), and an add that
    supersedes a fact it shows rewrites it at once, not a round later."""
    settings = Settings(judge="rules", consolidate_mode="inline", consolidate_every=50)
    first = make_conversation(
        "diet", [[("Priya", "I am pescatarian these days, fish but no meat."), ("Ava", "Ok!")]]
    )
    with MemoryService(
        tmp_path / "m.db",
        settings=settings,
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(),
    ) as mem:
        mem.add(first)
        mem.consolidate()
        (priya,) = [p for p in mem.persons() if p.name == "Priya"]
        before = mem.key_info(priya.id)
        assert "pescatarian" in before and "(since 2023-05-08)" in before
        later = make_conversation(
            "diet",
            [
                [("Priya", "I am pescatarian these days, fish but no meat."), ("Ava", "Ok!")],
                [("Priya", "I went fully vegan this month."), ("Ava", "Wow.")],
            ],
        )
        mem.add(later)  # no round is due (consolidate_every=50): only the refresh runs
        after = mem.key_info(priya.id)
        assert "vegan" in after and "pescatarian" not in after


def test_a_window_in_key_info_is_dated_and_read_as_history_once_it_has_passed(
    tmp_path: Path,
) -> None:
    """ "Here until Friday" is a foresight: key info written while it holds says until
    when, and a context read after that day marks it history (the snapshot is not
    rewritten when a window passes)."""
    from archivist.testing import FixedClock

    said = datetime(2024, 9, 16, 9, tzinfo=UTC)  # a Monday
    trip = make_conversation(
        "trip",
        [
            [
                ("Ana", "Landed in Lisbon for the conference! I'm here until Friday."),
                ("Lee", "Enjoy"),
            ]
        ],
        start=said,
    )
    with MemoryService(
        tmp_path / "m.db",
        settings=Settings(judge="rules", consolidate_mode="inline"),
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(),
        clock=FixedClock(said + timedelta(hours=2)),
    ) as mem:
        mem.add(trip)
        mem.consolidate()
        (ana,) = [p for p in mem.persons() if p.name == "Ana"]
        assert "(since 2024-09-16 until 2024-09-20)" in mem.key_info(ana.id)
        assert "Landed in Lisbon for the conference (on 2024-09-16)" in mem.key_info(ana.id)
        during, after = (
            assemble_context(mem.core, "Where is Ana?", person="Ana", at=at, config=STRUCTURED)
            for at in (said + timedelta(days=2), said + timedelta(days=8))
        )
    key = [line for line in during.text.splitlines() if "until 2024-09-20" in line]
    assert key and HISTORY_MARK not in key[0]
    key = [line for line in after.text.splitlines() if "until 2024-09-20" in line]
    assert key and HISTORY_MARK in key[0]
    # the dated snapshot alone says so, whatever claims the reader finds
    line = "Ana is at her parents' (since 2024-09-16 until 2024-09-20)."
    assert HISTORY_MARK in Bygones(at=said + timedelta(days=8)).mark(line)
    assert HISTORY_MARK not in Bygones(at=said + timedelta(days=4)).mark(line)


@pytest.mark.parametrize(
    ("old", "new", "stage"),
    [
        (
            "Kenji's fiancée Aiko and Kenji are choosing a venue.",
            "We got married on Saturday!",
            "relationship",
        ),
        (
            "Zainab: Landlord put the rent up again.",
            "Zainab completed on the flat in Leyton.",
            "home",
        ),
        (
            "Chidi and Ada are expecting a baby in March.",
            "Our son was born on Tuesday!",
            "pregnancy",
        ),
        ("Grace has one kid, Milo, he's three.", "The twins are here! Two girls.", "children"),
        ("We have two kids, both at school.", "Our daughter was born on Friday!", "children"),
        ("We have two kids, both at school.", "My sister's baby was born on Friday!", None),
        ("Ada is expecting a baby in March.", "Her sister's baby was born on Friday!", None),
        ("Mo is job-hunting since the layoffs.", "Mo accepted a new job at the council.", "work"),
        (
            "Marta's mum Halina still lives alone in her house in Gdańsk.",
            "Mum finally agreed to move into a care home in Sopot.",
            "home",
        ),
        ("Esteban lives in Madrid with two cats.", "Esteban moved to Berlin in June.", "home"),
        ("Esteban lives in Berlin now.", "Esteban moved to Berlin in June.", None),  # recalled
        ("Esteban lives in Madrid.", "Esteban moved to the garden for drinks.", None),
        ("Must be tough living in the city.", "Audrey is moving to a new house.", None),
        ("Esteban lives in Madrid.", "Esteban is moving to the Berlin office.", None),
        ("Kenji's girlfriend Aiko loves hiking.", "Kenji's sister got married in June.", None),
        ("Kenji's girlfriend Aiko loves hiking.", "We're not married yet, no rush.", None),
        ("Kenji's girlfriend Aiko loves hiking.", "Kenji is going to a wedding on Saturday.", None),
    ],
)
def test_a_later_stage_of_a_life_ends_the_earlier_one(
    old: str, new: str, stage: str | None
) -> None:
    from archivist.write.reconcile import moved_on

    found = moved_on(claim(new, days=30), claim(old))
    assert (found[0] if found else None) == stage


def test_the_answer_model_sees_what_no_longer_holds_marked_as_history(tmp_path: Path) -> None:
    """With an LLM, the snippets of a replaced diet carry [history] and its date; the
    current one does not, so the model can tell what holds from what came before."""
    from archivist.read.answer import answer_from, retrieve
    from archivist.testing import FakeLLM

    diet = make_conversation(
        "diet",
        [
            [("Priya", "I am pescatarian these days, fish but no meat."), ("Ava", "Ok!")],
            [("Priya", "I went fully vegan this month, no fish anymore."), ("Ava", "Wow.")],
        ],
    )
    llm = FakeLLM({"answer": "vegan", "evidence": [1], "abstain": False})
    with MemoryService(
        tmp_path / "m.db",
        settings=Settings(judge="rules", consolidate_mode="inline"),
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(),
    ) as mem:
        mem.add(diet)
        now = T0 + timedelta(days=30)
        q = "What did Priya eat before she went vegan?"  # the old diet is in view
        answer_from(mem.core, q, retrieve(mem.core, q, person="Priya", at=now), at=now, llm=llm)
    lines = llm.calls[0]["messages"][-1]["content"].splitlines()
    old = [line for line in lines if "pescatarian" in line and line.startswith("[")]
    new = [line for line in lines if "vegan" in line and line.startswith("[")]
    assert old and all("[history: no longer holds from" in line for line in old)
    assert new and not any("[history" in line for line in new)
    assert "[history] no longer holds" in llm.calls[0]["messages"][0]["content"]


def test_a_promotion_ends_the_job_a_first_week_named(tmp_path: Path) -> None:
    """ "First week as a junior analyst" names a job; "promoted to senior analyst"
    replaces it. "Officially from the 1st of November" begins then and has no end:
    not a one-day window that lapses the day after."""
    conv = make_conversation(
        "kwame",
        [
            [("Kwame", "First week as a junior analyst at the bank is done."), ("Efua", "Ha!")],
            [("Kwame", "I got promoted to senior analyst!!! Officially from the 1st of November.")],
        ],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        assert [(c.old_value, c.new_value) for c in mem.conflicts()] == [
            ("junior analyst", "senior analyst")
        ]
        (start,) = [c for c in mem.claims(conversation="kwame") if "1st of November" in c.text]
        assert start.kind == "fact" and start.valid_from is not None and start.valid_to is None


def test_a_move_in_a_month_is_the_home_from_then_on(tmp_path: Path) -> None:
    """ "Transferring to the Berlin office in June" begins the Berlin home in June; it is
    not a June-only window that lapses on 1 July."""
    conv = make_conversation(
        "esteban",
        [[("Ana", "It's official: I'm transferring to the Berlin office in June."), ("Lee", "Ok")]],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        (move,) = [c for c in mem.claims(conversation="esteban") if "Berlin" in c.text]
        assert move.kind == "fact" and move.valid_from is not None and move.valid_to is None


def test_a_line_is_history_by_its_own_claims_not_by_a_later_claim_in_the_same_words() -> None:
    """March's "Marta is making bacalhau" did not end with July's foresight in the same
    words: a message line is marked by the claims it is evidence of."""
    july = Claim(
        "Marta is making bacalhau again on Saturday.",
        "Ana",
        "Marta",
        "c",
        ("S4:1",),
        datetime(2024, 7, 9, tzinfo=UTC),
        kind="foresight",
        valid_to=datetime(2024, 7, 14, tzinfo=UTC),
        id=9,
    )
    past = Bygones(claims=(july,), at=datetime(2024, 8, 1, tzinfo=UTC))
    march = "Come to my housewarming on Saturday? Marta is making bacalhau."
    assert HISTORY_MARK not in past.mark(march, frozenset({("c", "S1:12")}))
    said_in_july = "Marta is making bacalhau again on Saturday."
    marked = past.mark(said_in_july, frozenset({("c", "S4:1")}))
    assert marked.endswith(f"{HISTORY_MARK} (no longer holds from 14 July 2024)")


def test_a_reply_denying_a_still_question_ends_what_it_asked_about(tmp_path: Path) -> None:
    """ "Are you still singing with the choir?" - "Not since October": the older line
    about the choir reads as history in the history shown whole; pottery does not."""
    from archivist.lang.text import denied_still

    assert denied_still("Do you still have the Golf?", "Nope, sold it.") == "Golf"
    assert denied_still("Do you still play tennis?", "Not any more, my knee.") == "tennis"
    assert denied_still("Are you still singing with the choir?", "Yes, every week.") is None
    assert denied_still("Are you still coming tonight?", "No, sorry!") is None
    assert denied_still("Is Tom still living with you?", "No, he moved out.") is None
    conv = make_conversation(
        "ama",
        [
            [("Ama", "Choir practice Wednesday nights, we're doing Faure."), ("Fi", "Fancy.")],
            [
                ("Fi", "Are you still singing with the choir?"),
                ("Ama", "Not since October. I do pottery on Wednesdays now."),
            ],
        ],
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        ctx = mem.context(
            "What does Ama do on Wednesdays?", person="Ama", at=T0 + timedelta(weeks=9)
        )
        lines = ctx.text.splitlines()
        assert any("Choir practice" in line and HISTORY_MARK in line for line in lines)
        assert any("pottery" in line and HISTORY_MARK not in line for line in lines)


def test_a_history_mark_is_never_dated_before_the_claim_was_said(tmp_path) -> None:
    conv = make_conversation(
        "home",
        [
            [("Tom", "I have been living in Leeds for three years.")],
            [("Tom", "I moved to Manchester in December, finally unpacked.")],
        ],
        people=("Tom", "Priya"),
        start=datetime(2025, 1, 14, 9, tzinfo=UTC),
    )
    mem = MemoryService(
        tmp_path / "m.db",
        settings=RULES.with_(consolidate_mode="manual"),
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(),
    )
    with mem:
        mem.add(conv)
        mem.reconcile()
        leeds = next(c for c in mem.claims(limit=10) if "Leeds" in c.text)
        assert leeds.status == "superseded" and leeds.valid_from < leeds.said_at
        assert leeds.valid_to == leeds.said_at  # not December, before Tom said it


def test_a_conflict_keeps_its_kind_whichever_claim_is_reconciled_second() -> None:
    t0 = datetime(2025, 1, 14, 9, tzinfo=UTC)
    old = Claim("Tom lives in Leeds.", "Tom", "Tom", "c", ("m1",), t0, id=1)
    new = Claim(
        "Tom moved to Manchester.", "Tom", "Tom", "c", ("m2",), t0 + timedelta(days=60), id=2
    )
    vectors = dict(zip((1, 2), FakeEmbedder().embed_batch([old.text, new.text]), strict=True))
    forward = reconcile_claims([old], [new], vectors).conflicts
    backward = reconcile_claims([new], [old], vectors).conflicts  # the older session again
    assert [c.kind for c in forward] == [c.kind for c in backward] == ["evolution"]


def test_a_history_line_cut_to_fit_keeps_its_mark() -> None:
    from archivist.read.context_pack import _fit

    line = (
        "Lee: Count me in. I've been pescatarian for years, so bacalhau is perfect: fish is "
        "the only meat I eat. [history] (no longer holds from 1 June 2024)"
    )
    for room in range(20, 37):
        cut = _fit(line, room, DEFAULT_CONTEXT)
        assert cut is None or ("[cut]" in cut and "[history]" in cut), cut
    cut = _fit(line, 30, DEFAULT_CONTEXT)
    assert cut is not None and cut.endswith("[history] (no longer holds from 1 June 2024)")
    plain = _fit("Lee: " + "word " * 40, 20, DEFAULT_CONTEXT)
    assert plain is not None and "[history]" not in plain


def test_a_replaced_value_is_history_from_when_its_claim_closed_never_before_it_was_said() -> None:
    """ "not anymore!!" said on 10 April, replaced by a library job placed on the Monday
    before (a misread "monday"): history from the 10th, when its claim was closed."""
    monday, thursday = datetime(2025, 4, 7, tzinfo=UTC), datetime(2025, 4, 10, 9, tzinfo=UTC)
    older = Claim("Not anymore!!", "Maya", "Maya", "c", ("3",), thursday)
    assert replaced_since(monday, older) == thursday  # still current: when it was said
    closed = replace(older, status="superseded", valid_to=datetime(2025, 4, 11, tzinfo=UTC))
    assert replaced_since(monday, closed) == datetime(2025, 4, 11, tzinfo=UTC)
    said_before = replace(older, said_at=datetime(2025, 3, 1, tzinfo=UTC))
    assert replaced_since(monday, said_before) == monday  # a later start stands
    assert replaced_since(monday, None) == monday  # the older claim is gone
