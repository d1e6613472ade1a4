"""The answer without an LLM reads what its evidence says (read/extractive.py)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from archivist.lang.attributes_asked import asked_kinds
from archivist.lang.text import stem
from archivist.read.extractive import asked_stems, compose, denies, rank_sentences, shape_of
from archivist.read.replies import reply_prompt
from archivist.read.sentences import Sentence, split_sentences
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder
from conftest import RULES, T0, make_conversation

DIET = (
    (("Priya", "I eat everything, steak is my favourite dinner."), ("Ava", "Noted!")),
    (("Priya", "I am pescatarian now, fish but no meat."), ("Ava", "Got it.")),
    (("Priya", "I went fully vegan this month, so no fish anymore."), ("Ava", "Wow, ok.")),
)


@pytest.fixture
def memory(tmp_path: Path) -> MemoryService:
    m = MemoryService(tmp_path / "x.db", settings=RULES, embedder=FakeEmbedder())
    m.add(make_conversation("diet", DIET, people=("Priya", "Ava")))
    yield m
    m.close()


def test_a_denial_in_the_evidence_answers_no(memory: MemoryService) -> None:
    got = memory.ask("Does Priya eat fish?", person="Priya")
    assert got.answer.startswith("No:") and "no fish anymore" in got.answer


def test_what_held_before_answers_a_question_about_then(memory: MemoryService) -> None:
    then = T0 + timedelta(days=8)  # after the second session, before the third
    got = memory.ask("Does Priya eat fish?", person="Priya", at=then)
    assert got.answer.startswith("Yes:") and "pescatarian" in got.answer  # not "steak"


@pytest.mark.parametrize(
    ("sentence", "asked", "denied"),
    [
        ("No fish anymore.", "eat fish", True),
        ("I quit smoking.", "smoke", True),
        ("Gave the old iPhone to my dad.", "iphone", True),
        ("Doctor says I'm lactose intolerant.", "have dairy", True),
        # a restriction the question asks about is what it affirms
        ("Doctor says I'm lactose intolerant.", "lactose intolerant", False),
        ("I'm allergic to peanuts.", "allergic peanuts", False),
        ("I love fish.", "eat fish", False),
    ],
)
def test_what_denies_a_yes_no_question(sentence: str, asked: str, denied: bool) -> None:
    assert denies(sentence, [stem(w) for w in asked.split()]) is denied


@pytest.mark.parametrize(
    ("sentence", "asked", "denied"),
    [
        ("I am pescatarian, fish but no meat.", "eat fish", False),
        ("I left the choir, I play bass in a band now.", "band", False),
        ("I left the choir, I play bass in a band now.", "choir", True),
        ("I don't eat fish.", "eat fish", True),
        ("Fish? Not anymore.", "fish", True),
        ("Nope, never.", "fish", True),  # no asked word: the whole sentence answers
        ("Boot's off, crutches handed back to the hospital.", "crutches", True),
    ],
)
def test_a_negation_denies_what_it_bears_on(sentence: str, asked: str, denied: bool) -> None:
    assert denies(sentence, [stem(w) for w in asked.split()]) is denied


def test_a_change_said_later_does_not_reach_back(memory: MemoryService) -> None:
    """ "I went vegan this month", said in the third week, starts on the 1st; on the
    16th memory knew only the pescatarian diet, and answers and context say so."""
    then = T0 + timedelta(days=8)
    got = memory.ask("Is Priya pescatarian?", person="Priya", at=then)
    assert got.answer.startswith("Yes:")
    assert memory.ask("Is Priya pescatarian?", person="Priya").answer.startswith("No:")
    shown = memory.context("What does Priya eat?", person="Priya", at=then).text
    assert "pescatarian" in shown and "[history]" not in shown


def test_a_window_that_closed_still_answers_whether_it_holds(tmp_path: Path) -> None:
    """The newest sentence of a chat outranks an older one on recency; when it is too
    weak to answer, the relevant older one does ("on night shifts until July"),
    read as no longer holding."""
    chat = (
        (
            ("Mateo", "Heads up, I'm on night shifts at the hospital until the end of July."),
            ("Vale", "Brutal."),
            ("Mateo", "Nope. August I'm back on days and all yours."),
        ),
    )
    with MemoryService(tmp_path / "x.db", settings=RULES, embedder=FakeEmbedder()) as m:
        m.add(make_conversation("shifts", chat, people=("Mateo", "Vale"), start=T0))
        got = m.ask("Is Mateo still on night shifts?", person="Mateo", at=T0 + timedelta(days=120))
    assert not got.abstain and got.answer.startswith("No:") and "night shifts" in got.answer


def test_where_is_answered_by_a_sentence_naming_a_place(tmp_path: Path) -> None:
    chat = (
        (("Esteban", "Everyone cycles everywhere here."), ("Nadia", "Lucky you.")),
        (("Esteban", "First week in Berlin done."), ("Nadia", "Come back soon.")),
    )
    with MemoryService(tmp_path / "x.db", settings=RULES, embedder=FakeEmbedder()) as m:
        m.add(make_conversation("move", chat, people=("Esteban", "Nadia")))
        got = m.ask("Where is Esteban now?", person="Esteban")
    assert "Berlin" in got.answer


@pytest.mark.parametrize(
    ("question", "kinds"),
    [
        ("Which city does Rosa live in?", {"residence"}),
        ("Where does Rosa live now?", {"residence"}),
        ("What does Rosa do for a living?", {"job"}),
        ("Where does Rosa work?", {"employer", "job"}),
        ("What does Rosa eat these days?", {"diet"}),
        ("Who is Rosa's girlfriend?", {"partner"}),
        ("How old is Rosa?", {"age"}),
        ("What does Rosa do on weekends?", set()),
        ("Which books did Rosa read?", set()),
        ("What happened to Rosa's job in August?", set()),  # an event, not the job now
        ("What did Rosa eat at the wedding?", set()),
        ("What did Rosa eat before going vegan?", {"diet"}),  # what held before a change
        ("Where did Rosa live before Leyton?", {"residence"}),
        ("Where did Rosa work before Acme?", {"employer", "job"}),
    ],
)
def test_which_attribute_an_open_question_asks_for(question: str, kinds: set[str]) -> None:
    assert asked_kinds(question) == kinds


def test_where_someone_lives_is_what_they_last_said_of_their_home(tmp_path: Path) -> None:
    """A sentence sharing the question's words ("the flat in Bonfim") does not beat the
    person's own statement of where they live; a relative's home is not theirs."""
    chat = (
        (("Rosa", "I live in Lyon, up in Croix-Rousse."), ("Ines", "Nice.")),
        (
            ("Rosa", "Finally settled in Porto. The flat in Bonfim is tiny but it has a balcony."),
            ("Ines", "Jealous."),
            ("Rosa", "And my sister lives in Braga now, so we meet on Sundays."),
        ),
    )
    with MemoryService(tmp_path / "x.db", settings=RULES, embedder=FakeEmbedder()) as m:
        m.add(make_conversation("home", chat, people=("Rosa", "Ines")))
        got = m.ask("Which city does Rosa live in?", person="Rosa")
    assert "Porto" in got.answer and "Lyon" not in got.answer and "Braga" not in got.answer


def test_what_holds_now_is_answered_without_what_stopped(tmp_path: Path) -> None:
    """Asked what holds now, "no longer X, Y" answers Y and "my old team" is not it."""
    chat = (
        (("Gabi", "I manage the support team at the insurer."), ("Rafa", "Busy.")),
        (
            ("Gabi", "I'm no longer managing the support team, I moved over to the data team."),
            ("Rafa", "Miss it?"),
            ("Gabi", "Not even a little. My old team got a new manager, he's great."),
        ),
    )
    with MemoryService(tmp_path / "x.db", settings=RULES, embedder=FakeEmbedder()) as m:
        m.add(make_conversation("team", chat, people=("Gabi", "Rafa")))
        got = m.ask("What team is Gabi on?", person="Gabi")
    assert got.answer == "I moved over to the data team."


def test_a_leading_clause_of_what_stopped_is_cut_from_an_answer_about_now(
    tmp_path: Path,
) -> None:
    chat = (
        (
            ("Zara", "Stopped the piano lessons, swapped them for Spanish classes on Thursdays."),
            ("Tom", "Olé!"),
        ),
    )
    with MemoryService(tmp_path / "x.db", settings=RULES, embedder=FakeEmbedder()) as m:
        m.add(make_conversation("thu", chat, people=("Zara", "Tom")))
        got = m.ask("What does Zara do on Thursdays?", person="Zara")
    assert got.answer == "Swapped them for Spanish classes on Thursdays."


def test_a_short_reply_is_read_and_quoted_with_its_question(tmp_path: Path) -> None:
    """A reply like "My girlfriend!" answers who Marisol is only beside its question."""
    chat = (
        (
            ("Andres", "So who's this Marisol you keep posting climbing photos with?"),
            ("Diego", "My girlfriend! We've been together since April."),
            ("Andres", "About time."),
        ),
    )
    with MemoryService(tmp_path / "x.db", settings=RULES, embedder=FakeEmbedder()) as m:
        m.add(make_conversation("news", chat, people=("Andres", "Diego")))
        got = m.ask("Is Marisol Diego's girlfriend?", person="Diego")
    assert got.answer.startswith("Yes: My girlfriend! (in reply to Andres: So who's this Marisol")


def test_reply_prompt_needs_a_question_by_someone_else() -> None:
    asked = make_conversation(
        "c", ((("Ana", "How many kids do you have?"), ("Lee", "Two of them. Both loud.")),)
    ).messages
    told = make_conversation(
        "c", ((("Ana", "I have two kids."), ("Lee", "Two of them. Both loud.")),)
    ).messages
    assert reply_prompt(asked[1], asked[0]) == "Ana: How many kids do you have?"
    assert reply_prompt(told[1], told[0]) == ""
    assert reply_prompt(asked[1], None) == ""
    assert reply_prompt(asked[0], asked[0]) == ""  # one's own question
    thanks = make_conversation(
        "c", ((("Ana", "What motivated you, Lee?"), ("Lee", "Thanks, Ana! Long story.")),)
    ).messages
    assert reply_prompt(thanks[1], thanks[0]) == ""  # says nothing of its own


def test_what_stopped_stays_in_the_answer_when_it_is_what_was_asked(tmp_path: Path) -> None:
    chat = (
        (
            ("Gabi", "I'm no longer managing the support team, I moved over to the data team."),
            ("Rafa", "Nice."),
        ),
    )
    with MemoryService(tmp_path / "x.db", settings=RULES, embedder=FakeEmbedder()) as m:
        m.add(make_conversation("team", chat, people=("Gabi", "Rafa")))
        got = m.ask("Which team does Gabi manage now?", person="Gabi")
    assert "no longer managing the support team" in got.answer


def test_when_reads_the_time_said_beside_the_event(tmp_path: Path) -> None:
    """The date may follow in the next sentence; "since when" wants the "since" time,
    not the first time the message names."""
    chat = (
        (
            ("Kofi", "I got promoted to senior analyst!!! Officially from the 1st of November."),
            ("Efua", "Drinks on you."),
            ("Kofi", "Mum fell in January and moved into a care home. She's there since March."),
        ),
    )
    start = T0.replace(month=10, day=3)
    with MemoryService(tmp_path / "x.db", settings=RULES, embedder=FakeEmbedder()) as m:
        m.add(make_conversation("news", chat, people=("Kofi", "Efua"), start=start))
        promoted = m.ask("From when is Kofi's promotion effective?", person="Kofi")
        since = m.ask("Since when has Kofi's mum been in the care home?", person="Kofi")
    assert "November" in promoted.answer
    assert "March" in since.answer and "January" not in since.answer


def test_a_yes_or_no_is_read_from_a_sentence_about_what_is_asked() -> None:
    """ "Back home!" ranks first (newer, near in meaning) but says nothing of the stay;
    the stay that ended answers, read as no."""
    said = make_conversation(
        "reno",
        (
            (
                ("Keiko", "I'm staying at my parents' for two weeks."),
                ("Keiko", "Back home!"),
            ),
        ),
        people=("Keiko", "Hiro"),
    ).messages
    question = "Is Keiko still staying at her parents' place?"
    shape = shape_of(question, asks_when=False)
    ranked = [
        Sentence("Back home!", said[1], "Keiko", 0, relevance=0.5, score=1.0),
        Sentence(said[0].text, said[0], "Keiko", 1, T0, relevance=0.6, score=0.4),
    ]
    wanted = asked_stems(question, ["Keiko"], shape.before)
    text, used, _ = compose(question, shape, ranked, wanted, "Keiko")
    assert used == [ranked[1]] and text.startswith("No: I'm staying at my parents'")


def test_why_is_answered_with_the_reason_said_next() -> None:
    """The best sentence says what changed; the next one of its message says why."""
    (said,) = make_conversation(
        "seat",
        (
            (
                (
                    "Dima",
                    "From now on, aisle seats please. Since the knee operation I need to stretch.",
                ),
            ),
        ),
        people=("Dima", "Ines"),
    ).messages
    what, why = split_sentences(said.text)
    ranked = [
        Sentence(what, said, "Dima", 0, relevance=0.8, score=0.8),
        Sentence(why, said, "Dima", 0, relevance=0.3, score=0.3),
    ]
    question = "Why did Dima change his seat preference?"
    shape = shape_of(question, asks_when=False)
    text, used, _ = compose(question, shape, ranked, asked_stems(question, ["Dima"], shape.before))
    assert used == ranked and text == f"{what}; {why}"


def test_an_irregular_past_meets_its_verb() -> None:
    """ "When did Raj sell his car?" - "Sold the Golf"; "break up" - "broke up"."""
    assert stem("sold") == stem("sell") == stem("selling")
    assert stem("broke") == stem("break") and stem("bought") == stem("buy")
    assert stem("camping") == stem("camp")  # regular words as before


def _then(first: tuple[str, str], later: tuple[str, str], question: str, near: float):
    """compose over a person's earlier and later sentence, ``near`` apart in meaning."""
    said = make_conversation("change", ((first,), (later,)), people=("Ama", "Kojo")).messages
    shape = shape_of(question, asks_when=False)
    ranked = [
        Sentence(said[0].text, said[0], "Ama", 0, relevance=1.1, score=1.1),
        Sentence(said[1].text, said[1], "Ama", 1, relevance=0.5, score=0.5),
    ]
    wanted = asked_stems(question, ["Ama"], shape.before)
    return compose(question, shape, ranked, wanted, "Ama", lambda a, b: near), ranked


def test_a_later_change_of_the_same_aspect_overtakes_a_yes() -> None:
    """Nothing in memory links "eating chicken" to a diet: the later sentence of the
    same person, near in meaning and telling of a change, answers no, quoting both."""
    (text, used, why), ranked = _then(
        ("Ama", "Ten years vegetarian this month, never missed meat once."),
        ("Ama", "Plot twist: started eating chicken again."),
        "Is Ama vegetarian?",
        near=0.4,
    )
    assert text.startswith("No: Plot twist: started eating chicken again. (earlier, ")
    assert text.endswith(": Ten years vegetarian this month, never missed meat once.)")
    assert used == [ranked[1], ranked[0]] and "changed since" in why


@pytest.mark.parametrize(
    ("later", "near"),
    [
        ("Started a new job at the city museum today.", 0.2),  # another aspect: a home stays
        ("Also started a chess club on Tuesdays.", 0.5),  # an addition: the band stays
        ("Started eating chicken again.", 0.0),  # meaning unknown: no guess
    ],
)
def test_a_later_sentence_that_is_no_change_of_it_leaves_the_yes(later: str, near: float) -> None:
    (text, used, _), ranked = _then(
        ("Ama", "Ten years vegetarian this month, never missed meat once."),
        ("Ama", later),
        "Is Ama vegetarian?",
        near=near,
    )
    assert text.startswith("Yes: Ten years vegetarian") and used == [ranked[0]]


def test_a_hypothetical_or_past_question_is_not_overtaken() -> None:
    for question in ("Was Ama vegetarian in 2023?", "Would Ama enjoy a vegetarian cafe?"):
        (text, _, _), _ = _then(
            ("Ama", "Ten years vegetarian this month, never missed meat once."),
            ("Ama", "Plot twist: started eating chicken again."),
            question,
            near=0.4,
        )
        assert not text.startswith("No:"), question


def test_a_short_announcement_is_answered_with_what_its_message_tells_next() -> None:
    """ "Got a new puppy!" announces; the sentence after it says what was asked."""
    (said,) = make_conversation(
        "puppy",
        ((("Omar", "Got a new puppy! A collie called Dot, she chews everything. Any tips?"),),),
        people=("Omar", "Bea"),
    ).messages
    got, told, ask = split_sentences(said.text)
    ranked = [
        Sentence(got, said, "Omar", 0, relevance=0.9, score=0.9),
        Sentence(told, said, "Omar", 0, relevance=0.3, score=0.3),
        Sentence(ask, said, "Omar", 0, relevance=0.2, score=0.2),
    ]
    question = "What is Omar's dog called?"
    shape = shape_of(question, asks_when=False)
    text, used, _ = compose(question, shape, ranked, asked_stems(question, ["Omar"], shape.before))
    assert used == ranked[:2] and text == f"{got}; {told}"
    # a longer sentence tells for itself; a question after it tells nothing
    longer = [Sentence(told, said, "Omar", 0, relevance=0.9, score=0.9), ranked[2]]
    text, used, _ = compose(question, shape, longer, asked_stems(question, ["Omar"], shape.before))
    assert used == longer[:1]


def test_how_long_is_answered_by_a_sentence_that_names_a_length() -> None:
    """ "How long was Sara's drive?" - the sentence naming forty minutes, not the
    one sharing more of the question's words."""
    said = make_conversation(
        "commute",
        (
            (("Sara", "Forty minutes in the car every morning on the ring road."),),
            (("Sara", "My drive to work passes the old mill."),),
        ),
        people=("Sara", "Ines"),
    ).messages
    question = "How long was Sara's drive to work?"
    shape = shape_of(question, asks_when=False)
    assert shape.length and not shape_of("How is Sara?", asks_when=False).length
    sentences = [Sentence(m.text, m, "Sara", i) for i, m in enumerate(said)]
    wanted = asked_stems(question, ["Sara"], shape.before)
    ranked = rank_sentences(sentences, shape, [0.2, 0.6], [0.3, 0.3], "Sara", wanted)
    assert ranked[0].text.startswith("Forty minutes")


@pytest.mark.parametrize(
    ("question", "sentence", "other"),
    [
        ("Does Olu own a home?", "We're renting a two-bed in Peckham.", True),
        ("Is Kenji engaged?", "We got married on Saturday!", True),
        ("Is Ada pregnant?", "Our son was born on Tuesday!", True),
        ("Does Tomás live in Lisbon?", "Tomás moved to Porto in March.", True),
        ("Does Tomás live in Lisbon?", "I moved to Lisbon in March.", False),  # the same stage
        ("Does Olu own a home?", "We bought a house in Leeds.", False),
        ("Is Ada pregnant?", "Due date is in May!", False),
    ],
)
def test_a_yes_no_question_names_one_stage_of_a_life_the_evidence_another(
    question: str, sentence: str, other: bool
) -> None:
    from archivist.lang.attributes_asked import other_stage

    assert other_stage(question, sentence) is other


@pytest.mark.parametrize(
    ("question", "sentence", "other"),
    [
        ("Is Lin on a student visa?", "They're sponsoring my skilled worker visa.", True),
        ("Is Ana on the payments team?", "I've moved to lead the fraud team.", True),
        ("Is Ana on the payments team?", "I manage the payments team now.", False),
        ("Does Mel play the acoustic guitar?", "I play guitar every day.", False),
        ("Does Mel play the acoustic guitar?", "I love my new guitar.", False),  # no kind
    ],
)
def test_a_yes_no_question_names_one_kind_of_a_thing_the_evidence_another(
    question: str, sentence: str, other: bool
) -> None:
    from archivist.read.extractive import other_kind

    assert other_kind(question, sentence) is other


def test_an_answer_about_now_leaves_out_what_a_swap_gave_up() -> None:
    from archivist.read.sentences import quoted

    (said,) = make_conversation(
        "car",
        (
            (
                (
                    "Ola",
                    "Traded the Fiesta in for an electric Kia Niro. "
                    "Switched from the iPhone to a Pixel.",
                ),
            ),
        ),
    ).messages
    traded, switched = (Sentence(t, said, "Ola", 0) for t in split_sentences(said.text))
    car = [stem("car")]
    assert quoted(traded, drop_replaced=True, wanted=car) == "Traded it for an electric Kia Niro."
    assert quoted(switched, drop_replaced=True, wanted=[stem("phone")]) == "Switched to a Pixel."
    # what was asked about stays; and asked about the past, nothing is cut
    fiesta = [stem("fiesta")]
    assert quoted(traded, drop_replaced=True, wanted=fiesta).startswith("Traded the Fiesta in")
    assert quoted(traded, wanted=car).startswith("Traded the Fiesta in")


def test_a_switch_denies_what_it_left_not_what_it_went_to() -> None:
    assert not denies("Switched to a Pixel, the camera is ridiculous.", [stem("pixel")])
    assert denies("Switched from the iPhone to a Pixel.", [stem("iphone")])
    assert not denies("Traded the Fiesta in for a Kia.", [stem("kia")])
    # "rental" is of "rent": the sentence speaks of it, and moving into one denies nothing
    assert not denies("Moved into a new rental in Didsbury.", [stem("rent")])
    assert denies("No longer going to the gym.", [stem("gym")])


@pytest.mark.parametrize(
    "sentence",
    [
        "Theo moved out at New Year, it's just me and the cat now.",
        "Traded the Fiesta in for a Kia.",
        "Marta and I called it quits last week.",
        "Walking with a stick now, the wheelchair went back to the Red Cross.",
    ],
)
def test_an_ending_after_what_it_ends_denies_it(sentence: str) -> None:
    asked = [stem(w) for w in ("theo", "fiesta", "marta", "wheelchair")]
    assert denies(sentence, asked)


def test_what_time_is_answered_with_the_time_of_day_said() -> None:
    (said,) = make_conversation(
        "bakery", ((("Nour", "Another 5am start at the bakery, my feet hate me."),),)
    ).messages
    question = "What time did Nour start at the bakery?"
    shape = shape_of(question, asks_when=True)
    ranked = [Sentence(said.text, said, "Nour", 0, relevance=0.9, score=0.9)]
    text, _, _ = compose(question, shape, ranked, asked_stems(question, ["Nour"], shape.before))
    assert text == said.text
    # "When…?" still asks for the day
    when = shape_of("When did Nour start at the bakery?", asks_when=True)
    text, _, _ = compose("When did Nour start at the bakery?", when, ranked, [stem("bakery")])
    assert text != said.text


def test_more_question_shapes() -> None:
    assert shape_of("What happened to Kit's road bike?", asks_when=False).past
    assert shape_of("How far did Kit ride on Sundays?", asks_when=False).length
    assert denies("Static Bloom is no more, the drummer moved.", [stem("static"), stem("bloom")])
    assert not denies("Sugar in my tea, no more fuss.", [stem("sugar")])


def test_a_window_ends_at_the_time_its_until_names() -> None:
    from datetime import UTC, datetime

    from archivist.read.sentences import window_end

    said = datetime(2024, 8, 1, 18, tzinfo=UTC)
    end = datetime(2024, 8, 21, tzinfo=UTC)
    assert window_end("Looking after the cat until the 20th.", said) == end
    assert window_end("Minding Pickle until she's back from Peru on the 20th.", said) == end
    assert window_end("On night shifts until the end of August.", said) == datetime(
        2024, 9, 1, tzinfo=UTC
    )
    assert window_end("Flying to Peru on the 20th.", said) is None


def test_a_name_asked_for_is_told_by_the_sentence_after() -> None:
    (said,) = make_conversation(
        "news",
        ((("Ivy", "Deleted all the dating apps, I'm seeing someone! His name is Raf."),),),
        people=("Ivy", "Tess"),
    ).messages
    seeing, name = split_sentences(said.text)
    ranked = [
        Sentence(seeing, said, "Ivy", 0, relevance=0.9, score=0.9),
        Sentence(name, said, "Ivy", 0, relevance=0.2, score=0.2),
    ]
    question = "Who is Ivy seeing?"
    shape = shape_of(question, asks_when=False)
    text, used, _ = compose(question, shape, ranked, asked_stems(question, ["Ivy"], shape.before))
    assert used == ranked and text.endswith("His name is Raf.")
    # a question that asks no name keeps the one sentence
    other = "What did Ivy delete?"
    shape = shape_of(other, asks_when=False)
    _, used, _ = compose(other, shape, ranked, asked_stems(other, ["Ivy"], shape.before))
    assert used == ranked[:1]


def test_why_favours_a_sentence_that_gives_a_reason() -> None:
    said = make_conversation(
        "band",
        (
            (("Rio", "Our band Static Bloom has a gig at the Crown on Friday."),),
            (("Rio", "Static Bloom is no more, the drummer moved to Glasgow."),),
        ),
        people=("Rio", "Cy"),
    ).messages
    question = "Why did Static Bloom end?"
    shape = shape_of(question, asks_when=False)
    assert shape.why and not shape_of("When did Static Bloom end?", asks_when=True).why
    sentences = [Sentence(m.text, m, "Rio", i) for i, m in enumerate(said)]
    wanted = asked_stems(question, ["Rio"], shape.before)
    ranked = rank_sentences(sentences, shape, [0.6, 0.5], [0.3, 0.3], "Rio", wanted)
    assert ranked[0].text.startswith("Static Bloom is no more")


@pytest.mark.parametrize(
    ("question", "ends"),
    [
        ("Is Nik off alcohol?", True),  # went without it, as "gave up" asks
        ("Is Nik still off alcohol?", True),
        ("Has Ana been off sugar since May?", True),
        ("Is Pam off sick?", False),  # a state of leave
        ("Is Lee off work today?", False),
        ("Did the flight take off on time?", False),
    ],
)
def test_off_something_asks_about_going_without_it(question: str, ends: bool) -> None:
    assert shape_of(question, asks_when=False).ends is ends


def test_off_something_ended_is_no(tmp_path: Path) -> None:
    """Dry January ended: "Is Nik off alcohol?" in March is no."""
    from datetime import UTC, datetime

    chat = ((("Nik", "Dry January starts tomorrow, no beer for a month."), ("Ava", "Good luck.")),)
    with MemoryService(tmp_path / "x.db", settings=RULES, embedder=FakeEmbedder()) as m:
        conv = make_conversation("dry", chat, people=("Nik", "Ava"))
        m.add(conv)
        got = m.ask("Is Nik off beer?", person="Nik", at=datetime(2030, 3, 1, tzinfo=UTC))
    assert got.answer.startswith("No: Dry January starts tomorrow")
