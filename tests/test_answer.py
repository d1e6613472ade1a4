"""Answers with provenance: speaker verification, time, extractive and LLM answers."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from archivist.judge import SupportPair, Verdict
from archivist.llm.base import LLMRefused
from archivist.model import Conversation
from archivist.read.answer import (
    Answer,
    answer_from,
    coverage,
    retrieve,
    stem,
)
from archivist.read.owners import focus_owner, sentence_owner
from archivist.read.sentences import format_when
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder, FakeJudge, FakeLLM
from conftest import RULES, T0, aiko_priya, make_conversation

PEOPLE = ("Caroline", "Melanie")
SESSIONS = (
    (
        ("Caroline", "I went to the LGBTQ support group yesterday and it was so powerful."),
        ("Melanie", "That sounds wonderful. How are the kids of the group doing?"),
        ("Caroline", "Great! I am also researching adoption agencies for my future family."),
    ),
    (
        (
            "Melanie",
            "I ran a charity race for mental health last Saturday. "
            "I realised that self-care is really important.",
        ),
        ("Caroline", "That charity race sounds great, Mel!"),
        ("Melanie", "My kids loved the pottery class we took together."),
    ),
)


@pytest.fixture
def memory(tmp_path: Path) -> MemoryService:
    m = MemoryService(tmp_path / "answer.db", settings=RULES, embedder=FakeEmbedder())
    m.add(make_conversation("c1", SESSIONS, people=PEOPLE))
    yield m
    m.close()


def test_adversarial_question_abstains_and_names_the_owner(memory: MemoryService) -> None:
    a = memory.ask("What did Caroline realise after her charity race?")
    assert a.abstain
    assert a.speaker == "Melanie"
    assert "that was Melanie's, not Caroline's" in a.reason
    assert ("c1", "D2:1") in a.evidence
    assert "not mentioned" in a.answer.lower()  # LoCoMo's category-5 phrase


def test_the_owner_gets_an_answer(memory: MemoryService) -> None:
    a = memory.ask("What did Melanie realise about self-care?")
    assert not a.abstain
    assert a.evidence == (("c1", "D2:1"),)
    assert a.speaker == "Melanie"
    assert "important" in a.answer
    assert 0 < a.confidence <= 1


def test_temporal_answer_is_when_it_happened(memory: MemoryService) -> None:
    a = memory.ask("When did Caroline go to the LGBTQ support group?")
    assert not a.abstain
    assert a.answer == "7 May 2023"  # said 8 May 2023: "yesterday"
    assert a.evidence == (("c1", "D1:1"),)


def test_extractive_answer_is_the_evidence_sentence_with_speaker_and_date(
    memory: MemoryService,
) -> None:
    a = memory.ask("What is Caroline researching?", conversation="c1")
    assert not a.abstain
    assert a.answer == "I am also researching adoption agencies for my future family."
    assert a.quote == a.answer and a.said_by == "Caroline" and a.said_at is not None
    assert a.method == "extractive"
    assert a.context_tokens > 0
    assert a.to_dict()["evidence"] == [{"conversation": "c1", "id": "D1:3"}]


def test_unsupported_question_abstains(memory: MemoryService) -> None:
    a = memory.ask("Which telescope brand does Melanie recommend?")
    assert a.abstain
    assert a.answer == "Not mentioned in memory."


def remembered(tmp_path: Path, conv: Conversation) -> MemoryService:
    """A memory on a real SQLite file (FakeEmbedder) that has read ``conv``; close it."""
    m = MemoryService(tmp_path / "m.db", settings=RULES, embedder=FakeEmbedder())
    m.add(conv)
    return m


def ask(memory: MemoryService, question: str, llm: FakeLLM) -> Answer:
    """What MemoryService.ask does, with another model than the memory's."""
    return answer_from(memory.core, question, retrieve(memory.core, question), llm=llm)


def test_llm_answer_maps_aliases_and_drops_out_of_range(memory: MemoryService) -> None:
    llm = FakeLLM({"answer": "adoption agencies", "evidence": [1, 99], "abstain": False})
    a = ask(memory, "What is Caroline researching?", llm)
    assert a.answer == "adoption agencies"
    assert len(a.evidence) == 1  # alias 99 does not exist: dropped
    user = llm.calls[0]["messages"][-1]["content"]
    assert "[1]" in user and "D1:" not in user  # aliases, never raw ids
    assert a.method == "llm:fake-llm"
    assert memory.llm_ledger.totals()["calls"] == 1


def test_service_ask_uses_its_llm_and_the_cache(tmp_path: Path, memory: MemoryService) -> None:
    memory.close()  # reopen the same file with a (scripted) model configured
    path = tmp_path / "answer.db"
    llm = FakeLLM({"answer": "", "evidence": [], "abstain": True, "speaker": None})
    with MemoryService(path, settings=RULES, embedder=FakeEmbedder(), llm=llm) as m:
        first = m.ask("What is Caroline researching?")
        again = m.ask("What is Caroline researching?")
    assert first.abstain and again.abstain
    assert len(llm.calls) == 1  # the second answer came from the response cache


def test_llm_failure_falls_back_to_extractive(memory: MemoryService) -> None:
    llm = FakeLLM(LLMRefused("no"))
    a = ask(memory, "What is Caroline researching?", llm)
    assert not a.abstain
    assert a.method.startswith("extractive (llm failed")
    assert "adoption agencies" in a.answer


def test_pure_helpers() -> None:
    assert stem("camping") == stem("camp")
    assert coverage("I went camping", ["camp", "tent"]) == 0.5
    assert format_when(T0) == "8 May 2023"
    assert format_when(T0.replace(month=12), "season") == "winter 2023"
    assert sentence_owner("My race was fun", "Mel", ("Caro",), PEOPLE) == "Mel"
    assert sentence_owner("Your race was fun", "Mel", ("Caro",), PEOPLE) == "Caro"
    assert sentence_owner("That race was fun", "Mel", ("Caro",), PEOPLE) is None
    assert isinstance(Answer("q", "a", False), Answer)


def test_answer_prompt_renders_dates_claims_and_aliases() -> None:
    from datetime import timedelta

    from archivist.prompts import answer as prompt
    from archivist.prompts import judge_answer

    snippet = prompt.Snippet(
        "Caroline",
        T0,
        "I went to the support group yesterday.",
        (("Caroline went to the support group.", T0 - timedelta(days=1), None),),
    )
    messages = prompt.build("When did Caroline go?", [snippet], T0)
    user = messages[-1]["content"]
    assert "[1] (08 May 2023) Caroline: I went to the support group yesterday." in user
    assert "claim: Caroline went to the support group. (happened 07 May 2023)" in user
    assert user.endswith("Question: When did Caroline go?")
    assert "not when it was mentioned" in messages[0]["content"]
    judged = judge_answer.build("q", "7 May 2023", "May 7, 2023")[-1]["content"]
    assert "Gold answer: 7 May 2023" in judged


def test_ask_routes_to_the_conversation_of_the_people_it_names(tmp_path: Path) -> None:
    other = make_conversation(
        "c2",
        [[("Caroline", "I went to the pottery fair yesterday."), ("Ben", "Fun!")]],
        people=("Caroline", "Ben"),
    )
    with MemoryService(tmp_path / "two.db", settings=RULES, embedder=FakeEmbedder()) as m:
        m.add([make_conversation("c1", SESSIONS, people=PEOPLE), other])
        a = m.ask("When did Caroline tell Melanie she went to the LGBTQ support group?")
        assert not a.abstain and a.conversation == "c1"
        assert a.evidence == (("c1", "D1:1"),)
        b = m.ask("What did Caroline tell Ben about the pottery fair?")
        assert b.conversation == "c2" and ("c2", "D1:1") in b.evidence


def test_a_name_used_to_address_someone_does_not_make_it_theirs(tmp_path: Path) -> None:
    conv = make_conversation(
        "g",
        [
            [
                ("Jon", "Hey Gina, I had to shut down my bank account after the fraud."),
                ("Gina", "Oh no, I am so sorry to hear that."),
                ("Gina", "I started a fashion internship downtown."),
            ]
        ],
        people=("Jon", "Gina"),
    )
    with MemoryService(tmp_path / "g.db", settings=RULES, embedder=FakeEmbedder()) as m:
        m.add(conv)
        a = m.ask("Why did Gina shut down her bank account?")
        assert a.abstain and a.speaker == "Jon"
        assert ("g", "D1:1") in a.evidence
        b = m.ask("Why did Jon shut down his bank account?")
        assert not b.abstain and ("g", "D1:1") in b.evidence


def test_the_named_persons_own_word_answers_before_anothers_abstains(tmp_path: Path) -> None:
    """Speaker verification never abstains citing someone else when the person's own
    message answers: an expired "no alcohol until the 15th" answers yes after it, while
    a denial of one's own does not answer "when" for the other's move."""
    conv = make_conversation(
        "tasting",
        [
            [
                ("Rosa", "Cheese and wine night at mine on Saturday the 9th?"),
                (
                    "Ines",
                    "Sinus infection, antibiotics for ten days, so no alcohol until the 15th.",
                ),
                ("Rosa", "Then I will drink for both of us and you can drive me home."),
            ],
            [
                ("Rosa", "I am transferring to the Lisbon office in June."),
                ("Ines", "I will visit for the festivals. I am not moving though, Porto is home."),
            ],
        ],
        people=("Rosa", "Ines"),
        start=datetime(2024, 11, 5, 9, tzinfo=UTC),
    )
    m = remembered(tmp_path, conv)
    after = m.ask("Can Ines drink alcohol?", person="Ines", at=datetime(2024, 11, 20, tzinfo=UTC))
    assert not after.abstain and after.answer.startswith("Yes"), after.answer
    assert "(ended 15 November 2024)" in after.answer and after.said_by == "Ines"
    assert 0 <= after.confidence <= 1
    during = m.ask("Can Ines drink alcohol?", person="Ines", at=datetime(2024, 11, 9, tzinfo=UTC))
    assert not during.abstain and during.answer.startswith("No"), during.answer
    moved = m.ask(
        "When did Ines move to Lisbon?", person="Ines", at=datetime(2024, 12, 1, tzinfo=UTC)
    )
    assert moved.abstain and moved.speaker == "Rosa", moved.answer
    m.close()


def test_a_yes_no_question_about_another_value_is_answered_no(tmp_path: Path) -> None:
    """ "Is Kofi vegan?" against "I eat fish but no meat" is no, though nothing is denied:
    the evidence gives the asked attribute another value. As of after the change, yes."""
    conv = make_conversation(
        "food",
        [
            [("Kofi", "I am pescatarian, I eat fish but no meat."), ("Ama", "Noted for dinner.")],
            [("Kofi", "Big change: I am vegan now."), ("Ama", "Then lentils it is.")],
        ],
        people=("Kofi", "Ama"),
        start=datetime(2024, 3, 1, 18, tzinfo=UTC),
    )
    m = remembered(tmp_path, conv)
    before = m.ask("Is Kofi vegan?", person="Kofi", at=datetime(2024, 3, 3, tzinfo=UTC))
    assert before.answer.startswith("No") and "pescatarian" in before.answer, before.answer
    now = m.ask("Is Kofi vegan?", person="Kofi")
    assert now.answer.startswith("Yes") and "vegan now" in now.answer, now.answer
    then = m.ask("Is Kofi pescatarian?", person="Kofi", at=datetime(2024, 3, 3, tzinfo=UTC))
    assert then.answer.startswith("Yes"), then.answer
    # now the latest word on his diet answers, however few words it shares with the question
    later = m.ask("Is Kofi pescatarian?", person="Kofi")
    assert later.answer.startswith("No") and "vegan now" in later.answer, later.answer
    # Ama said nothing of her diet: no yes from a sentence that does not name it
    ama = m.ask("Is Ama vegan?", person="Ama", at=datetime(2024, 3, 3, tzinfo=UTC))
    assert ama.abstain, ama.answer
    m.close()


def test_a_yes_needs_the_names_the_question_asks_about(tmp_path: Path) -> None:
    """ "Is Oscar Kofi's cat?" is no yes from "we got another cat named Bailey": the
    evidence must hold, say or hear every name the question asks about."""
    conv = make_conversation(
        "pets",
        [[("Kofi", "We got another cat, named Bailey, she is tiny."), ("Ama", "Cute!")]],
        people=("Kofi", "Ama"),
    )
    m = remembered(tmp_path, conv)
    oscar = m.ask("Is Oscar Kofi's cat?", person="Kofi")
    assert not oscar.answer.startswith("Yes"), oscar.answer
    bailey = m.ask("Is Bailey Kofi's cat?", person="Kofi")
    assert bailey.answer.startswith("Yes") and "Bailey" in bailey.answer, bailey.answer
    m.close()


def test_asked_words_belong_to_the_pronoun_before_them() -> None:
    said = "I hope I find something I'm as passionate about as you are with watercolor painting."
    wanted = [stem("watercolor"), stem("painting")]
    assert focus_owner(said, "Sam", ("Evan",), wanted) == "Evan"
    assert focus_owner("You asked, so: my watercolor painting.", "Sam", ("Evan",), wanted) == "Sam"
    assert focus_owner("Watercolor painting is fun, you know.", "Sam", ("Evan",), wanted) is None
    assert focus_owner(said, "Sam", ("Evan", "Ana"), wanted) is None  # whose "you"?


def test_a_question_about_what_the_speaker_said_of_the_other_abstains(tmp_path: Path) -> None:
    """Sam's "as passionate as you are with watercolor painting" is Evan's painting."""
    chat = (
        (
            (
                "Evan",
                "Watercolor painting got me through the winter, I took it up after the surgery.",
            ),
            (
                "Sam",
                "I hope I find something I'm as passionate as you are with watercolor painting.",
            ),
            ("Evan", "You will."),
        ),
    )
    with MemoryService(tmp_path / "x.db", settings=RULES, embedder=FakeEmbedder()) as m:
        m.add(make_conversation("art", chat, people=("Evan", "Sam")))
        got = m.ask("How did Sam get into watercolor painting?")
    assert got.abstain and "Evan" in got.answer


def test_what_held_before_a_named_value_is_the_person_s_statement_before_it(
    tmp_path: Path,
) -> None:
    """ "Where did Yara live before Leyton?" shares no word with "£1,450 a month for this
    shoebox in Walthamstow": her own statement of her home, said before Leyton was named,
    answers; a later home and someone else's home do not."""
    conv = make_conversation(
        "flat",
        [
            [
                ("Yara", "£1,450 a month for this shoebox in Walthamstow."),
                ("Omar", "My place in Hackney is worse."),
            ],
            [("Yara", "Completed on the flat in Leyton today!"), ("Omar", "Congrats!")],
            [("Yara", "Might rent a room in Bristol for the summer."), ("Omar", "Nice.")],
        ],
        people=("Yara", "Omar"),
        start=datetime(2024, 1, 5, 9, tzinfo=UTC),
    )
    m = remembered(tmp_path, conv)
    got = m.ask("Where did Yara live before Leyton?", person="Yara")
    assert not got.abstain and "Walthamstow" in got.answer, got.answer
    now = m.ask("Where does Yara live?", person="Yara")
    assert "Leyton" in now.answer, now.answer
    m.close()


def test_when_answers_meet_irregular_pasts_and_holidays(tmp_path: Path) -> None:
    """ "When did Raj sell his car?" is answered by "Sold the Golf last weekend" (the asked
    verb, said in its past), not by the Golf's older news; "broke up over Christmas" dates
    a break-up to Christmas."""
    conv = make_conversation(
        "life",
        [
            [("Raj", "My old Golf failed its MOT again on Monday, it is a money pit.")],
            [("Raj", "Marco and I are celebrating two years together on Friday.")],
            [("Raj", "Sold the Golf last weekend. Marco and I broke up over Christmas.")],
        ],
        people=("Raj", "Ellie"),
        start=datetime(2023, 11, 6, 9, tzinfo=UTC),
    )
    m = remembered(tmp_path, conv)
    at = datetime(2024, 2, 1, tzinfo=UTC)
    sold = m.ask("When did Raj sell his car?", person="Raj", at=at)
    assert "November 2023" in sold.answer and "Sold the Golf" in " ".join(
        m.store.get_message(c, i).text for c, i in sold.evidence
    ), sold.answer
    split = m.ask("When did Raj and Marco break up?", person="Raj", at=at)
    assert "25 December 2023" in split.answer, split.answer
    m.close()


def test_what_ended_in_other_words_answers_no(tmp_path: Path) -> None:
    """ "Cast came off yesterday", "smoke-free", "Handed in my notice at Bistro Nord" end
    what they name: asked after, "is she still…" is no; a question months before
    ("Where are you going?") is no prompt for a later message, and "seeing someone
    new, her name is Leah" names a partner."""
    conv = make_conversation(
        "changes",
        [
            [
                ("Ines", "Broke my wrist skiing, I'm in a cast for six weeks."),
                ("Ines", "I'm a line cook at Bistro Nord, the hours are brutal."),
                ("Ines", "Marco and I are celebrating two years together on Friday."),
                ("Tom", "Cute! Where are you going?"),
            ],
            [
                ("Ines", "Cast came off yesterday, wrist is stiff but free!"),
                ("Ines", "Handed in my notice at Bistro Nord today."),
                ("Ines", "Three months smoke-free and I can run up the stairs."),
                ("Ines", "I've been seeing someone new, her name is Leah and she's a vet."),
            ],
        ],
        people=("Ines", "Tom"),
        start=datetime(2024, 3, 1, 9, tzinfo=UTC),
    )
    m = remembered(tmp_path, conv)
    at = datetime(2024, 4, 1, tzinfo=UTC)
    for question in ("Is Ines wearing a cast?", "Is Ines still a line cook?", "Does Ines smoke?"):
        got = m.ask(question, person="Ines", at=at)
        assert got.answer.startswith("No"), (question, got.answer)
    during = m.ask("Is Ines wearing a cast?", person="Ines", at=datetime(2024, 3, 3, tzinfo=UTC))
    assert during.answer.startswith("Yes"), during.answer
    partner = m.ask("Who is Ines dating?", person="Ines", at=at)
    assert "Leah" in partner.answer and "in reply to" not in partner.answer, partner.answer
    m.close()


def test_asked_about_now_an_ending_is_not_the_answer(tmp_path: Path) -> None:
    """ "How does Kwame exercise?" after "Cancelled my gym membership. I swim at the lido
    three mornings a week now." is the swimming, not the cancelling."""
    conv = make_conversation(
        "fit",
        [
            [("Kwame", "Gym at 6am every weekday, chest day is my favourite.")],
            [
                (
                    "Kwame",
                    "Cancelled my gym membership. I swim at the lido three mornings a week now.",
                )
            ],
        ],
        people=("Kwame", "Ada"),
        start=datetime(2024, 5, 1, 9, tzinfo=UTC),
    )
    m = remembered(tmp_path, conv)
    got = m.ask("How does Kwame exercise?", person="Kwame", at=datetime(2024, 6, 1, tzinfo=UTC))
    assert "lido" in got.answer, got.answer
    m.close()


def test_an_ending_in_other_words_closes_what_it_names_in_any_order(tmp_path: Path) -> None:
    """ "Tuesday yoga is over" ends "Yoga every Tuesday evening"; "Fernway laid off half
    the design team, including me" ends working there; "Freelancing for now" is work."""
    conv = make_conversation(
        "life",
        [
            [
                ("Femi", "Yoga every Tuesday evening with my sister, it's our thing."),
                ("Femi", "Third year as a UX designer at Fernway and I still like it."),
            ],
            [
                ("Femi", "My sister moved to Leeds so Tuesday yoga is over."),
                ("Femi", "Fernway laid off half the design team today, including me."),
            ],
            [("Femi", "Freelancing for now, two small clients so far.")],
        ],
        people=("Femi", "Lou"),
        start=datetime(2024, 1, 2, 9, tzinfo=UTC),
    )
    m = remembered(tmp_path, conv)
    at = datetime(2024, 3, 1, tzinfo=UTC)
    for question in ("Does Femi still go to yoga?", "Does Femi work at Fernway?"):
        got = m.ask(question, person="Femi", at=at)
        assert got.answer.startswith("No"), (question, got.answer)
    work = m.ask("What does Femi do for work now?", person="Femi", at=at)
    assert "Freelancing" in work.answer, work.answer
    m.close()


def test_a_yes_no_about_a_named_year_reads_what_was_said_that_year(tmp_path: Path) -> None:
    """ "Was Ola vegan in 2023?" is yes from "I stayed vegan after January" (2023), though
    "I'm vegetarian again" (2024) is her latest word on her diet."""
    conv = make_conversation(
        "food",
        [
            [("Ola", "I stayed vegan after January, two months now!")],
            [("Ola", "Confession: I'm vegetarian again, I eat cheese and eggs now.")],
        ],
        people=("Ola", "Ben"),
        start=datetime(2023, 12, 28, 9, tzinfo=UTC),  # the second session is in 2024
    )
    m = remembered(tmp_path, conv)
    at = datetime(2024, 2, 1, tzinfo=UTC)
    assert m.ask("Was Ola vegan in 2023?", person="Ola", at=at).answer.startswith("Yes")
    assert m.ask("Is Ola vegan?", person="Ola", at=at).answer.startswith("No")
    m.close()


def test_a_persons_own_word_about_someone_the_question_names_is_theirs(tmp_path: Path) -> None:
    """ "Is Tom staying with Nina?" asked of Nina is answered from her own "My brother Tom
    is staying with us", not refused as Tom's; a trade-in is cut from what holds now."""
    conv = make_conversation(
        "home",
        [
            [("Nina", "My brother Tom is staying with us until he finds a flat.")],
            [("Nina", "Switched to a Samsung Galaxy phone, traded the iPhone in at the shop.")],
        ],
        people=("Nina", "Olu"),
        start=datetime(2024, 2, 1, 18, tzinfo=UTC),
    )
    m = remembered(tmp_path, conv)
    at = datetime(2024, 2, 20, tzinfo=UTC)
    got = m.ask("Is Tom staying with Nina?", person="Nina", at=at)
    assert not got.abstain and got.answer.startswith("Yes"), got.answer
    phone = m.ask("What phone does Nina have?", person="Nina", at=at)
    assert "Samsung" in phone.answer and "iPhone" not in phone.answer, phone.answer
    m.close()


def test_who_asked_of_nobody_is_answered_by_whoever_said_it(tmp_path: Path) -> None:
    """ "Who drinks four cups of coffee a day?", asked in Zoe's chat, names nobody: Sam's
    own word answers it, with Sam named, instead of "that was Sam's, not Zoe's"; asked
    of Zoe by name it is still refused."""
    conv = make_conversation(
        "coffee",
        [
            [("Zoe", "Haven't had coffee in a month. Green tea person now.")],
            [("Sam", "Impressive. I'm on four cups of coffee a day at this point.")],
        ],
        people=("Zoe", "Sam"),
        start=datetime(2024, 6, 10, 8, tzinfo=UTC),
    )
    m = remembered(tmp_path, conv)
    at = datetime(2024, 7, 1, tzinfo=UTC)
    who = m.ask("Who drinks four cups of coffee a day?", person="Zoe", at=at)
    assert not who.abstain and who.answer.startswith("Sam: "), who.answer
    named = m.ask("Does Zoe drink four cups of coffee a day?", person="Zoe", at=at)
    assert named.abstain or named.answer.startswith("No"), named.answer
    when = m.ask("When did Zoe stop drinking coffee?", person="Zoe", at=at)
    assert "May 2024" in when.answer, when.answer
    m.close()


def test_a_plan_called_off_no_longer_holds_and_lists_leave_out_what_was_cancelled(
    tmp_path: Path,
) -> None:
    """ "Dublin marathon in October" then "Marathon is off" in May: asked in August, the
    plan does not hold (it stopped when called off, not in October); "Cancelled Netflix
    and Prime" is no item of what Ravi pays for now."""
    conv = make_conversation(
        "plans",
        [
            [("Liam", "Training for the Dublin marathon in October, hopefully.")],
            [("Liam", "Knee surgeon says no more running for me. Marathon is off.")],
            [("Ravi", "We pay for Netflix, Disney+ and Prime and there is nothing to watch.")],
            [("Ravi", "Cancelled Netflix and Prime this weekend. Just Disney+ for the kids now.")],
        ],
        people=("Liam", "Ravi"),
        start=datetime(2024, 2, 11, 9, tzinfo=UTC),
    )
    m = remembered(tmp_path, conv)
    at = datetime(2024, 8, 1, tzinfo=UTC)
    got = m.ask("Is Liam running the Dublin marathon?", person="Liam", at=at)
    assert got.answer.startswith("No"), got.answer
    paid = m.ask("Which streaming services does Ravi pay for now?", person="Ravi", at=at)
    assert "Disney" in paid.answer and "Netflix" not in paid.answer, paid.answer
    m.close()


def test_a_state_dated_by_how_long_it_has_lasted_holds_from_its_start(tmp_path: Path) -> None:
    """ "Been seeing Marco for two months now", said in June, began in April and still
    holds: not a window that closed at the end of April."""
    conv = make_conversation(
        "apps",
        [
            [("Lina", "New year, still single, still on three dating apps. Send help.")],
            [
                (
                    "Lina",
                    "Been seeing Marco for two months now and it's going well. Deleted the apps!",
                )
            ],
        ],
        people=("Lina", "Pia"),
        start=datetime(2024, 6, 5, 20, tzinfo=UTC),
    )
    m = remembered(tmp_path, conv)
    at = datetime(2024, 7, 1, tzinfo=UTC)
    who = m.ask("Who is Lina dating?", person="Lina", at=at)
    assert "Marco" in who.answer, who.answer
    when = m.ask("When did Lina start seeing Marco?", person="Lina", at=at)
    assert "April 2024" in when.answer, when.answer
    apps = m.ask("Is Lina on dating apps?", person="Lina", at=at)
    assert apps.answer.startswith("No"), apps.answer
    m.close()


def test_what_ended_by_theft_split_or_payment_is_answered_no(tmp_path: Path) -> None:
    """A bike stolen, a band split up, a loan paid off: asked after, each is a no; a
    short sentence after what happened is read as its reason."""
    conv = make_conversation(
        "ended",
        [
            [
                ("Jon", "Cycled to work in the rain again, my bike keeps me sane."),
                ("Jon", "Student loan payment went out again, 300 a month for ever."),
                ("Jon", "Rehearsal ran late, the band sounds tight for the tour."),
            ],
            [
                ("Jon", "Someone nicked my bike outside the library. Bus it is for now."),
                ("Jon", "Paid off the last of my student loan today!"),
                ("Jon", "The band split up. Creative differences, the usual."),
            ],
        ],
        people=("Jon", "Ade"),
        start=datetime(2024, 2, 6, 8, tzinfo=UTC),
    )
    m = remembered(tmp_path, conv)
    at = datetime(2024, 6, 1, tzinfo=UTC)
    for q in ("Does Jon have a bike?", "Does Jon have a student loan?", "Is Jon in a band?"):
        got = m.ask(q, person="Jon", at=at)
        assert got.answer.startswith("No"), (q, got.answer)
    why = m.ask("Why did Jon's band split up?", person="Jon", at=at)
    assert "Creative differences" in why.answer, why.answer
    m.close()


def test_a_question_is_never_the_evidence_of_a_yes_or_no(tmp_path: Path) -> None:
    conv = make_conversation(
        "pets",
        [[("Tom", "Is your beagle still chewing the sofa?"), ("Priya", "Only on Sundays lol."),
          ("Tom", "Does your brother still have the cat?")]],
        people=("Tom", "Priya"),
    )  # fmt: skip
    with remembered(tmp_path, conv) as memory:
        for question in ("Does Priya's brother have a cat?", "Does Tom have a cat?"):
            answer = memory.ask(question)
            assert answer.abstain, answer.answer


def test_a_question_is_no_ones_evidence_when_whose_it_was_is_checked(tmp_path: Path) -> None:
    conv = make_conversation(
        "kin",
        [[("Ravi", "Oh my sister got a rescue greyhound btw, called Moth, he sleeps all day."),
          ("Jess", "So sweet."),
          ("Jess", "Random q but what pet does my sister have again?? Mum said, I forgot.")]],
        people=("Ravi", "Jess"),
    )  # fmt: skip
    with remembered(tmp_path, conv) as memory:
        # Jess asking about her own sister is not her sister's pet: Ravi's sister's
        # answers, and nothing says it was "Jess's, not Ravi's"
        answer = memory.ask("What pet does Ravi's sister have?", person="Ravi")
        assert not answer.abstain and "greyhound" in answer.answer, answer.answer


def test_a_question_naming_a_past_span_is_answered_as_memory_stood_then(tmp_path: Path) -> None:
    jan = datetime(2025, 1, 14, 9, tzinfo=UTC)
    sessions = (
        (("Tom", "Still a software tester at Northgate Bank, living the dream."),),
        (("Tom", "First month at Brightloop done! The startup life suits me."),),
    )
    conv = make_conversation("tp", sessions, people=("Tom", "Priya"), start=jan)
    later = conv.messages[-1].timestamp.replace(month=7)
    conv = Conversation(
        conv.id,
        conv.participants,
        (conv.messages[0], replace(conv.messages[1], timestamp=later)),
    )
    with MemoryService(tmp_path / "m.db", settings=RULES, embedder=FakeEmbedder()) as m:
        m.add(conv)
        at = datetime(2025, 11, 1, tzinfo=UTC)
        then = m.ask("Where did Tom work in January 2025?", at=at)
        assert "Northgate" in then.answer and then.said_at == conv.messages[0].timestamp
        assert m.ask("Where does Tom work now?", at=at).said_at == later
        # a span still to come keeps the time asked at
        assert m.ask("Where does Tom work in December 2025?", at=at).said_at == later


def test_the_judge_gives_a_subjectless_sentence_to_whoever_said_it(tmp_path: Path) -> None:
    """The rules own "signed up for a pottery course..." to nobody (no subject) and
    Priya's sentence to Priya (her "starter" shares a stem with "start"), so they
    abstain ("that was Priya's"); a judge sure Aiko's own sentence settles the
    question makes it hers, and one that reads it as settling nothing changes nothing."""
    conv = aiko_priya()
    question = "When did Aiko start her pottery course?"
    with MemoryService(tmp_path / "rules.db", settings=RULES, embedder=FakeEmbedder()) as m:
        m.add(conv)
        ruled = m.ask(question)
        assert ruled.abstain and ruled.speaker == "Priya", ruled.answer

    def settles(p: SupportPair) -> Verdict | None:
        return Verdict("answers", 0.9) if "pottery course thursday" in p.sentence else None

    for judge, abstains in ((FakeJudge(support=settles), False), (FakeJudge(), True)):
        with MemoryService(tmp_path / f"{abstains}.db", embedder=FakeEmbedder(), judge=judge) as m:
            m.add(conv)
            a = m.ask(question)
            assert a.abstain is abstains, a.answer
            asked = [
                p for p in judge.asked if isinstance(p, SupportPair) and p.question == question
            ]
            assert any("pottery course" in p.sentence and p.speaker == "Aiko" for p in asked)
            if not abstains:
                assert a.said_by == "Aiko" and "May 2023" in a.answer, a.answer
