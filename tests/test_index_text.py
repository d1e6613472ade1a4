"""What the indexes see for a message: names for pronouns, date words, the previous turn."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from archivist.model import Attachment, Message
from archivist.write.index_text import (
    DEFAULT_INDEX,
    IndexOptions,
    date_words,
    embed_text,
    index_rows,
    resolve_pronouns,
    search_text,
    text_hash,
)
from conftest import T0, make_conversation


def say(text: str, speaker: str = "Ana", to: tuple[str, ...] = ("Lee",), **kw) -> Message:
    return Message(
        id=kw.pop("id", "D1:1"),
        conversation="c",
        session=kw.pop("session", 1),
        speaker=speaker,
        text=text,
        timestamp=kw.pop("timestamp", T0),
        addressees=to,
        **kw,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went to my sister's", "Ana went to Ana's sister's"),
        ("Did you see your brother?", "Did Lee see Lee's brother?"),
        ("I'm tired, I've slept badly", "Ana is tired, Ana has slept badly"),
        ("I’m fine and you’re late", "Ana is fine and Lee is late"),
        (
            "I'd go; you'll see; I'll try; you'd know",
            "Ana would go; Lee will see; Ana will try; Lee would know",
        ),
        ("That one is mine, not yours", "That one is Ana's, not Lee's"),
        ("Tell me about yourself and myself", "Tell Ana about Lee and Ana"),
        ("MY cat, YOU know", "Ana's cat, Lee know"),
        ("Iceland, mice, youth, myth, mymy, I/O", "Iceland, mice, youth, myth, mymy, Ana/O"),
    ],
)
def test_resolve_pronouns(text: str, expected: str) -> None:
    assert resolve_pronouns(text, "Ana", "Lee") == expected


def test_second_person_stays_without_a_single_addressee() -> None:
    assert resolve_pronouns("I told you", "Ana", None) == "Ana told you"


def test_search_text_names_speaker_addressee_and_date() -> None:
    m = say("I went to my sister's")
    assert search_text(m) == "Ana to Lee: Ana went to Ana's sister's (8 May 2023, Monday)"


def test_search_text_you_becomes_the_addressee() -> None:
    m = say("Did you adopt your cat?", speaker="Lee", to=("Ana",))
    assert search_text(m).startswith("Lee to Ana: Did Ana adopt Ana's cat?")


def test_group_message_keeps_you_and_lists_everyone() -> None:
    m = say("Are you coming?", to=("Lee", "Bob"))
    assert search_text(m).startswith("Ana to Lee, Bob: Are you coming?")


def test_search_text_options_switch_each_part_off() -> None:
    m = say("I went to my sister's")
    bare = IndexOptions(speaker_prefix=False, resolve_pronouns=False, date_words=False)
    assert search_text(m, bare) == "I went to my sister's"
    assert (
        search_text(m, IndexOptions(date_words=False)) == "Ana to Lee: Ana went to Ana's sister's"
    )


def test_attachment_captions_are_indexed() -> None:
    m = say("Look!", attachments=(Attachment("image", caption="a grey cat"),))
    assert "Look! [image: a grey cat]" in search_text(m)
    assert "[image: a grey cat]" in embed_text(m, [])


def test_date_words_use_the_session_start_in_the_message_zone() -> None:
    late = datetime(2023, 5, 7, 23, 30, tzinfo=timezone(timedelta(hours=-5)))  # 8 May in UTC
    assert date_words(say("x", timestamp=late)) == "7 May 2023, Sunday"
    m = say("x", timestamp=T0 + timedelta(days=3), session_start=T0)
    assert date_words(m) == "8 May 2023, Monday"
    assert "(8 May 2023, Monday)" in search_text(m)


def test_embed_text_includes_the_previous_turn() -> None:
    q = say("Did you go?", speaker="Lee", to=("Ana",), id="D1:1")
    a = say("Yes, I went yesterday", id="D1:2")
    assert embed_text(a, [q]) == "Lee to Ana: Did Ana go?\nAna to Lee: Yes, Ana went yesterday"
    assert embed_text(a, []) == "Ana to Lee: Yes, Ana went yesterday"
    assert "May" not in embed_text(a, [q])  # dates are for the keyword index only


def test_embed_text_caps_the_context_turn() -> None:
    long = say("x" * 1000, speaker="Lee", to=("Ana",))
    text = embed_text(say("ok"), [long], IndexOptions(context_chars=10))
    assert text == "Lee to Ana: " + "x" * 10 + "…\nAna to Lee: ok"
    assert embed_text(say("ok"), [long], IndexOptions(embed_context=0)) == "Ana to Lee: ok"


def test_index_rows_uses_the_previous_turn_of_the_same_session_only() -> None:
    conv = make_conversation(
        "c",
        [
            [("Ana", "I adopted a cat."), ("Lee", "What is its name?")],
            [("Ana", "Pixel sleeps a lot.")],
        ],
    )
    m1, m2, m3 = conv.messages
    rows = index_rows(list(conv.messages))
    assert [s for s, _ in rows] == [search_text(m) for m in conv.messages]
    assert rows[0][1] == "Ana to Lee: Ana adopted a cat."
    assert rows[1][1] == "Ana to Lee: Ana adopted a cat.\nLee to Ana: What is its name?"
    assert rows[2][1] == "Ana to Lee: Pixel sleeps a lot."  # session 2 starts fresh


def test_index_rows_orders_by_seq_but_answers_in_input_order() -> None:
    conv = make_conversation("c", [[("Ana", "first"), ("Lee", "second"), ("Ana", "third")]])
    shuffled = [conv.messages[2], conv.messages[0], conv.messages[1]]
    rows = index_rows(shuffled)
    assert rows[0][1] == "Lee to Ana: second\nAna to Lee: third"
    assert rows[1][1] == "Ana to Lee: first"
    assert rows[2][1] == "Ana to Lee: first\nLee to Ana: second"


def test_index_rows_with_wider_context() -> None:
    conv = make_conversation("c", [[("Ana", "a1"), ("Lee", "b2"), ("Ana", "a3")]])
    rows = index_rows(list(conv.messages), IndexOptions(embed_context=2))
    assert rows[2][1] == "Ana to Lee: a1\nLee to Ana: b2\nAna to Lee: a3"


def test_text_hash_is_stable_and_content_sensitive() -> None:
    assert text_hash("abc") == text_hash("abc")
    assert text_hash("abc") != text_hash("abd")
    assert len(text_hash("")) == 64
    assert DEFAULT_INDEX == IndexOptions()
    with pytest.raises(AttributeError):
        DEFAULT_INDEX.embed_context = 3  # type: ignore[misc]


def test_message_hash_covers_content_but_not_seq() -> None:
    m = say("hello")
    assert m.hash == replace(m, seq=5).hash
    assert m.hash != replace(m, text="hello!").hash
    assert m.hash != replace(m, speaker="Lee").hash
    assert m.hash != replace(m, timestamp=T0 + timedelta(seconds=1)).hash
    assert m.hash != replace(m, attachments=(Attachment("image", "cat"),)).hash
