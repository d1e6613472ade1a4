"""The words the answerer reads whose a sentence is (read/answer.py): a name said to someone
(a vocative), first- and second-person words, a name a question holds past its first word."""

from __future__ import annotations

import re

# "Hey Caroline, ..." / "..., Caroline!": a name said to someone is no claim about them.
VOCATIVE = (
    re.compile(r"(?:^|,)\s*[A-Z]\w+\W*$"),
    re.compile(r"^\W*(?:(?i:hey|hi|hello|thanks|thank you|wow|oh|yes|yeah)\W+)?[A-Z]\w+,"),
)

FIRST_PERSON_WORDS = frozenset(
    "i me my mine myself i'm i've i'd i'll we us our ours we're we've".split()
)

SECOND_PERSON_WORDS = frozenset("you your yours yourself you're you've you'd you'll".split())

# a name the question holds past its first word: "When was Theo born?"
NAMED_IN_QUESTION = re.compile(r"(?<=\s)([A-Z][a-z]+)(?:['’]s)?\b")
