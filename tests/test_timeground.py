"""Explicit time: relative and absolute expressions resolved against the message's timestamp."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from archivist.lang.timeground import TimeRef, durations, find_times, ground, tense

AT = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday


def day(y: int, m: int, d: int, tz=UTC) -> datetime:
    return datetime(y, m, d, tzinfo=tz)


def only(text: str, at: datetime = AT) -> TimeRef:
    refs = find_times(text, at)
    assert len(refs) == 1, refs
    return refs[0]


# -- the design brief's scenarios ---------------------------------------------------------


def test_yesterday_said_on_8_may_is_7_may() -> None:
    start, end = ground("I went to the support group yesterday", AT)
    assert start == day(2023, 5, 7)
    assert end == day(2023, 5, 8)


def test_antibiotics_for_ten_days_expire_ten_days_later() -> None:
    start, end = ground("I'm on antibiotics for 10 days", AT)
    assert start is not None and end is not None
    assert start.date() == date(2023, 5, 8)
    assert end.date() == date(2023, 5, 18)


def test_travelling_next_month_holds_for_june() -> None:
    assert ground("We're travelling to Japan next month", AT) == (day(2023, 6, 1), day(2023, 7, 1))


def test_until_a_weekday_holds_from_when_said_through_that_day() -> None:
    # said on Monday 8 May: Friday is the 12th, the window closes at the 13th's start
    assert ground("I'm here until Friday, flying back Saturday", AT) == (AT, day(2023, 5, 13))
    assert ground("Staying at my parents' till March", AT) == (AT, day(2024, 4, 1))
    assert ground("On night shifts until the end of May", AT) == (AT, day(2023, 6, 1))
    assert only("off work since Monday").start == day(2023, 5, 8)
    assert only("on nights from Monday").start == day(2023, 5, 15)


def test_no_time_expression_grounds_to_nothing() -> None:
    assert ground("I love hiking in the mountains", AT) == (None, None)
    assert find_times("I may go hiking, who knows", AT) == []


# -- each pattern -------------------------------------------------------------------------

CASES = [
    # text, start, end (exclusive), granularity
    ("yesterday", (2023, 5, 7), (2023, 5, 8), "day"),
    ("today", (2023, 5, 8), (2023, 5, 9), "day"),
    ("tonight", (2023, 5, 8), (2023, 5, 9), "day"),
    ("this morning", (2023, 5, 8), (2023, 5, 9), "day"),
    ("this evening", (2023, 5, 8), (2023, 5, 9), "day"),
    ("last night", (2023, 5, 7), (2023, 5, 8), "day"),
    ("tomorrow", (2023, 5, 9), (2023, 5, 10), "day"),
    ("the day before yesterday", (2023, 5, 6), (2023, 5, 7), "day"),
    ("the day after tomorrow", (2023, 5, 10), (2023, 5, 11), "day"),
    ("last week", (2023, 5, 1), (2023, 5, 8), "week"),
    ("this week", (2023, 5, 8), (2023, 5, 15), "week"),
    ("next week", (2023, 5, 15), (2023, 5, 22), "week"),
    ("last weekend", (2023, 5, 6), (2023, 5, 8), "week"),
    ("this weekend", (2023, 5, 13), (2023, 5, 15), "week"),
    ("next weekend", (2023, 5, 20), (2023, 5, 22), "week"),
    ("this past weekend", (2023, 5, 6), (2023, 5, 8), "week"),
    ("two weekends ago", (2023, 4, 29), (2023, 5, 1), "week"),
    ("last month", (2023, 4, 1), (2023, 5, 1), "month"),
    ("this month", (2023, 5, 1), (2023, 6, 1), "month"),
    ("next month", (2023, 6, 1), (2023, 7, 1), "month"),
    ("last year", (2022, 1, 1), (2023, 1, 1), "year"),
    ("this year", (2023, 1, 1), (2024, 1, 1), "year"),
    ("next year", (2024, 1, 1), (2025, 1, 1), "year"),
    ("last Saturday", (2023, 5, 6), (2023, 5, 7), "day"),
    ("last Monday", (2023, 5, 1), (2023, 5, 2), "day"),  # strictly before the day said
    ("last Fri", (2023, 5, 5), (2023, 5, 6), "day"),
    ("next Friday", (2023, 5, 12), (2023, 5, 13), "day"),
    ("next Monday", (2023, 5, 15), (2023, 5, 16), "day"),
    ("this Wednesday", (2023, 5, 10), (2023, 5, 11), "day"),
    ("3 days ago", (2023, 5, 5), (2023, 5, 6), "day"),
    ("two weeks ago", (2023, 4, 24), (2023, 5, 1), "week"),
    ("a couple of months ago", (2023, 3, 1), (2023, 4, 1), "month"),
    ("a couple days ago", (2023, 5, 6), (2023, 5, 7), "day"),
    ("a few years ago", (2020, 1, 1), (2021, 1, 1), "year"),
    ("twelve years ago", (2011, 1, 1), (2012, 1, 1), "year"),
    ("a year ago", (2022, 1, 1), (2023, 1, 1), "year"),
    ("in 3 days", (2023, 5, 11), (2023, 5, 12), "day"),
    ("in two weeks", (2023, 5, 22), (2023, 5, 29), "week"),
    ("in a few months", (2023, 8, 1), (2023, 9, 1), "month"),
    ("last summer", (2022, 6, 1), (2022, 9, 1), "season"),
    ("last winter", (2022, 12, 1), (2023, 3, 1), "season"),
    ("last spring", (2022, 3, 1), (2022, 6, 1), "season"),
    ("last fall", (2022, 9, 1), (2022, 12, 1), "season"),
    ("last autumn", (2022, 9, 1), (2022, 12, 1), "season"),
    ("this summer", (2023, 6, 1), (2023, 9, 1), "season"),
    ("next spring", (2024, 3, 1), (2024, 6, 1), "season"),
    ("8 May 2023", (2023, 5, 8), (2023, 5, 9), "day"),
    ("May 8, 2023", (2023, 5, 8), (2023, 5, 9), "day"),
    ("May 8th", (2023, 5, 8), (2023, 5, 9), "day"),
    ("8th of May", (2023, 5, 8), (2023, 5, 9), "day"),
    ("Sept. 3rd, 2021", (2021, 9, 3), (2021, 9, 4), "day"),
    ("2023-05-08", (2023, 5, 8), (2023, 5, 9), "day"),
    ("in May", (2023, 5, 1), (2023, 6, 1), "month"),
    ("May 2022", (2022, 5, 1), (2022, 6, 1), "month"),
    ("last May", (2022, 5, 1), (2022, 6, 1), "month"),
    ("next March", (2024, 3, 1), (2024, 4, 1), "month"),
    ("in 2022", (2022, 1, 1), (2023, 1, 1), "year"),
    ("the past week", (2023, 5, 1), (2023, 5, 9), "week"),
    ("the other day", (2023, 5, 1), (2023, 5, 9), "week"),
]


@pytest.mark.parametrize(("text", "start", "end", "granularity"), CASES)
def test_pattern(text: str, start: tuple, end: tuple, granularity: str) -> None:
    ref = only(f"It was {text}, I think")
    assert (ref.start, ref.end, ref.granularity) == (day(*start), day(*end), granularity)


def test_in_a_span_after_a_past_denial_reaches_back() -> None:
    """ "Haven't had coffee in a month" (said 8 May) stopped in April; "in a month"
    with nothing denied is still ahead."""
    assert only("Haven't had coffee in a month, tea person now").start == day(2023, 4, 1)
    assert only("He hasn't smoked in six weeks").start == day(2023, 3, 27)
    assert only("I have not been there in 2 years").start == day(2021, 1, 1)
    assert only("We move in a month").start == day(2023, 6, 1)
    assert only("I won't see them in a month").start == day(2023, 6, 1)  # ahead: no past


def test_a_span_of_a_state_reaches_back_to_its_start() -> None:
    assert only("One year sober, feeling great").start == day(2022, 1, 1)
    assert only("Six months smoke-free and counting").start == day(2022, 11, 1)
    assert only("Been seeing Marco for two months, it's going well").start == day(2023, 3, 1)
    assert only("Vegan for a year now!").start == day(2022, 1, 1)
    assert find_times("On antibiotics for ten days, so no wine", AT) == []  # a window ahead


def test_ref_text_is_the_expression() -> None:
    assert only("We met last Saturday at the lake").text == "last Saturday"


def test_iso_with_time_is_an_instant() -> None:
    ref = only("booked for 2023-05-08T14:30")
    assert ref.start == datetime(2023, 5, 8, 14, 30, tzinfo=UTC)
    assert (ref.end, ref.granularity) == (None, "instant")


def test_bare_year_but_not_quantities() -> None:
    assert only("I painted that in 2022.").start == day(2022, 1, 1)
    assert only("Back in 1968 things were different").start == day(1968, 1, 1)
    assert find_times("We walked 2000 miles", AT) == []
    assert find_times("It cost $2019 in the 1990s", AT) == []


def test_several_expressions_in_text_order() -> None:
    refs = find_times("Yesterday I booked it for next Friday", AT)
    assert [r.text for r in refs] == ["Yesterday", "next Friday"]


def test_the_longest_expression_wins() -> None:
    assert only("It was the day before yesterday").text == "the day before yesterday"
    assert only("on 8 May 2023").text == "8 May 2023"


def test_modal_may_is_not_a_month() -> None:
    assert find_times("I may 3 times a day check it", AT) == []


def test_impossible_dates_are_skipped() -> None:
    assert find_times("on 31 June", AT) == []


# -- year and weekday placement by tense ---------------------------------------------------


def test_yearless_date_far_ahead_in_past_tense_is_last_year() -> None:
    assert only("I went there on 20 November").start == day(2022, 11, 20)
    assert only("I will go on 20 November").start == day(2023, 11, 20)


def test_yearless_date_far_behind_in_future_tense_is_next_year() -> None:
    assert only("I'll fly out on 1 April").start == day(2024, 4, 1)
    assert only("I flew out on 1 April").start == day(2023, 4, 1)


def test_in_month_follows_the_tense() -> None:
    assert only("I went to Rome in June").start == day(2022, 6, 1)
    assert only("We will go to Rome in June").start == day(2023, 6, 1)
    assert only("We will go to Rome in March").start == day(2024, 3, 1)
    assert only("We went to Rome in March").start == day(2023, 3, 1)
    # a month gone by this year is told in the past tense: one told in the present is next
    assert only("My passport expires in March").start == day(2024, 3, 1)
    assert only("The wedding is in early March").start == day(2024, 3, 1)
    assert only("Back in March I quit").start == day(2023, 3, 1)
    assert only("I'm vegan since March").start == day(2023, 3, 1)
    assert only("My exam is in June").start == day(2023, 6, 1)


def test_on_weekday_follows_the_tense() -> None:
    assert only("On Saturday I went out").start == day(2023, 5, 6)
    assert only("On Saturday I will go out").start == day(2023, 5, 13)


def test_tense() -> None:
    assert tense("I'll see you") == "future"
    assert tense("We walked home") == "past"
    assert tense("I like tea") == "present"


# -- timezone -------------------------------------------------------------------------------


def test_results_are_in_the_messages_timezone() -> None:
    tz = timezone(timedelta(hours=-4))
    at = datetime(2023, 5, 8, 22, 30, tzinfo=tz)  # already 9 May in UTC
    ref = only("yesterday", at)
    assert ref.start == datetime(2023, 5, 7, tzinfo=tz)
    assert ref.start.tzinfo is tz and ref.end is not None and ref.end.tzinfo is tz


def test_last_summer_in_autumn_is_this_years_summer() -> None:
    at = datetime(2023, 10, 2, 9, 0, tzinfo=UTC)
    assert only("last summer", at).start == day(2023, 6, 1)
    assert only("last winter", datetime(2023, 1, 15, tzinfo=UTC)).start == day(2021, 12, 1)


# -- durations and grounding -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("for ten days", 10),
        ("for 2 weeks", 14),
        ("for a month", 30),
        ("for the next three days", 3),
        ("for a couple of weeks", 14),
        ("for a few days", 3),
        ("for one year", 365),
    ],
)
def test_durations(text: str, days: int) -> None:
    assert durations(f"I'll be away {text}.") == [timedelta(days=days)]


def test_vague_for_is_no_duration() -> None:
    assert durations("I've known her for years and stayed for the day") == []


def test_duration_starts_at_the_time_expression() -> None:
    start, end = ground("Next week I'm visiting Lisbon for ten days", AT)
    assert (start, end) == (day(2023, 5, 15), day(2023, 5, 25))


def test_backward_duration_started_before_and_is_open() -> None:
    assert ground("I've been married for 5 years", AT) == (AT - timedelta(days=5 * 365), None)
    assert ground("I worked there for the past two years", AT) == (
        AT - timedelta(days=730),
        None,
    )


def test_since_is_open_ended() -> None:
    assert ground("I have lived here since 2020", AT) == (day(2020, 1, 1), None)
    assert ground("We've been vegan since May", AT) == (day(2023, 5, 1), None)


def test_past_event_keeps_its_span() -> None:
    assert ground("I painted that lake last year", AT) == (day(2022, 1, 1), day(2023, 1, 1))


def test_relative_times_are_resolved_where_they_stand() -> None:
    from archivist.lang.timeground import dated

    at = datetime(2023, 5, 25, 14, tzinfo=UTC)  # a Thursday
    assert dated("Ran a charity race last Saturday!", at) == (
        "Ran a charity race last Saturday [20 May 2023]!"
    )
    assert (
        dated("We went camping last week.", at) == "We went camping last week [15 to 21 May 2023]."
    )
    assert dated("Maybe this summer", at) == "Maybe this summer [June to August 2023]"
    assert dated("See you tomorrow", at) == "See you tomorrow [26 May 2023]"
    # a time that names its year is already absolute; no time, no change
    assert dated("Moved on 5 May 2021.", at) == "Moved on 5 May 2021."
    assert dated("Nothing dated here.", at) == "Nothing dated here."
    # each sentence in its own tense: the dinner is the coming Saturday
    invite = "Are you coming to dinner on Saturday? He booked a place."
    assert dated(invite, at).startswith("Are you coming to dinner on Saturday [27 May 2023]?")


def test_a_weekly_habit_is_no_day() -> None:
    """ "classes on Thursday nights" happen every week: grounding them to one Thursday
    would make the classes a one-day window that expires the next day."""
    assert [r.text for r in find_times("I've started classes on Thursday nights.", AT)] == []
    assert [r.text for r in find_times("Yoga on Tuesdays.", AT)] == []
    assert [r.text for r in find_times("See you on Thursday night!", AT)] == ["on Thursday"]


@pytest.mark.parametrize(
    ("text", "said", "day"),
    [
        ("Marco and I broke up over Christmas.", date(2024, 1, 10), date(2023, 12, 25)),
        ("We met last Halloween.", date(2024, 1, 10), date(2023, 10, 31)),
        ("Dinner out on Valentine's Day!", date(2024, 2, 1), date(2024, 2, 14)),
        ("We will be at my parents' over Christmas.", date(2024, 11, 20), date(2024, 12, 25)),
        ("Party on New Year's Eve.", date(2024, 12, 20), date(2024, 12, 31)),
    ],
)
def test_a_holiday_is_its_day_placed_by_tense_or_nearness(text: str, said: date, day: date) -> None:
    at = datetime(said.year, said.month, said.day, 9, tzinfo=UTC)
    (ref,) = find_times(text, at)
    assert ref.start.date() == day and ref.granularity == "day"


def test_a_holiday_s_things_are_no_time() -> None:
    """ "the Christmas markets", "Christmas trees" name no day."""
    assert find_times("I'll come for the Christmas markets.", AT) == []
    assert find_times("We bought lights for Christmas trees.", AT) == []


def test_until_the_end_of_the_month_holds_to_that_month_s_end() -> None:
    said = datetime(2024, 2, 5, 9, tzinfo=UTC)
    start, end = ground("On crutches until the end of the month, no driving.", said)
    assert start == said and end == datetime(2024, 3, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "said", "day"),
    [
        ("Wedding is on the 24th, I'm so nervous!", date(2023, 6, 1), date(2023, 6, 24)),
        ("Rent is due on the 2nd.", date(2023, 6, 20), date(2023, 7, 2)),
        ("We met on the 3rd.", date(2023, 6, 1), date(2023, 5, 3)),
        # the clause decides, not a past verb elsewhere in the sentence
        (
            "Home at last, still on antibiotics till the 21st.",
            date(2023, 11, 14),
            date(2023, 11, 21),
        ),
        (
            "I was on antibiotics until the 21st, it was rough.",
            date(2023, 11, 14),
            date(2023, 10, 21),
        ),
    ],
)
def test_the_nth_is_a_day_of_the_month_it_is_said_in_or_near(
    text: str, said: date, day: date
) -> None:
    at = datetime(said.year, said.month, said.day, 9, tzinfo=UTC)
    (ref,) = find_times(text, at)
    assert ref.start.date() == day


def test_from_a_month_is_that_month() -> None:
    at = datetime(2024, 4, 2, 9, tzinfo=UTC)
    (ref,) = find_times("Back in the office three days a week from May.", at)
    assert ref.start.date() == date(2024, 5, 1) and ref.granularity == "month"


def test_a_return_said_later_closes_a_trips_window() -> None:
    said = datetime(2024, 4, 2, 9, tzinfo=UTC)
    start, end = ground("Off to Japan on the 10th, back on the 24th. Can't wait!", said)
    assert (start.day, end.day) == (10, 25)  # through the 24th
    start, end = ground("Dentist on the 10th, then lunch with Mum on the 24th.", said)
    assert (start.day, end.day) == (10, 11)  # no return: the first day's span
