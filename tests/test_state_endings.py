"""Issue 13: the many ways a state ends, and answers that read the newest word on it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from archivist.config import Settings
from archivist.lang.attributes import attribute_values
from archivist.lang.text import ENDING, WENT_BACK, ended_objects, names_thing
from archivist.read.history import HISTORY_MARK
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder
from archivist.write.archivist import HeuristicArchivist
from conftest import T0, make_conversation


def memory(path: Path) -> MemoryService:
    return MemoryService(
        path,
        settings=Settings(judge="rules", consolidate_mode="manual"),
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(),
    )


@pytest.mark.parametrize(
    ("sentence", "ended"),
    [
        ("Doctor told me to cut out caffeine, so I'm on decaf.", ["caffeine"]),
        ("Closed the shop for good yesterday.", ["shop"]),
        ("The shelter closed down last month, funding ran out.", ["shelter"]),
        ("Pulled out of the half marathon, knee is shot.", ["half marathon"]),
        ("Raj and I separated in May.", ["Raj"]),
        ("My visa expired last week.", ["visa"]),
        ("Completed my chemo on Friday!", ["chemo"]),
        ("Took the dress back to the shop.", ["dress"]),
        ("I've dropped the Portuguese though, switching to Japanese.", ["Portuguese"]),
        ("I've handed in my chair at the orchestra.", ["orchestra"]),
        ("GP says I'm prediabetic. Sugar's off the menu.", ["Sugar"]),
        ("On crutches until July and parkrun is out for the year.", ["parkrun"]),
        ("The Fiat went to a guy from Gumtree.", ["Fiat"]),
        ("We had to rehome Rocket, he and the baby weren't safe.", ["Rocket"]),
        ("Last day at the bank after 32 years. Officially retired!", ["bank"]),
        ("Not renewing the Clifton lease, I'm moving to Bath.", ["Clifton lease", "Clifton"]),
        ("RIP Nibbles, the kids buried him in the garden.", ["Nibbles"]),
        ("I changed course to psychology. Law is behind me.", ["Law"]),
        ("Handed in my apron at Grind.", ["Grind"]),
        (
            "Got my insulin pump, no more finger pricks and injections!",
            ["finger pricks", "injections"],
        ),
        ("They closed the Leeds office, we're fully remote now.", ["Leeds office"]),
        ("My shoulder won't take rowing anymore.", ["rowing"]),
        ("I've let my club membership lapse.", ["club membership", "club"]),
        ("Junior designer at Monzo, I start in two weeks. Bye bye Tesco.", ["Tesco"]),
        ("Stepped back from the cathedral choir, Sundays were too much.", ["cathedral choir"]),
        ("We wound Loopy down, ran out of runway.", ["Loopy"]),
        ("Pottery's finished for me, the studio put the price up.", ["Pottery"]),
        ("Beard's off! Raised 600 quid for the hospice.", ["Beard"]),
        ("The drum kit's gone to a kid down the road.", ["drum kit"]),
        ("The vintage shop is no more, the rent tripled.", ["vintage shop", "shop"]),
        ("Doctor took me off metformin, my numbers are normal.", ["metformin"]),
        ("We've wrapped the podcast up after 40 episodes.", ["podcast"]),
        ("The Corsa failed its MOT so badly it's been scrapped.", ["Corsa"]),
        ("The shop was sold by the owners.", ["shop"]),
        ("Handed my notice in at Grindhouse, got the apprenticeship.", ["Grindhouse"]),
        ("Rosa and I have split, she's gone back to Madrid.", ["Rosa"]),
        ("Put the OU degree on hold, work is too busy.", ["OU degree"]),
    ],
)
def test_ways_a_state_ends_name_what_ended(sentence: str, ended: list[str]) -> None:
    assert ended_objects(sentence) == ended
    assert ENDING.search(sentence) or WENT_BACK.search(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "I closed my eyes and listened.",
        "We closed the deal today.",
        "I'm not cut out for this.",
        "Keep them separated for a few days.",
        "Completed on the flat in Leyton!",
        "Tom went to a concert with his friend.",
        "Don't rip the paper.",
        "I closed the door behind me.",
        "We closed the shop early today.",
        "I'm off to Japan on Friday.",
    ],
)
def test_look_alikes_end_nothing(sentence: str) -> None:
    assert ended_objects(sentence) == []
    assert not ENDING.search(sentence)


def test_a_retirement_ends_a_job_not_the_person() -> None:
    """ "Grandpa retired" must not mark "Grandpa lives in Leeds" as history: a party
    ends by dying, leaving or splitting up, not by retiring."""
    assert ended_objects("Grandpa retired last year.") == []
    assert ENDING.search("Colin retired, and my new boss is Priti.")  # an answer's no


def test_a_second_verb_after_and_is_no_second_thing() -> None:
    assert ended_objects("I finished my first screenplay and printed it.") == ["first screenplay"]


def test_a_thing_is_named_as_words_or_as_the_end_of_a_name() -> None:
    assert names_thing("Signed up at PureGym by the station.", "gym")
    assert names_thing("I love my bikes.", "bike")
    assert not names_thing("A documentary about overfishing.", "fish")
    assert not names_thing("The gymnast was great.", "gym")
    assert names_thing("Rent on my flat in Camden went up.", "Camden flat")  # any order
    assert not names_thing("My flat is lovely.", "Camden flat")


def test_homes_named_by_flatmates_a_possessive_or_their_kind_are_homes() -> None:
    (leith,) = {
        v.value for v, _ in attribute_values("Living with two nurses in a flat share in Leith.")
    }
    assert leith == "Leith"
    moved = [v for v, _ in attribute_values("Got the keys to Ivy's own studio in Portobello.")]
    assert ("Portobello", "move") in {(v.value, v.change) for v in moved}
    (camden,) = attribute_values("Rent on Ned's flat in Camden went up again.")
    assert camden[0].value == "Camden"
    (boat,) = attribute_values("Ned lives on a narrowboat on the Regent's Canal now!")
    assert boat[0].value == "narrowboat"


def test_a_new_home_makes_the_flat_share_history(tmp_path: Path) -> None:
    conv = make_conversation(
        "ivy",
        [
            [
                ("Ivy", "Living with two nurses in a flat share in Leith, it's noisy."),
                ("Sol", "Ha"),
            ],
            [("Ivy", "Got the keys to my own studio in Portobello!"), ("Sol", "Party?")],
        ],
        people=("Ivy", "Sol"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        assert [(c.old_value, c.new_value) for c in mem.conflicts()] == [("Leith", "Portobello")]
        ctx = mem.context("Where does Ivy live?", person="Ivy", at=T0 + timedelta(weeks=3))
        lines = ctx.text.splitlines()
        assert any("Leith" in line and HISTORY_MARK in line for line in lines)
        assert any("Portobello" in line and HISTORY_MARK not in line for line in lines)


def test_a_later_denial_answers_no_over_the_event_that_began_it(tmp_path: Path) -> None:
    """ "Opened my bike repair shop" stays true as history; "Closed the shop for good"
    is Gil's newest word on the shop: he runs none now."""
    conv = make_conversation(
        "gil",
        [
            [("Gil", "Opened my bike repair shop on Mill Lane today!"), ("Ada", "Proud!")],
            [("Gil", "Closed the shop for good yesterday. Rent doubled."), ("Ada", "Oh no")],
        ],
        people=("Gil", "Ada"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        at = T0 + timedelta(weeks=4)
        answer = mem.ask("Does Gil run a bike shop?", person="Gil", at=at)
        assert answer.answer.startswith("No: Closed the shop for good")
        assert "earlier, " in answer.answer  # the opening, dated, as what held before
        ctx = mem.context("Does Gil run a bike shop?", person="Gil", at=at)
        (opened,) = [line for line in ctx.text.splitlines() if "Opened my bike" in line]
        assert HISTORY_MARK in opened
        # asked before the closing, the shop is his
        before = mem.ask("Does Gil run a bike shop?", person="Gil", at=T0 + timedelta(days=2))
        assert before.answer.startswith("Yes")


def test_a_still_clause_is_no_later_denial(tmp_path: Path) -> None:
    conv = make_conversation(
        "omar",
        [
            [("Omar", "Tenants' association committee meeting tonight."), ("Lia", "Fun")],
            [("Omar", "Yes, I'm still on the committee, just no more accounts."), ("Lia", "Ok")],
        ],
        people=("Omar", "Lia"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        q = "Is Omar on the committee?"
        answer = mem.ask(q, person="Omar", at=T0 + timedelta(weeks=3))
        assert answer.answer.startswith("Yes")


def test_who_and_whose_questions_name_the_one_who_said_it(tmp_path: Path) -> None:
    conv = make_conversation(
        "abe",
        [
            [
                ("Abe", "My iPhone screen cracked again, third time this year."),
                ("Noor", "Get a case!"),
            ]
        ],
        people=("Abe", "Noor"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        answer = mem.ask("Who told Abe to get a case?", at=T0 + timedelta(days=1))
        assert answer.answer == "Noor: Get a case!"


def test_did_x_say_abstains_naming_who_did(tmp_path: Path) -> None:
    conv = make_conversation(
        "uma",
        [[("Uma", "Six months with Raj now, he cooks better than me."), ("Jo", "Keep him!")]],
        people=("Uma", "Jo"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        at = T0 + timedelta(days=1)
        wrong = mem.ask("Did Jo say Raj cooks better than Uma?", at=at)
        assert wrong.abstain and "Uma" in wrong.answer
        right = mem.ask("Did Uma say Raj cooks better than her?", at=at)
        assert not right.abstain


def test_ones_own_relative_named_in_the_question_is_no_one_elses(tmp_path: Path) -> None:
    """ "When was Theo born?" asked of Zara: "Baby Theo arrived last night" is her baby,
    named, not someone else's news."""
    conv = make_conversation(
        "zara",
        [[("Zara", "Baby Theo arrived last night, everyone is well."), ("Lou", "Congrats!")]],
        people=("Zara", "Lou"),
        start=datetime(2022, 11, 19, 9, tzinfo=UTC),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        answer = mem.ask("When was Theo born?", person="Zara", at=datetime(2023, 1, 1, tzinfo=UTC))
        assert not answer.abstain and "18 November 2022" in answer.answer


def test_a_yes_no_naming_a_month_reads_the_state_then(tmp_path: Path) -> None:
    """ "On crutches until July": asked of August, no; of June, yes; of March (before
    the fall), no."""
    conv = make_conversation(
        "ida",
        [[("Ida", "Tore my ACL at netball, so I'm on crutches until July."), ("Bo", "Ouch")]],
        people=("Ida", "Bo"),
        start=datetime(2023, 5, 27, 9, tzinfo=UTC),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        at = datetime(2023, 8, 15, tzinfo=UTC)
        august = mem.ask("Is Ida on crutches in August 2023?", person="Ida", at=at)
        assert august.answer.startswith("No:") and "(ended 1 August 2023)" in august.answer
        june = mem.ask("Was Ida on crutches in June 2023?", person="Ida", at=at)
        assert june.answer.startswith("Yes:")
        march = mem.ask("Was Ida on crutches in March 2023?", person="Ida", at=at)
        assert march.answer.startswith("No:")


def test_an_answer_about_now_leaves_out_the_clause_that_ended(tmp_path: Path) -> None:
    conv = make_conversation(
        "eve",
        [
            [("Eve", "My manager Colin signs off everything I do."), ("Tam", "Micromanager.")],
            [("Eve", "Colin retired, and my new boss is Priti, she trusts me."), ("Tam", "Nice")],
        ],
        people=("Eve", "Tam"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        answer = mem.ask("Who is Eve's boss now?", person="Eve", at=T0 + timedelta(weeks=3))
        assert "Priti" in answer.answer and "Colin" not in answer.answer


def test_a_short_announcement_is_a_claim_a_birth_ends(tmp_path: Path) -> None:
    """ "I'm pregnant!" is two words, and a state: a claim; "She's here!" ends it."""
    conv = make_conversation(
        "gem",
        [
            [("Gem", "I'm pregnant!"), ("Tia", "Congratulations!")],
            [("Gem", "She's here! Isla, born this morning."), ("Tia", "Welcome Isla!")],
        ],
        people=("Gem", "Tia"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        assert [c.attribute for c in mem.conflicts()] == ["pregnancy"]
        now = mem.ask("Is Gem pregnant?", person="Gem", at=T0 + timedelta(weeks=3))
        assert now.answer.startswith("No")
        then = mem.ask("Is Gem pregnant?", person="Gem", at=T0 + timedelta(days=2))
        assert then.answer.startswith("Yes")


def test_rather_than_denies_what_follows_it_and_resisting_affirms() -> None:
    from archivist.lang.denial import denies
    from archivist.lang.text import stem

    said = "Couldn't resist the cheese board, I'm veggie now rather than vegan."
    assert denies(said, [stem("vegan")])
    assert not denies(said, [stem("veggie")])
    assert not denies("Couldn't resist the cheese board at the wedding.", [stem("cheese")])
    assert denies("I didn't touch the cheese board.", [stem("cheese")])


def test_a_move_in_with_someone_next_month_is_the_home_from_then_on(tmp_path: Path) -> None:
    conv = make_conversation(
        "rui",
        [
            [("Rui", "Signed a lease on a one-bed flat in Clifton."), ("Ken", "Nice")],
            [("Rui", "Not renewing the lease, I'm moving in with Alice in Bath next month.")],
        ],
        people=("Rui", "Ken"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        (move,) = [c for c in mem.claims(conversation="rui") if "Bath" in c.text]
        assert move.kind == "fact" and move.valid_to is None
        assert ("Clifton", "Bath") in [(c.old_value, c.new_value) for c in mem.conflicts()]


def test_a_kind_named_at_the_start_and_a_partner_named_by_dates() -> None:
    from archivist.lang.phrasing import other_kind

    assert other_kind("Is Anu on a student visa?", "Graduate visa approved!")
    assert not other_kind("Is Anu on a student visa?", "Student visa approved!")
    (felix,) = attribute_values("Lia has been on three dates with a lovely guy called Felix.")
    assert (felix[0].attribute, felix[0].value) == ("partner", "Felix")


def test_what_a_person_ends_is_never_the_person(tmp_path: Path) -> None:
    """Claims write "Jon" for "I": "Jon had to shut down Jon's bank account" ends the
    account, not every older claim that names Jon."""
    assert ended_objects("Jon had to shut down Jon's bank account.") == ["bank account", "bank"]
    assert ended_objects("Gina quit Gina's job at the bakery.") == ["job"]
    conv = make_conversation(
        "jon",
        [
            [("Jon", "I dance salsa every Friday with my partner."), ("Gina", "Fun")],
            [("Jon", "I had to shut down my bank account, it was tough."), ("Gina", "Oh")],
            [("Jon", "I retired from the studio last week."), ("Gina", "Wow")],
        ],
        people=("Jon", "Gina"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        (salsa,) = [c for c in mem.claims(conversation="jon") if "salsa" in c.text]
        assert salsa.status == "current" and salsa.valid_to is None


def test_a_promotion_keeps_the_employer(tmp_path: Path) -> None:
    """The promotion closes the first-week claim (one validity per claim), but only the
    title changed: Pixelworks is still where Mara works."""
    conv = make_conversation(
        "mara",
        [
            [("Mara", "First week as a junior designer at Pixelworks, so lovely."), ("Eli", "Go")],
            [("Mara", "Got bumped up to senior designer, new title and everything."), ("Eli", "!")],
        ],
        people=("Mara", "Eli"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        at = T0 + timedelta(weeks=3)
        assert "Pixelworks" in mem.ask("Where does Mara work?", person="Mara", at=at).answer
        assert "senior" in mem.ask("What is Mara's job title?", person="Mara", at=at).answer
        conv2 = make_conversation(
            "mara",
            [[("Mara", "Left Pixelworks for good, I work at Studio Nine now."), ("Eli", "Oh!")]],
            people=("Mara", "Eli"),
            first_session=3,
            first_seq=4,
        )
        mem.add(conv2)
        later = mem.ask("Where does Mara work?", person="Mara", at=T0 + timedelta(weeks=5))
        assert "Studio Nine" in later.answer


def test_an_employer_left_is_not_kept(tmp_path: Path) -> None:
    conv = make_conversation(
        "mara",
        [
            [("Mara", "First week as a junior designer at Pixelworks, so lovely."), ("Eli", "Go")],
            [("Mara", "Got bumped up to senior designer, new title and everything."), ("Eli", "!")],
            [("Mara", "Quit Pixelworks today, taking the summer off."), ("Eli", "Enjoy")],
        ],
        people=("Mara", "Eli"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        answer = mem.ask("Where does Mara work?", person="Mara", at=T0 + timedelta(weeks=4))
        assert not answer.answer.startswith("First week")


def test_im_off_it_denies_it() -> None:
    from archivist.lang.denial import denies
    from archivist.lang.text import stem

    assert denies("It made me foggy so I'm off the topiramate.", [stem("topiramate")])
    assert not denies("I'm off to Japan on Friday.", [stem("japan")])


def test_who_said_it_is_answered_by_someone_else_named(tmp_path: Path) -> None:
    """ "Who said Nell's hair was gorgeous?" asks for the one who said it to Nell: her
    own sentence about her hair is no answer, and the speaker is named, not the one
    "you" means."""
    conv = make_conversation(
        "nell",
        [
            [
                ("Nell", "Growing my hair out, it's past my shoulders now."),
                ("Kez", "Gorgeous."),
                ("Nell", "Any plans for the weekend?"),
                ("Kez", "You should get a fringe cut too!"),
            ]
        ],
        people=("Nell", "Kez"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        at = T0 + timedelta(days=1)
        said = mem.ask("Who said Nell's hair was gorgeous?", at=at)
        assert said.answer.startswith("Kez:")
        told = mem.ask("Who told Nell to get a fringe cut?", at=at)
        assert told.answer.startswith("Kez: You should get a fringe cut too!")
        asked = mem.ask("Who asked about plans for the weekend?", at=at)
        assert asked.answer.startswith("Nell: Any plans")


def test_how_someone_does_a_thing_now_is_their_newest_word_on_it(tmp_path: Path) -> None:
    """ "How does Sam get to the office?": the train he takes now, though only the old
    way names the office; a later word that only says what ended tells no how."""
    conv = make_conversation(
        "sam",
        [
            [
                ("Sam", "I drive my car to the office every day, the traffic is awful."),
                ("Ana", "Oof"),
            ],
            [
                ("Sam", "How I get there now: the train, my car stays at home every day."),
                ("Ana", "Nice"),
            ],
        ],
        people=("Sam", "Ana"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        at = T0 + timedelta(weeks=3)
        answer = mem.ask("How does Sam get to the office?", person="Sam", at=at)
        assert "train" in answer.answer and "drive" not in answer.answer


@pytest.mark.parametrize(
    ("sentence", "asked"),
    [
        ("Still getting used to the lenses, I dropped one down the sink.", "lenses"),
        ("Left Pixelworks late again, the deadline is brutal.", "Pixelworks"),
        ("Can't wait for choir tonight, we're starting the Faure.", "choir"),
    ],
)
def test_a_state_spoken_of_again_is_not_denied_by_a_word_that_looks_like_an_ending(
    sentence: str, asked: str
) -> None:
    """Getting used to lenses, leaving work late and not being able to wait for choir
    all say the state holds."""
    from archivist.lang.denial import denies
    from archivist.lang.text import stem

    assert not denies(sentence, [stem(asked.lower())])
    assert denies("I used to wear lenses.", [stem("lenses")])
    assert denies("Left Pixelworks in May.", [stem("pixelworks")])


@pytest.mark.parametrize(
    ("sentence", "asked", "denied"),
    [
        ("Orchard season's done, I'm doing a bar job now.", "orchard", True),
        ("Marco and I are done. He took the job in Milan.", "marco", True),
        ("Crutches are history, walking to the shop unaided.", "crutches", True),
        ("The van's water pump is done, showering at the leisure centre.", "van", False),
        ("Jess is off to Glasgow for the weekend.", "jess", False),
        ("The Polestar is off the road for a week with a flat tyre.", "polestar", False),
        ("Tutoring went over by an hour tonight.", "tutoring", False),
        ("Gina is over the moon about the new store.", "gina", False),
        ("Cast is off and I'm back on skates, slowly.", "cast", True),
        ("The dog walker was off sick so Biscuit came to work.", "walker", False),
    ],
)
def test_a_thing_said_to_be_over(sentence: str, asked: str, denied: bool) -> None:
    """The copula's forms of an ending ("'s done", "are history"), said of the thing
    itself: not of something it owns, and not for a while or somewhere else."""
    from archivist.lang.denial import denies
    from archivist.lang.text import stem

    assert denies(sentence, [stem(asked)]) is denied


@pytest.mark.parametrize(
    ("sentence", "home"),
    [
        ("Renting a one-bed above the chippy on Church Street, smells amazing.", "Church Street"),
        ("Signed for a terrace in Heaton with my cousin Dee.", "Heaton"),
        ("We rent a two-bed in Leith.", "Leith"),
        ("Found a room in a houseshare in Bristol.", "Bristol"),
        ("Renting a flat in Camden.", "Camden"),
        ("Sharing a flat in Hackney with two guys from uni.", "Hackney"),
        ("Moved back to my mum's in Margate to save for a deposit.", "Margate"),
        ("Renting a room in Paris for the weekend.", None),
        ("Rented a car in Spain.", None),
    ],
)
def test_a_home_by_what_one_rents_or_finds(sentence: str, home: str | None) -> None:
    found = [a.value for a, _ in attribute_values(sentence) if a.attribute == "residence"]
    assert found == ([home] if home else [])


def test_a_partner_called_by_name_after_seeing_a_guy() -> None:
    (idris,) = attribute_values("Been seeing a lovely guy called Idris from my running club.")
    assert (idris[0].attribute, idris[0].value) == ("partner", "Idris")


def test_an_event_that_began_a_state_is_ended_by_a_later_word(tmp_path: Path) -> None:
    """ "Started on metformin" is an event, yet it began a state; "Doctor took me off
    metformin" (a claim says "took Bet off") ends it, as a superseded claim."""
    from archivist.write.reconcile import opens_state

    assert opens_state("Started on metformin for the diabetes.")
    assert opens_state("Joined the community choir at St Paul's.")
    assert not opens_state("Started the car.") and not opens_state("Got a parking ticket.")
    assert opens_state("Picked up Don's first car today, a red Corsa.")  # claims write names
    assert not opens_state("Picked up the kids from school.")
    conv = make_conversation(
        "bet",
        [
            [("Bet", "Started on metformin for the diabetes, it upsets my stomach."), ("Al", "Oh")],
            [("Bet", "Doctor took me off metformin, my numbers are normal."), ("Al", "Great")],
        ],
        people=("Bet", "Al"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        (started,) = [c for c in mem.claims(conversation="bet") if c.text.startswith("Started")]
        assert started.kind == "event" and started.status == "superseded"
        profile = mem.profile("Bet", at=T0 + timedelta(weeks=3))
        assert [e.text for e in profile.entries() if "Started" in e.text] == []


@pytest.mark.parametrize(
    ("sentence", "subject", "attribute", "value"),
    [
        ("Ola's line manager Sandra keeps booking meetings.", "Ola", "manager", "Sandra"),
        ("Sandra retired at Christmas, Ola's new manager is Imran.", "Ola", "manager", "Imran"),
        ("My boss is Dave.", "Ana", "manager", "Dave"),
        ("Freshers week at Sheffield, studying geography.", "Bo", "study", "geography"),
        ("Switched Bo's degree to geology, too many essays.", "Bo", "study", "geology"),
        ("Finally settled in Porto.", "Tomas", "residence", "Porto"),
    ],
)
def test_one_manager_and_one_subject_at_a_time(
    sentence: str, subject: str, attribute: str, value: str
) -> None:
    """A line manager and a degree subject are single-valued: a new one replaces the
    old. "Sandra retired" is Sandra's retirement, not the speaker's job."""
    from archivist.lang.attributes import attribute_of

    found = attribute_of(sentence, subject)
    assert found is not None and (found.attribute, found.value) == (attribute, value)
    assert attribute_of("Studying for my driving test.", "Lil") is None


def test_the_clause_naming_a_replaced_value_reads_as_history(tmp_path: Path) -> None:
    """ "Sandra retired at Christmas, my new manager is Imran": the line tells of the
    change; the clause naming Sandra is marked in place, the old line as a whole."""
    conv = make_conversation(
        "ola",
        [
            [("Ola", "My line manager Sandra keeps booking meetings at 5pm."), ("Tim", "Ugh")],
            [("Ola", "Sandra retired at Christmas, my new manager is Imran."), ("Tim", "Nice")],
        ],
        people=("Ola", "Tim"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        assert [(c.old_value, c.new_value) for c in mem.conflicts()] == [("Sandra", "Imran")]
        text = mem.context("Who is Ola's manager?", person="Ola", at=T0 + timedelta(weeks=3)).text
        (old,) = [line for line in text.splitlines() if "5pm" in line]
        (new,) = [line for line in text.splitlines() if "Imran" in line]
        assert HISTORY_MARK in old
        assert f"{HISTORY_MARK}, my new manager is Imran" in new


def test_a_value_named_only_as_what_was_is_another_value() -> None:
    from archivist.lang.attributes_asked import asked_attributes, states_other_value

    pescatarian = asked_attributes("Is Ash pescatarian?")
    said = "I eat meat again, the pescatarian thing lasted eight months."
    assert states_other_value(pescatarian, said)
    assert not states_other_value(pescatarian, "Still pescatarian, though I eat meat at Christmas.")
    sandra = asked_attributes("Is Sandra Ola's manager?")
    assert [(a.attribute, a.value) for a in sandra] == [("manager", "Sandra")]
    assert states_other_value(sandra, "Sandra retired at Christmas, my new manager is Imran.")


def test_a_thing_ended_by_the_name_it_was_given(tmp_path: Path) -> None:
    """ "Does Don have a car?": his car was "a red Corsa", and "the Corsa … has been
    scrapped" shares no word with the question."""
    conv = make_conversation(
        "don",
        [
            [("Don", "Picked up my first car today, a red Corsa with 90k miles."), ("Meg", "Yay")],
            [("Don", "The Corsa failed its MOT so badly it's been scrapped."), ("Meg", "Oh no")],
        ],
        people=("Don", "Meg"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        answer = mem.ask("Does Don have a car?", person="Don", at=T0 + timedelta(weeks=3))
        # the write side closes the car's claim too ("Picked up my first car" began a
        # state): the answer still quotes what ended it, not only when
        assert answer.answer.startswith("No: The Corsa failed its MOT")


def test_a_yes_reads_what_the_holder_later_said_of_whom_or_what_it_named(tmp_path: Path) -> None:
    """ "Does Ola have a flatmate?": "My flatmate Bea…", then Ola's "Bea moved in with her
    boyfriend" (a sentence about Bea, said by Ola). "We lost Bruno" stays a no after its
    claim's end; "BRACES OFF!!!" is a headline ending."""
    conv = make_conversation(
        "ola",
        [
            [("Ola", "My flatmate Bea leaves her dishes everywhere."), ("Tam", "Post-it time")],
            [("Ola", "Bea moved in with her boyfriend, so the flat is all mine."), ("Tam", "Ha")],
            [("Ola", "Our old labrador Bruno is thirteen now."), ("Tam", "Aw")],
            [("Ola", "We lost Bruno on Saturday."), ("Tam", "So sorry")],
            [("Ola", "Got braces fitted, two years of this."), ("Tam", "Brave")],
            [("Ola", "BRACES OFF!!!"), ("Tam", "Smile!")],
        ],
        people=("Ola", "Tam"),
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add(conv)
        at = T0 + timedelta(weeks=9)
        flatmate = mem.ask("Does Ola have a flatmate?", person="Ola", at=at).answer
        assert flatmate.startswith("No: Bea moved in with her boyfriend")
        bruno = mem.ask("Does Ola still have Bruno?", person="Ola", at=at).answer
        assert bruno.startswith("No: We lost Bruno") and "ended" not in bruno
        assert mem.ask("Does Ola have braces?", person="Ola", at=at).answer.startswith("No")


def test_a_workplace_named_by_its_kind_and_smoke_free() -> None:
    from archivist.lang.denial import denies
    from archivist.lang.text import stem

    ((job, _),) = attribute_values("I got the apprenticeship at the garage!")
    assert (job.attribute, job.value) == ("employer", "garage")
    assert denies("One year smoke free today!", [stem("smoke")])
    assert ended_objects("We split the bill.") == []
