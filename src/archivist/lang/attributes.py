"""Single-valued attributes of a person read off a claim's words: job, diet, home, partner...

Reconciliation needs to know when two claims cannot both hold: "Ana works as
a software engineer" and, later, "Ana was promoted to team lead" are two
values of one attribute, so the newer closes the older and a conflict is
logged. Without an LLM this is the heuristic's whole notion of contradiction,
so it is deliberately narrow: a handful of attributes that are single-valued
at any one time, with patterns that need the attribute's own cue words. A
claim that matches nothing is never in conflict (duplicates and refinements
are found separately, by wording).

This is the one vocabulary of these attributes: the identity agent's tools
(write/people_tools.py) read the same cues, so reconciliation and the agent
cannot disagree about someone's job or home; the agent only adds cues of its
own for past values and for what is not single-valued (family, pets, hobbies).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from .text import KIN_WORDS

# Occupations the "is a ..." pattern accepts; anything after "works as" is accepted.
JOB_WORDS = (
    "engineer|developer|programmer|designer|lead|manager|director|nurse|doctor|teacher|"
    "professor|lawyer|accountant|pilot|chef|cook|waiter|waitress|barista|writer|author|"
    "artist|painter|musician|singer|photographer|student|intern|consultant|analyst|"
    "scientist|researcher|architect|electrician|plumber|mechanic|driver|firefighter|"
    "officer|soldier|counselor|counsellor|therapist|pharmacist|dentist|vet|veterinarian|"
    "librarian|cashier|clerk|receptionist|secretary|assistant|founder|ceo|cto|"
    "entrepreneur|freelancer|coach|trainer|instructor|journalist|editor|farmer|baker|"
    "carpenter|paramedic|surgeon|physician|technician|administrator|executive|"
    "salesperson|marketer|recruiter|tutor|caregiver|retiree|volunteer|midwife|translator|"
    "sailor|fisherman|rep|representative|agent|associate|supervisor|specialist|coordinator|"
    "copywriter|bookkeeper|hairdresser|barber|cleaner|carer|courier|postman|banker|broker|"
    "economist|interpreter|actor|actress|dancer|producer|physiotherapist|physio|"
    "psychologist|psychiatrist|paralegal|solicitor|barrister|judge|detective|lifeguard|"
    "builder|welder|bartender|butcher|florist|gardener|tailor|realtor|nanny|childminder|"
    "lecturer|headteacher|apprentice|trainee|auditor|actuary|optician|radiographer|"
    "hygienist|zookeeper|housekeeper|labourer|laborer"
)
ARTICLE = r"(?:an?\s+|the\s+)?"
# Where a job title ends: a preposition, a time word, or punctuation.
JOB_END = (
    r"(?=\s+(?:at|for|in|on|with|after|since|and|but|last|this|next|yesterday|today|"
    r"recently|earlier|again|now)\b|[.,;!?]|$)"
)
NAME = r"(?P<v>[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+){0,2})"
# What a home is called when it is named by its place ("this shoebox in Walthamstow").
HOME_WORDS = "flat|apartment|house|home|place|studio|shoebox|bedsit|condo|cottage"
# A home by its kind, as one rents, buys or finds it ("a terrace in Heaton", "a two-bed
# in Leith", "a room in a houseshare in Bristol").
DWELLING = (
    HOME_WORDS
    + r"|terrace|semi|bungalow|maisonette|loft|room|houseshare|flatshare|[\w-]*bed(?:room)?"
)
# not a stay: "a room in Paris for the weekend"
_NOT_A_STAY = (
    r"(?![^.;!?]*\bfor\s+(?:the\s+|a\s+|two\s+|three\s+)?"
    r"(?:weekend|nights?|weeks?|holidays?|summer|winter|month|term))"
)
# not a maybe or a wish: "Might rent a room in Bristol", "want to rent a flat"
_NOT_MAYBE = r"(?<!\bmight\s)(?<!\bmay\s)(?<!\bcould\s)(?<!\bwould\s)(?<!\bto\s)"
# A place: capitalised words, plus ", Country" only where the sentence ends with it.
PLACE = r"(?P<v>[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+){0,2}(?:,\s+[A-Z][\w'-]+(?=\s*[.!?;]|$))?)"


@dataclass(frozen=True)
class AttributeValue:
    """One attribute and its value as a claim states it."""

    attribute: str
    value: str
    change: str = ""  # "promotion", "move", "change", "correction": why a newer value came


# (attribute, cue, change): each cue's group ``v`` is the value. No "was a", no "lived
# in": "Ana lived in Paris", said after "Ana lives in Berlin", must not close the latter.
PATTERNS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "job",
        re.compile(
            rf"\b(?:promot(?:ed|ion)|(?:bumped|moved)\s+up)\s+(?:to|as)\s+{ARTICLE}"
            rf"(?P<v>[\w -]{{2,40}}?){JOB_END}",
            re.I,
        ),
        "promotion",
    ),
    (
        "job",
        re.compile(
            rf"\b(?:works?|working|worked|job|career|employed|started|starting|"
            rf"(?:first|new)\s+(?:day|week|month|shift)|hired)\s+as\s+{ARTICLE}"
            rf"(?P<v>[\w -]{{2,40}}?){JOB_END}",
            re.I,
        ),
        "",
    ),
    (
        "job",
        re.compile(
            r"\b(?:is|am|'m|are|became|become|becoming|now|still)\s+(?:now\s+)?(?:an?\s+)"
            rf"(?P<v>(?:[\w-]+\s+){{0,2}}(?:{JOB_WORDS}))\b",
            re.I,
        ),
        "",
    ),
    (  # "Freelancing for now", "I'm self-employed": work with no employer
        "job",
        re.compile(
            r"\b(?i:(?:i'm\s+|i\s+am\s+|now\s+|still\s+)?)"
            r"(?P<v>(?i:freelancing|freelance|self-employed|unemployed|retired))\b"
        ),
        "",
    ),
    (
        "employer",
        re.compile(
            rf"\b(?:works?|working|employed|job|joined|hired)\s+(?:at|for|by)\s+{NAME}",
        ),
        "",
    ),
    (  # "I got the apprenticeship at the garage": a workplace named by its kind
        "employer",
        re.compile(
            r"\b(?i:(?:got|landed|accepted|took)\s+(?:the|a|an|my)\s+(?:new\s+)?(?:[\w-]+\s+)?"
            r"(?:job|apprenticeship|role|position|placement|internship|traineeship)\s+at\s+"
            r"(?:the\s+|a\s+)?)(?P<v>(?:[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+){0,2})|[a-z][\w-]+(?:\s+(?:centre|shop|"
            r"office|hospital|school|factory|garage|bank|library|council|warehouse))?)"
        ),
        "",
    ),
    (  # "First week as a junior designer at Pixelworks": the employer after a job title
        "employer",
        re.compile(
            r"\b(?i:as\s+(?:a|an|the)\s+(?:[\w-]+\s+){0,2}(?:"
            + JOB_WORDS
            + rf")\s+(?:at|for|with))\s+{NAME}",
        ),
        "",
    ),
    (
        "residence",
        re.compile(rf"\b(?:lives?|living|live|based|settled|resides?)\s+in\s+{PLACE}"),
        "",
    ),
    (  # "living in my parents' basement in Queens": the place after the home
        "residence",
        re.compile(
            r"\b(?i:(?:lives?|living|live|staying)\s+(?:with\s+(?:[\w'’-]+\s+){1,3}?)?in\s+"
            r"(?:my|our|a|an|the)\s+(?:[\w'’-]+\s+){0,3}?"
            rf"(?:{HOME_WORDS}|basement|room|flat\s*share|house\s*share)\s+in)\s+{PLACE}"
        ),
        "",
    ),
    ("residence", re.compile(rf"\b(?:moved|moving|relocated|relocating)\s+to\s+{PLACE}"), "move"),
    (  # "Moved back to my mum's in Margate", "moving in with my parents in Leeds"
        "residence",
        re.compile(
            r"\b(?i:(?:moved|moving|move)\s+(?:back\s+)?(?:in\s+with|to|into)\s+"
            r"(?:my|our|his|her|(?-i:[A-Z])[\w-]*['’]s)\s+"
            rf"(?:[\w-]+['’]s|parents['’]?|{KIN_WORDS})(?:\s+(?:place|house|flat|home))?\s+in)\s+"
            + PLACE
        ),
        "move",
    ),
    (  # "moving in with Alice in Bath": a new home, with someone, in a place
        "residence",
        re.compile(
            r"\b(?i:(?:moved|moving|move)\s+in\s+with\s+(?:[\w'’-]+\s+){1,3}?in)\s+" + PLACE
        ),
        "move",
    ),
    (  # "I live on a narrowboat now", "living in a camper van": a home named by its kind
        "residence",
        re.compile(
            r"\b(?i:(?:lives?|living)\s+(?:on|in)\s+(?:a|an|the|my|our)\s+(?:[\w-]+\s+)?)"
            r"(?P<v>(?i:narrowboat|houseboat|boat|barge|caravan|camper\s*van|motorhome|yurt|"
            r"care\s+home|hostel|dorm|commune))\b"
        ),
        "",
    ),
    (  # "this shoebox in Walthamstow", "our flat in Bonfim": one's home named by its place
        "residence",
        re.compile(
            r"\b(?i:(?:my|our|this|(?-i:[A-Z])[\w-]*['’]s)\s+"
            r"(?:(?:little|tiny|tiny\s+little|rented|new|own|first)\s+)?"
            rf"(?:{HOME_WORDS})\s+in)\s+{PLACE}"
        ),
        "",
    ),
    (  # "Completed on the flat in Leyton", "moved into a house in Leith", "Signed for a
        # terrace in Heaton", "Found a room in a houseshare in Bristol": a new home
        "residence",
        re.compile(
            r"\b"
            + _NOT_MAYBE
            + r"(?i:(?:bought|buying|completed\s+on|closed\s+on|moved\s+into|moving\s+into|"
            r"got\s+the\s+keys\s+to|signed\s+for|found|"
            r"signed\s+(?:a|the)\s+lease\s+(?:on|for))\s+"
            r"(?:a|an|the|my|our|(?-i:[A-Z])[\w-]*['’]s)\s+(?:[\w-]+\s+){0,2}"
            rf"(?:{DWELLING})(?:\s+in\s+(?:a|an)\s+(?:houseshare|flatshare|house\s+share))?"
            rf"\s+in)\s+{PLACE}{_NOT_A_STAY}"
        ),
        "move",
    ),
    (  # "Renting a flat in Camden", "We rent a two-bed in Leith", "renting a one-bed above
        # the chippy on Church Street": a home one rents
        "residence",
        re.compile(
            r"\b"
            + _NOT_MAYBE
            + r"(?i:(?:rent|rents|renting|rented|sharing|share)\s+(?:a|an|the|my|our)\s+"
            r"(?:[\w-]+\s+){0,2}?"
            rf"(?:{DWELLING})(?:\s+(?:above|over|near|behind|by)\s+(?:a|an|the)\s+[\w-]+)?"
            rf"\s+(?:in|on))\s+{PLACE}{_NOT_A_STAY}"
        ),
        "",
    ),
    (  # "transferring to the Berlin office": a move with the job, to that city
        "residence",
        re.compile(
            rf"\btransferr(?:ed|ing)\s+to\s+(?:the|our|their)\s+{PLACE}\s+"
            r"(?:office|branch|campus|site|headquarters|HQ)\b"
        ),
        "move",
    ),
    (
        "diet",
        re.compile(
            r"\b(?:is|am|'m|are|became|become|went|gone|going|turned|now|being|stayed|stay|"
            r"staying|"
            r"(?:has|have|'s|'ve)\s+been)\s+(?:now\s+)?"
            r"(?:a\s+|fully\s+|strictly\s+)?(?P<v>vegan|vegetarian|pescatarian|pescetarian|"
            r"carnivore|omnivore|keto|flexitarian|veggie)\b",
            re.I,
        ),
        "",
    ),
    (
        "diet",
        re.compile(r"\b(?P<v>eats?\s+meat|eating\s+meat\s+again)\b", re.I),
        "",
    ),
    (
        "partner",
        re.compile(
            r"\b(?:dating|married\s+to|engaged\s+to|seeing|in\s+a\s+relationship\s+with|"
            # "three dates with a lovely guy called Felix"
            # "been seeing a lovely guy called Idris"
            r"(?:dates?\s+with|dating|seeing|going\s+out\s+with)\s+(?:a\s+|an\s+|this\s+)?"
            r"(?:[\w-]+\s+){0,2}(?:guy|girl|man|woman|bloke|lad|chap|fella|boy)"
            r"\s+(?:called|named))\s+" + NAME
        ),
        "",
    ),
    (
        "partner",
        re.compile(
            r"\b(?:boyfriend|girlfriend|partner|husband|wife|fianc[ée]e?)\s*,?\s+(?:is\s+)?" + NAME
        ),
        "",
    ),
    (  # "I've been seeing someone new, her name is Leah"
        "partner",
        re.compile(
            r"\b(?:seeing|dating|met)\s+someone(?:\s+new)?\s*[,.;:-]?\s*(?:and\s+)?"
            r"(?:her|his|their)\s+name\s+is\s+" + NAME
        ),
        "",
    ),
    (
        "age",
        re.compile(r"\b(?:is|am|'m|turned|turning)\s+(?P<v>\d{1,3})(?:\s+years?\s+old)?\b"),
        "",
    ),
    (  # one line manager at a time: "My line manager Sandra", "my new manager is Imran"
        "manager",
        re.compile(
            # (claims write "Ola's" for "my": the possessive names the holder)
            r"(?:(?<=\b[Mm]y\s)|(?<=\b[Oo]ur\s)|(?<=['’]s\s))"
            r"(?i:(?:new\s+)?(?:line\s+)?(?:manager|boss)(?:\s+is)?,?)\s+" + NAME
        ),
        "",
    ),
    (  # "Sandra is my manager", and a question's "Is Sandra Ola's manager?"
        "manager",
        re.compile(
            NAME + r"\s+(?:is|was)\s+(?i:(?:my|our|(?-i:[A-Z])[\w-]*['’]s)\s+"
            r"(?:new\s+)?(?:line\s+)?(?:manager|boss))\b"
        ),
        "",
    ),
    (  # what one studies: "studying geography", "Switched my degree to geology"
        "study",
        re.compile(
            r"\b(?i:(?:studying|studies|doing\s+a\s+degree\s+in|my\s+degree\s+in|"
            r"a\s+degree\s+in|majoring\s+in|(?:switched|changed|swapped)\s+"
            r"(?:my\s+|(?-i:[A-Z])[\w-]*['’]s\s+)?"
            r"(?:degree|course|major)\s+to))\s+"
            r"(?!(?:for|hard|late|abroad|at|in|with|the|a|an|my|our|all|every|so|too|and)\b)"
            r"(?P<v>[A-Za-z][a-z-]{3,}(?:\s+(?:science|studies|engineering|history|law))?)\b"
        ),
        "",
    ),
)

# A newer value that says the older one was a mistake (it never held) ...
_CORRECTION = re.compile(
    r"\b(?:actually|correction|i\s+misspoke|to\s+correct|not\s+\w+\s+but|i\s+meant)\b",
    re.I,
)
# ... or that things changed (the older one held until then): "no more fish", "vegan now".
_CHANGED = re.compile(
    r"\b(?:no\s+longer|anymore|any\s+more|no\s+more|instead|now|these\s+days|nowadays|"
    r"switched|went|became|become|started|quit|gave\s+up|since)\b",
    re.I,
)
_DIET_CANON = {
    "pescetarian": "pescatarian",
    "eats meat": "omnivore",
    "eat meat": "omnivore",
    "eating meat again": "omnivore",
    "carnivore": "omnivore",
    "veggie": "vegetarian",
}
_TRAILING = re.compile(r"\s+(?:now|again|too|as well|already|full[- ]time|part[- ]time)$", re.I)


def clean_value(attribute: str, value: str) -> str:
    """A cue's value in its compared form ("" when it is no value: an age of 500)."""
    v = " ".join(value.split()).strip(" ,.;")
    if attribute == "diet":
        v = _DIET_CANON.get(v.lower(), v.lower())
    elif attribute == "job":
        v = _TRAILING.sub("", v).lower()
    elif attribute == "age" and not (1 <= int(v) <= 120):
        return ""
    return v


# a third person, or a possessive ("Ana's"), but not "it's" or "that's"
_SOMEONE = re.compile(
    r"\b(?:he|she|they|his|her|their|him|them)\b"
    r"|(?<!\bit)(?<!\bthat)(?<!\bthere)(?<!\bhere)(?<!\bwhat)(?<!\blet)['’]s\b",
    re.I,
)


def _elliptic(before: str) -> bool:
    """Whether the words before a cue name no holder: no name past the first word
    (capitalised anyway), no third-person pronoun, no possessive; in the cue's own
    clause ("Not renewing the Clifton lease, I'm moving in with Alice in Bath")."""
    before = re.split(r"[,;:.!?]", before)[-1]
    rest = before.strip().split(maxsplit=1)
    if len(rest) == 1 and _DOER.fullmatch(rest[0]) and not _OPENER.fullmatch(rest[0]):
        return False  # "Sandra retired at Christmas": the name right before the cue holds it
    return not _SOMEONE.search(before) and not (
        len(rest) > 1 and re.search(r"\b[A-Z][a-z]+\b", rest[1])
    )


# A capitalised first word right before a cue: a name ("Sandra retired"), unless a word
# that opens a chat line ("Finally settled in Porto", "Just moved", "Officially retired")
_DOER = re.compile(r"[A-Z][a-z]+")
_OPENER = re.compile(
    r"\w+ly|Just|Now|Still|Also|Already|Today|Yesterday|Tonight|Soon|Back|Even|Then|So|And|"
    r"But|Well|Update|Ever|Since|Gonna|Going|Got|Been|Being|Became|Am|Is|Was|Were|Are|Yes|"
    r"Yep|Nope|No|Oh|Ok|Okay|Ha|Haha|Lol|Guess|Guys|News|Big|Good|Great|Bad|Sad|Happy|"
    r"Exciting|Plus|Too|My|Our|The|This|That|These|Those|We|Me|Her|His|Their|Its|An|It|He|"
    r"She|They|You|Your"
)


# a value whose holder is named after it: "Sandra is Ola's manager"
_OWNER = re.compile(
    r"[A-Z][\w'-]*\s+(?:is|was)\s+([A-Z][\w-]*)['’]s\s+(?:new\s+)?(?:line\s+)?(?:manager|boss)\b"
)


def holds_for(text: str, subject: str, start: int, attribute: str = "") -> bool:
    """Whether ``subject`` is the one the cue at ``start`` speaks of.

    The subject's name must come before the cue with nothing in between that
    hands the attribute to someone else: "Ana's sister Mia lives in Porto" is
    Mia's home, not Ana's.
    """
    first = subject.split()[0] if subject.split() else ""
    if not first:
        return False
    if (of := _OWNER.search(text, start)) is not None and of.start() == start:
        return of.group(1).casefold() == first.casefold()  # "Sandra is Ola's manager"
    hits = list(re.finditer(rf"\b{re.escape(first)}\b", text[:start], re.I))
    if not hits:
        # "Finally settled in Porto.": nobody named before the cue is elliptic first
        # person (claims keep the speaker's words), so the subject's own value
        return _elliptic(text[:start])
    between = text[hits[-1].end() : start]
    if attribute in ("partner", "manager") and re.fullmatch(r"['’]s\s+", between):
        return True  # "Ana's boyfriend Carl": the possessive names the holder
    return not re.search(r"^'s\b|\b[A-Z][a-z]+\b", between)


def attribute_values(text: str) -> Iterator[tuple[AttributeValue, re.Match[str]]]:
    """Every value the ``PATTERNS`` read in ``text``, whoever it belongs to, cue by cue.

    An age needs "year" in the text ("Ana is 30" may be a score, not an age).
    """
    for attribute, pattern, change in PATTERNS:
        for m in pattern.finditer(text):
            value = clean_value(attribute, m.group("v"))
            if value and not (attribute == "age" and "year" not in text.lower()):
                yield AttributeValue(attribute, value, change), m


def attribute_of(text: str, subject: str) -> AttributeValue | None:
    """The first single-valued attribute ``text`` states of ``subject``, or None.

    Claims are stored with names, not pronouns, so the subject's name is in the
    text; a cue that belongs to someone else in the sentence is skipped.
    """
    for found, m in attribute_values(text):
        if holds_for(text, subject, m.start(), found.attribute):
            if found.change:
                return found
            if _CORRECTION.search(text):
                return replace(found, change="correction")
            if _CHANGED.search(text):
                return replace(found, change="change")
            return found
    return None


def same_value(a: str, b: str) -> bool:
    """Values naming the same thing ("team lead" / "Team Lead", "Lisbon" / "Lisbon, Portugal").

    Reconciliation's test: any other value is a change ("nurse" -> "head nurse").
    """
    x, y = a.casefold(), b.casefold()
    return x == y or x.startswith(y + ",") or y.startswith(x + ",")


def compatible_values(a: str, b: str) -> bool:
    """Values that may describe one person: the same, or one's words inside the other's.

    The identity agent's test, looser than ``same_value``: "pilot" and "cargo
    pilot" may be one person told twice, though a change of job to reconcile.
    """
    x, y = set(re.findall(r"\w+", a.casefold())), set(re.findall(r"\w+", b.casefold()))
    return same_value(a, b) or bool(x and y) and (x <= y or y <= x)


# Stages of a life that follow one another. A claim at a later stage ends the same
# speaker's state at an earlier one with no change cue ("We got married on Saturday"
# ends "My fiancée Aiko and I…"; write/reconcile.py), and a yes/no question naming one
# stage is answered no by evidence of the other ("Does Olu own a home?" - "We're
# renting"; read/attributes_asked.py). Each: (aspect, earlier stage, later stage), as
# patterns; a relative named before the later stage makes it theirs ("my sister got
# married"), except for a birth of one's own ("our son was born").
STAGES: tuple[tuple[str, str, str], ...] = (
    (
        "relationship",
        r"fianc[ée]e?|engaged|girlfriend|boyfriend",
        r"married|wedding day|my (?:wife|husband)|newlyweds?",
    ),
    (
        "home",
        r"renting|rented|rent(?: is| went| up)|my landlord|tenancy|lease",
        r"(?:bought|completed on|own) (?:a|the|our|my) (?:\w+ )?(?:flat|house|home|apartment"
        r"|place|front door)|mortgage|homeowners?",
    ),
    (
        # a move ends where one lived: "moved into a care home in Sopot" ends "lives alone
        # in her house in Gdańsk"; only a named place or a home on either side counts
        # ("must be tough living in the city" is no home, "moved to the garden" no move)
        "home",
        r"(?:lives?|living)(?: \w+)? in (?:(?-i:[A-Z])\w+|(?:my|our|her|his|their) (?:\w+ )?"
        r"(?:flat|house|apartment|home))|(?:my|our|her|his|their) (?:\w+ )?(?:flat|house"
        r"|apartment) in (?-i:[A-Z])\w+",
        r"(?:moved|moving|move|relocated|relocating) (?:in)?to (?:(?:(?:a|an|the|my|our|her|his"
        r"|their) )?(?:\w+ )?(?:flat|house|home|apartment|place)|(?-i:[A-Z])\w+(?! office))",
    ),
    (
        "pregnancy",
        r"pregnant|expecting (?:a|our|twins)|(?:we|i)(?:['’]re|['’]m| are| am) expecting|due date",
        r"was born|gave birth|newborn|(?:she|he)['’]s (?:finally )?here|"
        r"born (?:this morning|this afternoon|last night|yesterday|today|at \d)",
    ),
    (
        # a birth ends "we have one kid": how many children is a state that changes
        "children",
        r"(?:have|has) (?:one|two|three|four|a|an) (?:kid|child|son|daughter|boy|girl)s?"
        r"|only child|(?:one|two|three|four) (?:kids|children)",
        r"(?:was|were) born|gave birth|newborn"
        r"|(?:baby|twins|son|daughter)\b[^.!?]{0,20}\b(?:arrived|(?:is|are) here)",
    ),
    ("study", r"studying for|my (?:degree|thesis|dissertation)|at uni\b", r"graduated|graduation"),
    (
        "work",
        r"unemployed|job[- ]hunting|looking for (?:a )?(?:new )?(?:job|work)|between jobs",
        r"(?:got|landed|accepted|starting|started) (?:a|the|my) (?:new )?(?:job|role|position)"
        r"|hired",
    ),
)
LIFE_STAGES = tuple(
    (aspect, re.compile(rf"\b(?:{a})\b", re.I), re.compile(rf"\b(?:{b})\b", re.I))
    for aspect, a, b in STAGES
)
