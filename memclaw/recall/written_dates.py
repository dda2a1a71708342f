"""Relative dates in text written to memory, made absolute (pure; English): "Maya's dentist appointment is tomorrow",
written on 2026-11-25, is kept as "Maya's dentist appointment is tomorrow (2026-11-26)".

A fact is read long after it was written, when "tomorrow" means another day. Every fact memclaw writes (`memory add`,
the `remember` tool, consolidation) goes through `resolve_relative_dates` with the day it was learned: each relative
expression keeps its words and is followed by the day or span it named then, `(2026-11-26)`, `(2026-11-16 to
2026-11-22)`, `(2026-12)` for a whole month, `(2027)` for a whole year.

The past forms are those recall reads in a query (memclaw.recall.dates: "today", "yesterday", "last week", "this
month", "the past three days", "two weeks ago", "last Friday"); this module adds the future ones: "tomorrow", "the
day after tomorrow", "next week / month / year", "this / next weekend" (Saturday and Sunday of this / next week),
"next / this / coming Friday" (the first Friday after the day it was said), "in 3 days / 2 weeks" (a day), "in 2
months" (that month), "in a year" (that year). Left as written: what is ambiguous ("on Friday", past or future),
vague ("in a few days", "soon"), not a day ("in 2 hours", "next time", "next door", "last name"), absolute already
("8 May 2023"), or already followed by its date (a text resolved once is not resolved again).

Recall reads those dates back (memclaw.markdown.formats.named_days): a fact written on 2026-11-25 as "dentist
tomorrow (2026-11-26)" is about the 26th, so a query naming the 26th lifts it as it lifts what was stamped that day
(memclaw.recall.ranking.stamp_in).
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime, time, timedelta

from memclaw.recall.dates import DateRange, find_date_spans

_WEEKDAYS = {d.lower(): i for i, d in enumerate(calendar.day_name)}
_COUNTS = {w: i for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
)} | {"a": 1, "an": 1}  # fmt: skip
_COUNT = r"(?P<n>\d{1,3}|" + "|".join(sorted(_COUNTS, key=len, reverse=True)) + r")"
_FUTURE: list[tuple[str, re.Pattern[str]]] = [
    (kind, re.compile(r"\b" + p + r"\b", re.I))
    for kind, p in [
        ("day_after", r"(?:the\s+)?day\s+after\s+tomorrow"),
        ("tomorrow", r"tomorrow"),
        ("weekend", r"(?P<which>this|next|coming)\s+weekend"),
        ("next_unit", r"next\s+(?P<unit>week|month|year)"),
        ("weekday", r"(?:next|this|coming)\s+(?P<wd>" + "|".join(_WEEKDAYS) + r")"),
        ("in_n", r"in\s+" + _COUNT + r"\s+(?P<unit>day|week|month|year)s?"),
    ]
]
_AMBIGUOUS = re.compile(r"on\s", re.I)  # "on Friday": recall reads the last one; said of a plan, it is the next
_POSSESSIVE = re.compile(r"'s\b")
_FOLLOWED_BY_DATE = re.compile(r"[\s,(]*(?:on\s+|i\.e\.\s+)?\Z", re.I)


def _day(d: date) -> datetime:
    return datetime.combine(d, time())


def _add_months(d: date, n: int) -> date:
    y, m = divmod(d.month - 1 + n, 12)
    return date(d.year + y, m + 1, 1)


def _future(kind: str, g: dict[str, str | None], on: date) -> tuple[datetime, datetime]:
    if kind in ("day_after", "tomorrow"):
        d = on + timedelta(days=2 if kind == "day_after" else 1)
        return _day(d), _day(d + timedelta(days=1))
    if kind == "weekend":
        # Saturday of this Monday-to-Sunday week (said on a Sunday: the weekend it is), or of the next
        sat = on + timedelta(days=5 - on.weekday() + 7 * ((g["which"] or "").lower() == "next"))
        return _day(sat), _day(sat + timedelta(days=2))
    unit = (g.get("unit") or "").lower()
    if kind == "next_unit":
        if unit == "week":
            start = on + timedelta(days=7 - on.weekday())
            return _day(start), _day(start + timedelta(days=7))
        if unit == "month":
            start = _add_months(on, 1)
            return _day(start), _day(_add_months(start, 1))
        return datetime(on.year + 1, 1, 1), datetime(on.year + 2, 1, 1)
    if kind == "weekday":
        d = on + timedelta(days=(_WEEKDAYS[(g["wd"] or "").lower()] - on.weekday()) % 7 or 7)
        return _day(d), _day(d + timedelta(days=1))
    raw = (g["n"] or "").lower()
    n = int(raw) if raw.isdigit() else _COUNTS[raw]
    if unit in ("day", "week"):
        d = on + timedelta(days=n * (7 if unit == "week" else 1))
        return _day(d), _day(d + timedelta(days=1))
    if unit == "month":
        start = _add_months(on, n)
        return _day(start), _day(_add_months(start, 1))
    return datetime(on.year + n, 1, 1), datetime(on.year + n + 1, 1, 1)


def format_span(r: DateRange) -> str:
    """A range as a person reads it: `2026-11-26`, `2026-12` (a whole month), `2027` (a whole year), else
    `2026-11-16 to 2026-11-22` (both days included)."""
    start, last = r.start.date(), (r.end - timedelta(days=1)).date()
    if start == last:
        return start.isoformat()
    if start.day == 1 and r.end.date() == _add_months(start, 1):
        return f"{start:%Y-%m}"
    if (start.month, start.day) == (1, 1) and r.end.date() == date(start.year + 1, 1, 1):
        return str(start.year)
    return f"{start.isoformat()} to {last.isoformat()}"


def relative_spans(text: str, on: date) -> list[tuple[int, int, DateRange]]:
    """(start, end, range) of each relative date expression of `text` said on `on` that can be resolved."""
    now = datetime.combine(on, time(12))
    found: list[tuple[int, int, DateRange]] = []
    for kind, rx in _FUTURE:
        for m in rx.finditer(text):
            if any(a < m.end() and m.start() < b for a, b, _ in found):
                continue
            try:
                start, end = _future(kind, m.groupdict(), on)
            except (ValueError, KeyError, OverflowError):
                continue
            found.append((m.start(), m.end(), DateRange(start, end, m.group(0))))
    spans = find_date_spans(text, now)
    for a, b, relative, r in spans:
        if not relative or _AMBIGUOUS.match(r.text) or any(x < b and a < y for x, y, _ in found):
            continue
        found.append((a, b, r))
    absolute = [a for a, _, relative, _ in spans if not relative]
    out = []
    for a, b, r in sorted(found, key=lambda x: x[0]):
        m = _POSSESSIVE.match(text, b)
        end = m.end() if m else b
        if any(x >= end and _FOLLOWED_BY_DATE.match(text[end:x]) for x in absolute):
            continue  # already followed by the date it names
        out.append((a, end, r))
    return out


def resolve_relative_dates(text: str, on: date) -> str:
    """`text` with each relative date expression followed by the absolute day or span it names when said on `on`
    ("tomorrow" -> "tomorrow (2026-11-26)"); see the module docstring for what is and is not read."""
    out: list[str] = []
    pos = 0
    for _a, end, r in relative_spans(text, on):
        out += [text[pos:end], f" ({format_span(r)})"]
        pos = end
    return "".join(out) + text[pos:]
