"""A fact is about the day it names: "Maya's dentist appointment is tomorrow", learned on 2026-11-25, is written
"... tomorrow (2026-11-26)", and a query naming the 26th lifts it as it lifts what was stamped that day. Through
the real pipeline (memclaw's writer, real model, real Chroma, memclaw's BM25); the parser's edges as unit tests."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import pytest

from memclaw.config import Config
from memclaw.markdown.formats import event_days, named_days
from memclaw.markdown.units import MemoryUnit
from memclaw.recall.dates import DateRange
from memclaw.recall.ranking import stamp_in
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace

NOW = datetime(2026, 11, 27, 9, 0)  # a Friday; the 26th was yesterday


@pytest.fixture(scope="module")
def service(tmp_path_factory, embedder):
    root = Path(tmp_path_factory.mktemp("named")) / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "HISTORY.md").write_text(
        "[2026-11-20 18:00] Talked about the garden and the new tomato plants.\n\n"
        "[2026-11-24 12:00] Called the landlord about the heating.\n",
        "utf-8",
    )
    svc = MemoryService(Workspace(root), Config(workspace=root), embedder=embedder)
    svc.add_fact("Maya's dentist appointment is tomorrow", learned=date(2026, 11, 25))
    svc.add_fact("The team offsite is next week", learned=date(2026, 11, 20))
    svc.add_fact("Lena's birthday party was yesterday", learned=date(2026, 11, 10))
    svc.add_fact("I prefer window seats on trains", learned=date(2026, 11, 26))
    svc.sync()
    yield svc
    svc.close()


def _texts(svc: MemoryService, query: str, k: int = 8) -> list[str]:
    return [h.unit.text for h in svc.recall_detailed(query, k=k, now=NOW).hits]


def test_the_writer_resolves_the_day_a_fact_names(service):
    texts = [u.text for u in service.facts()]
    assert any(t.startswith("Maya's dentist appointment is tomorrow (2026-11-26)") for t in texts), texts
    assert any("next week (2026-11-23 to 2026-11-29)" in t for t in texts), texts


def test_a_query_naming_the_day_finds_the_fact_about_it(service):
    """No word of the query is in the fact: only the day it names brings it, ahead of what only matches words."""
    texts = _texts(service, "what was going on yesterday?")
    inside = ["Maya's dentist", "I prefer window seats", "The team offsite"]  # about the 26th, learned on it, a week
    assert sorted(next(p for p in inside if t.startswith(p)) for t in texts[:3]) == sorted(inside), texts
    hits = service.recall_detailed("what was going on yesterday?", k=8, now=NOW).hits
    dentist = next(h for h in hits if "dentist" in h.unit.text)
    assert "date" in dentist.boosts and dentist.unit.timestamp.date() == date(2026, 11, 25)  # its stamp unchanged


def test_a_span_the_fact_names_overlaps_the_query(service):
    """ "next week (2026-11-23 to 2026-11-29)" holds the 24th: the fact gains what the entry stamped that day gains."""
    hits = service.recall_detailed("what is happening on 24 November?", k=8, now=NOW).hits
    gain = {h.unit.text.split()[1]: h.boosts.get("date", 0.0) for h in hits}  # (the second word names each unit)
    assert gain["team"] == gain["the"] > 0, gain  # the offsite fact; "Called the landlord ..." stamped that day
    assert "offsite" in hits[0].unit.text, [h.unit.text for h in hits]
    assert gain["dentist"] < gain["team"]  # learned the day after: the smaller lift of what was said just after
    assert all(g == 0 for w, g in gain.items() if w not in {"team", "the", "dentist"}), gain


def test_a_fact_naming_another_day_is_not_lifted(service):
    hits = service.recall_detailed("what happened on 9 November?", k=8, now=NOW).hits
    rc = service.config.recall.tuning
    full = rc.date_weight * (rc.bm25_weight + rc.vector_weight)  # the lift of a unit inside the range
    party = [h for h in hits if "birthday party" in h.unit.text]
    assert party and party[0].boosts["date"] == pytest.approx(full)  # "yesterday (2026-11-09)", learned the 10th
    assert all("date" not in h.boosts for h in hits if "dentist" in h.unit.text or "offsite" in h.unit.text)


def test_named_days_reads_what_memclaw_writes_and_dates_in_words():
    d = lambda a, b: (datetime.fromisoformat(a), datetime.fromisoformat(b))  # noqa: E731
    fact = "dentist tomorrow (2026-11-26) (2026-11-25 #c12345678)"
    assert event_days(fact, "fact", datetime(2026, 11, 25)) == (d("2026-11-26", "2026-11-27"),)  # not the mark
    assert named_days("offsite next week (2026-11-30 to 2026-12-06)") == [d("2026-11-30", "2026-12-07")]
    assert named_days("move next month (2026-12), trip next year (2027)") == [
        d("2026-12-01", "2027-01-01"),
        d("2027-01-01", "2028-01-01"),
    ]
    # issue 38.4: a date written in words or ISO is a date, wherever it stands
    for text in ["Meeting with Ana on 2026-12-03", "Meeting with Ana on 3 December 2026", "on December 3, 2026",
                 "[2026-12-03] Meeting"]:  # fmt: skip
        assert named_days(text) == [d("2026-12-03", "2026-12-04")], text
    # without a year: read from the day it was written (the nearest 3 December to 29 November 2026)
    assert named_days("Meeting with Ana on December 3") == []
    assert named_days("Meeting with Ana on December 3", datetime(2026, 11, 29)) == [d("2026-12-03", "2026-12-04")]
    assert named_days("Ana's party was on 3 December", datetime(2026, 11, 29)) == [d("2025-12-03", "2025-12-04")]
    # impossible or out-of-range dates name nothing; other forms are not read
    for text in ["(2026-13-40)", "(2026-02-30)", "(0000)", "(9999-12) (10000)", "(2026-12-03 to 2026-12-01)",
                 "(26/11/2026)", "(" * 10_000]:  # fmt: skip
        assert named_days(text) == [], text


def test_stamp_in_reads_named_days_of_facts_and_summaries_only():
    on_26 = [DateRange(datetime(2026, 11, 26), datetime(2026, 11, 27), "26 November")]
    ts = datetime(2026, 11, 25, 0, 0)

    def unit(kind: str) -> MemoryUnit:
        return MemoryUnit(id="u", kind=kind, text="dentist tomorrow (2026-11-26)", source="m", scope="owner", line=1,
                          timestamp=ts)  # fmt: skip

    assert stamp_in(unit("fact"), on_26) == datetime(2026, 11, 26)
    assert stamp_in(unit("history"), on_26) == datetime(2026, 11, 26)
    assert stamp_in(unit("archive"), on_26) == ts  # a turn is about when it was said
    assert stamp_in(unit("fact"), []) == ts
