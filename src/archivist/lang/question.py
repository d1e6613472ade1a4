"""The words the extractive answerer reads a question with (read/extractive.py): its form
(yes/no, how many, why), whether it asks about now or before, and the cues in evidence that
give a place, a reason, a new state or a "still"."""

from __future__ import annotations

import re

ASKS_YES_NO = re.compile(
    r"^\s*(did|does|do|is|are|was|were|would|could|will|has|have|had|can|should|"
    r"isn't|aren't|doesn't|don't|didn't|wasn't|can't|hasn't|haven't)\b",
    re.I,
)

ASKS_COUNT = re.compile(r"^\s*how\s+(many|much)\b", re.I)

ASKS_NOW = re.compile(
    r"\b(now|still|currently|current|these\s+days|at\s+the\s+moment|right\s+now|today|"
    r"anymore|any\s+more|nowadays|at\s+present)\b",
    re.I,
)

ASKS_PAST = re.compile(
    r"^\s*(?:\w+\s+){0,3}?(did|was|were|had|didn't|wasn't|weren't)\b|\b(used\s+to|before|"
    r"back\s+in|previously|formerly|ago|originally|at\s+first|at\s+the\s+start|happened|"
    r"in\s+(?:(?:jan|febr)uary\s+|march\s+|april\s+|may\s+|june\s+|july\s+|august\s+|"
    r"(?:septem|octo|novem|decem)ber\s+)?(19|20)\d\d|last\s+year)\b",
    re.I,
)

ASKS_BEFORE = re.compile(r"\bbefore\s+([^,?.;]+)", re.I)

ASKS_NEGATED = re.compile(r"n't\b|\bnot\b", re.I)

# "What pets does…", "Which clubs or groups is…": a plural noun before the verb
ASKS_PLURAL = re.compile(
    r"^\s*(?:what|which)\s+(?:[\w-]+\s+){0,3}?[\w-]+[^s\W]s\s+"
    r"(?:do|does|did|is|are|was|were|has|have|had)\b",
    re.I,
)

# Words that frame a question in time, not what it asks about.
TIME_FRAME = frozenset("back now still currently anymore moment days ago before".split())

# "Where…?" / "Which city…?" is answered by a named place: "First week in Berlin done"
ASKS_PLACE = re.compile(r"^\W*(?:where|which\s+(?:city|town|country|place|neighbou?rhood))\b", re.I)

NAMES_PLACE = re.compile(r"\b(?:in|to|at|from|near)\s+(?:the\s+)?[A-Z][\w'’-]+")

# What a sentence that also denies says holds instead: "vegan now", "I moved over to…"
STATES_NEW = re.compile(
    ASKS_NOW.pattern + r"|\b(?:instead|switched|moved|joined|started|became|went)\b", re.I
)

STILL = re.compile(r"\bstill\b", re.I)

ASKS_WHY = re.compile(r"^\W*(?:why|how\s+come|what\s+(?:made|caused|led))\b", re.I)

BECAUSE = re.compile(
    r"\b(?:because|since|due\s+to|thanks\s+to|after|cause|cos|reason)\b"
    r"|^\W*with\b",  # "With the new job there's just no time."
    re.I,
)

# "Did she drop the course?": a question about an ending (beside text.ENDING)
ASKS_DROP = re.compile(r"\bdrop", re.I)  # "drop", "dropped", "dropping"

# "Would Caroline like Vivaldi?": a hypothetical, answered by inference from other evidence
HYPOTHETICAL = frozenset(("would", "could", "might"))

# "Who…?", "With whom…?", "Whose…?": a question that asks for a person
ASKS_PERSON = re.compile(r"\W*(?:with\s+)?(?:who|whom|whose)\b", re.I)
