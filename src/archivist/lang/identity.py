"""The cues people resolution reads what one person says of another with (write/people_tools.py):
a job, a home, a relative, a pet or a hobby named beside a name."""

from __future__ import annotations

import re

from .attributes import JOB_WORDS, PLACE

# Cues only the identity agent reads, beside ``attributes.PATTERNS`` (the one vocabulary
# of job, employer, home, diet, partner and age, which reconciliation reads too): past
# values, which identify someone as well as present ones but must not close a current
# claim; jobs told by what someone does; and family, pets and hobbies, which are many.
OWNER = r"(?:(?P<o>[A-Z][\w-]*)['’]s|[Mm]y|[Hh]is|[Hh]er|[Tt]heir)\s+"

KIN = (  # partners are attributes.PATTERNS' ("Ana's husband Carl")
    "sister|brother|mom|mum|mother|dad|father|son|daughter|cousin|aunt|uncle|grandmother|"
    "grandfather|niece|nephew"
)

RELATIONS = {"mom": "mother", "mum": "mother", "dad": "father"}

PETS = "dog|cat|puppy|kitten|parrot|rabbit|hamster|horse|tortoise|turtle"

GAMES = "tennis|football|soccer|chess|guitar|piano|violin|drums|basketball|golf|volleyball"

FLY = r"\bfl(?:y|ies|ew|ying|own)\s+"

IDENTITY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("job", re.compile(rf"\bwas\s+an?\s+(?P<v>(?:[\w-]+\s+){{0,2}}(?:{JOB_WORDS}))\b", re.I)),
    ("job", re.compile(rf"{FLY}(?P<v>(?:cargo|passenger|commercial)\s+)?"
                       rf"(?:planes?|jets?|aircraft|flights?)\b|{FLY}(?P<w>cargo)\b", re.I)),
    ("job", re.compile(r"\b(?P<t>teach(?:es|ing)?)\s+(?!(?:me|him|her|them|us|you)\b)", re.I)),
    ("residence", re.compile(rf"\blived\s+in\s+{PLACE}")),
    ("family", re.compile(rf"{OWNER}(?:(?:older|younger|little|big|baby|twin|late)\s+)?"
                          rf"(?P<r>{KIN})\s*,?\s+(?P<v>[A-Z][a-z]+)")),
    ("pet", re.compile(rf"(?:{OWNER})?\b(?P<k>{PETS})\s*,?\s+(?:(?:called|named)\s+)?"
                       r"(?P<v>[A-Z][a-z]+)")),
    ("hobby", re.compile(r"\b(?:loves?|enjoys?|likes?)\s+(?P<v>[a-z]+ing)\b")),
    ("hobby", re.compile(rf"\bplays?\s+(?:the\s+)?(?P<v>{GAMES})\b")),
)  # fmt: skip
