"""The words reconciliation's change-cue rules read (write/reconcile.py: the baseline beside
the judge): what says a state only grew, which words name no aspect of a life, an event that
began a state, and what makes a later stage someone else's or not yet reached."""

from __future__ import annotations

import re

from .text import KIN_WORDS, TOPIC_STOPWORDS, stem

# A newer claim that says it only grew, not changed (the change cues: text.CHANGE).
# ("too" at a clause's end only: "the band too", not "too cold")
ADDITION_CUE = re.compile(
    r"\b(?:also|too(?=\s*(?:[.,;:!?)]|$))|as\s+well|another|second|third|additionally|"
    r"in\s+addition|besides|on\s+top\s+of)\b",
    re.I,
)

# Words that name no aspect of a life: shared, they say nothing about sameness.
STOP_STEMS = {stem(w) for w in TOPIC_STOPWORDS}

NOT_ASPECTS = {
    stem(w)
    for w in (
        "really still just going thing things time times people year years month week "
        "today yesterday tomorrow morning evening night weekend lately recently again "
        "good great nice new old much many more most little lot lots some every "
        "make made making get getting got take took taking keep kept feel feeling "
        "think thought know want wanted love loved like liked said says tell told "
        "since now anymore longer instead switched quit sold left stopped "
        "work works working live lives living home place stay use used come "
        "please thanks thank sorry okay"
    ).split()
}

# An event that began a state: "Started on metformin", "Joined the community choir",
# "Took up pottery", "Signed up at the climbing wall", "Adopted a greyhound", "Got an
# allotment plot". Not one that only happened ("Started the car", "Got a parking
# ticket"): the state must be named after it, and a verb of having or doing.
OPENS_STATE = re.compile(
    r"^\W*(?:(?:I|we|[A-Z][\w-]*)\s+)?(?:(?:have|has|'ve|just|finally)\s+)*"
    r"(?:start(?:ed|ing)\s+(?:on|at|with|taking|doing|going|learning|playing|a\s+new)|"
    r"began|joined|took\s+up|signed\s+up|enrolled|adopted|"
    r"(?:got|picked\s+up)\s+(?:an?|my|our|(?-i:[A-Z])[\w-]*['’]s)\s+(?:new\s+|first\s+)?"
    r"(?:[\w-]+\s+)?"
    r"(?:plot|allotment|membership|job|place|"
    r"flat|house|dog|cat|puppy|kitten|lodger|car|bike|tenant)\b|"
    r"bought\s+(?:an?|my|our|(?-i:[A-Z])[\w-]*['’]s)\s+)",
    re.I,
)

# words that qualify an aspect without naming a kind of it ("too much milk", "usual seat")
NO_KIND = frozenset("much more less many few some any every usual same other own whole".split())

NEGATED_BEFORE = re.compile(r"\b(?:not|never|no|n't|yet to)\W+(?:\w+\W+){0,2}$", re.I)

# "My sister got married" is the sister's stage, not the speaker's
RELATIVE_BEFORE = re.compile(
    rf"\b(?:my|our|his|her|their|\w+['’]s)\s+(?:\w+\s+)?(?:{KIN_WORDS})\b[^.;!?]*$",
    re.I,
)

OTHERS_CHILD = re.compile(
    rf"\b(?:his|her|their|\w+['’]s)\s+(?:\w+\s+)?(?:{KIN_WORDS})\b|\bmy\s+(?!son|daughter|baby)"
    rf"(?:\w+\s+)?(?:{KIN_WORDS})['’]s\b",
    re.I,
)
