"""Whose a sentence is, by its subject (archivist/subject.py) and in answers."""

from __future__ import annotations

from archivist.lang.subject import clause_subject, kin_names, mentions_kin
from archivist.read.owners import sentence_owner

PEOPLE = ("Amara", "Lars", "Sofia")


def test_a_named_relative_opening_the_sentence_is_its_subject() -> None:
    assert clause_subject("My brother Kofi just started as a paramedic.", "Amara") == "Kofi"
    assert clause_subject("My new flatmate is Carla, she's a nurse.", "Sofia") == "Carla"


def test_an_unnamed_relative_is_the_speakers_relative_or_the_name_given_elsewhere() -> None:
    assert clause_subject("My sister broke her wrist.", "Lars") == "Lars's sister"
    kin = kin_names([("Marta", "My mum Halina still lives alone in Gdańsk.")])
    assert kin == {("marta", "mum"): "Halina"}
    assert clause_subject("Mum had a fall in January.", "Marta", kin=kin) == "Halina"
    # a name is never read past the kin word's sentence; a plural opening is people at large
    assert kin_names([("Mel", "I love my kids. How are yours?")]) == {}
    assert clause_subject("Kids are amazingly resilient.", "Caroline") is None


def test_the_speaker_stays_the_subject_of_their_own_sentences() -> None:
    assert clause_subject("My flight was delayed again.", "Lars") == "Lars"
    assert clause_subject("My kids and I went camping.", "Lars") == "Lars"
    assert clause_subject("Landed in Lisbon for the conference!", "Fatima") == "Fatima"
    assert clause_subject("Sold the car last week.", "Ingrid") == "Ingrid"
    # after an opener the past verb is no longer capitalised; the "I" is still left out
    assert clause_subject("Just got some new shoes, too!", "Mel") == "Mel"
    assert clause_subject("Oh, been quite a ride lately.", "Nate") == "Nate"
    assert clause_subject("Just wondering about it.", "Mel") is None
    # a report is about the one it is told to
    assert clause_subject("Doctor says crutches for six weeks.", "Aisling") is None
    assert clause_subject("My doctor says no driving.", "Aisling") == "Aisling"


def test_a_pronoun_takes_the_one_name_before_it() -> None:
    said = "Big news from Ingrid: she finally sold the Volvo."
    assert clause_subject(said, "Lars", known=("Ingrid", "Lars")) == "Ingrid"
    assert clause_subject("She finally sold the Volvo.", "Lars", known=("Ingrid",)) is None


def test_a_question_about_a_relative_keeps_relatives_with_the_speaker() -> None:
    assert mentions_kin("Where does Amara's brother work?")
    assert not mentions_kin("Where does Amara work?")
    said = "My brother Kofi just started as a paramedic."
    assert sentence_owner(said, "Amara", ("Lars",), PEOPLE, by_kin=False) == "Amara"
    assert sentence_owner(said, "Amara", ("Lars",), PEOPLE) == "Kofi"


def test_without_a_subject_the_older_rule_decides() -> None:
    assert (
        sentence_owner("That race sounds great, I loved it", "Lars", ("Sofia",), PEOPLE) == "Lars"
    )
    assert (
        sentence_owner("Thanks for the tip about your race", "Lars", ("Sofia",), PEOPLE) == "Sofia"
    )
    assert sentence_owner("That race was fun", "Lars", ("Sofia",), PEOPLE) is None
