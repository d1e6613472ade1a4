"""The no-LLM archivist: sentence claims, fixed-size episodes and their extractive narratives."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from archivist.lang.subject import split_clauses
from archivist.model import CLAIM_KINDS, CLAIM_SOURCES, Attachment, Claim, Message
from archivist.write.heuristic import heuristic_claims, heuristic_episode, split_sentences
from archivist.write.segment_fallback import segment_fixed, should_use_llm_boundaries

T = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday
CAPTION = "a photo of a small brown puppy on a blue blanket"

TURNS = [
    ("Ana", "Hey Lee! Good to see you! How have you been?"),
    ("Lee", "Hi Ana! I went to the climbing gym yesterday with my cousin Tomas."),
    ("Ana", "Wow, that's great! I'm on antibiotics for 10 days, so no climbing for me."),
    ("Lee", "Oh no, that's rough. Dr. Okafor told you to rest, right?"),
    ("Ana", "Yes. We're travelling to Japan next month and I want to be healthy by then."),
    ("Lee", "I love hiking in the hills near Sao Paulo. Did you ever go hiking?"),
    ("Ana", "Thanks! My sister Maya adopted a puppy last Saturday. Look at him!"),
    ("Lee", "Should I get a dog too? Your sister is so lucky!"),
    ("Ana", "Lee's brother works at the shelter, so he said you could visit anytime."),
    ("Lee", "Thank you so much! Talk to you soon!"),
]


def msg(
    i: int,
    speaker: str,
    text: str,
    *,
    session: int = 1,
    when: datetime | None = None,
    role: str = "user",
    to: tuple[str, ...] | None = None,
    attachments: tuple[Attachment, ...] = (),
    conversation: str = "c1",
) -> Message:
    other = "Lee" if speaker == "Ana" else "Ana"
    return Message(
        id=f"D{session}:{i + 1}",
        conversation=conversation,
        session=session,
        speaker=speaker,
        text=text,
        timestamp=when or T + timedelta(seconds=30 * i),
        role=role,  # type: ignore[arg-type]
        addressees=(other,) if to is None else to,
        attachments=attachments,
        session_start=T,
        seq=i,
    )


def dialogue() -> list[Message]:
    photo = (Attachment("image", caption=CAPTION),)
    return [
        msg(i, who, text, attachments=photo if i == 6 else ())
        for i, (who, text) in enumerate(TURNS)
    ]


@pytest.fixture(scope="module")
def claims() -> list[Claim]:
    return heuristic_claims(dialogue(), known_people=["Maya", "Tomas"])


def claim_from(claims: list[Claim], message_id: str, contains: str) -> Claim:
    hits = [c for c in claims if c.evidence == (message_id,) and contains in c.text]
    assert len(hits) == 1, [c.text for c in claims if c.evidence == (message_id,)]
    return hits[0]


# -- attribution and provenance -----------------------------------------------------------


def test_every_claim_has_speaker_evidence_and_heuristic_method(claims: list[Claim]) -> None:
    by_id = {m.id: m for m in dialogue()}
    assert claims
    for c in claims:
        assert c.speaker and c.evidence and c.text.strip()
        assert set(c.evidence) <= set(by_id)
        m = by_id[c.evidence[0]]
        assert (c.conversation, c.said_at, c.method) == (m.conversation, m.timestamp, "heuristic")
        assert c.kind in CLAIM_KINDS and c.source in CLAIM_SOURCES
        assert 1 <= c.importance <= 10 and 1 <= c.salience <= 10


def test_first_hand_claims_carry_their_evidence_speaker(claims: list[Claim]) -> None:
    speakers = {m.id: m.speaker for m in dialogue()}
    first = [c for c in claims if c.source == "first_hand"]
    matching = sum(c.speaker == speakers[c.evidence[0]] for c in first)
    assert first and matching / len(first) >= 0.95
    assert matching == len(first)  # by construction


def test_greetings_thanks_farewells_and_others_questions_are_dropped(claims: list[Claim]) -> None:
    ids = {c.evidence[0] for c in claims}
    assert "D1:1" not in ids and "D1:10" not in ids
    texts = " | ".join(c.text for c in claims)
    for gone in ("Good to see", "Thanks", "Look at him", "ever go hiking", "Wow", "Hi Ana"):
        assert gone not in texts


def test_pronouns_resolved_to_names(claims: list[Claim]) -> None:
    c = claim_from(claims, "D1:2", "climbing gym")
    assert c.text == "Lee went to the climbing gym yesterday with Lee's cousin Tomas."
    assert claim_from(claims, "D1:3", "antibiotics").text.startswith("Ana is on antibiotics")
    for c in claims:
        words = {w.lower() for w in re.findall(r"[\w'’]+", c.text)}
        assert not words & {"i", "me", "my", "i'm", "you", "your", "you're"}, c.text


def test_claim_words_come_from_the_message(claims: list[Claim]) -> None:
    by_id = {m.id: m for m in dialogue()}
    names = {"ana", "lee", "ana's", "lee's"}
    agreement = {"is", "has", "does", "doesn't", "was", "wants", "loves"}
    template = {"shared", "photo", "of", "a"}
    for c in claims:
        source = {w.lower() for w in re.findall(r"[\w'’.]+", by_id[c.evidence[0]].indexed_text())}
        source |= {w.rstrip(".") for w in source}
        words = {w.lower() for w in re.findall(r"[\w'’.]+", c.text)} | set()
        extra = {w.rstrip(".") for w in words} - source - names - agreement - template
        assert not extra, (c.text, extra)


def test_subjects(claims: list[Claim]) -> None:
    assert claim_from(claims, "D1:2", "climbing").subject == "Lee"  # first person
    assert claim_from(claims, "D1:8", "sister is so lucky").subject == "Ana"  # "your"
    assert claim_from(claims, "D1:9", "brother works").subject == "Lee"  # a named person


def test_a_sentence_about_a_relative_is_the_relative_s(claims: list[Claim]) -> None:
    """ "My sister Maya adopted a puppy" is Maya's; the speaker's own word, so first-hand."""
    puppy = claim_from(claims, "D1:7", "adopted a puppy")
    assert (puppy.subject, puppy.speaker, puppy.source) == ("Maya", "Ana", "first_hand")
    later = msg(0, "Ana", "Mum had a fall and moved into a care home.", session=2)
    named = heuristic_claims([later], kin={("ana", "mum"): "Halina"})
    unnamed = heuristic_claims([later])
    assert [c.subject for c in named] == ["Halina"]  # named in an earlier session
    assert [c.subject for c in unnamed] == ["Ana's mum"]
    # in one batch the introduction is read too; "my kids and I" stays the speaker's
    both = heuristic_claims(
        [
            msg(0, "Ana", "My mum Halina still lives alone in Gdansk."),
            msg(1, "Ana", "Mum had a fall and moved into a care home."),
            msg(2, "Ana", "My kids and I went camping at the lake."),
        ]
    )
    assert [c.subject for c in both] == ["Halina", "Halina", "Ana"]


def test_sources(claims: list[Claim]) -> None:
    assert claim_from(claims, "D1:2", "climbing").source == "first_hand"
    assert claim_from(claims, "D1:4", "Okafor told").source == "reported"
    assert claim_from(claims, "D1:9", "brother works").source == "reported"
    advice = msg(
        0,
        "assistant",
        "You should drink plenty of water while on antibiotics.",
        role="assistant",
        to=("Ana",),
    )
    (c,) = heuristic_claims([advice])
    assert (c.source, c.speaker, c.subject) == ("assistant_suggested", "assistant", "Ana")
    assert c.text == "Ana should drink plenty of water while on antibiotics."


def test_kinds(claims: list[Claim]) -> None:
    assert claim_from(claims, "D1:2", "climbing").kind == "event"
    assert claim_from(claims, "D1:3", "antibiotics").kind == "foresight"
    assert claim_from(claims, "D1:5", "Japan").kind == "foresight"
    assert claim_from(claims, "D1:6", "hiking").kind == "preference"
    assert claim_from(claims, "D1:7", "adopted a puppy").kind == "event"
    assert claim_from(claims, "D1:8", "get a dog").kind == "question"
    assert claim_from(claims, "D1:8", "lucky").kind == "fact"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("I'm going to start a pottery class soon.", "plan"),
        ("I plan to repaint the kitchen walls.", "plan"),
        ("We are hoping to adopt a second cat.", "plan"),
        ("My favorite band is playing a concert.", "preference"),
        ("I really hate waiting in long queues.", "preference"),
        ("We finally finished the garden fence.", "event"),
        ("The meeting was moved to next Friday, we will be there.", "foresight"),
        ("My brother is a nurse at the city hospital.", "fact"),
        ("The painting looks like a calm summer lake.", "fact"),
    ],
)
def test_kind_cues(text: str, kind: str) -> None:
    (c,) = heuristic_claims([msg(0, "Ana", text)])
    assert c.kind == kind


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("I went fully vegan this month, can you suggest some recipes?", "went fully vegan"),
        ("I moved to Porto last week so could you update my address?", "moved to Porto"),
        ("Just started Japanese classes on Thursdays - any tips?", "Japanese classes"),
    ],
)
def test_a_statement_before_a_request_is_a_claim(text: str, said: str) -> None:
    (c,) = heuristic_claims([msg(0, "Ana", text)])
    assert said in c.text and "?" not in c.text and c.kind != "question"


def test_a_request_alone_is_no_claim() -> None:
    assert heuristic_claims([msg(0, "Ana", "Can you help me write an email to my boss?")]) == []


def test_dates_grounded_against_the_message(claims: list[Claim]) -> None:
    gym = claim_from(claims, "D1:2", "climbing")
    assert gym.valid_from == datetime(2023, 5, 7, tzinfo=UTC)
    pills = claim_from(claims, "D1:3", "antibiotics")
    assert pills.valid_to is not None and pills.valid_to.date().isoformat() == "2023-05-18"
    trip = claim_from(claims, "D1:5", "Japan")
    assert (trip.valid_from, trip.valid_to) == (
        datetime(2023, 6, 1, tzinfo=UTC),
        datetime(2023, 7, 1, tzinfo=UTC),
    )
    assert claim_from(claims, "D1:7", "puppy last").valid_from == datetime(2023, 5, 6, tzinfo=UTC)
    assert claim_from(claims, "D1:6", "hiking").valid_from is None


def test_image_caption_becomes_an_event(claims: list[Claim]) -> None:
    c = claim_from(claims, "D1:7", "shared")
    assert c.text == f"Ana shared {CAPTION}"
    assert (c.kind, c.source, c.speaker, c.subject) == ("event", "first_hand", "Ana", "Ana")
    (bare,) = heuristic_claims(
        [msg(0, "Lee", "", attachments=(Attachment("image", "a red kite"),))]
    )
    assert bare.text == "Lee shared a photo of a red kite"


def test_audio_and_files_are_shared_as_what_they_are() -> None:
    odd = (Attachment("audio", "audio clip (wav)"), Attachment("file", "file (lease.pdf)"))
    claims = heuristic_claims([msg(0, "Lee", "", attachments=odd)])
    assert [c.text for c in claims] == [
        "Lee shared an audio clip (wav)",
        "Lee shared a file (lease.pdf)",
    ]


def test_entities(claims: list[Claim]) -> None:
    def ents(mid: str, contains: str) -> dict[str, str]:
        return {e.name: e.kind for e in claim_from(claims, mid, contains).entities}

    assert ents("D1:2", "climbing") == {"Tomas": "person"}
    assert ents("D1:4", "Okafor") == {"Dr. Okafor": "person"}
    assert ents("D1:5", "Japan") == {"Japan": "other"}
    assert ents("D1:6", "hiking") == {"Sao Paulo": "other"}
    assert ents("D1:7", "puppy last") == {"Maya": "person"}  # not "My", not "Saturday"
    assert ents("D1:9", "brother") == {"Lee": "person"}


def test_entity_spans() -> None:
    text = "Yesterday Ana went to the LGBTQ support group with Mr. Berg on Friday in May."
    (c,) = heuristic_claims([msg(0, "Lee", text)])
    assert {e.name: e.kind for e in c.entities} == {
        "Ana": "person",
        "LGBTQ": "other",
        "Mr. Berg": "person",
    }


def test_scores() -> None:
    plain, moving = heuristic_claims(
        [
            msg(0, "Ana", "The bus to work was a bit slow."),
            msg(1, "Ana", "My grandmother passed away last week and I am heartbroken!!"),
        ]
    )
    assert moving.salience > plain.salience
    assert moving.importance > plain.importance
    assert moving.text.endswith("Ana is heartbroken!!")


def test_system_messages_and_fillers_make_no_claims() -> None:
    assert (
        heuristic_claims([msg(0, "system", "You are a helpful assistant for Ana.", role="system")])
        == []
    )
    assert (
        heuristic_claims(
            [msg(0, "Ana", "Haha yeah, so cool!"), msg(1, "Lee", "Totally agree, Ana.")]
        )
        == []
    )


def test_a_short_sentence_is_kept_when_it_dates_something() -> None:
    (c,) = heuristic_claims([msg(0, "Ana", "Wow! Last night was amazing! Bye!")])
    assert c.text == "Last night was amazing!"
    assert c.valid_from == datetime(2023, 5, 7, tzinfo=UTC)
    assert heuristic_claims([msg(0, "Ana", "That was amazing!")]) == []


def test_group_message_keeps_you_and_attributes_to_the_speaker() -> None:
    (c,) = heuristic_claims(
        [msg(0, "Ana", "I think you all did a great job today.", to=("Lee", "Bob"))]
    )
    assert (c.speaker, c.subject) == ("Ana", "Ana")
    assert "you all" in c.text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I am tired and I feel sick.", "Ana is tired and Ana feels sick."),
        ("I have two cats and I don't like dogs.", "Ana has two cats and Ana doesn't like dogs."),
        ("Are you sure that you are invited tonight?", None),  # a question to Lee: dropped
        ("Should I bring a cake tonight?", "Should Ana bring a cake tonight?"),
        ("Fish is the only meat I eat these days.", "Fish is the only meat Ana eats these days."),
        (
            "I know you love the sea and you have a boat.",
            "Ana knows Lee loves the sea and Lee has a boat.",
        ),
    ],
)
def test_verbs_agree_with_the_names(text: str, expected: str | None) -> None:
    got = [c.text for c in heuristic_claims([msg(0, "Ana", text)])]
    assert got == ([expected] if expected else [])


def test_split_sentences() -> None:
    assert split_sentences("Dr. Okafor said so. Wow!\nI agree, e.g. on Mon. Fine?") == [
        "Dr. Okafor said so.",
        "Wow!",
        "I agree, e.g. on Mon.",
        "Fine?",
    ]


# -- episodes -------------------------------------------------------------------------------


def test_episode_narrative_is_extractive_and_dated() -> None:
    messages = dialogue()
    ep = heuristic_episode(messages)
    assert ep.narrative.startswith("Session 1 (8 May 2023): Ana and Lee talked about ")
    assert (ep.conversation, ep.session, ep.method) == ("c1", 1, "heuristic")
    assert ep.message_ids == tuple(m.id for m in messages)
    assert (ep.start, ep.end) == (messages[0].timestamp, messages[-1].timestamp)
    assert ep.title and ep.title[0].isupper()
    source = {w.lower() for m in messages for w in re.findall(r"[\w'’]+", m.indexed_text())}
    template = set("session 1 8 may 2023 talked about and ana lee ana's lee's".split())
    agreement = {"is", "has", "wants", "does", "loves"}
    extra = (
        {w.lower() for w in re.findall(r"[\w'’]+", ep.narrative)} - source - template - agreement
    )
    assert not extra


def test_episode_rejects_empty_and_mixed_sessions() -> None:
    with pytest.raises(ValueError):
        heuristic_episode([])
    with pytest.raises(ValueError):
        heuristic_episode([msg(0, "Ana", "Hello there"), msg(1, "Lee", "Hi", session=2)])


# -- fixed segmentation -------------------------------------------------------------------


def turns(
    n: int,
    *,
    session: int = 1,
    start: datetime = T,
    step: timedelta = timedelta(minutes=1),
    seq0: int = 0,
    conversation: str = "c1",
) -> list[Message]:
    return [
        msg(
            seq0 + i,
            "Ana" if i % 2 == 0 else "Lee",
            f"turn {i}",
            session=session,
            when=start + step * i,
            conversation=conversation,
        )
        for i in range(n)
    ]


def test_segment_splits_at_max_turns_in_balanced_chunks() -> None:
    chunks = segment_fixed(turns(18), max_turns=8)
    assert [len(c) for c in chunks] == [6, 6, 6]
    assert [m for c in chunks for m in c] == turns(18)


def test_segment_splits_at_time_gaps() -> None:
    first = turns(3)
    later = turns(3, start=T + timedelta(hours=2), seq0=3)
    chunks = segment_fixed(later + first, gap=timedelta(minutes=30))  # order restored by seq
    assert [[m.seq for m in c] for c in chunks] == [[0, 1, 2], [3, 4, 5]]
    assert len(segment_fixed(first + later, gap=timedelta(hours=3))) == 1


def test_segment_never_mixes_sessions_or_conversations() -> None:
    messages = turns(3, session=1) + turns(2, session=2, seq0=3) + turns(2, conversation="c2")
    chunks = segment_fixed(messages, max_turns=8)
    assert len(chunks) == 3
    for c in chunks:
        assert len({(m.conversation, m.session) for m in c}) == 1


def test_segment_edge_cases() -> None:
    assert segment_fixed([]) == []
    assert [len(c) for c in segment_fixed(turns(8), max_turns=8)] == [8]
    with pytest.raises(ValueError):
        segment_fixed(turns(2), max_turns=0)


def test_llm_boundaries_only_for_long_sessions() -> None:
    assert not should_use_llm_boundaries(turns(10))
    assert should_use_llm_boundaries(turns(11))


def test_an_assistant_echo_adds_no_claim() -> None:
    """ "Noted (2): my sister Maya lives in Porto" repeats the user: no claim, and never the
    assistant's sister; a reply that says something new is still the assistant's claim."""
    told = msg(0, "Ana", "My sister Maya lives in Porto and teaches chemistry.", to=("assistant",))
    echo = msg(
        1, "assistant", "Noted (2): My sister Maya lives in Porto and teaches chemistry.",
        role="assistant", to=("Ana",),
    )  # fmt: skip
    advice = msg(
        2, "assistant", "You could bring Maya to the new lentil place near the river.",
        role="assistant", to=("Ana",),
    )  # fmt: skip
    claims = heuristic_claims([told, echo, advice])
    assert [c.speaker for c in claims] == ["Ana", "assistant"]
    assert "lentil" in claims[1].text
    # the turn before an appended tail counts as heard
    assert heuristic_claims([echo], earlier=[told]) == []


def test_what_a_sentence_says_ended_in_other_words() -> None:
    """A pet put down, a membership cancelled (and so the gym), a home moved out of."""
    from archivist.lang.text import ended_objects

    assert ended_objects("We had to put Biscuit down on Monday.") == ["Biscuit"]
    assert ended_objects("Cancelled my gym membership.") == ["gym membership", "gym"]
    assert "basement" in ended_objects("Moving out of the basement on Saturday.")
    assert ended_objects("Put the kettle on.") == []


def test_lay_offs_and_things_that_are_over_end_what_they_name() -> None:
    from archivist.lang.text import ended_objects

    assert ended_objects("Fernway laid off half the design team today, including me.") == [
        "Fernway"
    ]
    assert ended_objects("My sister moved to Leeds so Tuesday yoga is over.") == ["Tuesday yoga"]
    assert ended_objects("Game over, it was over quickly.") == []


def test_off_and_over_end_something_only_where_the_clause_ends() -> None:
    """ "Caroline is off to go do some research", "over the moon", "got off to a bad start"
    end nothing (on LoCoMo they logged 265 false conflicts closing true claims)."""
    from archivist.lang.text import ENDING, ended_objects

    for said in (
        "Caroline is off to go do some research.",
        "Gina is over the moon about the new store.",
        "Our trip got off to a bad start.",
    ):
        assert ended_objects(said) == [] and not ENDING.search(said), said
    assert ended_objects("The cast is off!") == ["cast"]
    # an owner is not who died: "Maria's grandma passed away" ends no claim naming Maria
    assert ended_objects("Last week, Maria's grandma passed away.") == ["grandma"]


def test_a_sentence_of_two_facts_becomes_two_claims_with_one_evidence() -> None:
    said = "Still a software tester at Northgate Bank, and I still live in Leeds."
    msg = Message("D1:1", "c", 1, "Tom", said, datetime(2025, 1, 14, 9, tzinfo=UTC))
    claims = heuristic_claims([msg])
    assert [c.text for c in claims] == [
        "Still a software tester at Northgate Bank",
        "Tom still lives in Leeds.",
    ]
    assert {c.evidence for c in claims} == {("D1:1",)} and {c.subject for c in claims} == {"Tom"}
    assert split_clauses("I like it, I think") == ["I like it, I think"]  # too short to stand
    # chat writes the pronoun in lower case: the clause is still its own fact
    assert split_clauses("still a tester at northgate bank, and i still live in leeds 🙃") == [
        "still a tester at northgate bank",
        "i still live in leeds 🙃",
    ]
