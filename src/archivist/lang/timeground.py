"""Explicit time: resolve "yesterday", "next month", "8 May 2023" against when a message was said.

A relative date means nothing once the conversation is old, so claims are
grounded at write time against the message's own timestamp.
Regular expressions only, no parser dependency: this runs on every sentence.

Conventions, kept simple on purpose:

- days run 00:00 to the next 00:00 (end exclusive) in the timezone of ``at``;
  "this morning", "tonight" and "last night" resolve to the whole day;
- weeks start on Monday; a weekend is Saturday 00:00 to Monday 00:00, with
  granularity "week"; "N weeks ago" / "in N weeks" is the Monday-based week
  holding that day; "next weekend" is the one after "this weekend";
- "last <weekday>" (also "last Fri") is the most recent one strictly before ``at``'s date, "next
  <weekday>" the first strictly after, "on <weekday>" follows the tense
  (future → next, past → last, present → the one in ``at``'s week); "until/by/
  before <weekday>" is ``at``'s day or the next such day, "from/after" the next
  strictly after, "since" ``at``'s day or the latest before;
- seasons are northern-hemisphere meteorological: spring = Mar–May, summer =
  Jun–Aug, autumn = Sep–Nov, winter = Dec–Feb; "last summer" is the latest
  one that ended before ``at``;
- a date without a year takes ``at``'s year, one year earlier if the sentence
  is past tense and that lands more than 31 days after ``at`` (one later for
  future tense, more than 31 days before); "in May" takes ``at``'s year, the
  previous year if May is after ``at``'s month in a past-tense sentence (the
  next year if before it in a future- or present-tense one: "the wedding is in
  March", said in May);
- "the past week/month/year" is the rolling window up to the end of ``at``'s
  day (7, 30 or 365 days); "the other day" counts as the past week;
- in durations a month is 30 days and a year 365.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from functools import lru_cache

from ..model import date_in_range

GRANULARITIES: tuple[str, ...] = ("day", "week", "month", "year", "season", "instant")


@dataclass(frozen=True)
class TimeRef:
    """A time expression found in text, resolved to an absolute span (end exclusive)."""

    text: str
    start: datetime
    end: datetime | None
    granularity: str  # day|week|month|year|season|instant


# -- vocabulary ---------------------------------------------------------------------------

_WORD_NUMBERS = {
    w: i + 1
    for i, w in enumerate("one two three four five six seven eight nine ten eleven twelve".split())
}
_WORD_NUMBERS.update({"a": 1, "an": 1, "couple": 2, "few": 3, "several": 3})
_NUM = (
    r"(?:\d{1,3}|a\s+couple(?:\s+of)?|couple\s+of|a\s+few|several|an?|"
    r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
_UNIT = r"(day|week|month|year)s?"
_MONTH_NAMES = (
    "january february march april may june july august september october november december"
).split()
_MONTHS = {name: i + 1 for i, name in enumerate(_MONTH_NAMES)}
_MONTHS.update({name[:3]: i + 1 for i, name in enumerate(_MONTH_NAMES)})
_MONTHS["sept"] = 9
# "May" only capitalised, so the modal verb "may" is never a month.
_MONTH_FULL = (
    r"(?:January|February|March|April|(?-i:May)|June|July|August|September|October|"
    r"November|December)"
)
_MONTH_ANY = (
    r"(?:January|February|March|April|(?-i:May)|June|July|August|September|October|"
    r"November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)"
)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_SEASON_START = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}

_FUTURE = re.compile(
    r"\b(?:will|won't|wont|shall|gonna|going\s+to|plan(?:s|ning)?\s+(?:to|on)|"
    r"hop(?:e|es|ing)\s+to|want(?:s)?\s+to|intend|upcoming|can't\s+wait|looking\s+forward|"
    r"next|tomorrow)\b|['’]ll\b",
    re.IGNORECASE,
)
_PAST = re.compile(
    r"\b(?:was|were|did|had|went|got|made|took|saw|met|ago|yesterday|last|[a-z]{3,}ed)\b",
    re.IGNORECASE,
)
_BACKWARD = re.compile(
    r"(?:\b(?:have|has)|['’]ve)\s+(?:\w+ly\s+)?(?:been|known|lived|worked|had|studied|played|"
    r"practi[cs]ed|volunteered|dated|done|taught|run|owned|kept)\b",
    re.IGNORECASE,
)


def tense(text: str) -> str:
    """Coarse tense of a sentence ("future", "past" or "present"), to place yearless dates."""
    if _FUTURE.search(text):
        return "future"
    if _PAST.search(text):
        return "past"
    return "present"


def _number(phrase: str) -> int:
    """Digits or a number word ("a couple of" → 2, "a few" → 3) as an int."""
    words = phrase.lower().split()
    if words[-1] == "of":
        words.pop()
    return int(words[-1]) if words[-1].isdigit() else _WORD_NUMBERS[words[-1]]


# -- spans --------------------------------------------------------------------------------


def _at_day(d: date, tz: tzinfo | None) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=tz)


def _days(text: str, d: date, n: int, tz: tzinfo | None, granularity: str = "day") -> TimeRef:
    return TimeRef(text, _at_day(d, tz), _at_day(d + timedelta(days=n), tz), granularity)


def _week(text: str, d: date, tz: tzinfo | None) -> TimeRef:
    return _days(text, d - timedelta(days=d.weekday()), 7, tz, "week")


def _shift_month(year: int, month: int, k: int) -> tuple[int, int]:
    total = year * 12 + (month - 1) + k
    return total // 12, total % 12 + 1


def _month(text: str, year: int, month: int, tz: tzinfo | None) -> TimeRef:
    ny, nm = _shift_month(year, month, 1)
    return TimeRef(
        text, datetime(year, month, 1, tzinfo=tz), datetime(ny, nm, 1, tzinfo=tz), "month"
    )


def _year(text: str, year: int, tz: tzinfo | None) -> TimeRef:
    return TimeRef(
        text, datetime(year, 1, 1, tzinfo=tz), datetime(year + 1, 1, 1, tzinfo=tz), "year"
    )


def _season(text: str, name: str, year: int, tz: tzinfo | None) -> TimeRef:
    """The season ``name`` that starts in ``year`` (winter starts in December)."""
    month = _SEASON_START[name]
    ey, em = _shift_month(year, month, 3)
    return TimeRef(
        text, datetime(year, month, 1, tzinfo=tz), datetime(ey, em, 1, tzinfo=tz), "season"
    )


# -- handlers: (match, at, text) -> TimeRef | None ------------------------------------------

# (match, when said, the sentence, its mood when known: "future", "past" or "" to read
# it off the sentence's tense) -> the time it names
Handler = Callable[[re.Match, datetime, str, str], "TimeRef | None"]


def _h_offset_day(offset: int) -> Handler:
    def handle(m: re.Match, at: datetime, _text: str, _mood: str = "") -> TimeRef:
        return _days(m[0], at.date() + timedelta(days=offset), 1, at.tzinfo)

    return handle


def _h_relative_period(m: re.Match, at: datetime, _text: str, _mood: str = "") -> TimeRef:
    """last/this/next week, weekend, month, year."""
    which = m[1].lower().split()[-1]  # "this past" -> "past"
    k = {"last": -1, "past": -1, "this": 0, "the": 0, "next": 1}[which]
    unit, d, tz = m[2].lower(), at.date(), at.tzinfo
    if unit == "week":
        return _week(m[0], d + timedelta(weeks=k), tz)
    if unit == "weekend":
        saturday = d - timedelta(days=d.weekday()) + timedelta(days=5 + 7 * k)
        return _days(m[0], saturday, 2, tz, "week")
    if unit == "month":
        return _month(m[0], *_shift_month(at.year, at.month, k), tz)
    return _year(m[0], at.year + k, tz)


def _weekday(name: str) -> int:
    """Monday = 0 for a weekday's name or its abbreviation ("Tues", "Fri")."""
    return next(i for i, d in enumerate(_WEEKDAYS) if d.startswith(name.lower()[:3]))


def _h_weekday(m: re.Match, at: datetime, text: str, mood: str = "") -> TimeRef:
    """last/next/this/on/for <weekday>, and until/by/from/since <weekday>."""
    which, target, d = " ".join(m[1].lower().split()), _weekday(m[2]), at.date()
    if which in ("on", "for"):  # "booked the dentist for thursday": the mood says which
        which = {"future": "next", "past": "last"}.get(mood or tense(text), "this")
    if which in ("last", "this past"):
        back = (d.weekday() - target) % 7 or 7
        return _days(m[0], d - timedelta(days=back), 1, at.tzinfo)
    if which in ("next", "this coming", "from", "after"):
        ahead = (target - d.weekday()) % 7 or 7
        return _days(m[0], d + timedelta(days=ahead), 1, at.tzinfo)
    if which in ("until", "till", "by", "before"):  # "here until Friday": today or ahead
        return _days(m[0], d + timedelta(days=(target - d.weekday()) % 7), 1, at.tzinfo)
    if which == "since":  # "off work since Monday": today or before
        return _days(m[0], d - timedelta(days=(d.weekday() - target) % 7), 1, at.tzinfo)
    return _days(m[0], d + timedelta(days=target - d.weekday()), 1, at.tzinfo)


# "Haven't had coffee in a month", "hasn't rained in weeks": "in" a span after a past
# denial reaches back to when it last happened, not ahead
_DENIED_SINCE = re.compile(
    r"(?:\b(?:have|has|had|did)\s*n['’]?t|\b(?:have|has|had|did)\s+not|\bnever)\s+"
    r"(?:[\w'’-]+\s+){0,5}$",
    re.I,
)


def _h_count(sign: int) -> Handler:
    """ "N units ago" (sign -1) and "in N units" (sign +1; -1 after a past denial)."""

    def handle(m: re.Match, at: datetime, text: str, _mood: str = "") -> TimeRef:
        step = -1 if sign > 0 and _DENIED_SINCE.search(text[: m.start()]) else sign
        n, unit, d, tz = step * _number(m[1]), m[2].lower(), at.date(), at.tzinfo
        if unit == "day":
            return _days(m[0], d + timedelta(days=n), 1, tz)
        if unit == "week":
            return _week(m[0], d + timedelta(weeks=n), tz)
        if unit == "month":
            return _month(m[0], *_shift_month(at.year, at.month, n), tz)
        return _year(m[0], at.year + n, tz)

    return handle


def _h_recent(m: re.Match, at: datetime, _text: str, _mood: str = "") -> TimeRef:
    """Rolling windows up to today: "the past week/month/year", "the other day" (a week)."""
    unit = (m[1] or "week").lower()
    days = {"week": 7, "month": 30, "year": 365}[unit]
    d = at.date()
    return TimeRef(m[0], _at_day(d - timedelta(days=days), at.tzinfo),
                   _at_day(d + timedelta(days=1), at.tzinfo), unit)  # fmt: skip


def _h_weekends_ago(m: re.Match, at: datetime, _text: str, _mood: str = "") -> TimeRef:
    d = at.date() - timedelta(weeks=_number(m[1]))
    return _days(m[0], d - timedelta(days=d.weekday()) + timedelta(days=5), 2, at.tzinfo, "week")


def _h_season(m: re.Match, at: datetime, _text: str, _mood: str = "") -> TimeRef:
    """last/this/next summer (northern hemisphere)."""
    which, name = m[1].lower().split()[-1], m[2].lower()
    candidates = [_season(m[0], name, y, at.tzinfo) for y in range(at.year - 2, at.year + 2)]
    if which in ("last", "past"):
        return [s for s in candidates if s.end <= at][-1]
    if which == "next":
        return next(s for s in candidates if s.start > at)
    current = [s for s in candidates if s.start <= at < s.end]
    return current[0] if current else next(s for s in candidates if s.start > at)


def _yearless(month: int, day: int, at: datetime, text: str, mood: str = "") -> date:
    """The date in ``at``'s year, moved a year back or on when the mood (else the tense)
    says it is far off."""
    when = date(at.year, month, day)
    mood = mood or tense(text)
    if mood == "past" and (when - at.date()).days > 31:
        when = date(at.year - 1, month, day)
    elif mood == "future" and (at.date() - when).days > 31:
        when = date(at.year + 1, month, day)
    return when


# Holidays on a fixed day: (month, day).
_HOLIDAYS = {
    "christmas eve": (12, 24),
    "christmas": (12, 25),
    "christmas day": (12, 25),
    "new year's eve": (12, 31),
    "new years eve": (12, 31),
    "new year's day": (1, 1),
    "new years day": (1, 1),
    "halloween": (10, 31),
    "valentine's day": (2, 14),
    "valentines day": (2, 14),
}


def _h_holiday(m: re.Match, at: datetime, text: str, mood: str = "") -> TimeRef | None:
    """ "over Christmas", "last Halloween": the holiday's day, placed by the word before
    it or, as a yearless date, by the sentence's tense ("broke up over Christmas", said
    on 10 January, is last December's)."""
    name = " ".join(m[2].lower().replace("’", "'").split())
    month, day = _HOLIDAYS[name]
    which, mood = m[1].lower(), mood or tense(text)
    around = [date(y, month, day) for y in (at.year - 1, at.year, at.year + 1)]
    if which in ("last", "since", "after") or (
        which not in ("next", "until", "till", "by") and mood == "past"
    ):
        when = max(d for d in around if d <= at.date())
    elif which == "next" or mood == "future":
        when = min(d for d in around if d >= at.date())
    else:  # the nearest: "over Christmas", said on 10 January, is the one just gone
        when = min(around, key=lambda d: abs((d - at.date()).days))
    return _days(m[0], when, 1, at.tzinfo)


def _h_date(day_group: int, month_group: int, year_group: int) -> Handler:
    """Day-month(-year) in either order; None for impossible dates such as 31 June."""

    def handle(m: re.Match, at: datetime, text: str, mood: str = "") -> TimeRef | None:
        month = _MONTHS[m[month_group].lower().rstrip(".")]
        day = int(m[day_group])
        try:
            if m[year_group]:
                when = date(int(m[year_group]), month, day)
            else:
                when = _yearless(month, day, at, text, mood)
        except ValueError:
            return None
        return _days(m[0], when, 1, at.tzinfo)

    return handle


def _h_month_year(m: re.Match, at: datetime, _text: str, _mood: str = "") -> TimeRef:
    return _month(m[0], int(m[2]), _MONTHS[m[1].lower().rstrip(".")], at.tzinfo)


_AHEAD = frozenset("in during early late mid".split())  # not "since March", "of March"
_BACK = re.compile(r"\bback\s*$", re.IGNORECASE)  # "back in March" looks back


def _h_month_alone(m: re.Match, at: datetime, text: str, mood: str = "") -> TimeRef:
    """in/last/next <Month>, placed by the word before it or by the sentence's tense."""
    which, month = m[1].lower(), _MONTHS[m[2].lower()]
    year, mood = at.year, mood or tense(text)
    if which == "last":
        year -= month >= at.month
    elif which == "next":
        year += month <= at.month
    elif which in ("until", "till", "by") and mood != "past":
        year += month < at.month  # "staying at my parents' till March", said in September
    elif month > at.month and mood == "past":
        year -= 1
    elif month < at.month and (
        mood == "future"
        or (mood == "present" and which in _AHEAD and not _BACK.search(text[: m.start()]))
    ):
        # "The wedding is in March", said in May: a month gone by this year is told in
        # the past tense, so one told in the present is the next
        year += 1
    return _month(m[0], year, month, at.tzinfo)


_CLAUSE_BREAK = re.compile(r"[,;:!?]|\.(?!\d)")


def _h_day_of_month(m: re.Match, at: datetime, text: str, mood: str = "") -> TimeRef | None:
    """ "on the 24th": the 24th of the month it is said in; of the next month when that
    day has passed and the sentence looks ahead, of the last when it looks back. The
    clause holding it decides: "Discharged this morning, still on antibiotics till the
    21st" looks ahead."""
    start = max((b.end() for b in _CLAUSE_BREAK.finditer(text, 0, m.start())), default=0)
    end = _CLAUSE_BREAK.search(text, m.end())
    day, mood = int(m[2]), mood or tense(text[start : end.start() if end else len(text)])
    year, month = at.year, at.month
    if day < at.day and mood != "past" and m[1].lower() != "since":
        year, month = _shift_month(year, month, 1)
    elif day > at.day and mood == "past":
        year, month = _shift_month(year, month, -1)
    try:
        return _days(m[0], date(year, month, day), 1, at.tzinfo)
    except ValueError:  # "the 31st" of a shorter month
        return None


def _h_iso(m: re.Match, at: datetime, _text: str, _mood: str = "") -> TimeRef | None:
    try:
        if m[4]:
            when = datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), tzinfo=at.tzinfo)
            return TimeRef(m[0], when, None, "instant")
        return _days(m[0], date(int(m[1]), int(m[2]), int(m[3])), 1, at.tzinfo)
    except ValueError:
        return None


def _h_year(m: re.Match, at: datetime, _text: str, _mood: str = "") -> TimeRef:
    return _year(m[0], int(m[1]), at.tzinfo)


# A state that has lasted a span up to when it is said began that long ago: "been
# seeing Marco for two months", "vegan for three years now", "one year sober today"
_SPANS_BACK = (
    rf"\bbeen\s+(?:[\w'’-]+\s+){{0,4}}?for\s+({_NUM})\s+{_UNIT}\b",
    rf"\bfor\s+({_NUM})\s+{_UNIT}\s+now\b",
    rf"\b({_NUM})\s+{_UNIT}\s+(?:sober|clean|smoke[- ]free|alcohol[- ]free|married|"
    r"together|vegan|vegetarian|cancer[- ]free|in\s+remission)\b",
)
_SPAN_BACK = re.compile("|".join(f"(?:{p})" for p in _SPANS_BACK), re.I)


def spans_back(text: str) -> bool:
    """Whether the text dates a state by how long it has lasted ("for two months now"):
    its time is when the state began, not a window it holds in."""
    return _SPAN_BACK.search(text) is not None


_WD = "(" + "|".join(_WEEKDAYS) + "|(?-i:Mon|Tues?|Wed|Thu|Thurs?|Fri|Sat|Sun))"
_RAW_PATTERNS: list[tuple[str, Handler]] = [
    (r"\bthe\s+day\s+before\s+yesterday\b", _h_offset_day(-2)),
    (r"\bthe\s+day\s+after\s+tomorrow\b", _h_offset_day(2)),
    (r"\b(?:yesterday|last\s+night)\b", _h_offset_day(-1)),
    (r"\b(?:today|tonight|this\s+(?:morning|afternoon|evening))\b", _h_offset_day(0)),
    (r"\btomorrow\b", _h_offset_day(1)),
    (r"\b(last|this|next)\s+(week|weekend|month|year)\b", _h_relative_period),
    (r"\b(this\s+past)\s+(weekend)\b", _h_relative_period),
    # "until the end of the month": the period it is said in ("of next month": next's)
    (r"\bthe\s+end\s+of\s+(the)\s+(week|month|year)\b", _h_relative_period),
    (
        rf"\b(last|next|this|this\s+past|this\s+coming|on|for|until|till|by|before|from|after|since)"
        # not "on Thursdays" nor "on Thursday nights": a habit, not a day
        rf"\s+{_WD}\b(?!s|\s+(?:nights|mornings|afternoons|evenings)\b)",
        _h_weekday,
    ),
    (rf"\b({_NUM})\s+{_UNIT}\s+ago\b", _h_count(-1)),
    *((pattern, _h_count(-1)) for pattern in _SPANS_BACK),
    (rf"\bin\s+({_NUM})\s+{_UNIT}\b", _h_count(1)),
    (rf"\b({_NUM})\s+weekends?\s+ago\b", _h_weekends_ago),
    (r"\b(?:the\s+|this\s+)past\s+(week|month|year)\b|\bthe\s+other\s+day\b", _h_recent),
    (r"\b(last|this|next|this\s+past)\s+(summer|winter|spring|fall|autumn)\b", _h_season),
    (
        # "over Christmas", "last Halloween"; not "the Christmas markets" nor "Christmas trees"
        r"\b(over|at|for|on|before|after|since|until|till|by|around|during|last|this|next)\s+"
        r"(christmas(?:\s+(?:eve|day))?|new\s+years?['’]?s?\s+(?:eve|day)|halloween|"
        r"valentines?['’]?s?\s+day)\b(?!\s+(?:trees?|lights?|cards?|presents?|gifts?|markets?|"
        r"jumpers?|sweaters?|movies?|songs?|decorations?|costumes?|cand(?:y|ies)|part(?:y|ies)|"
        r"dinners?|lunch|shopping|lists?|spirit|music|carols?|cookies?|pudding|cakes?)\b)",
        _h_holiday,
    ),
    (
        rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_ANY}\.?)(?:,?\s+(\d{{4}}))?\b",
        _h_date(1, 2, 3),
    ),
    (
        rf"\b({_MONTH_ANY}\.?)\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?\b(?!:)",
        _h_date(2, 1, 3),
    ),
    (rf"\b({_MONTH_ANY})\.?,?\s+(\d{{4}})\b", _h_month_year),
    (
        rf"\b(in|during|since|from|until|till|by|last|next|this|early|late|mid|of)\s+({_MONTH_FULL})\b"
        r"(?!\s*\d)",
        _h_month_alone,
    ),
    # "the 10k in may": a lowercase "may" after a word that only a month follows (not
    # "this", and not before a verb: "by may be", "in may have")
    (
        r"\b(in|during|since|from|until|till|by|last|next|early|late|mid|of)\s+(may)\b"
        r"(?!\s*\d|\s+(?:be|have|not|need|want|well|go|get|take|come|also|just|still|even|"
        r"never|or|as)\b)",
        _h_month_alone,
    ),
    (r"\b(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2}))?\b", _h_iso),
    # "Wedding is on the 24th": that day of the month said in, or of the next one
    (
        r"\b(on|by|until|till|from|since)\s+the\s+(\d{1,2})(?:st|nd|rd|th)\b(?!\s+(?:of\b|[A-Z]))",
        _h_day_of_month,
    ),
    (
        r"(?<![\d$£€.,:/-])\b(19[5-9]\d|20[0-4]\d)\b(?![\d,.:/]\d|s\b|\s*(?:miles|km|people|"
        r"dollars|bucks|steps|feet|meters|metres|words|calories|pounds|kg|lbs|times|pieces))",
        _h_year,
    ),
]
_PATTERNS = [(re.compile(p, re.IGNORECASE), h) for p, h in _RAW_PATTERNS]
_QUICK = re.compile(
    r"\d|yesterday|today|tonight|tomorrow|night|morning|afternoon|evening|week|month|year|"
    r"day|ago|other|mon|tue|wed|thu|fri|sat|sun|summer|winter|spring|fall|autumn|christmas|"
    r"halloween|" + "|".join(_MONTH_NAMES + [n[:3] for n in _MONTH_NAMES]),
    re.IGNORECASE,
)


@lru_cache(maxsize=16384)  # a context reads the same stored lines' times every turn
def _found(text: str, at: datetime, mood: str = "") -> tuple[tuple[int, TimeRef], ...]:
    """Non-overlapping (position, TimeRef) pairs, the longest match winning, in text order.

    ``mood`` ("future" or "past", when the judge has said whether the sentence looks
    ahead or back) places a yearless date or a bare weekday; else the tense does.

    Nothing is grounded against a time outside model.MIN_YEAR..MAX_YEAR (a
    message dated 9999 would overflow the arithmetic), and a span that would
    leave the calendar is skipped, not raised.
    """
    if not date_in_range(at) or not _QUICK.search(text):
        return ()
    candidates: list[tuple[int, int, re.Match, Handler]] = []
    for pattern, handler in _PATTERNS:
        for m in pattern.finditer(text):
            candidates.append((m.start(), m.end(), m, handler))
    candidates.sort(key=lambda c: (c[0] - c[1], c[0]))
    taken: list[tuple[int, int]] = []
    out: list[tuple[int, TimeRef]] = []
    for start, end, m, handler in candidates:
        if any(start < e and s < end for s, e in taken):
            continue
        try:
            ref = handler(m, at, text, mood)
        except (OverflowError, ValueError):  # e.g. "next year" in 9999: no such span
            ref = None
        if ref is not None:
            taken.append((start, end))
            out.append((start, ref))
    return tuple(sorted(out, key=lambda p: p[0]))


def undirected_times(text: str, at: datetime) -> list[str]:
    """The time expressions of ``text`` whose place on the calendar depends on whether the
    sentence looks ahead or back ("the 10k in May", "for thursday"): those that land
    elsewhere read ahead than read back. Their direction is the judge's question."""
    ahead = dict(_found(text, at, "future"))
    back = dict(_found(text, at, "past"))
    return [ref.text for pos, ref in ahead.items() if pos in back and back[pos].start != ref.start]


def find_times(text: str, at: datetime, mood: str = "") -> list[TimeRef]:
    """Every time expression in ``text``, resolved against ``at`` (the message's timestamp;
    ``mood``: see ``_found``)."""
    return [ref for _, ref in _found(text, at, mood)]


# -- durations and grounding ----------------------------------------------------------------

_DURATION = re.compile(
    rf"\bfor\s+(?:the\s+(next|past|last)\s+)?({_NUM}\s+)?{_UNIT}\b",
    re.IGNORECASE,
)
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}


def _durations(text: str) -> list[tuple[timedelta, bool]]:
    """(length, backward) for each "for N units"; backward when it counts up to now."""
    out = []
    for m in _DURATION.finditer(text):
        if not m[2] and not m[1]:
            continue  # "for years" / "for the day": no count
        n = _number(m[2].strip()) if m[2] else 1
        backward = (m[1] or "").lower() in ("past", "last") or bool(_BACKWARD.search(text))
        out.append((timedelta(days=n * _UNIT_DAYS[m[3].lower()]), backward))
    return out


def durations(text: str) -> list[timedelta]:
    """Lengths of "for ten days", "for 2 weeks", "for a month", "for the next three days"."""
    return [d for d, _ in _durations(text)]


def is_forward_duration(text: str) -> bool:
    """True when the text bounds a state from now on ("on antibiotics for 10 days")."""
    return any(not backward for _, backward in _durations(text))


def last_day(end: datetime) -> date:
    """The last day a window holds: ends are exclusive (a day runs to the next 00:00)."""
    return (end - timedelta(seconds=1)).date()


def spoken_day(d: date | datetime) -> str:
    """A day as people write it, "5 August 2024": a reader (a small model too) sees
    the month by name, where "2024-08-05" leaves it to work out."""
    return f"{d.day} {d:%B %Y}"


def spoken_span(ref: TimeRef) -> str:
    """What a resolved time expression stands for: "20 May 2023", "May 2023", "2023",
    "15 to 21 May 2023", "June to August 2023"."""
    if ref.end is None or ref.end - ref.start <= timedelta(days=1):
        return spoken_day(ref.start)
    if ref.granularity == "year":
        return f"{ref.start:%Y}"
    first, last = ref.start.date(), last_day(ref.end)
    if ref.granularity in ("month", "season") and first.day == 1:
        if (first.year, first.month) == (last.year, last.month):
            return f"{first:%B %Y}"
        head = f"{first:%B}" if first.year == last.year else f"{first:%B %Y}"
        return f"{head} to {last:%B %Y}"
    if (first.year, first.month) == (last.year, last.month):
        return f"{first.day} to {spoken_day(last)}"
    head = f"{first.day} {first:%B}" if first.year == last.year else spoken_day(first)
    return f"{head} to {spoken_day(last)}"


_HAS_YEAR = re.compile(r"\b\d{4}\b")
_SENTENCE_END = re.compile(r"(?<=[.!?])(\s+)")


def as_placed(text: str, at: datetime, ref: TimeRef, placed: Collection[datetime]) -> TimeRef:
    """``ref`` (found in ``text``, said at ``at``) as memory placed it: of its readings
    ahead and back, the one whose start is in ``placed`` (the starts of the sentence's
    claims, which took the direction from the judge: "the 10k in May", said in March,
    is this May), else ``ref`` as the tense reads it."""
    if placed:
        for mood in ("future", "past"):
            for other in find_times(text, at, mood):
                if other.text == ref.text and other.start in placed:
                    return other
    return ref


@lru_cache(maxsize=8192)  # the same stored lines are dated for every context shown
def dated(text: str, at: datetime, placed: tuple[datetime, ...] = ()) -> str:
    """``text`` with each time it names relative to ``at`` resolved after it, in
    brackets: "ran a charity race last Saturday [20 May 2023]". A time that names its
    year ("5 May 2023", "2023-05-05") is left as it is; ``placed``: see ``as_placed``."""
    if len(parts := _SENTENCE_END.split(text)) > 1:  # each read in its own tense
        return "".join(dated(p, at, placed) if i % 2 == 0 else p for i, p in enumerate(parts))
    out, end = [], 0
    for pos, ref in _found(text, at):
        if _HAS_YEAR.search(ref.text):
            continue
        stop = pos + len(ref.text)
        out += [text[end:stop], f" [{spoken_span(as_placed(text, at, ref, placed))}]"]
        end = stop
    return "".join(out) + text[end:] if out else text


_UNTIL_WORDS = ("until", "till")
# a later time said as the return closes a trip's window: "back on the 24th"
_BACK_BEFORE = re.compile(r"\b(?:back|home|return(?:ing)?|flying\s+back)\s*$", re.I)


def ground(text: str, at: datetime, mood: str = "") -> tuple[datetime | None, datetime | None]:
    """(valid_from, valid_to) of a claim said at ``at``; (None, None) without a time expression.

    A forward duration runs from the first time expression (or ``at``) for its
    length; a backward one ("have been married for 5 years") started that long
    before ``at`` and is still open; "since <time>" is open-ended; "until <time>"
    holds from ``at`` to that time's end; otherwise the first time expression's span.
    ``mood``: see ``_found``.
    """
    found = _found(text, at, mood)
    spans = _durations(text) if date_in_range(at) else []
    if spans:
        length, backward = spans[0]
        if backward:
            return at - length, None
        # it runs from the first time that is no end ("antibiotics for ten days, so no
        # alcohol until the 15th" starts when said, not on the 15th)
        starts = [r for _, r in found if r.text.lower().split()[0] not in _UNTIL_WORDS]
        start = starts[0].start if starts else at
        return start, start + length
    if not found:
        return None, None
    pos, ref = found[0]
    if ref.text.lower().startswith("since") or re.search(r"\bsince\s*$", text[:pos], re.I):
        return ref.start, None
    back = next((r for p, r in found[1:] if _BACK_BEFORE.search(text[:p])), None)
    if back is not None and back.end is not None and back.start > ref.start:
        return ref.start, back.end  # "off to Japan on the 10th, back on the 24th"
    head = ref.text.lower().split()[0]
    if head in _UNTIL_WORDS or re.search(
        r"\b(?:until|till|through)\s+(?:the\s+end(?:\s+of)?\s+)?$", text[:pos], re.I
    ):
        # "here until Friday": from when said to Friday's end (a past window: X's span)
        return (at if ref.end is not None and ref.end > at else ref.start), ref.end
    return ref.start, ref.end
