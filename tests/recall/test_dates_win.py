"""Dates named in a query win (issue 21): when a query names a date or a span and memories are stamped inside it,
those come first, and the words that made the date are not topic words. The three examples of the issue, tried on
a small workspace through the real pipeline (real model, real Chroma, memclaw's BM25)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from memclaw.config import Config
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace

NOW = datetime(2026, 11, 25, 12, 0)  # a Wednesday: "last week" is Monday 16 .. Sunday 22 November

FACTS = [
    "Bought a new bike helmet (2026-11-18)",
    "My sister Lena lives in Porto",
    "I am allergic to penicillin",
]
HISTORY = [
    "[2026-11-10 09:00] Planned the week ahead: dentist on Tuesday, the gym twice this week.",
    "[2026-11-17 19:30] Dinner with Anna for her birthday at Luigi's; she loved the tiramisu.",
    "[2026-11-19 18:00] Fixed the brakes of the bike and rode to the lake.",
    "[2026-11-21 10:00] Went hiking on Mount Tamalpais with Sam.",
    "[2026-11-24 12:00] Called the landlord about the heating.",
]


@pytest.fixture(scope="module")
def service(tmp_path_factory, embedder):
    root = Path(tmp_path_factory.mktemp("dates")) / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text("# Facts\n" + "".join(f"- {t}\n" for t in FACTS), "utf-8")
    (root / "memory" / "HISTORY.md").write_text("\n\n".join(HISTORY) + "\n", "utf-8")
    svc = MemoryService(Workspace(root), Config(workspace=root), embedder=embedder)
    svc.sync()
    yield svc
    svc.close()


def _days(svc: MemoryService, query: str) -> list[str]:
    res = svc.recall_detailed(query, k=8, now=NOW)
    return [h.unit.timestamp.date().isoformat() if h.unit.timestamp else "-" for h in res.hits]


def _in_range_first(days: list[str], lo: str, hi: str) -> bool:
    """Every hit stamped inside [lo, hi] comes before every hit that is not."""
    inside = [lo <= d <= hi for d in days]
    return inside == sorted(inside, reverse=True)


def test_a_named_day_puts_what_was_stamped_that_day_first(service):
    days = _days(service, "what happened on 17 November")
    assert days[0] == "2026-11-17", days  # the only entry of that day, though others are closer in words
    assert _in_range_first(days, "2026-11-17", "2026-11-17")


def test_last_week_puts_the_week_first_and_week_is_no_topic_word(service):
    days = _days(service, "what did I do last week")
    assert _in_range_first(days, "2026-11-16", "2026-11-22"), days
    assert days[0] != "2026-11-10"  # the entry that only says "week" is not first
    assert set(days[:4]) == {"2026-11-17", "2026-11-18", "2026-11-19", "2026-11-21"}


def test_a_year_in_the_date_is_no_topic_word(service):
    days = _days(service, "on 17 November 2026")
    assert days[0] == "2026-11-17", days  # not the fact of the 18th, which says "2026"
    assert _in_range_first(days, "2026-11-17", "2026-11-17")


def test_the_date_words_still_leave_the_topic_to_rank(service):
    """Inside the span, the unit that matches the topic ranks first; a query naming no date is untouched."""
    res = service.recall_detailed("the bike last week", k=8, now=NOW)
    assert "bike" in res.hits[0].unit.text and res.date_ranges
    res = service.recall_detailed("Anna's birthday", k=3, now=NOW)
    assert "Anna" in res.hits[0].unit.text and not res.date_ranges
