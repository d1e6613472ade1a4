"""Whether a sentence denies what a question asks: "no fish", "quit smoking", "Cast came
off yesterday", "my old team", "I'm lactose intolerant". The answerer reads a yes or no
from it (read/extractive.py ``yes_or_no``), and the ranking lowers a denial as the
answer to an open question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .text import (
    CEASED_PARTY,
    ENDING,
    HEADLINE_OFF,
    IS_OVER,
    NEGATION,
    OFF_FOR,
    WENT_BACK,
    stem,
)

TOKEN = re.compile(r"[\w'’-]+")
_RESTRICTION = re.compile(
    r"\b(allerg(?:ic|y|ies)|intoleran(?:t|ce)|avoid(?:s|ing)?|banned|forbidden|off-limits)\b",
    re.I,
)
# "my old team" (not "old friends": friends of long standing)
_FORMER = re.compile(r"\b(?:old|former|previous|ex)[\s-]+(?!friends?\b)([\w'-]+)", re.I)
_INSTEAD_WORD = re.compile(r"\binstead\b", re.I)
_INSTEAD_OF = re.compile(r"\b(?:instead\s+of|rather\s+than)\b", re.I)
OLD_STEMS = frozenset(stem(w) for w in ("old", "former", "previous", "ex"))
# cues that follow what they end: "fish anymore", "crutches handed back"
_TRAILING_CUE = re.compile(
    r"any\s*more|any\s+longer|handed\s+(?:it\s+|them\s+)?back|over\s+with|moved\s+out|"
    r"passed\s+away|died|"
    r"(?:came|comes|come|taken|got|is|are)\s+off|removed|\w+-free|laid\s+off|"
    r"(?:is|are|was|were)\s+(?:over|gone)|['’]s\s+gone|no\s+more|split\s+up|broke\s+up|"
    r"(?:was|were)(?:n['’]t|\s+not)\s+for\s+(?:me|us)|called\s+it\s+quits|"
    r"signed\s+(?:me|him|her|us|them)\s+off|disbanded|stolen|nicked|"
    + CEASED_PARTY
    + "|"
    + OFF_FOR
    + "|"
    + IS_OVER,
    re.I,
)


def _scoped(text: str, cue: re.Pattern[str], wanted: Sequence[str]) -> bool:
    """Whether a cue bears on what the question asks: shortly before an asked word ("no
    fish", "quit smoking", "given up the choir") or, for "anymore", "handed back",
    "came off" and "split up" ("Cast came off yesterday", "Marta and I split up"),
    just after it, unless after a switch's "to" (``_new_side``). A sentence with no
    asked word in it is all about it ("Nope, never.")."""
    found = list(cue.finditer(text))
    if not found:
        return False
    tokens = list(TOKEN.finditer(text))
    asked = [i for i, t in enumerate(tokens) if _asked(stem(t.group(0).lower()), wanted)]
    if not asked:
        return True
    for m in found:
        i = sum(1 for t in tokens if t.start() < m.start())  # the cue's first token
        last = max(i, sum(1 for t in tokens if t.start() < m.end()) - 1)  # and its last
        # a trailing cue may follow its party across "and I": "Marta and I split up"
        after = 3 if _TRAILING_CUE.fullmatch(m.group(0)) else 0
        # within four words of a cue's end, five of a long one's: "handed in my
        # resignation at the school", "paid off the last of my student loan"
        reach = 5 if last > i else 4
        new = _new_side(text, m, tokens)
        if any(
            a - reach <= last
            and i <= a + after
            and a < new
            and not (after and _owns_other(tokens[a], m))
            for a in asked
        ):
            return True
    return False


def _owns_other(token: re.Match[str], cue: re.Match[str]) -> bool:
    """Whether an asked word before a trailing cue owns another thing the cue is said
    of: "The van's water pump is done" ends the pump, not the van ("Beard's off" is the
    beard's own "is")."""
    return token.group(0).endswith(("'s", "’s")) and cue.start() >= token.end()


# a switch names what it went to after "to": "switched to a Pixel", "moved into a new
# rental", "traded it in for a Kia" deny no Pixel, rental or Kia ("switched from the
# iPhone to a Pixel" still denies the iPhone)
_SWITCH = re.compile(r"^(?:switched|swapped|moved|changed|traded|transferr?ed)\b", re.I)
_TO = re.compile(r"\b(?:to|into|for)\b", re.I)


def _new_side(text: str, cue: re.Match[str], tokens: Sequence[re.Match[str]]) -> int:
    """The index of the first token naming a switch's new side (past the end for a cue
    that is no switch, or a switch that names none)."""
    to = _TO.search(text, cue.start()) if _SWITCH.match(cue.group(0)) else None
    if to is None:
        return len(tokens)
    return sum(1 for t in tokens if t.start() < to.start())


def _asked(root: str, wanted: Sequence[str]) -> bool:
    """Whether a word's root is an asked one, or grows one of four letters or more
    ("rental" of "rent", "smoker" of "smoke")."""
    return root in wanted or any(len(w) >= 4 and root.startswith(w) for w in wanted)


def former(text: str, wanted: Sequence[str]) -> bool:
    """Whether the sentence calls what the question asks about old ("my old team")."""
    return any(stem(m.group(1)) in wanted for m in _FORMER.finditer(text))


# a negation that affirms: "couldn't resist the cheese board", "can't stop eating it"
_AFFIRMING = re.compile(
    r"\b(?:couldn['’]t|can['’]t|wouldn['’]t|(?:could|can|would)\s+not|cannot)\s+"
    r"(?:resist|help|stop|wait|get\s+enough\s+of)\b",
    re.I,
)


def denies(text: str, wanted: Sequence[str] = ()) -> bool:
    """Whether a sentence says something does not (or no longer) hold: a negation or
    an ending bearing on what is asked ("fish but no meat" denies no fish), what
    the question asks about called old ("gave the old iPhone"), or
    a restriction the question does not itself ask about ("I'm lactose intolerant"
    answers "Can Bao have dairy?" with no, "Is Bao lactose intolerant?" with yes).
    "Couldn't resist the cheese board" denies nothing."""
    text = _AFFIRMING.sub(" ", text)
    if _scoped(text, NEGATION, wanted) or _scoped(text, ENDING, wanted):
        return True
    if any(stem(m.group(1).lower()) in wanted for m in WENT_BACK.finditer(text)):
        return True  # "the wheelchair went back to the Red Cross"
    if any(
        _asked(stem(w.lower()), wanted)
        for m in HEADLINE_OFF.finditer(text)
        for w in m.group(1).split()
    ):
        return True  # "BRACES OFF!!!"
    if (of := _INSTEAD_OF.search(text)) is not None:
        # "veggie now rather than vegan" denies vegan, not veggie
        after = [stem(t.lower()) for t in TOKEN.findall(text[of.end() :])[:4]]
        before = [stem(t.lower()) for t in TOKEN.findall(text[: of.start()])]
        if any(_asked(w, wanted) for w in after) or not any(_asked(w, wanted) for w in before):
            return True
    elif _INSTEAD_WORD.search(text):
        return True
    if any(stem(m.group(1)) not in wanted for m in _RESTRICTION.finditer(text)):
        return True
    return former(text, wanted)
