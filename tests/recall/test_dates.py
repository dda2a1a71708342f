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
        ("from June 3 to 5", [("2023-06-03", "2023-06-05")]),
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
