"""How questions and evidence sentences are phrased: the patterns the extractive
answerer (read/extractive.py) reads a question's ask and a sentence's change, kind,
length, time of day or reason with. Patterns and pure string tests only; nothing here
knows a Sentence or the store.
"""

from __future__ import annotations

import re

from .text import ENDING, is_stopword, stem

# "Is Nik off alcohol?" asks whether he went without it, as "Did Nik give up…?" does;
# "off sick", "off work" and "off today" are a state of leave, not something given up
OFF_THING = re.compile(
    r"\b(?:is|are|was|were|be|been|being|stay(?:s|ed|ing)?|go(?:es|ing)?|went|gone)\s+"
    r"(?:[A-Z][\w'’-]*\s+)?(?:still\s+)?off\s+(?!sick|work|duty|today|tomorrow|the\s+hook\b)\w",
    re.I,
)

INSTEAD = re.compile(r",?\s*\b(instead\s+of|rather\s+than|replacing)\b[^,.;!?]*", re.I)
# A clause that says what stopped, beside one that says what holds now.
# Any ending (``text.ENDING``: "Colin retired", "sold the Fiat") or a thing returned;
# not a switch's new side ("Switched to a Samsung Galaxy", "Moved into a new rental")
_STOPPED = (
    # ("Switched my degree to geology" says what holds)
    r"(?![^,;.!?]*\b(?:switched|swapped|moved|changed|transferred)\s+(?:[\w'’-]+\s+){0,3}?"
    r"(?:to|into)\b)"
    r"[^,;.!?]*(?:" + ENDING.pattern + r"|\breturned\b)[^,;.!?]*"
)  # "Switched to a Samsung, traded the iPhone in at the shop": its second clause stopped;
# "Stopped the piano lessons, swapped them for Spanish classes": its first
# what a swap gave up, told beside what it got: cut from an answer about now
SWAPS = (
    (
        re.compile(
            r"\b(traded|swapped|exchanged)\s+(?:in\s+)?(?:the|my|our|his|her|their)\s+"
            r"(?:[\w'’-]+\s+){0,3}?(?:in\s+)?for\b",
            re.I,
        ),
        r"\1 it for",
    ),
    (re.compile(r"\b(switched|moved|changed)\s+from\s+(?:[\w'’-]+\s+){1,4}?to\b", re.I), r"\1 to"),
)
# a clause that also says what came instead is no stopped clause: "Traded the Fiesta in
# for an electric Kia Niro, no more petrol stations!" is not "no more petrol stations!"
_FOR_NEW = r"(?![^,;.!?]*\bfor\s+(?:a|an|the|my|our)\b)"
NO_LONGER_LEAD = re.compile(rf"^{_FOR_NEW}{_STOPPED}[,;]\s*(?:(?:but|and|so)\s+)?", re.I)
NO_LONGER_TAIL = re.compile(rf"[,;]\s*(?:(?:but|and|so)\s+)?{_STOPPED}(?=[.!?]*$)", re.I)

_DET = r"\b(?:a|an|the|my|our|his|her|their|your)\s+"
# "a student visa", "the payments team": a kind of a thing, as a question names it
_ASKED_KIND = re.compile(_DET + r"([a-z][\w-]+)\s+([a-z][\w-]{2,})\b")
# words that qualify a thing without naming a kind of it ("a new team", "the same car")
_NO_KIND = frozenset(
    "much more less many few some any every usual same other own whole new old current "
    "first last next big small little good great nice lovely real".split()
)


def other_kind(question: str, sentence: str) -> bool:
    """Whether ``sentence`` names another kind of the thing a yes/no question asks
    about, and not the asked one: "Is Lin on a student visa?" against "They're
    sponsoring my skilled worker visa", "Is Ana on the payments team?" against "I
    moved to lead the fraud team". The thing must come after a determiner on both
    sides (or the sentence's start: "Graduate visa approved!"), so "I play guitar" names
    no kind against "the acoustic guitar"."""
    for m in _ASKED_KIND.finditer(question):
        kind, thing = m.group(1).lower(), m.group(2).lower()
        if is_stopword(kind) or kind in _NO_KIND or re.search(rf"\b{kind}", sentence, re.I):
            continue
        said = re.finditer(
            rf"(?:^\W*|{_DET})((?:[\w-]+\s+){{1,2}}){re.escape(stem(thing))}\w*\b", sentence, re.I
        )
        for n in said:
            other = n.group(1).split()[0].lower()
            if not is_stopword(other) and other not in _NO_KIND:
                return True
    return False


# a sentence telling that something began, changed or is gone ("Plot twist: started
# eating chicken again", "back in the office three days a week", "officially a citizen",
# "six weeks without a cigarette") ...
TURN = re.compile(
    r"\b(?:start(?:ed|ing|s)?|began|took\s+up|joined|moved|became|now|officially|finally|"
    r"back\s+(?:in|to|at|on)|again|switched|new|since|any\s*more|no\s+longer|"
    r"called\s+off|quit|gave\s+up|sold|left|completed|without|cancell?ed|traded|transferred|instead)\b",
    re.I,
)
# a question about a state now ("Is Ama vegetarian?"), not a hypothetical ("Would…?")
ASKS_STATE = re.compile(r"^\W*(?:is|are|does|do|has|have|can)\b", re.I)
# ... unless it adds to what held ("I also joined a chess club": the band still holds)
ADDED = re.compile(r"\b(?:also|too|as\s+well|another|second|third|more|extra|besides)\b", re.I)

# "How long was…?", "How many years has…?", "How old is…?": answered by a sentence
# naming a length of time ("forty minutes in the car", "Eighteen years old", "turned two")
HOW_LONG = re.compile(
    r"^\W*how\s+(?:long|old|far|many\s+(?:minutes|hours|days|weeks|months|years|decades|"
    r"miles|kilometres|kilometers|km))\b",
    re.I,
)
_NUMBER_WORD = (
    r"\d+(?:\.\d+)?|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"(?:thir|four|fif|six|seven|eigh|nine)teen|(?:twen|thir|for|fif|six|seven|eigh|nine)ty|"
    r"a\s+few|a\s+couple\s+of|several|half\s+an?"
)
LENGTH = re.compile(  # of time, of a way, of a life
    rf"\b(?:{_NUMBER_WORD})[\s-]+(?:more\s+)?(?:minutes?|mins?|hours?|hrs?|days?|weeks?|"
    rf"months?|years?|yrs?|decades?|miles?|km|kilometres?|kilometers?|k)\b"
    rf"|\b(?:turned|turns|aged?)\s+(?:{_NUMBER_WORD})\b|\b\d+(?:k|km)\b",
    re.I,
)
# "What time does she start?" asks a time of day, which a sentence says ("a 5am start")
WHAT_TIME = re.compile(r"^\W*(?:what|which)\s+time\b|^\W*at\s+what\s+time\b", re.I)
CLOCK = re.compile(
    r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d{2}\b|\b(?:noon|midnight|"
    r"o'clock)\b",
    re.I,
)


# a question that asks for a name: "Who is Ivy seeing?", "What is the puppy called?"
ASKS_NAME = re.compile(r"^\W*(?:who|whom)\b|\b(?:called|named|name)\b", re.I)
# a name inside a sentence: a capitalised word not opening it, not "I"
_NAME_INSIDE = re.compile(r"(?<!^)(?<![.!?]\s)\b(?!I\b)[A-Z][a-z][\w'’-]*")


def names_one(text: str) -> bool:
    return bool(_NAME_INSIDE.search(text.strip()))


# a reason given: a causal word, or what ended followed by what did it ("Static Bloom is
# no more, the drummer moved to Glasgow", "no more running for me, the cartilage is shot")
GIVES_REASON = re.compile(
    r"\b(?:because|since|due\s+to|thanks\s+to|cause|cos|so\s+(?:i|we|she|he|they)\b|"
    r"which\s+is\s+why|that's\s+why|reason)\b"
    r"|\b(?:no\s+more|over|quit|stopped|sold|left|split\s+up|ended|off)\b[^,;.!?]*[,;:]\s+\w",
    re.I,
)
