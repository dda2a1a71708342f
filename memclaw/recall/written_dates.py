"""Relative dates in text written to memory, made absolute (pure; English).

"Maya's dentist appointment is tomorrow", written on 2026-11-25, is kept with "(2026-11-26)" after "tomorrow".
A fact is read long after it was written, when "tomorrow" means another day.
Every fact memclaw writes goes through `resolve_relative_dates` with the day it was learned.
Each relative expression keeps its words and is followed by the day or span it named then.
Spans read `(2026-11-16 to 2026-11-22)`, `(2026-12)` for a month and `(2027)` for a year.

Recall reads the past forms in a query (memclaw.recall.dates); this module adds the future ones.
Among them: "tomorrow", "next week", "this weekend", "next Friday", "in 3 days", "in 2 months", "in a year".
Left as written: the ambiguous ("on Friday"), the vague ("soon"), what is not a day ("in 2 hours", "next door").
Absolute dates stay too, and a text resolved once is not resolved again.

Recall reads those dates back (memclaw.markdown.formats.named_days, memclaw.recall.ranking.stamp_in).
A query naming the 26th then lifts "dentist tomorrow (2026-11-26)" as it lifts what was stamped that day.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta

from memclaw.recall.dates import DateRange, find_date_spans

# "on Friday": past or future; said of a plan, it is the next
_AMBIGUOUS = re.compile(r"on\s", re.I)
# "the 30th": which month is a guess; left as said
_UNRESOLVED = frozenset({"nth_day"})
_POSSESSIVE = re.compile(r"'s\b")
_FOLLOWED_BY_DATE = re.compile(r"[\s,(]*(?:on\s+|i\.e\.\s+)?\Z", re.I)


def _add_months(d: date, n: int) -> date:
    y, m = divmod(d.month - 1 + n, 12)
    return date(d.year + y, m + 1, 1)


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
    spans = find_date_spans(text, datetime.combine(on, time(12)))
    absolute = [a for a, _, relative, _ in spans if not relative]
    out = []
    for a, b, relative, r in spans:
        if not relative or r.kind in _UNRESOLVED or _AMBIGUOUS.match(r.text):
            continue
        m = _POSSESSIVE.match(text, b)
        end = m.end() if m else b
        if any(x >= end and _FOLLOWED_BY_DATE.match(text, end, x) for x in absolute):
            # already followed by the date it names
            continue
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
