"""archivist.lang.text: tokens, stopwords, stems, name folding and FTS quoting."""

from __future__ import annotations

import re

import pytest

from archivist.lang import text
from archivist.lang.text import (
    CALENDAR_WORDS,
    FILLER_WORDS,
    STOPWORDS,
    TOPIC_STOPWORDS,
    content_words,
    fold,
    fts_query,
    fts_quote,
    is_stopword,
    match_words,
    name_words,
    normalised,
    person_key,
    query_terms,
    singular,
    stem,
    words,
)


def test_text_imports_nothing_from_archivist() -> None:
    source = open(text.__file__, encoding="utf-8").read()
    assert not re.search(r"^\s*(from|import)\s+(archivist|\.)", source, re.M)


def test_query_terms_drop_stopwords_and_possessives_in_order() -> None:
    assert query_terms("What did Melanie's kids paint, and when?") == ["melanie", "kids", "paint"]
    assert query_terms("Melanie’s race") == ["melanie", "race"]  # typographic apostrophe
    assert query_terms("cat Cat CAT") == ["cat"]
    assert query_terms("I'm sure I didn't go") == ["sure"]  # contractions are stopwords
    assert query_terms("a 5 k run x") == ["5", "run"]  # single letters go, digits stay
    assert query_terms("what is it", keep_stopwords=True) == ["what", "is", "it"]


def test_may_is_a_month_not_a_stopword() -> None:
    assert "may" not in STOPWORDS and "may" in CALENDAR_WORDS
    assert query_terms("What did Ana do in May?") == ["ana", "may"]


def test_one_stopword_list_and_its_named_variant() -> None:
    assert STOPWORDS < TOPIC_STOPWORDS
    assert TOPIC_STOPWORDS == STOPWORDS | FILLER_WORDS | CALENDAR_WORDS
    assert not FILLER_WORDS & STOPWORDS  # the variant only adds
    assert is_stopword("The") and is_stopword("I’m") and not is_stopword("camping")
    assert "kind" not in STOPWORDS and "kind" in TOPIC_STOPWORDS  # "what kind of X" needs it


@pytest.mark.parametrize(
    "hostile",
    [
        'say "hi',
        "cat*",
        "NEAR(cat dog)",
        "cats OR dogs",
        "AND NOT x",
        "^start col:value -minus",
        "a\"b'c",
        'x"" OR ""y',
    ],
)
def test_fts_query_quotes_hostile_input(hostile: str) -> None:
    q = fts_query(hostile)
    assert q is not None and q.startswith("search_text : (") and q.endswith(")")
    inner = q[len("search_text : (") : -1]
    for part in inner.split(" OR "):  # every term one well-quoted string, quotes doubled
        assert re.fullmatch(r'"(?:[^"]|"")*"', part), part
    assert "*" not in inner and "^" not in inner and ":" not in inner


def test_fts_query_keeps_operators_as_plain_terms() -> None:
    assert fts_query("cats OR dogs") == 'search_text : ("cats" OR "dogs")'
    assert fts_query("NEAR(cat dog)") == 'search_text : ("near" OR "cat" OR "dog")'
    assert fts_query('"""') is None and fts_query("???") is None
    assert fts_query("what is it") == 'search_text : ("what" OR "is" OR "it")'
    assert fts_query("cat dog", drop=["cat"]) == 'search_text : ("dog")'
    assert fts_query("cat", drop=["cat"]) == 'search_text : ("cat")'  # never empty


def test_fts_quote_doubles_quotes() -> None:
    assert fts_quote('a"b') == '"a""b"'
    assert fts_quote("NEAR") == '"NEAR"'


def test_stem_meets_question_and_evidence_words() -> None:
    assert stem("camping") == stem("camp") == "camp"
    assert stem("Melanie's") == stem("melanie")
    assert stem("painted") == stem("paints") == "paint"
    assert stem("adoption") == "adopt"  # first five letters
    assert stem("sky") == "sky"  # too short to lose a suffix


def test_words_keep_inner_apostrophes_and_hyphens() -> None:
    assert words("Self-care isn't easy, Mel!") == ["Self-care", "isn't", "easy", "Mel"]
    assert fold("I’M") == "i'm"


def test_match_words_fold_plurals_and_possessives() -> None:
    assert match_words("Jack Russells' dogs, Ana’s cats") == [
        "jack",
        "russell",
        "dog",
        "ana",
        "cat",
    ]
    assert singular("glass") == "glass" and singular("bus") == "bus" and singular("dogs") == "dog"


def test_names_fold_the_same_way_everywhere() -> None:
    assert person_key("  Ana   MARÍA ") == "ana maría"
    assert person_key("Straße") == person_key("STRASSE")
    assert name_words("Did Melanie’s (sister) call?") == ["did", "melanie", "sister", "call"]
    assert name_words("the Joneses' house") == ["the", "joneses", "house"]


def test_normalised_is_the_statement_key() -> None:
    assert normalised("Ana moved to Porto!") == normalised("ana  moved to porto")


def test_content_words_leave_out_chat_filler_and_the_calendar() -> None:
    got = content_words("That sounds great! Pixel sleeps on pillows every Monday.")
    assert got == {"pixel", "sleeps", "pillows"}


def test_calling_off_and_stepping_down_end_what_they_name() -> None:
    from archivist.lang.text import ENDING, ended_objects

    assert ended_objects("Leo and I called off the engagement.") == ["engagement"]
    assert ended_objects("I stepped down as treasurer at last night's meeting.") == ["treasurer"]
    assert ended_objects("She stepped down from the board in May.") == ["board"]
    assert ENDING.search("The match was called off.")
    assert not ENDING.search("I stepped up as treasurer.")
    assert ended_objects("Handed in my resignation at the school.") == ["school"]
    # "no more X" ends X, as words: not "overfishing" (``names_thing``), not "no more than"
    assert ended_objects("Surgeon says no more running for me.") == ["running"]
    assert ended_objects("Got my own place, no more flatmates!") == ["flatmates"]
    assert ended_objects("It costs no more than a tenner.") == []
    assert ENDING.search("The divorce was finalised today.")
    assert ended_objects("Handed the Golf back on Friday.") == ["Golf"]
    assert ENDING.search("Passed my final ACCA exam!") and ENDING.search("Graduated in June!")
    assert not ENDING.search("Passed the salt to my sister.")
    assert ended_objects("Put the knitting needles away for good.") == ["knitting needles"]
    assert ended_objects("Put the dishes away.") == [] and not ENDING.search("Put the dishes away.")
    assert ended_objects("Deleted the apps!") == ["apps"]
    assert ended_objects("Someone nicked my bike outside the library.") == ["bike"]
    assert ENDING.search("The band split up after the tour.")
    assert ENDING.search("Paid off the last of my student loan today!")
    assert ENDING.search("My bike was stolen.")


def test_endings_of_someone_else_leaving_or_of_a_thing_given_back() -> None:
    from archivist.lang.text import ENDING, ended_objects

    assert ended_objects("Marta and I called it quits last week.") == ["Marta"]
    assert ended_objects("Car's gone. Got a cargo bike instead.") == ["Car"]
    assert not ended_objects("She's gone to Paris for the weekend.")
    assert not ENDING.search("She's gone to Paris for the weekend.")
    assert ended_objects("Colin got moved to the Leeds branch.") == ["Colin"]
    assert ended_objects("Bea moved in with her boyfriend.") == ["Bea"]
    assert ended_objects("My girlfriend moved in with me.") == []
    assert ended_objects("Physio signed me off today.") == ["Physio"]
    assert ENDING.search("Physio signed me off today.")
    said = "Walking with a stick now, the wheelchair went back to the Red Cross."
    assert ended_objects(said) == ["wheelchair"]
    for kept in ("Tom went back to the flat.", "My sister went back to the hospital."):
        assert ended_objects(kept) == []
    assert ended_objects("Tapered off the sertraline, doctor is happy.") == ["sertraline"]
    assert ended_objects("We lost Bruno on Saturday.") == ["Bruno"]
    assert ended_objects("Keys handed over for Elm Street.") == ["Elm Street"]
    for kept in ("I lost weight!", "We lost the match."):
        assert ended_objects(kept) == [] and not ENDING.search(kept)
    said = "Had to stop the food bank shifts, weekend work at the garage took over."
    assert ended_objects(said) == ["food bank shifts", "food bank"]
    assert ended_objects("Finished the marathon in 4:12! Never again.") == ["marathon"]
    assert not ENDING.search("I finished work at 5.")
    said = "Dropped out of uni. Architecture wasn't for me, I'm an apprentice now."
    assert "Architecture" in ended_objects(said)
    assert ended_objects("Bought an e-bike, I'm never getting on that bus again.") == ["bus"]


def test_sober_denies_drinking() -> None:
    from archivist.lang.text import NEGATION

    assert NEGATION.search("One year sober today.") and NEGATION.search("I'm teetotal.")


def test_giving_away_ones_own_thing_ends_it_giving_a_talk_does_not() -> None:
    from archivist.lang.text import ENDING, ended_objects

    assert ended_objects("Worked perfectly. Gave the old iPhone to my dad.") == ["iPhone"]
    assert ended_objects("I gave my old bike to my nephew.") == ["bike"]
    assert ended_objects("We gave away the sofa yesterday.") == ["sofa"]
    for kept in ("She gave the talk to a full room.", "I gave my sister a book."):
        assert ended_objects(kept) == [] and not ENDING.search(kept)
