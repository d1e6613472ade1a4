"""The words the answerer and the context read evidence with (read/): spans (until), when a
question asks since or until when, number and ordinal words, the clauses a denial is scoped to,
what a sentence says it replaced, and a reply that says nothing of its own."""

from __future__ import annotations

import re

UNTIL_WORD = re.compile(r"\b(?:until|till|til|through)\b", re.I)

ASKS_SINCE_WHEN = re.compile(r"^\W*(since|from|by|until|till)\s+when\b", re.I)

NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split()
    )
}

ORDINAL_WORDS = {
    w: i
    for i, w in enumerate(
        "zeroth first second third fourth fifth sixth seventh eighth ninth tenth".split()
    )
    if i >= 2
}

# key info's "(since …, until 2024-09-20)"
KEY_INFO_UNTIL = re.compile(r"\buntil (\d{4}-\d{2}-\d{2})\b")

REPLACED_WORDS = re.compile(r"\b(?:instead\s+of|rather\s+than)\b[^,.;!?]*", re.I)

# What a reply says when it says nothing of its own: "Thanks, Melanie!", "Yep!", "Sure thing"
EMPTY_REPLY = frozenset(
    "thanks thank thx yes yeah yep yup no nope sure ok okay right wow haha lol cool great "
    "nice awesome totally definitely absolutely exactly agreed true thing".split()
)

# "I'm still on the committee, just no more accounts": the denial is of the accounts
CLAUSES = re.compile(r"[,;:]\s|\s[-\u2013\u2014]\s|\b(?:but|though|although)\b", re.I)
