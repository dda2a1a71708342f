"""Issue 38 items 2-4, end to end through the console script (in-process, real workspace, real model, embedded
Chroma): `memclaw memory add --date` writes what a user says on 2026-11-29, `memclaw recall --json` reads it back
with the clock at that day's evening. The clock is the one fake: recall's `now` (memclaw.recall.search)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

import memclaw.recall.search as search
from tests.cli import test_bad_input

cli = test_bad_input.cli  # the fixtures: the console script's entry point in-process, an onboarded workspace
ws = test_bad_input.ws

TODAY = "2026-11-29"  # a Sunday
NOW = datetime(2026, 11, 29, 19, 30)

SAID_TODAY = [
    "My dentist appointment is tomorrow",
    "Next month we move to Berlin",
    "Meeting with Ana on 2027-01-14",
    "Dinner with Lena on January 16",
    "I like green tea more than coffee",
    "The bins go out on Mondays",
    "My bike has a flat tyre",
    "Omar lent me his drill",
]


class _Clock(datetime):
    @classmethod
    def now(cls, tz=None):  # type: ignore[override]
        return NOW if tz is None else NOW.astimezone(tz)


@pytest.fixture
def said(cli, ws, monkeypatch):
    for text in SAID_TODAY:
        r = cli("memory", "add", text, "--date", TODAY, "--json")
        assert r.code == 0, r.err
    monkeypatch.setattr(search, "datetime", _Clock)

    def recall(query: str, *extra: str) -> list[dict]:
        r = cli("recall", query, "--json", *extra)
        assert r.code == 0, r.err
        return json.loads(r.out)

    return recall


def _rank(hits: list[dict], needle: str) -> tuple[int, dict]:
    i = next(i for i, h in enumerate(hits) if needle in h["text"])
    return i + 1, hits[i]


def test_a_day_without_a_year_is_the_coming_one(said):
    """Item 2: "30 November" asked on the 29th is tomorrow, not a year ago; the dentist fact names that day."""
    hits = said("what's on 30 November?")
    rank, hit = _rank(hits, "dentist")
    assert rank == 1 and hit["boosts"].get("date", 0) > 0, hits


def test_a_month_without_a_year_is_the_coming_one(said):
    """Item 2: "December" asked at the end of November is the next month; "Next month (2026-12)" is about it."""
    hits = said("what am I doing in December")
    rank, hit = _rank(hits, "Berlin")
    assert rank == 1 and hit["boosts"].get("date", 0) > 0, hits


@pytest.mark.parametrize("query", ["what do I have tomorrow", "anything on the 30th?"])
def test_relative_days_in_a_query_are_dates(said, query):
    """Item 2: the forms the writer resolves ("tomorrow") and "the 30th" are read in a query too."""
    hits = said(query)
    rank, hit = _rank(hits, "dentist")
    assert rank == 1 and hit["boosts"].get("date", 0) > 0, hits


def test_tonight_does_not_lift_what_was_learned_today(said):
    """Item 3: "tonight" is when the question is asked: nothing gains a date lift for having been learned today."""
    hits = said("what should I cook tonight", "--tokens", "1024")
    assert hits and all("date" not in h["boosts"] for h in hits), [(h["text"], h["boosts"]) for h in hits]


def test_what_was_said_today_is_still_a_question_about_today(said):
    """Item 3: "what did I tell you today" (a past word) asks what was said that day: the learned-mark counts."""
    hits = said("what did I tell you today?")
    today = [h for h in hits if f"({TODAY})" in h["text"]]
    assert today and all(h["boosts"].get("date", 0) > 0 for h in today), hits


@pytest.mark.parametrize(
    ("query", "needle"),
    [("what do I have on 2027-01-14", "Meeting with Ana"), ("anything on 16 January?", "Dinner with Lena")],
)
def test_a_date_written_in_words_is_a_date(said, query, needle):
    """Item 4: "on 2027-01-14" and "on January 16" (the coming one) inside a fact's text are the days it is about."""
    hits = said(query)
    rank, hit = _rank(hits, needle)
    assert rank == 1 and hit["boosts"].get("date", 0) > 0, hits
