"""The rule families moved into archivist/lang/: each a row of examples it must read and
look-alikes it must not, read by one parametrised test (STYLE 17).

A rule family that grows a case here first: a new case of *meaning* becomes training
data for the judge (training/judge/), not a row here.
"""

from __future__ import annotations

import re

import pytest

from archivist.lang import change, evidence, identity, question, statement, whose

# (family, rule, examples it matches, look-alikes it must not match)
FAMILIES = [
    ("question: yes/no form", question.ASKS_YES_NO,
     ["Does Ana still live in Porto?", "Is Tom on antibiotics?", "Hasn't she moved?"],
     ["Where does Ana live?", "Who is Tom dating?", "Why did he go?"]),
    ("question: how many", question.ASKS_COUNT,
     ["How many kids does Sadia have?", "how much rent does he pay?"],
     ["How long was Tom on antibiotics?", "How does Mateo get around?"]),
    ("question: about now", question.ASKS_NOW,
     ["Where does Tom work now?", "Is she still vegan?", "What is her current job?"],
     ["Where did Tom work in 2024?", "What job did she have before Porto?"]),
    ("question: about before", question.ASKS_PAST,
     ["Where did Tom work in January 2025?", "What did she eat before she went vegan?",
      "Where did he live in 2019?"],
     ["Where does Tom work?", "Is she vegan?"]),
    ("question: before what", question.ASKS_BEFORE,
     ["What job did Ana have before Porto?"], ["What job does Ana have?"]),
    ("question: negated", question.ASKS_NEGATED,
     ["Isn't she vegan?", "Does he not drink?"], ["Is she vegan?"]),
    ("question: several answers", question.ASKS_PLURAL,
     ["What pets does Ana have?", "Which clubs is Tom in?"],
     ["What pet does Ana have?", "Where is Tom?"]),
    ("question: why", question.ASKS_WHY,
     ["Why did Priya start eating fish?", "How come he moved?", "What made her quit?"],
     ["Who made the cake?", "When did she quit?"]),
    ("question: who", question.ASKS_PERSON,
     ["Who is Tom dating?", "With whom does she live?", "Whose dog is Biscuit?"],
     ["What does Tom do?", "Where is Hannah moving?"]),
    ("question: an ending", question.ASKS_DROP,
     ["Did she drop the course?", "Has he dropped out?"], ["Did she pass the course?"]),
    ("question: place asked", question.ASKS_PLACE,
     ["Where does Ines work now?", "Which city did he move to?"], ["What does Ines do?"]),
    ("evidence: a place named", question.NAMES_PLACE,
     ["First week in Berlin done", "moving to York next month"],
     ["moving next month", "first week done"]),
    ("evidence: a reason", question.BECAUSE,
     ["quit because of my back", "With the new job there's no time."],
     ["quit my job", "a new job"]),
    ("evidence: a new state beside a denial", question.STATES_NEW,
     ["not vegetarian, pescatarian now", "no longer at the bank, joined a startup"],
     ["not vegetarian", "no longer at the bank"]),
    ("statement: greeting", statement.GREETING,
     ["Good to see you!", "Thanks so much", "how are you doing?", "Take care x"],
     ["I moved to Leeds", "Good news: I got the job"]),
    ("statement: a request tacked on", statement.REQUEST,
     ["I'm vegan now, can you suggest a recipe?", "Moving to Leeds - any tips?"],
     ["I'm vegan now.", "Can you believe it?"]),
    ("statement: the speaker's own question", statement.OWN_QUESTION,
     ["Should I take the job?", "Is my landlord allowed to do that?"],
     ["Is your landlord nice?", "Did you take the job?"]),
    ("statement: a plan", statement.PLAN_CUE,
     ["going to run the 10k", "gonna sell the car", "thinking of moving to Leeds"],
     ["going to the gym now", "sold the car", "went to school there"]),
    ("statement: a preference", statement.PREFERENCE_CUE,
     ["I love jazz.", "hate mushrooms", "I really like hiking"], ["I hiked up Snowdon"]),
    ("statement: reported speech", statement.REPORTED,
     ["my mum says I should rest", "Tom said it was fine"], ["I said no", "I rested"]),
    ("statement: strong feeling", statement.STRONG,
     ["my gran passed away", "we broke up last week", "got laid off"],
     ["my gran came over", "we broke the record"]),
    ("statement: a span bound", statement.SPAN_WINDOW,
     ["on antibiotics for ten days", "staying until Friday"], ["on antibiotics now"]),
    ("statement: a pronoun", statement.PRONOUN,
     ["I'm tired", "your dog", "myself"], ["the island", "iris"]),
    ("statement: a caption with its article", statement.ARTICLE,
     ["a voice note", "the menu"], ["menu", "another one"]),
    ("statement: a photo caption", statement.PHOTO_OF,
     ["a photo of the beach", "an image of my cat"], ["a photographer", "the beach"]),
    ("change: an addition, not a change", change.ADDITION_CUE,
     ["got a second cat", "joined a chess club as well", "I run too."],
     ["got a cat", "too cold today", "joined a chess club"]),
    ("change: an event that began a state", change.OPENS_STATE,
     ["Started on metformin", "Joined the community choir", "Adopted a greyhound",
      "Got an allotment plot"],
     ["Started the car", "Got a parking ticket"]),
    ("change: not yet", change.NEGATED_BEFORE, ["not ", "never really "], ["finally "]),
    ("evidence: until", evidence.UNTIL_WORD,
     ["on crutches until July", "off work till Monday"], ["on crutches in July"]),
    ("evidence: since when asked", evidence.ASKS_SINCE_WHEN,
     ["Since when has Ana been vegan?", "Until when is he away?"], ["When did Ana go vegan?"]),
    ("evidence: what was replaced", evidence.REPLACED_WORDS,
     ["oat milk instead of cow's", "the bus rather than the car"], ["oat milk in my tea"]),
    ("evidence: a denial's clauses", evidence.CLAUSES,
     ["still on the committee, just no more accounts", "I'd go but I can't"],
     ["still on the committee"]),
    ("whose: a name said to someone", whose.VOCATIVE[1],
     ["Hey Caroline, how are you?", "Thanks Jon, that helps"], ["Caroline moved to Leeds"]),
    ("whose: a name in a question", whose.NAMED_IN_QUESTION,
     ["When was Theo born?", "Is Priya's dog a beagle?"], ["When were you born?"]),
]  # fmt: skip

WORD_LISTS = [
    ("statement: interjections", statement.INTERJECTIONS, ["lol", "omg", "hey"], ["vegan"]),
    ("statement: first-person words", statement.FIRST_BASES, ["i", "my", "we"], ["you"]),
    ("statement: words that are no names", statement.NOT_NAMES, ["the", "monday", "lol"],
     ["priya"]),
    ("question: words that frame a time", question.TIME_FRAME, ["now", "still", "anymore"],
     ["vegan"]),
    ("question: hypotheticals", question.HYPOTHETICAL, ["would", "could", "might"], ["does"]),
    ("evidence: replies that say nothing", evidence.EMPTY_REPLY, ["thanks", "yep", "lol"],
     ["balcony"]),
    ("evidence: number words", evidence.NUMBER_WORDS, ["three", "twelve"], ["dozen"]),
    ("whose: second-person words", whose.SECOND_PERSON_WORDS, ["you", "your", "you're"],
     ["yours truly"]),
    ("identity: relations said plainly", identity.RELATIONS, ["mum", "dad"], ["sister"]),
]  # fmt: skip


@pytest.mark.parametrize(("family", "rule", "examples", "lookalikes"), FAMILIES,
                         ids=[f[0] for f in FAMILIES])  # fmt: skip
def test_rule_family_reads_its_examples_not_its_lookalikes(
    family: str, rule: re.Pattern[str], examples: list[str], lookalikes: list[str]
) -> None:
    assert [e for e in examples if not rule.search(e)] == [], family
    assert [e for e in lookalikes if rule.search(e)] == [], family


@pytest.mark.parametrize(("family", "words", "members", "others"), WORD_LISTS,
                         ids=[f[0] for f in WORD_LISTS])  # fmt: skip
def test_word_list_holds_its_words(
    family: str, words: object, members: list[str], others: list[str]
) -> None:
    assert all(w in words for w in members), family  # type: ignore[operator]
    assert not any(w in words for w in others), family  # type: ignore[operator]


def test_identity_cues_read_a_relative_and_a_pet() -> None:
    found = {
        kind: m.groupdict()
        for kind, pattern in identity.IDENTITY_PATTERNS
        if (m := pattern.search("Ana's sister Carla came over with her dog Rex"))
    }
    assert found["family"]["r"] == "sister" and found["family"]["v"] == "Carla"
    assert found["pet"]["v"] == "Rex"
