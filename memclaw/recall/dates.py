"""Date expressions in a recall query -> the time ranges they name (pure; English).

"What did Anna say on 8th December, 2023?", "in August 2023", "between August 11 and August 15 2023", "the week
before 16 November 2023", "last week", "three days ago", "the past three months": each names a range of days. Recall
lifts memories whose timestamp (a history entry's stamp, a fact's trailing date) falls inside it. Relative
expressions are read against `now`; a month or day without a year means its latest occurrence not after `now`.

Nothing here guesses beyond the text: a query with no date expression yields no range, and an impossible date
("February 30") is ignored rather than repaired.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

_MONTHS: dict[str, int] = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
_MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
_MONTHS["sept"] = 9
_WEEKDAYS: dict[str, int] = {d.lower(): i for i, d in enumerate(calendar.day_name)}
_NUMBERS: dict[str, int] = {
    w: i
    for i, w in enumerate(
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
    )
}
_NUMBERS.update({"a": 1, "an": 1, "a couple of": 2, "a few": 3, "several": 3})
_ORDINALS = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3, "4th": 3, "last": -1}

_MON = r"(?P<mon>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_NUM = r"(?P<n>\d+|" + "|".join(sorted((re.escape(w) for w in _NUMBERS), key=len, reverse=True)) + r")"
_UNIT = r"(?P<unit>day|week|month|year)s?"


@dataclass(frozen=True)
class DateRange:
    """[start, end): whole days. `text` is the expression it was read from."""

    start: datetime
    end: datetime
    text: str

    def __contains__(self, ts: object) -> bool:
        return isinstance(ts, datetime) and self.start <= ts.replace(tzinfo=None) < self.end

    @property
    def days(self) -> int:
        return (self.end - self.start).days


def _day(d: date) -> datetime:
    return datetime.combine(d, time())


def _month(y: int, m: int) -> tuple[datetime, datetime]:
    return datetime(y, m, 1), datetime(y + (m == 12), m % 12 + 1, 1)


def _latest_month(mon: int, now: datetime) -> int:
    return now.year if mon <= now.month else now.year - 1


def _latest_day(mon: int, day: int, now: datetime) -> datetime:
    d = datetime(now.year, mon, day)
    return d if d.date() <= now.date() else datetime(now.year - 1, mon, day)


def _month_of(g: dict[str, str | None]) -> int:
    raw = (g.get("mon") or "").lower().rstrip(".")
    return int(raw) if raw.isdigit() else _MONTHS[raw]


def _count(raw: str) -> int:
    return int(raw) if raw.isdigit() else _NUMBERS[raw.lower()]


def _week_of(d: datetime) -> tuple[datetime, datetime]:
    start = d - timedelta(days=d.weekday())
    return start, start + timedelta(days=7)


def _span(g: dict[str, str | None], now: datetime, *, prefix: str = "") -> tuple[datetime, datetime]:
    """The range of one absolute date group (day, month or year; a missing year means the latest)."""
    year, mon, day = g.get(prefix + "year"), g.get(prefix + "mon"), g.get(prefix + "day")
    if mon is None:
        y = int(year)  # type: ignore[arg-type]
        return datetime(y, 1, 1), datetime(y + 1, 1, 1)
    m = int(mon) if mon.isdigit() else _MONTHS[mon.lower().rstrip(".")]
    if day is None:
        return _month(int(year) if year else _latest_month(m, now), m)
    d = datetime(int(year), m, int(day)) if year else _latest_day(m, int(day), now)
    return d, d + timedelta(days=1)


def _absolute(kind: str, g: dict[str, str | None], now: datetime) -> tuple[datetime, datetime]:
    if kind in ("iso_day", "dmy", "mdy", "iso_month", "my", "year", "md", "dm", "month"):
        return _span(g, now)
    if kind == "between":
        a, _ = _span({"mon": g["mon"], "day": g["day"], "year": g["year"] or g["year2"]}, now)
        _, b = _span({"mon": g["mon2"] or g["mon"], "day": g["day2"], "year": g["year2"] or g["year"]}, now)
        return (a, b) if a < b else (b - timedelta(days=1), a + timedelta(days=1))
    if kind == "week_rel":
        anchor, _ = _span(g, now)
        if g["rel"].lower() == "before":
            return anchor - timedelta(days=7), anchor
        if g["rel"].lower() == "after":
            return anchor + timedelta(days=1), anchor + timedelta(days=8)
        return _week_of(anchor)
    if kind == "nth_week":
        m = _month_of(g)
        start, end = _month(int(g["year"]) if g.get("year") else _latest_month(m, now), m)
        i = _ORDINALS[g["ord"].lower()]
        s = end - timedelta(days=7) if i < 0 else start + timedelta(days=7 * i)
        return s, s + timedelta(days=7)
    raise AssertionError(kind)


def _relative(kind: str, g: dict[str, str | None], now: datetime) -> tuple[datetime, datetime]:
    today = _day(now.date())
    if kind == "today":
        return today, today + timedelta(days=1)
    if kind == "yesterday":
        return today - timedelta(days=1), today
    if kind == "this_last":
        unit, last = g["unit"].lower(), g["which"].lower() in ("last", "past", "previous")
        if unit == "weekend":
            sat = today - timedelta(days=(today.weekday() - 5) % 7)
            if last and sat + timedelta(days=2) > today:
                sat -= timedelta(days=7)
            return sat, sat + timedelta(days=2)
        if unit == "week":
            s, e = _week_of(today)
            return (s - timedelta(days=7), s) if last else (s, e)
        if unit == "month":
            s, e = _month(now.year, now.month)
            return _month(s.year - (s.month == 1), (s.month - 2) % 12 + 1) if last else (s, e)
        y = now.year - 1 if last else now.year
        return datetime(y, 1, 1), datetime(y + 1, 1, 1)
    if kind == "last_n":  # "the past three months": from that long ago up to today, inclusive
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[g["unit"].lower()] * _count(g["n"])
        return today - timedelta(days=days), today + timedelta(days=1)
    if kind == "ago":
        n, unit = _count(g["n"]), g["unit"].lower()
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * n
        slack = {"day": 0, "week": 3, "month": 15, "year": 182}[unit]
        centre = today - timedelta(days=days)
        return centre - timedelta(days=slack), centre + timedelta(days=slack + 1)
    if kind == "weekday":
        back = (today.weekday() - _WEEKDAYS[g["wd"].lower()]) % 7 or 7
        d = today - timedelta(days=back)
        return d, d + timedelta(days=1)
    raise AssertionError(kind)


def _rx(p: str) -> re.Pattern[str]:
    return re.compile(r"\b" + p + r"\b", re.I)


def _renamed(p: str, suffix: str) -> str:
    return re.sub(r"\(\?P<(\w+)>", lambda m: f"(?P<{m.group(1)}{suffix}>", p)


# Most specific first: a span of text is read by the first pattern that claims it.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "between",
        _rx(
            r"(?:between|from)\s+" + _MON + r"\s+" + _DAY + r"(?:,?\s*" + _YEAR + r")?\s+(?:and|to|-|until)\s+"
            r"(?:" + _renamed(_MON, "2") + r"\s+)?" + _renamed(_DAY, "2") + r"(?:,?\s*" + _renamed(_YEAR, "2") + r")?"
        ),
    ),
    (
        "week_rel",
        _rx(
            r"(?:the\s+)?week\s+(?P<rel>before|after|of)\s+(?:the\s+)?"
            + _DAY
            + r"(?:\s+of)?\s+"
            + _MON
            + r"(?:,?\s*"
            + _YEAR
            + r")?"
        ),
    ),
    (
        "week_rel",
        _rx(r"(?:the\s+)?week\s+(?P<rel>before|after|of)\s+" + _MON + r"\s+" + _DAY + r"(?:,?\s*" + _YEAR + r")?"),
    ),
    (
        "nth_week",
        _rx(
            r"(?:the\s+)?(?P<ord>first|1st|second|2nd|third|3rd|fourth|4th|last)\s+week\s+of\s+"
            + _MON
            + r"(?:,?\s*"
            + _YEAR
            + r")?"
        ),
    ),
    ("iso_day", _rx(r"(?P<year>(?:19|20)\d\d)-(?P<mon>[01]\d)-(?P<day>[0-3]\d)")),
    ("iso_month", re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<mon>[01]\d)\b(?!-\d)")),
    ("dmy", _rx(_DAY + r"(?:\s+of)?\s+" + _MON + r",?\s*" + _YEAR)),
    ("mdy", _rx(_MON + r"\s+" + _DAY + r"(?:,\s*|\s+)" + _YEAR)),
    ("my", _rx(_MON + r",?\s+(?:of\s+)?" + _YEAR)),
    ("md", _rx(_MON + r"\s+" + _DAY + r"(?!\s*,?\s*\d)")),
    ("dm", _rx(_DAY + r"(?:\s+of)?\s+" + _MON)),
    ("month", _rx(r"(?:in|during|since|of|last|this|early|mid|late)\s+" + _MON + r"(?!\s*,?\s*\d)")),
    ("year", _rx(r"(?:in|during|of|since|by|from|year)\s+" + _YEAR)),
    ("today", _rx(r"today|tonight|this\s+(?:morning|afternoon|evening)")),
    ("yesterday", _rx(r"yesterday|last\s+night")),
    ("last_n", _rx(r"(?:past|last|previous)\s+" + _NUM + r"\s+" + _UNIT)),
    ("this_last", _rx(r"(?P<which>this|last|past|previous)\s+(?P<unit>weekend|week|month|year)")),
    ("ago", _rx(_NUM + r"\s+" + _UNIT + r"\s+ago")),
    ("weekday", _rx(r"(?:last|on)\s+(?P<wd>" + "|".join(_WEEKDAYS) + r")")),
]
_RELATIVE = {"today", "yesterday", "last_n", "this_last", "ago", "weekday"}


def find_date_ranges(query: str, now: datetime) -> list[DateRange]:
    """Every date range the query names, in order of appearance. `now` anchors relative expressions."""
    return [r for _, _, _, r in find_date_spans(query, now)]


def find_date_spans(text: str, now: datetime) -> list[tuple[int, int, bool, DateRange]]:
    """(start, end, relative, range) of every date expression in `text`, in order of appearance; `relative`: the
    expression depends on `now` ("last week", "three days ago"), not an absolute date ("8 May 2023")."""
    now = now.replace(tzinfo=None)
    found: list[tuple[int, int, bool, DateRange]] = []
    for kind, rx in _PATTERNS:
        for m in rx.finditer(text):
            if any(a < m.end() and m.start() < b for a, b, _, _ in found):
                continue
            g = m.groupdict()
            try:
                start, end = (_relative if kind in _RELATIVE else _absolute)(kind, g, now)
            except (ValueError, KeyError, OverflowError):
                continue  # an impossible date is ignored, not repaired
            found.append((m.start(), m.end(), kind in _RELATIVE, DateRange(start, end, m.group(0))))
    return sorted(found, key=lambda x: x[0])


def without_dates(query: str, ranges: Sequence[DateRange]) -> str:
    """The query without the words that named its date ranges ("what did I do last week" -> "what did I do"): they
    say when, not what, so they are no topic words (BM25 would match "week" or "2026" anywhere)."""
    for r in ranges:
        query = query.replace(r.text, " ", 1)
    return " ".join(query.split())
