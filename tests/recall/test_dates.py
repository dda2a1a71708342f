"""Date expressions in recall queries -> date ranges (pure)."""

from datetime import datetime

import pytest

from memclaw.recall.dates import DateRange, find_date_ranges

NOW = datetime(2023, 12, 20, 15, 0)  # a Wednesday


def spans(query: str, now: datetime = NOW) -> list[tuple[str, str]]:
    """Each range as (first day, last day), inclusive."""
    out = []
    for r in find_date_ranges(query, now):
        last = datetime.fromordinal(r.end.toordinal() - 1)
        out.append((r.start.date().isoformat(), last.date().isoformat()))
    return out


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What book did Tim finish on 8th December, 2023?", [("2023-12-08", "2023-12-08")]),
        ("Which team did John sign with on 21 May, 2023?", [("2023-05-21", "2023-05-21")]),
        ("What dish did Nate make on November 9, 2022?", [("2022-11-09", "2022-11-09")]),
        ("the forest picture shared on December 1,2023", [("2023-12-01", "2023-12-01")]),
        ("What inspired Joanna's new script in July 2022?", [("2022-07-01", "2022-07-31")]),
        ("When did John get an ankle injury in 2023?", [("2023-01-01", "2023-12-31")]),
        ("Where was John between August 11 and August 15 2023?", [("2023-08-11", "2023-08-15")]),
        ("where was I from June 3 to 5", [("2023-06-03", "2023-06-05")]),
        ("Where was Tim in the week before 16 November 2023?", [("2023-11-09", "2023-11-15")]),
        ("Which country was Tim visiting in the second week of November?", [("2023-11-08", "2023-11-14")]),
        ("the last week of June 2023", [("2023-06-24", "2023-06-30")]),
        ("notes from 2023-05-08 and 2023-05", [("2023-05-08", "2023-05-08"), ("2023-05-01", "2023-05-31")]),
        # a month or day without a year: its latest occurrence up to now
        ("What kind of deal did John get in December?", [("2023-12-01", "2023-12-31")]),
        ("What did his teammates give him on Aug 15th?", [("2023-08-15", "2023-08-15")]),
        ("what happened on December 24", [("2022-12-24", "2022-12-24")]),
        # relative to now
        ("what did I do yesterday", [("2023-12-19", "2023-12-19")]),
        ("anything today?", [("2023-12-20", "2023-12-20")]),
        ("What did I do last week?", [("2023-12-11", "2023-12-17")]),
        ("plans for this week", [("2023-12-18", "2023-12-24")]),
        ("last weekend", [("2023-12-16", "2023-12-17")]),
        ("last month", [("2023-11-01", "2023-11-30")]),
        ("this year", [("2023-01-01", "2023-12-31")]),
        ("three days ago", [("2023-12-17", "2023-12-17")]),
        ("the trips I took in the past three months", [("2023-09-21", "2023-12-20")]),
        ("what did I do in the last two weeks?", [("2023-12-06", "2023-12-20")]),
        ("over the past 3 days", [("2023-12-17", "2023-12-20")]),
        ("a couple of weeks ago", [("2023-12-03", "2023-12-09")]),
        ("what did Anna say last Friday", [("2023-12-15", "2023-12-15")]),
    ],
)
def test_date_expressions(query, expected):
    assert spans(query) == expected


@pytest.mark.parametrize(
    "query",
    [
        "May I ask what my sister does?",
        "I have 2 dogs and 3 cats",
        "order 2023 arrived",  # a bare number is not a year without a date word
        "February 30, 2023",  # impossible: ignored, not repaired
        "who is my manager",
        "",
    ],
)
def test_no_date_no_range(query):
    assert find_date_ranges(query, NOW) == []


def test_range_membership_ignores_timezone_and_is_half_open():
    r = DateRange(datetime(2023, 5, 1), datetime(2023, 5, 2), "1 May 2023")
    assert datetime(2023, 5, 1, 23, 59) in r
    assert datetime(2023, 5, 2) not in r
    assert datetime.fromisoformat("2023-05-01T08:00+02:00") in r
    assert None not in r and r.days == 1


def test_ranges_come_in_order_of_appearance():
    got = find_date_ranges("between June 1 and June 3 2023, then yesterday, then in 2021", NOW)
    assert [r.text for r in got] == ["between June 1 and June 3 2023", "yesterday", "in 2021"]


SUN = datetime(2026, 11, 29, 19, 30)  # issue 38's day, a Sunday


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # issue 38.2: a date without a year is the nearest occurrence, unless the tense says which
        ("what's on 30 November?", [("2026-11-30", "2026-11-30")]),
        ("what am I doing in December", [("2026-12-01", "2026-12-31")]),
        ("what did I do on 30 November?", [("2025-11-30", "2025-11-30")]),
        ("what happened in December?", [("2025-12-01", "2025-12-31")]),
        ("what will I do in October?", [("2027-10-01", "2027-10-31")]),
        ("what did I do in October?", [("2026-10-01", "2026-10-31")]),
        ("anything in October?", [("2026-10-01", "2026-10-31")]),  # a month ago is nearer than eleven ahead
        ("anything on the 30th?", [("2026-11-30", "2026-11-30")]),
        ("what did I buy on the 2nd", [("2026-11-02", "2026-11-02")]),
        ("what's on Tuesday", [("2026-12-01", "2026-12-01")]),
        ("what did I do on Friday", [("2026-11-27", "2026-11-27")]),
        # the forms the writer resolves are read in a query too
        ("what do I have tomorrow", [("2026-11-30", "2026-11-30")]),
        ("what's on next week?", [("2026-11-30", "2026-12-06")]),
        ("plans for this weekend", [("2026-11-28", "2026-11-29")]),
        ("what did I do this weekend", [("2026-11-28", "2026-11-29")]),
        ("the 1st time we met", []),
        ("what event did I take part in a month ago?", [("2026-10-15", "2026-11-14")]),
        ("how many devices do I use in a day?", []),
        ("what is due in 3 days", [("2026-12-02", "2026-12-02")]),
    ],
)
def test_a_date_without_a_year_is_read_as_people_mean_it(query, expected):
    assert spans(query, SUN) == expected


def test_what_memory_holds_decides_between_two_near_occurrences():
    """1 June asked on 29 November 2026: June 2026 is 181 days back, June 2027 184 ahead. With no tense word, the
    occurrence memory holds something in wins; with none (or both) held, the nearer."""
    assert spans("what's on 1 June?", SUN) == [("2026-06-01", "2026-06-01")]
    ahead = lambda r: r.start.year == 2027  # noqa: E731
    assert [(r.start.date().isoformat()) for r in find_date_ranges("what's on 1 June?", SUN, holds=ahead)] == [
        "2027-06-01"
    ]
    assert find_date_ranges("what's on 1 June?", SUN, holds=lambda r: False)[0].start.year == 2026
    # the tense orders the two; memory still skips the one it holds nothing in
    assert find_date_ranges("what did I do on 1 June?", SUN)[0].start.year == 2026
    assert find_date_ranges("what did I do on 1 June?", SUN, holds=lambda r: True)[0].start.year == 2026
    assert find_date_ranges("what did I do on 1 June?", SUN, holds=ahead)[0].start.year == 2027


@pytest.mark.parametrize(
    ("query", "stamps"),
    [
        ("what should I cook tonight", False),
        ("what am I doing this evening?", False),
        ("what's on today", False),
        ("what did I tell you today", True),
        ("what happened this morning?", True),
    ],
)
def test_today_as_the_time_of_the_question_is_no_stamp_range(query, stamps):
    """Issue 38.3: "tonight" in a question is when it is asked; only a past word makes it a question about what was
    said or learned that day."""
    (r,) = find_date_ranges(query, SUN)
    assert (r.start, r.days, r.stamps) == (datetime(2026, 11, 29), 1, stamps)


def _python_calls(fn) -> int:
    """The Python and C function calls `fn()` makes (sys.setprofile): an operation counter, no clock."""
    import sys

    n = 0

    def count(_frame, event, _arg):
        nonlocal n
        if event in ("call", "c_call"):
            n += 1

    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return n


def test_the_parser_is_linear_and_reads_at_most_a_bounded_number_of_mentions():
    """Issue 39.10: "last week " x 20,000 took 39.5 s (every match was checked against every match kept). The work
    for 2N repetitions is well under 3x the work for N (it was 4x), and the mentions read are capped."""
    small = _python_calls(lambda: find_date_ranges("last week " * 400, NOW))
    large = _python_calls(lambda: find_date_ranges("last week " * 800, NOW))
    assert large < 3 * small, (small, large)
    from memclaw.recall.dates import MAX_DATE_MENTIONS

    assert len(find_date_ranges("last week, yesterday and 8 May 2023 " * 5_000, NOW)) == MAX_DATE_MENTIONS
