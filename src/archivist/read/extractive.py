"""The answer without an LLM: the evidence sentence that holds, read for what it says.

An extractive answer must never contradict its own quote, nor serve a value
that stopped holding as the current one. So the answerer:

1. reads the question's shape: yes/no, when, how many, or open; whether it asks
   what holds now ("does", "still", "now") or what held before ("did", "was",
   "before Porto", a named period);
2. scores every sentence of the evidence by the question's content words
   (IDF-weighted) and by meaning (the embedder's cosine, so "diet" meets
   "vegan"), favours sentences about the person asked about, and knows which
   sentences no longer hold at ``at`` (their claims were superseded or expired);
3. for a question about now, lets what still holds win and, among relevant
   sentences, the latest; a sentence that no longer holds only answers a
   question about the past;
4. answers in the question's form: "No" when the evidence denies it (negation,
   "no longer", "anymore", an ending such as "quit" or "sold"), "Yes" when it
   affirms it, the event's date for "when", a number for "how many", and
   otherwise the evidence sentence itself with its speaker and date, never a
   fragment of words. Weak evidence abstains.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from ..lang.attributes import AttributeValue
from ..lang.attributes_asked import (
    asked_attributes,
    asked_kinds,
    on_attribute,
    other_stage,
    stated_before,
    states_other_value,
    stating_kind,
)
from ..lang.denial import OLD_STEMS, denies, former
from ..lang.evidence import CLAUSES
from ..lang.phrasing import (
    ASKS_NAME,
    ASKS_STATE,
    CLOCK,
    GIVES_REASON,
    HOW_LONG,
    LENGTH,
    OFF_THING,
    WHAT_TIME,
    names_one,
    other_kind,
)
from ..lang.query import SPEECH_WHO, asks_when, asks_who
from ..lang.question import (
    ASKS_BEFORE,
    ASKS_COUNT,
    ASKS_DROP,
    ASKS_NEGATED,
    ASKS_NOW,
    ASKS_PAST,
    ASKS_PLACE,
    ASKS_PLURAL,
    ASKS_WHY,
    ASKS_YES_NO,
    BECAUSE,
    HYPOTHETICAL,
    NAMES_PLACE,
    STATES_NEW,
    STILL,
    TIME_FRAME,
)
from ..lang.text import (
    CALENDAR_WORDS,
    ENDING,
    NEGATION,
    ended_objects,
    fold,
    is_stopword,
    stem,
    words,
)
from ..lang.timeground import find_times, spoken_day
from .sentences import (
    Sentence,
    after_in_message,
    count_in,
    coverage,
    event_time,
    format_when,
    quoted,
    split_sentences,
)
from .since import asks, denied_later, overtaken, speaks_of

# Abstain when the best sentence's relevance (lexical coverage / 2 + cosine) is
# below this; yes/no needs more, since "Yes" or "No" is a claim of its own.
MIN_RELEVANCE = 0.22
MIN_YES_NO = 0.3
HISTORY_WEIGHT = 0.25  # a sentence that no longer holds, for a question about now
NEGATED_WEIGHT = 0.6  # a denial answers an open question badly ("not in Lyon anymore")
ASSISTANT_WEIGHT = 0.5  # the assistant's sentences are not the user's facts
# Whose a sentence is, for a question about one person: theirs, someone else's, or
# unclear in a message someone else said ("He booked that seafood place", said by Ava).
OWN_WEIGHT = 1.25
OTHER_OWNER_WEIGHT = 0.6
# what someone says to a person of them ("made the tiramisu recipe for you", "how are you
# getting on with the pills"), beside what they say themselves: mostly a reply or a
# question, weaker word of their life than their own
TOLD_WEIGHT = 0.7
UNCLEAR_WEIGHT = 0.8
ASPECT_CUE = 0.5  # lexical credit for a word of the aspect asked about (halved in relevance)
WHEN_WEIGHT = 1.6  # "when" questions: a sentence that names a time
RECENCY = 1.0  # at most this share added to the latest relevant sentence (questions about now)
NEIGHBOUR = 0.3  # share of its message's best relevance a sentence borrows
LIST_SHARE = 0.5  # list answers take sentences within this share of the best
MAX_LIST = 3


@dataclass(frozen=True)
class Shape:
    """What a question asks for, read off its words."""

    form: str  # "yes_no", "when", "count" or "open"
    now: bool  # about what holds at the time asked ("does", "still", "now")
    past: bool  # about what held before ("did", "was", "before X", a year)
    before: frozenset[str]  # stems of what the answer must precede ("before Porto")
    negated: bool  # "Isn't she…", "Doesn't he…"
    ends: bool  # the question asks about an ending ("Did she quit…", "sell", "drop")
    plural: bool  # "Which clubs…", "What pets…": several sentences may answer
    length: bool = False  # "How long…?": a sentence naming a length of time answers
    why: bool = False  # "Why…?": a sentence giving a reason answers
    # the span a yes/no question names ("Is Ida on crutches in August 2023?"): what had
    # ended before it, or began after it, did not hold then
    during: tuple[datetime, datetime] | None = None


def shape_of(question: str, *, asks_when: bool) -> Shape:
    """The question's form and time orientation."""
    if asks_when:
        form = "when"
    elif ASKS_COUNT.match(question):
        form = "count"
    elif ASKS_YES_NO.match(question):
        form = "yes_no"
    else:
        form = "open"
    before = frozenset(
        stem(w)
        for m in ASKS_BEFORE.finditer(question)
        for w in words(m.group(1))
        if not is_stopword(w)
    )
    past = bool(ASKS_PAST.search(question)) and not ASKS_NOW.search(question)
    plural = bool(ASKS_PLURAL.match(question)) and form == "open"
    return Shape(
        form=form,
        now=not past,
        past=past,
        before=before,
        negated=bool(ASKS_NEGATED.search(question)),
        ends=bool(
            ENDING.search(question) or ASKS_DROP.search(question) or OFF_THING.search(question)
        ),
        plural=plural,
        length=form == "open" and bool(HOW_LONG.match(question)),
        why=form == "open" and bool(ASKS_WHY.match(question)),
    )


def asked_at(question: str, at: datetime | None, now: datetime) -> datetime | None:
    """When a question asks memory to stand: the end of the one past span it names
    ("What shift was Kofi working in November 2023?" is answered from what was said by
    the end of November 2023 and held then), else ``at``. A yes/no question reads its
    span itself (``Shape.during``: what held then, told later too)."""
    ref = at or now
    spans = find_times(question, ref)
    if len(spans) != 1 or spans[0].end is None or spans[0].end > ref:
        return at
    if shape_of(question, asks_when=asks_when(question)).form == "yes_no":
        return at
    return spans[0].end


# Aspects of a life a short question asks about in one word ("Where does she
# live?") and the words evidence of it uses ("completed on the flat in Leyton").
# Question words -> evidence words; both as text, stemmed when used.
ASPECTS: tuple[tuple[str, str], ...] = (
    (
        "live lives living home house flat apartment address stay staying reside",
        "live living lives moved move flat house apartment home rent renting landlord "
        "mortgage bought settled city town neighbourhood neighborhood place",
    ),
    (
        "work works working job jobs career employer company occupation profession role "
        "position title",
        "work working job started joined hired engineer manager analyst company office "
        "role promoted promotion position team boss colleague coworker shift shifts",
    ),
    (
        "diet eat eats eating food vegan vegetarian meat dairy",
        "vegan vegetarian pescatarian plant meat fish dairy eat eating food diet gluten "
        "lactose allergic milk",
    ),
    (
        "partner girlfriend boyfriend wife husband spouse married dating relationship "
        "fiancé fiancée",
        "girlfriend boyfriend partner wife husband married wedding dating together engaged "
        "fiancée fiance anniversary",
    ),
    ("pet pets dog dogs cat cats animal animals", "dog cat puppy kitten adopted vet rescue pet"),
    (
        "children kids child son sons daughter daughters baby babies",
        "son daughter baby born kids children child pregnant",
    ),
    (
        "health sick ill injury injured allergic allergy medication hurt",
        "doctor hospital allergic allergy injury broke fractured medication antibiotics "
        "crutches surgery",
    ),
    (
        "car drive driving commute around transport travel bike",
        "car bike drive drove driving bus train cycle cycling walk crutches lift",
    ),
    (
        "study studies studied studying degree course major subject",
        "degree course university uni college studying studied major lectures graduated "
        "exams thesis",
    ),
    (
        "fit fitness exercise sport sports gym hobby hobbies activities activity club clubs groups",
        "gym run running club swim swimming yoga football class lessons training team band choir",
    ),
)
_ASPECT_STEMS = tuple(
    (frozenset(stem(w) for w in asks.split()), frozenset(stem(w) for w in says.split()))
    for asks, says in ASPECTS
)


def aspect_stems(question: str) -> frozenset[str]:
    """Evidence words of the aspects a question names ("live" -> flat, moved, rent...)."""
    asked = {stem(w) for w in words(question)}
    return frozenset(w for asks, says in _ASPECT_STEMS if asks & asked for w in says)


def _framing(word: str) -> bool:
    w = fold(word)
    return is_stopword(w) or w in CALENDAR_WORDS or w in TIME_FRAME or w.isdigit()


def asked_stems(question: str, names: Sequence[str], before: frozenset[str]) -> list[str]:
    """The stems an answer should hold: the question's words less names, function
    words, time framing ("back in March 2024", "still") and what it came before."""
    skip = {stem(w) for n in names for w in words(n)} | before
    out: list[str] = []
    for w in words(ASKS_BEFORE.sub(" ", question)):
        s = stem(w)
        if not _framing(w) and s not in skip and s not in out:
            out.append(s)
    return out


def meaning_text(question: str, names: Sequence[str]) -> str:
    """The question as the embedder should read it: no names, no time framing."""
    named = {fold(w) for n in names for w in words(n)}
    kept = [
        w
        for w in words(ASKS_BEFORE.sub(" ", question))
        if fold(w).removesuffix("'s") not in named and not (_framing(w) and not is_stopword(w))
    ]
    return " ".join(kept)


def someone_elses(s: Sentence, person: str, *, by_subject: bool = True) -> str | None:
    """The owner of a sentence that is not ``person``'s and does not name them: the
    speaker's own ("Landed in Lisbon!" said by Fatima, asked of Yusuf) or another's
    by its subject ("My brother Kofi just started…", asked of Amara); else None.
    ``by_subject`` False for "Who…?" questions, which another person answers."""
    if s.owner is None or s.owner.casefold() == person.casefold():
        return None
    theirs = (s.subject and by_subject) or s.owner == s.message.speaker
    if not theirs or person.casefold() in s.text.casefold():
        return None
    return s.owner


def _ownership(s: Sentence, person: str) -> float:
    key = person.casefold()
    if re.search(rf"\b{re.escape(key)}\b", s.text.casefold()):
        return OWN_WEIGHT  # "My brother Kofi just started as a paramedic" is about Kofi
    if s.owner is not None:
        if s.owner.casefold() != key:
            return OTHER_OWNER_WEIGHT
        return OWN_WEIGHT * (1.0 if s.message.speaker.casefold() == key else TOLD_WEIGHT)
    if s.message.speaker.casefold() == key or key in s.text.casefold():
        return 1.0
    return UNCLEAR_WEIGHT


def lexical_scores(
    texts: Sequence[str],
    wanted: Sequence[str],
    aspects: frozenset[str],
    weights: Mapping[str, float] | None,
    question: str = "",
) -> list[float]:
    """Word overlap per text: the question's stems, plus ASPECT_CUE when the text
    uses a word of the aspect the question names, or names a place when the
    question asks where (capped at 1)."""
    out = []
    place = bool(ASKS_PLACE.match(question))
    for text in texts:
        cov = coverage(text, wanted, weights)
        if (aspects and coverage(text, sorted(aspects)) > 0) or (
            place and NAMES_PLACE.search(text)
        ):
            cov += ASPECT_CUE
        out.append(min(1.0, cov))
    return out


def rank_sentences(
    sentences: Sequence[Sentence],
    shape: Shape,
    lexical: Sequence[float],
    meaning: Sequence[float],
    person: str | None,
    wanted: Sequence[str] = (),
) -> list[Sentence]:
    """The sentences scored for the question, best first (see the module docstring).
    ``wanted``: the question's stems (``asked_stems``), for what a sentence calls old."""
    scored = []
    latest = max((s.message.timestamp for s in sentences), default=None)
    earliest = min((s.message.timestamp for s in sentences), default=None)
    span = (latest - earliest).total_seconds() if latest and earliest else 0.0
    # "before Porto": the first time the later value is mentioned bounds the answer
    bound = None
    if shape.before:
        later = [s for s in sentences if shape.before & {stem(w) for w in words(s.text)}]
        bound = min((s.message.timestamp for s in later), default=None)
    own = [lex / 2 + sem for lex, sem in zip(lexical, meaning, strict=True)]
    calls_old = bool(OLD_STEMS & set(wanted))  # "John's old area": the question's own word
    by_message: dict[int, float] = {}
    for s, r in zip(sentences, own, strict=True):
        by_message[id(s.message)] = max(by_message.get(id(s.message), 0.0), r)
    for s, r in zip(sentences, own, strict=True):
        # a sentence shares a little of its message's best: "Movers are booked for
        # March 8th" answers "When did he move to Porto?" beside "…in Porto."
        rel = r + NEIGHBOUR * max(0.0, by_message[id(s.message)] - r)
        score = rel
        if s.message.role == "assistant":
            score *= ASSISTANT_WEIGHT
        if person:
            score *= _ownership(s, person)
        if shape.before:
            # names the later value, or answers a question that does ("Whoa, can you
            # even play drums?" - "Learning fast"): not what came before it
            if shape.before & {stem(w) for w in words(f"{s.asked or ''} {s.text}")}:
                score *= 0.2
            elif bound is not None and s.message.timestamp < bound:
                score *= 1.3
        if s.ended is not None and not shape.past and not shape.before:
            score *= HISTORY_WEIGHT
        if (
            shape.form in ("open", "count")
            and (NEGATION.search(s.text) or (shape.now and ended_objects(s.text)))
            and not STATES_NEW.search(s.text)
        ):
            # "not in Lyon anymore" and, asked about now, "Cancelled my gym membership"
            # say what is not; "vegan now, so no fish" and "no longer on support, I
            # moved over to the data team" say what is
            score *= NEGATED_WEIGHT
        if (
            shape.form in ("open", "count")
            and shape.now
            and not calls_old
            and former(s.text, wanted)
        ):
            score *= HISTORY_WEIGHT  # "my old team got a new manager" is not her team now
        if shape.form == "when" and (find_times(s.text, s.message.timestamp) or s.when):
            score *= WHEN_WEIGHT
        elif shape.length and LENGTH.search(s.text):
            score *= WHEN_WEIGHT  # "How long was her drive?" - "forty minutes in the car"
        elif shape.why and GIVES_REASON.search(s.text):
            score *= REASON_WEIGHT  # "Why did the band end?" - "…no more, the drummer moved"
        elif shape.form == "count" and count_in(s.text) is not None:
            score *= WHEN_WEIGHT  # "How many engineers…?" - "…the payments team, eight engineers"
        if s.text.rstrip().endswith("?") or s.idle:
            score *= 0.3  # a question states little, small talk nothing
        scored.append((s, rel, score))
    if shape.now and shape.form != "when" and not shape.before and span > 0:
        best = max((x[2] for x in scored), default=0.0)
        rescored = []
        for s, rel, score in scored:
            if best and score >= 0.5 * best:  # recency decides only among relevant ones
                frac = (s.message.timestamp - earliest).total_seconds() / span  # type: ignore[operator]
                score *= 1 + RECENCY * frac
            rescored.append((s, rel, score))
        scored = rescored
    out = [replace(s, relevance=rel, score=sc) for s, rel, sc in scored]
    return sorted(out, key=lambda s: (-s.score, s.rank))


def yes_or_no(s: Sentence, shape: Shape, at_is_past_of: bool, wanted: Sequence[str]) -> bool:
    """Whether the sentence answers the yes/no question with yes.

    The sentence affirms what the question asks unless it denies it; a question
    about an ending ("Did she quit…?") is affirmed by a denial ("no longer…").
    A sentence that no longer holds, asked about now, says the opposite.
    """
    denied = _denies(s.text, wanted)
    affirms = denied == shape.ends
    span = shape.during
    # an ending stays true once told ("We lost Bruno on Saturday"): its claim's end
    # turns no denial into a yes, as the end of "no alcohol until the 15th" does
    lasting = denied and _ends_asked(s.text, wanted)
    if not lasting and (
        (s.ended is not None and (at_is_past_of or (span and s.ended <= span[0])))
        or (span and s.when is not None and s.when >= span[1])
    ):
        affirms = not affirms
    return affirms != shape.negated


def _ends_asked(text: str, wanted: Sequence[str]) -> bool:
    """Whether the sentence says that an asked thing ended ("We lost Bruno"), not
    something beside it ("no running for eight weeks, so Berlin is off")."""
    return any(coverage(thing, wanted) > 0 for thing in ended_objects(text))


def _denies(text: str, wanted: Sequence[str]) -> bool:
    """Whether the sentence denies what is asked, unless a clause of it says the asked
    thing still holds: "I'm still on the committee, just no more accounts"."""
    if not denies(text, wanted):
        return False
    return not any(
        STILL.search(clause) and coverage(clause, wanted) > 0 and not denies(clause, wanted)
        for clause in CLAUSES.split(text)
    )


def names_missing(question: str, s: Sentence) -> list[str]:
    """The names a yes/no question asks about that its evidence sentence does not hold,
    say or hear: "Is Oscar Melanie's pet?" is no yes from "we got another cat named
    Bailey" (Melanie's own words, with no Oscar in them). Months and days are times,
    not names; a hypothetical ("Would Caroline like Vivaldi?") is an inference from
    other evidence, so it asks for no name."""
    if fold(question.split()[0] if question.split() else "") in HYPOTHETICAL:
        return []
    people = {fold(p) for p in (s.message.speaker, *s.message.addressees)}
    low = fold(f"{s.text} {s.asked}")
    missing = []
    for token in question.split()[1:]:
        name = re.sub(r"(?:['’]s)?\W*$", "", token.strip('"“”('))
        if (
            len(name) > 1
            and name[0].isupper()
            and not is_stopword(name)
            and fold(name) not in CALENDAR_WORDS
            and fold(name) not in people
            and not re.search(rf"(?<!\w){re.escape(fold(name))}(?!\w)", low)
        ):
            missing.append(name)
    return missing


REASON_WORDS = 8  # a sentence after "why" evidence this short is read as its reason
REASON_WEIGHT = 1.3  # "why" questions: a sentence that gives a reason


def _reason_after(best: Sentence, ranked: Sequence[Sentence]) -> Sentence | None:
    """The sentence said right after ``best`` in its message (``_told_after``), when it
    gives a reason: it says so ("because", "with the new job…"), or it is short and
    ``best`` only says what happened ("The band split up after the tour." - "Creative
    differences.")."""
    told = _told_after(best, ranked)
    if told is None or (not BECAUSE.search(told.text) and len(words(told.text)) > REASON_WORDS):
        return None
    return told


def _without_names(question: str, wanted: Sequence[str]) -> list[str]:
    """The asked stems but the names: in "Is Tom staying with Nina?" what is asked of
    is the stay; "Tom finally moved into his own place" names Tom, not the stay."""
    names = {stem(w.lower()) for w in re.findall(r"(?<!^)\b[A-Z][\w'’-]*", question.strip())}
    return [w for w in wanted if w not in names] or list(wanted)


def _said_by(s: Sentence, person: str) -> bool:
    return fold(s.owner or s.message.speaker) == fold(person)


SHORT_WORDS = 5  # a sentence this short ("Got a new puppy!") announces more than it tells


def _told_after(best: Sentence, ranked: Sequence[Sentence]) -> Sentence | None:
    """The statement said right after ``best`` in its message, if any (not a question)."""
    following = split_sentences(after_in_message(best))[:1]
    if not following or following[0].endswith("?"):
        return None
    return next((s for s in ranked if s.message is best.message and s.text == following[0]), None)


def _speaking_of(
    ranked: Sequence[Sentence], asked_of: Sequence[str], person: str | None, floor: float
) -> Sentence | None:
    """The sentence a yes or no is read from: one that speaks of what is asked, when
    one does ("Back home!" is near "staying at her parents'" in meaning, but it is the
    stay that answers whether she is still there); the person's own such statement
    first ("Does Nell rent?" - her "Renting in Manchester is a joke", since ended, not
    a friend's "Homeowners!!")."""
    # a question is never the evidence of an answer ("What pet does my brother have?")
    speaking = [
        s for s in ranked if s.relevance >= floor and speaks_of(s, asked_of) and not asks(s)
    ]
    own = [s for s in speaking if person and _said_by(s, person)]
    return next(iter(own or speaking), None)


def _yes_no(
    question: str,
    shape: Shape,
    best: Sentence,
    ranked: Sequence[Sentence],
    wanted: Sequence[str],
    asked: Sequence[AttributeValue],
    asked_of: Sequence[str],
    person: str | None,
    near: Callable[[Sentence, Sentence], float] | None,
    why: str,
    said: Sequence[Sentence] | None = None,
) -> tuple[str, list[Sentence], str] | None:
    """A yes or no read from ``best``, quoting it (``compose``'s yes/no answers)."""
    current = shape.now and not shape.before
    yes = yes_or_no(best, shape, at_is_past_of=current, wanted=wanted)
    if yes and not shape.negated and states_other_value(asked, best.text):
        yes = False  # "Is Lee vegan?" - "I've been pescatarian for years": no
    elif yes and current and not shape.negated and other_stage(question, best.text):
        yes = False  # "Does Olu own a home?" - "We're renting a two-bed": no
    elif yes and not shape.negated and other_kind(question, best.text):
        yes = False  # "Is Lin on a student visa?" - "my skilled worker visa": no
    elif yes and names_missing(question, best):
        return None  # a yes must be about what the question names
    plain_now = current and not (shape.negated or shape.ends)  # "Does…?", not "Did she quit…?"
    if yes and plain_now:
        # "Does Gil run a bike shop?" - "Opened my bike repair shop" (an event: it stays
        # true), then "Closed the shop for good": his later word on it denies it; else
        # "Yes: Ten years vegetarian" when she has since "started eating chicken again"
        later = denied_later(best, said or ranked, asked_of, person, MIN_RELEVANCE)
        how = "denied since"
        if later is None and near and ASKS_STATE.match(question):
            later = overtaken(best, ranked, asked_of, person, near, MIN_RELEVANCE)
            how = "changed since"
        if later is not None:
            return _no_since(later, best, f"{why}; {how}")
    # the answer flipped by an ending says so: "Yes: …no alcohol until the 15th" alone
    # reads as contradicting its own quote
    lasting = _denies(best.text, wanted) and _ends_asked(best.text, wanted)  # see yes_or_no
    gone = (
        best.ended and not lasting and (current or (shape.during and best.ended <= shape.during[0]))
    )
    if gone and not yes and plain_now:
        # what ended it, when memory holds it, says more than the date: "No: The Corsa
        # failed its MOT… (earlier, 1 July 2021: Picked up my first car…)"
        later = denied_later(best, said or ranked, asked_of, person, MIN_RELEVANCE)
        if later is not None:
            return _no_since(later, best, f"{why}; denied since")
    ended = f" (ended {spoken_day(best.ended)})" if gone else ""
    return f"{'Yes' if yes else 'No'}: {quoted(best)}{ended}", [best], why


def _no_since(later: Sentence, best: Sentence, why: str) -> tuple[str, list[Sentence], str]:
    """A no quoting the later word on what ``best`` said, with ``best`` and its day."""
    before = f"earlier, {spoken_day(best.message.timestamp)}: {quoted(best)}"
    return f"No: {quoted(later)} ({before})", [later, best], why


def compose(
    question: str,
    shape: Shape,
    ranked: Sequence[Sentence],
    wanted: Sequence[str] = (),
    person: str | None = None,
    near: Callable[[Sentence, Sentence], float] | None = None,
    said: Sequence[Sentence] | None = None,
) -> tuple[str, list[Sentence], str] | None:
    """The answer text, the sentences it rests on and why; None to abstain.
    ``person``: the one asked about, whose own statement of an asked attribute wins.
    ``near``: how close two sentences are in meaning (``overtaken``; None: unknown).
    ``said``: all the evidence, when ``ranked`` is only some of it (the person's own
    words): a later word that ends what a yes rests on may be in any of it."""
    floor = MIN_YES_NO if shape.form == "yes_no" else MIN_RELEVANCE
    # the best scored sentence that is relevant at all: a weak but recent one on top
    # ("Nope. August I'm back on days") does not hide "on night shifts until July"
    # a question is never the evidence of a yes or a no ("Does your brother still have
    # the cat?" says nothing either way)
    usable = [s for s in ranked if shape.form != "yes_no" or not asks(s)]
    best = next((s for s in usable if s.relevance >= floor), None)
    asked_of = _without_names(question, wanted)  # what a yes or no is about, names aside
    if shape.form == "yes_no" and wanted:
        best = _speaking_of(ranked, asked_of, person, floor) or best
    asked = asked_attributes(question) if shape.form == "yes_no" else []
    if asked:
        # a question about one's diet, job or home is answered by what they said of it
        # last ("Is Lee pescatarian?" - "I went vegan": no), however few words it shares;
        # if they said nothing of it, only a sentence naming the asked value answers
        stating = on_attribute(question, asked, ranked)
        if stating is not None:
            best = stating
        elif best is not None and not any(a.value.casefold() in fold(best.text) for a in asked):
            best = None
    elif shape.form == "open" and shape.now and not shape.before and not shape.plural:
        # "Where does Tomás live?" is answered by what he last said of his home
        stating = stating_kind(asked_kinds(question), person, ranked)
        if stating is not None:
            best = stating
        elif best is not None and near is not None and person:
            best = _turned_to(best, ranked, wanted, person, near) or best
    elif shape.form == "open" and shape.before and (later := ASKS_BEFORE.search(question)):
        # "Where did Zainab live before Leyton?": the home she named before Leyton
        stating = stated_before(asked_kinds(question), person, ranked, later.group(1))
        if stating is not None:
            best = stating
    if best is None:
        return None
    why = f"best evidence relevance {best.relevance:.2f}"
    current = shape.now and not shape.before
    if shape.form == "yes_no":
        return _yes_no(
            question, shape, best, ranked, wanted, asked, asked_of, person, near, why, said
        )
    if shape.form == "when":
        if WHAT_TIME.match(question) and CLOCK.search(best.text):
            return quoted(best), [best], why  # "What time…?" - "Another 5am start…"
        when, granularity = event_time(best, question, wanted)
        return format_when(when, granularity), [best], why
    if shape.form == "count":
        n = count_in(best.text)
        head = f"{n}. " if n is not None else ""
        return f"{head}{quoted(best, drop_replaced=current, wanted=wanted)}", [best], why
    chosen = [best]
    if ASKS_WHY.match(question) and not BECAUSE.search(best.text):
        # "Why did he change his seat?" - "From now on, aisle seats please." says what,
        # the next sentence of the message says why: "Since the knee operation I need…"
        reason = _reason_after(best, ranked)
        if reason is not None:
            chosen.append(reason)
    elif (told := _told_after(best, ranked)) and (
        len(words(best.text)) <= SHORT_WORDS
        or (ASKS_NAME.search(question) and names_one(told.text) and not names_one(best.text))
    ):
        # "What is Omar's dog called?" - "Got a new puppy!" only announces it; the
        # sentence after it tells it: "A collie called Dot, she chews everything."
        # "Who is Ivy seeing?" - "…I'm seeing someone!" is told by "His name is Raf."
        chosen.append(told)
    if shape.plural:
        # items of a list are told at different times: relevance decides, not the
        # recency that picked the best; what no longer holds stays out of "now"
        for s in ranked:
            if len(chosen) == MAX_LIST:
                break
            if s is not best and _joins_list(s, max(floor, LIST_SHARE * best.relevance), current):
                chosen.append(s)
    chosen.sort(key=lambda s: s.message.timestamp)
    said = [quoted(s, drop_replaced=current, wanted=wanted) for s in chosen]
    if asks_who(question):
        whose = question.lstrip().casefold().startswith("whose")
        speech = SPEECH_WHO.match(question) is not None
        said = [_named(s, t, person, whose, speech) for s, t in zip(chosen, said, strict=True)]
    return "; ".join(said), chosen, why


def _turned_to(
    best: Sentence,
    ranked: Sequence[Sentence],
    wanted: Sequence[str],
    person: str,
    near: Callable[[Sentence, Sentence], float],
) -> Sentence | None:
    """The holder's later word on what ``best`` tells of, when it says what holds now:
    "How does Sam get to the office?" - "Driving to the office every day", then "I get
    the train in now" (``overtaken``), though it shares no word with the question. One
    that only says what ended ("She doesn't have a car anymore!") tells no how or where."""
    later = overtaken(best, ranked, wanted, person, near, MIN_RELEVANCE)
    if later is None or NEGATION.search(later.text) or ENDING.search(later.text):
        return None
    return later


def _joins_list(s: Sentence, floor: float, current: bool) -> bool:
    """Whether a sentence beside the best one is another item of a list answer: relevant
    enough, a statement of the user's, and, asked about now, still holding and not only
    what stopped ("Cancelled Netflix and Prime" is no item of what Ravi pays for)."""
    return (
        s.relevance >= floor
        and not (current and s.ended is not None)
        and not (current and ended_objects(s.text) and not STATES_NEW.search(s.text))
        and not s.text.rstrip().endswith("?")
        and s.message.role != "assistant"
    )


def _named(s: Sentence, text: str, person: str | None, whose: bool, speech: bool) -> str:
    """A who-question's answer names who said it: "Who drinks four cups a day?" - "Sam:
    I'm on four cups a day", not only beside it; asked of a person ("Who told Abe to
    get a case?"), one who is not that person: "Noor: Get a case!". A whose-question
    is answered by the owner, asked of them or not: "Mo: The cat will be at my mum's"."""
    if speech:  # "Who said Kim would have a perfect smile?" - Eli said it
        who = s.message.speaker
    elif person is None or whose:
        who = s.owner or s.message.speaker
    elif fold(s.message.speaker) != fold(person):
        who = s.message.speaker
    else:
        return text
    return text if fold(who) in fold(text) else f"{who}: {text}"
