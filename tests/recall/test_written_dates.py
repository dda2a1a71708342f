"""Relative dates in text written to memory are made absolute (memclaw.recall.written_dates): the words stay, the
day or span they named when they were said follows them; what is not a date, or is ambiguous, is left alone."""

from __future__ import annotations

from datetime import date

import pytest

from memclaw.recall.written_dates import relative_spans, resolve_relative_dates

WED = date(2026, 11, 25)  # a Wednesday
SUN = date(2026, 11, 29)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # the future: what a plan says
        ("Maya's dentist appointment is tomorrow", "Maya's dentist appointment is tomorrow (2026-11-26)"),
        ("The day after tomorrow is a holiday", "The day after tomorrow (2026-11-27) is a holiday"),
        ("Moving to Porto next week", "Moving to Porto next week (2026-11-30 to 2026-12-06)"),
        ("Starts the new job next month", "Starts the new job next month (2026-12)"),
        ("Plans to retire next year", "Plans to retire next year (2027)"),
        ("Hiking this weekend", "Hiking this weekend (2026-11-28 to 2026-11-29)"),
        ("Hiking next weekend", "Hiking next weekend (2026-12-05 to 2026-12-06)"),
        ("Lunch with Lena next Friday", "Lunch with Lena next Friday (2026-11-27)"),
        ("Lunch with Lena this Wednesday", "Lunch with Lena this Wednesday (2026-12-02)"),  # said on one: the next
        ("Flies to Lyon in 3 days", "Flies to Lyon in 3 days (2026-11-28)"),
        ("Back in two weeks", "Back in two weeks (2026-12-09)"),
        ("The exam is in 2 months", "The exam is in 2 months (2027-01)"),
        # the past: what recall reads in a query
        ("Started the course yesterday", "Started the course yesterday (2026-11-24)"),
        ("Ate at Taberna tonight", "Ate at Taberna tonight (2026-11-25)"),
        ("Lena visited last week", "Lena visited last week (2026-11-16 to 2026-11-22)"),
        ("Bought the kayak three days ago", "Bought the kayak three days ago (2026-11-22)"),
        ("Saw Henrik last Friday", "Saw Henrik last Friday (2026-11-20)"),
        ("Ran 40 km this month", "Ran 40 km this month (2026-11)"),
        ("next week's meeting is moved", "next week's (2026-11-30 to 2026-12-06) meeting is moved"),
        # two in one sentence
        ("Saw Maya yesterday and sees her again tomorrow",
         "Saw Maya yesterday (2026-11-24) and sees her again tomorrow (2026-11-26)"),
    ],
)  # fmt: skip
def test_relative_dates_are_resolved_against_the_day_they_were_said(text, want):
    assert resolve_relative_dates(text, WED) == want


@pytest.mark.parametrize(
    "text",
    [
        "Lives next door to Henrik",
        "Her last name is Okafor",
        "Next time, bring the red wine",
        "The last week of March is always busy",  # absolute already
        "Was born on 8 May 1990",
        "Works on Monday and Friday",  # no relative word
        "Meets Lena on Friday",  # past or future: ambiguous, left as said
        "Will call back in 2 hours",  # not a day
        "Will call back in a few days",  # vague
        "Loves the Tomorrowland festival",
        "May lives in Lyon",
        "Reads the weekly newsletter",
        "Goes to the Next Level gym",
        "Dentist tomorrow (2026-11-26)",  # resolved once: not again
        "Dentist tomorrow, 2026-11-26",
        "Dentist tomorrow, November 26, 2026",
        "",
    ],
)
def test_what_is_not_a_relative_date_is_left_as_written(text):
    assert resolve_relative_dates(text, WED) == text
    assert relative_spans(text, WED) == []


def test_resolving_twice_changes_nothing():
    once = resolve_relative_dates("Dentist tomorrow, then a week off next month", WED)
    assert once == "Dentist tomorrow (2026-11-26), then a week off next month (2026-12)"
    assert resolve_relative_dates(once, WED) == once
    assert resolve_relative_dates(once, date(2027, 3, 1)) == once  # read later, it still says the same days


def test_this_weekend_said_on_a_sunday_is_that_weekend():
    assert resolve_relative_dates("Cleaning this weekend", SUN) == "Cleaning this weekend (2026-11-28 to 2026-11-29)"
    assert resolve_relative_dates("Cleaning next weekend", SUN) == "Cleaning next weekend (2026-12-05 to 2026-12-06)"


def test_month_and_year_ends_roll_over():
    dec31 = date(2026, 12, 31)
    assert resolve_relative_dates("Party tomorrow", dec31) == "Party tomorrow (2027-01-01)"
    assert resolve_relative_dates("Trip next month", dec31) == "Trip next month (2027-01)"
    assert resolve_relative_dates("Done in 13 months", dec31) == "Done in 13 months (2028-01)"
