"""Date expressions in text -> the time ranges they name (pure; English): one reader for queries and written memory.

"on 8th December, 2023", "between August 11 and August 15 2023", "the week before 16 November 2023", "three days ago",
"tomorrow", "the 30th": each names a range of days. Recall lifts memories whose timestamp or text falls inside it
(memclaw.markdown.formats.named_days). Relative expressions are read against `now`.

A date without a year, as "30 November", "in December" or "on Friday", is read the way people mean it:

- The tense of the text decides first. A past word ("did", "was", ...) means its latest occurrence not after
  today. A future word ("will", "next", "plan", ...) means its first occurrence from today on.
- Otherwise the nearest occurrence to today wins; a month or day that contains today is itself, and a tie goes to
  the past. When the caller says what memory holds (`holds`), the nearest occurrence that holds something wins.

"today", "tonight" or "this morning" in a question with no past word name the time of the question. Such a range
has `stamps=False`: only the days a memory's text names fall in it, not its stamp. "what did I tell you today"
has a past word and keeps `stamps=True`.

Nothing here guesses beyond the text. A text with no date expression yields no range, and an impossible date
("February 30") is ignored rather than repaired. At most MAX_DATE_MENTIONS expressions are read from one text, and
the work is linear in its length.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

MAX_DATE_MENTIONS = 16
"""The date expressions read from one text at most (the first ones): a query of thousands of "last week" costs no
more than sixteen."""

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

# every key of _MONTHS, factored by prefix (a flat alternation of 25 names scans a long text six times slower)
_MON_NAMES = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_MON = r"(?P<mon>" + _MON_NAMES + r")\.?"
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
    stamps: bool = True
    """False: the range is the time of the question ("what should I cook tonight"): a memory falls in it by a day its
    text names, not by when it was stamped or learned."""
    kind: str = ""
    """The form it was read from (e.g. "iso_day", "tomorrow", "nth_day"); see _PATTERNS."""

    def __contains__(self, ts: object) -> bool:
        return isinstance(ts, datetime) and self.start <= ts.replace(tzinfo=None) < self.end

    @property
    def days(self) -> int:
        return (self.end - self.start).days


def _day(d: date) -> datetime:
    return datetime.combine(d, time())


def _month(y: int, m: int) -> tuple[datetime, datetime]:
    return datetime(y, m, 1), datetime(y + (m == 12), m % 12 + 1, 1)


def _add_months(d: date, n: int) -> date:
    y, m = divmod(d.month - 1 + n, 12)
    return date(d.year + y, m + 1, 1)


_PAST_WORDS = re.compile(
    r"\b(?:did|didn't|was|wasn't|were|weren't|had|hadn't|happened|went|said|told|ago|ended|finished|used\s+to)\b", re.I
)
_FUTURE_WORDS = re.compile(
    r"\b(?:will|won't|shall|going\s+to|gonna|upcoming|coming|next|plan|plans|planned|planning|scheduled|due)\b|'ll\b",
    re.I,
)


def tense(text: str) -> int:
    """-1: the text speaks of the past ("what did I do ..."); 1: of the future ("what will ...", "my plans for
    ..."); 0: neither, or both. Only yearless dates and "today" read it (see the module docstring)."""
    past, future = _PAST_WORDS.search(text) is not None, _FUTURE_WORDS.search(text) is not None
    return 0 if past == future else (-1 if past else 1)


Span = tuple[datetime, datetime]


class _Reader:
    """How one text's dates are read: against `now`, in the text's tense, consulting `holds` (see the module
    docstring for the rule of a date without a year)."""

    def __init__(self, now: datetime, direction: int, holds: Callable[[DateRange], bool] | None) -> None:
        self.now = now
        self.today = _day(now.date())
        self.direction = direction
        self.holds = holds

    def pick(self, candidates: list[Span]) -> Span:
        """One occurrence of a yearless date among its valid occurrences, in time order.

        The candidates are the latest past one and the first one to come, in the order the tense prefers, else the
        nearer first. Of those, the first that memory holds something in (`holds`) wins, else the first."""
        today, tomorrow = self.today, self.today + timedelta(days=1)
        past = [c for c in candidates if c[0] < tomorrow][-1:]
        future = [c for c in candidates if c[1] > today][:1]
        if self.direction < 0:
            order = past + future
        elif self.direction > 0:
            order = future + past
        else:
            day = timedelta(days=1)
            order = sorted(past + future, key=lambda c: (max(c[0] - today, today - c[1] + day, timedelta(0)), c[0]))
        order = list(dict.fromkeys(order))
        if self.holds is not None and len(order) > 1:
            for c in order:
                if self.holds(DateRange(c[0], c[1], "", kind="candidate")):
                    return c
        return order[0]

    def month(self, mon: int) -> Span:
        y = self.now.year
        return self.pick([_month(y + dy, mon) for dy in (-1, 0, 1)])

    def day(self, mon: int, day: int) -> Span:
        out = []
        for dy in (-1, 0, 1):
            try:
                d = datetime(self.now.year + dy, mon, day)
            except ValueError:
                continue
            out.append((d, d + timedelta(days=1)))
        if not out:
            raise ValueError(f"no day {mon}-{day}")
        return self.pick(out)

    def day_of_month(self, day: int) -> Span:
        out = []
        for dm in (-1, 0, 1):
            first = _add_months(self.now.date(), dm)
            try:
                d = datetime(first.year, first.month, day)
            except ValueError:
                continue
            out.append((d, d + timedelta(days=1)))
        if not out:
            raise ValueError(f"no day {day}")
        return self.pick(out)

    def weekday(self, wd: int) -> Span:
        back = (self.today.weekday() - wd) % 7 or 7
        before = self.today - timedelta(days=back)
        after = self.today + timedelta(days=(wd - self.today.weekday()) % 7 or 7)
        return self.pick([(d, d + timedelta(days=1)) for d in (before, after)])


def _month_of(g: dict[str, str | None]) -> int:
    raw = (g.get("mon") or "").lower().rstrip(".")
    return int(raw) if raw.isdigit() else _MONTHS[raw]


def _count(raw: str) -> int:
    return int(raw) if raw.isdigit() else _NUMBERS[raw.lower()]


def _week_of(d: datetime) -> tuple[datetime, datetime]:
    start = d - timedelta(days=d.weekday())
    return start, start + timedelta(days=7)


def _span(g: dict[str, str | None], rd: _Reader, *, prefix: str = "") -> Span:
    """The range of one absolute date group (day, month or year; a missing year: _Reader's rule)."""
    year, mon, day = g.get(prefix + "year"), g.get(prefix + "mon"), g.get(prefix + "day")
    if mon is None:
        y = int(year)  # type: ignore[arg-type]
        return datetime(y, 1, 1), datetime(y + 1, 1, 1)
    m = int(mon) if mon.isdigit() else _MONTHS[mon.lower().rstrip(".")]
    if day is None:
        return _month(int(year), m) if year else rd.month(m)
    if year:
        d = datetime(int(year), m, int(day))
        return d, d + timedelta(days=1)
    return rd.day(m, int(day))


def _absolute(kind: str, g: dict[str, str | None], rd: _Reader) -> Span:
    if kind in ("iso_day", "dmy", "mdy", "iso_month", "my", "year", "md", "dm", "month"):
        return _span(g, rd)
    if kind == "between":
        a, _ = _span({"mon": g["mon"], "day": g["day"], "year": g["year"] or g["year2"]}, rd)
        _, b = _span({"mon": g["mon2"] or g["mon"], "day": g["day2"], "year": g["year2"] or g["year"]}, rd)
        return (a, b) if a < b else (b - timedelta(days=1), a + timedelta(days=1))
    if kind == "week_rel":
        anchor, _ = _span(g, rd)
        if g["rel"].lower() == "before":  # type: ignore[union-attr]
            return anchor - timedelta(days=7), anchor
        if g["rel"].lower() == "after":  # type: ignore[union-attr]
            return anchor + timedelta(days=1), anchor + timedelta(days=8)
        return _week_of(anchor)
    if kind == "nth_week":
        m = _month_of(g)
        start, end = _month(int(g["year"]), m) if g.get("year") else rd.month(m)
        i = _ORDINALS[g["ord"].lower()]  # type: ignore[union-attr]
        s = end - timedelta(days=7) if i < 0 else start + timedelta(days=7 * i)
        return s, s + timedelta(days=7)
    raise AssertionError(kind)


def _relative(kind: str, g: dict[str, str | None], rd: _Reader) -> Span:
    now, today = rd.now, rd.today
    if kind == "today":
        return today, today + timedelta(days=1)
    if kind == "yesterday":
        return today - timedelta(days=1), today
    if kind == "this_last":
        unit, last = g["unit"].lower(), g["which"].lower() in ("last", "past", "previous")  # type: ignore[union-attr]
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
    # "the past three months": from that long ago up to today, inclusive
    if kind == "last_n":
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[g["unit"].lower()] * _count(g["n"])  # type: ignore
        return today - timedelta(days=days), today + timedelta(days=1)
    if kind == "ago":
        n, unit = _count(g["n"]), g["unit"].lower()  # type: ignore[arg-type, union-attr]
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * n
        slack = {"day": 0, "week": 3, "month": 15, "year": 182}[unit]
        centre = today - timedelta(days=days)
        return centre - timedelta(days=slack), centre + timedelta(days=slack + 1)
    # "last Friday": the one before today; "on Friday": _Reader's rule
    if kind == "weekday":
        wd = _WEEKDAYS[g["wd"].lower()]  # type: ignore[union-attr]
        if g["on"].lower() == "last":  # type: ignore[union-attr]
            d = today - timedelta(days=(today.weekday() - wd) % 7 or 7)
            return d, d + timedelta(days=1)
        return rd.weekday(wd)
    if kind == "nth_day":
        return rd.day_of_month(int(g["day"]))  # type: ignore[arg-type]
    if kind == "weekend" and rd.direction < 0 and (g["which"] or "").lower() == "this":
        return _relative("this_last", {"which": "this", "unit": "weekend"}, rd)
    return _future(kind, g, today.date())


def _future(kind: str, g: dict[str, str | None], on: date) -> Span:
    """The forms that name a day to come, said on `on` ("tomorrow", "next week", "this weekend", "next Friday",
    "in 3 days", "in 2 months", "in a year")."""
    if kind in ("day_after", "tomorrow"):
        d = on + timedelta(days=2 if kind == "day_after" else 1)
        return _day(d), _day(d + timedelta(days=1))
    if kind == "weekend":
        # Saturday of this Monday-to-Sunday week (said on a Sunday: the weekend it is), or of the next; "did ...
        # this weekend" is the last one (_relative)
        sat = on + timedelta(days=5 - on.weekday() + 7 * ((g["which"] or "").lower() == "next"))
        return _day(sat), _day(sat + timedelta(days=2))
    unit = (g.get("unit") or "").lower()
    if kind == "next_unit":
        if unit == "week":
            start = on + timedelta(days=7 - on.weekday())
            return _day(start), _day(start + timedelta(days=7))
        if unit == "month":
            first = _add_months(on, 1)
            return _day(first), _day(_add_months(first, 1))
        return datetime(on.year + 1, 1, 1), datetime(on.year + 2, 1, 1)
    if kind == "next_weekday":
        d = on + timedelta(days=(_WEEKDAYS[(g["wd"] or "").lower()] - on.weekday()) % 7 or 7)
        return _day(d), _day(d + timedelta(days=1))
    if kind != "in_n":
        raise AssertionError(kind)
    n = _count(g["n"] or "")
    if unit in ("day", "week"):
        d = on + timedelta(days=n * (7 if unit == "week" else 1))
        return _day(d), _day(d + timedelta(days=1))
    if unit == "month":
        first = _add_months(on, n)
        return _day(first), _day(_add_months(first, 1))
    return datetime(on.year + n, 1, 1), datetime(on.year + n + 1, 1, 1)


def _rx(p: str) -> re.Pattern[str]:
    return re.compile(r"\b" + p + r"\b", re.I)


def _renamed(p: str, suffix: str) -> str:
    return re.sub(r"\(\?P<(\w+)>", lambda m: f"(?P<{m.group(1)}{suffix}>", p)


_WD = r"(?P<wd>" + "|".join(_WEEKDAYS) + r")"
# "in a few days" is vague: only a number counts
_FUTURE_COUNT = (
    r"(?P<n>\d{1,3}|"
    + "|".join(sorted((w for w in _NUMBERS if " " not in w and w not in ("several",)), key=len, reverse=True))
    + r")"
)
_FUTURE_UNIT = r"(?P<unit>day|week|month|year)s?"

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
    # the forms that name a day to come (memclaw.recall.written_dates resolves them in what is written)
    ("day_after", _rx(r"(?:the\s+)?day\s+after\s+tomorrow")),
    ("tomorrow", _rx(r"tomorrow")),
    ("weekend", _rx(r"(?P<which>this|next|coming)\s+weekend")),
    ("next_unit", _rx(r"next\s+(?P<unit>week|month|year)")),
    ("next_weekday", _rx(r"(?:next|this|coming)\s+" + _WD)),
    # "in 3 days"; not "(took part) in a week ago", nor "in a day" (a rate: "twice in a day")
    ("in_n", _rx(r"in\s+(?!an?\s+day\b)" + _FUTURE_COUNT + r"\s+" + _FUTURE_UNIT + r"(?!\s+ago\b)")),
    ("today", _rx(r"today|tonight|this\s+(?:morning|afternoon|evening)")),
    ("yesterday", _rx(r"yesterday|last\s+night")),
    ("last_n", _rx(r"(?:past|last|previous)\s+" + _NUM + r"\s+" + _UNIT)),
    ("this_last", _rx(r"(?P<which>this|last|past|previous)\s+(?P<unit>weekend|week|month|year)")),
    ("ago", _rx(_NUM + r"\s+" + _UNIT + r"\s+ago")),
    ("weekday", _rx(r"(?P<on>last|on)\s+" + _WD)),
    # "on the 30th" ("the 1st time" is no date: a preposition says it is one)
    (
        "nth_day",
        _rx(
            r"(?:on|for|by|until|till|before|after|since)\s+the\s+(?P<day>[0-3]?\d)(?:st|nd|rd|th)"
            r"(?!\s+(?:of\s+)?" + _MON_NAMES + r"\b)"
        ),
    ),
]
_ABSOLUTE = frozenset({"between", "week_rel", "nth_week", "iso_day", "iso_month", "dmy", "mdy", "my", "md", "dm",
                       "month", "year"})  # fmt: skip
_ALL_KINDS = frozenset(k for k, _ in _PATTERNS)


def find_date_ranges(query: str, now: datetime, *, holds: Callable[[DateRange], bool] | None = None) -> list[DateRange]:
    """Every date range the query names, in order of appearance (at most MAX_DATE_MENTIONS). `now` anchors relative
    expressions; `holds` (whether memory holds anything inside a range) helps read a date without a year."""
    return [r for _, _, _, r in find_date_spans(query, now, holds=holds)]


def find_date_spans(
    text: str,
    now: datetime,
    *,
    holds: Callable[[DateRange], bool] | None = None,
    kinds: frozenset[str] = _ALL_KINDS,
) -> list[tuple[int, int, bool, DateRange]]:
    """(start, end, relative, range) of every date expression in `text` (of the forms `kinds`), in order of
    appearance, the first MAX_DATE_MENTIONS; `relative`: the expression depends on `now` ("last week", "three days
    ago"), not an absolute date ("8 May 2023"). Linear in the length of `text`: each form is scanned once and stops
    at MAX_DATE_MENTIONS matches it keeps, so the overlap checks are bounded."""
    now = now.replace(tzinfo=None)
    direction = tense(text)
    rd = _Reader(now, direction, holds)
    found: list[tuple[int, int, bool, DateRange]] = []
    for kind, rx in _PATTERNS:
        if kind not in kinds:
            continue
        kept = 0
        for m in rx.finditer(text):
            if kept >= MAX_DATE_MENTIONS:
                break
            if any(a < m.end() and m.start() < b for a, b, _, _ in found):
                continue
            g = m.groupdict()
            try:
                start, end = (_absolute if kind in _ABSOLUTE else _relative)(kind, g, rd)
            except (ValueError, KeyError, OverflowError):
                # an impossible date is ignored, not repaired
                continue
            stamps = kind != "today" or direction < 0
            found.append((m.start(), m.end(), kind not in _ABSOLUTE, DateRange(start, end, m.group(0), stamps, kind)))
            kept += 1
    return sorted(found, key=lambda x: x[0])[:MAX_DATE_MENTIONS]


def without_dates(query: str, ranges: Sequence[DateRange]) -> str:
    """The query without the words that named its date ranges ("what did I do last week" -> "what did I do"): they
    say when, not what, so they are no topic words (BM25 would match "week" or "2026" anywhere)."""
    for r in ranges:
        query = query.replace(r.text, " ", 1)
    return " ".join(query.split())
