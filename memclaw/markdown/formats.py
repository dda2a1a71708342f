"""The Markdown memory formats' shared text rules, and HISTORY.md (pure: no I/O).

MEMORY.md is parsed by memclaw.markdown.memory_md, its line syntax in memclaw.markdown._syntax. What both formats
share is here: clean text, section paths, a fact's trailing date, the days a text names, history stamps.

A HISTORY.md entry starts at a line beginning `[YYYY-MM-DD HH:MM]`, `[YYYY-MM-DD]` or `[YYYY-MM-DD HH:MM:SS]`. It
runs until the next such line; trailing blank lines are dropped. Text before the first stamp is one undated entry.
A line with a stamp's shape but no real date or time, as `[2026-11-31 10:00]`, starts an undated entry too. That
entry keeps the stamp as written and is named in a parse note (`HistoryDoc.notes`, kind "stamp"). A comment block,
from a line starting `<!--` to the line holding `-->`, is ignored.

Parsing never raises, whatever the text: control characters, surrogate-escaped bytes, 5 MB files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache

from memclaw.markdown.dates import find_date_spans
from memclaw.markdown.units import MemoryUnit, unit_id

_TRAILING_DATE = re.compile(
    r"(?:\(([0-9]{4}-[0-9]{2}-[0-9]{2})(?: #(c[0-9a-f]{8,16}))?\)|\[([0-9]{4}-[0-9]{2}-[0-9]{2})\])\s*\Z"
)
_NAMED_DAYS = re.compile(
    r"\(([0-9]{4}-[0-9]{2}-[0-9]{2})(?: to ([0-9]{4}-[0-9]{2}-[0-9]{2}))?\)|\(([0-9]{4})-([0-9]{2})\)|\(([0-9]{4})\)"
)
_WRITTEN_DATES = frozenset({"iso_day", "iso_month", "dmy", "mdy", "my"})
"""The forms of a date a memory's text names in plain words or ISO (memclaw.markdown.dates): "2026-12-03", "3
December 2026", "December 3, 2026", "December 2026"; with the day it was written, also "3 December", "December 3"."""
_YEARLESS_DATES = frozenset({"md", "dm"})
_DIGIT = re.compile(r"\d")
_ISO_SHAPE = re.compile(r"\d\d\d\d-\d\d")
_MONTH_PREFIXES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
NAMED_DAY_KINDS = frozenset({"fact", "history"})
"""The kinds whose text is read for the days it names (an archived turn is about when it was said)."""
_LEADING_DATE = re.compile(r"\[([0-9]{4}-[0-9]{2}-[0-9]{2})\]")
_STAMP = re.compile(
    r"\[([0-9]{4})-([0-9]{2})-([0-9]{2})(?: ([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?)?(?: #(c[0-9a-f]{8,16}))?\]"
)
_SURROGATES = re.compile("[\ud800-\udfff]+")
SECTION_SEP = " > "
MAX_HEADING_LEVEL = 6


@dataclass(frozen=True)
class ParseNote:
    """Something in a memory file that is not what it may look like. MEMORY.md (memclaw.markdown.memory_md): `kind`
    "paragraph" or "code" (not a fact), or "date" (`detail`, as written, is no date). HISTORY.md: "stamp" (`detail`,
    the stamp as written, has no real date or time: the entry is undated). `line` is 1-based."""

    line: int
    kind: str
    detail: str = ""


# ----- small helpers -------------------------------------------------------------------------------------
def clean_text(s: str) -> str:
    """Valid UTF-8 text: surrogates (undecodable bytes read with surrogateescape) become U+FFFD."""
    if s.isascii():
        return s
    return _SURROGATES.sub("\ufffd", s)


def split_trailing_date(text: str) -> tuple[str, str | None]:
    """`text` without the date it ends in, `... (2023-05-08)` or `... [2023-05-08]` (or the learned-mark
    `... (2023-05-08 #c7f3a9b21)`, see `fact_mark`), and that date as written (YYYY-MM-DD); `(text, None)` when it
    ends in none. The one reading of a fact's trailing date."""
    m = _TRAILING_DATE.search(text)
    if m is None:
        return text, None
    return text[: m.start()].rstrip(), m.group(1) or m.group(3)


def fact_cid(text: str) -> str | None:
    """The id of the consolidation that wrote a fact: the `#c...` inside its trailing mark, else None."""
    m = _TRAILING_DATE.search(text)
    return m.group(2) if m is not None else None


def without_cid(text: str) -> str:
    """A fact's text with its learned-mark's consolidation id left out (`... (2026-11-25)`): what the index reads. The
    id is a link (memclaw.index._links), not words: embedded, its hex digits only blur what the fact says."""
    m = _TRAILING_DATE.search(text)
    if m is None or m.group(2) is None:
        return text
    return text[: m.start(2)].rstrip().removesuffix("#").rstrip() + text[m.end(2) :]


def named_days(text: str, written: datetime | None = None) -> list[tuple[datetime, datetime]]:
    """The [start, end) spans of whole days `text` names.

    One form is the way memclaw writes a resolved relative date, as `(2026-11-26)` or `(2026-12)`, whoever wrote it
    (memclaw.recall.written_dates.format_span). The other is a date in plain words or ISO anywhere in the text, as
    "on 3 December 2026". Given `written`, the day the text was written, a date without a year is read by
    memclaw.markdown.dates' rule. An impossible date names nothing."""
    out = []
    for m in _NAMED_DAYS.finditer(text):
        try:
            if m.group(1):
                first = date.fromisoformat(m.group(1))
                last = date.fromisoformat(m.group(2)) if m.group(2) else first
                start, end = datetime(first.year, first.month, first.day), datetime(last.year, last.month, last.day)
                end += timedelta(days=1)
            elif m.group(3):
                y, mo = int(m.group(3)), int(m.group(4))
                start, end = datetime(y, mo, 1), datetime(y + (mo == 12), mo % 12 + 1, 1)
            else:
                y = int(m.group(5))
                start, end = datetime(y, 1, 1), datetime(y + 1, 1, 1)
        except (ValueError, OverflowError):
            continue
        if start < end:
            out.append((start, end))
    low = text.lower()
    if _ISO_SHAPE.search(text) is None and not any(m in low for m in _MONTH_PREFIXES):
        # no ISO date and no month's name: nothing more to read
        return list(dict.fromkeys(out))
    kinds = _WRITTEN_DATES | _YEARLESS_DATES if written is not None else _WRITTEN_DATES
    # each written form read once, as above
    rest = _NAMED_DAYS.sub(lambda m: " " * len(m.group(0)), text)
    for _a, _b, _rel, r in find_date_spans(rest, written or datetime(2000, 1, 1), kinds=kinds):
        out.append((r.start, r.end))
    return list(dict.fromkeys(out))


@lru_cache(maxsize=16384)
def event_days(text: str, kind: str, stamp: datetime | None) -> tuple[tuple[datetime, datetime], ...]:
    """The days a memory's text names (`named_days`, a date without a year read from its `stamp`), a fact's
    trailing date or learned-mark of its stamp's day left out: that says when it was learned. Archived
    turns name none (a turn is about when it was said: NAMED_DAY_KINDS)."""
    if kind not in NAMED_DAY_KINDS or _DIGIT.search(text) is None:
        # every form of a date has a digit
        return ()
    if kind == "fact" and stamp is not None:
        body, day = split_trailing_date(text)
        text = body if day == stamp.date().isoformat() else text
    return tuple(named_days(text, stamp.replace(tzinfo=None) if stamp is not None else None))


def fact_mark(learned: date, cid: str | None = None) -> str:
    """` (2026-11-25 #c7f3a9b21)`: the end of a fact's bullet, saying when it was learned and by which consolidation.

    The date is the one memclaw reads as a fact's date. The id links the fact to the history entry and archive chunk
    of the same consolidation; a fact not written by a consolidation has none."""
    return f" ({learned.isoformat()}" + (f" #{cid}" if cid else "") + ")"


def fact_date(text: str) -> tuple[datetime | None, str | None]:
    """A fact's date: the date it ends in (or starts with, `[2023-05-08] ...`) and None; (None, the date as
    written) when that is no real date (`2026-02-30`); (None, None) when it names none."""
    raw = split_trailing_date(text)[1]
    if raw is None:
        m = _LEADING_DATE.match(text)
        raw = m.group(1) if m else None
    if raw is None:
        return None, None
    try:
        d = date.fromisoformat(raw)
    except ValueError:
        return None, raw
    return datetime(d.year, d.month, d.day), None


def parse_stamp(line: str) -> tuple[datetime, int] | None:
    """(timestamp, end of the stamp) if `line` begins with a valid history stamp."""
    got = parse_stamp_cid(line)
    return None if got is None else (got[0], got[1])


def parse_stamp_cid(line: str) -> tuple[datetime, int, str | None] | None:
    """(timestamp, end of the stamp, consolidation id or None) if `line` begins with a valid history stamp:
    `[2026-11-25 14:02]`, or with the id of the consolidation that wrote the entry, `[2026-11-25 14:02 #c7f3a9b21]`."""
    m = _STAMP.match(line)
    if m is None:
        return None
    ts = _stamp_time(m)
    return None if ts is None else (ts, m.end(), m.group(7))


def is_stamp_shaped(line: str) -> bool:
    """Whether `line` begins with something of a history stamp's shape, a real date and time or not
    (`[2026-11-31 10:00]`): such a line starts an entry (see the module docstring)."""
    return line[:1] == "[" and _STAMP.match(line) is not None


def _stamp_time(m: re.Match[str]) -> datetime | None:
    y, mo, d, h, mi, s, _ = m.groups()
    try:
        return datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0))
    except ValueError:
        return None


def section_pieces(section: str | None) -> list[str]:
    """A section path "A > B" as its headings, whitespace-normalised, empty pieces dropped."""
    if not section:
        return []
    pieces = [" ".join(p.split()) for p in " ".join(section.split()).split(SECTION_SEP)]
    return [p for p in pieces if p]


def normalize_section(section: str | None) -> str | None:
    """A section path as memclaw writes and compares it (undecodable argv bytes as U+FFFD, as a heading reads)."""
    return SECTION_SEP.join(section_pieces(clean_text(section) if section else section)) or None


# ----- HISTORY.md ----------------------------------------------------------------------------------------
@dataclass
class HistoryBlock:
    unit: MemoryUnit
    start: int
    end: int


@dataclass
class HistoryDoc:
    blocks: list[HistoryBlock]
    # the text ends inside an unclosed <!-- comment
    open_comment: bool
    # stamps that are no date or time (see the module docstring)
    notes: list[ParseNote]


def scan_history(text: str, *, scope: str, source: str, line_offset: int = 0) -> list[HistoryBlock]:
    return scan_history_doc(text, scope=scope, source=source, line_offset=line_offset).blocks


def scan_history_doc(text: str, *, scope: str, source: str, line_offset: int = 0) -> HistoryDoc:
    """HISTORY.md text -> its entries, whether the text ends inside a comment block, and its parse notes.
    `line_offset` resumes a parse at that 0-based line after a clean boundary (see memclaw.markdown.incremental)."""
    lines = text.split("\n")
    if not line_offset and lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    blocks: list[HistoryBlock] = []
    notes: list[ParseNote] = []
    counts: dict[str, int] = {}
    in_comment = False
    # first line of the current entry (None: the undated prelude)
    start: int | None = None
    ts: datetime | None = None
    cid: str | None = None
    body: list[str] = []
    first_line: int | None = None
    last = 0

    def close() -> None:
        t = clean_text("\n".join(_edge_trim(body)) if ts is None else "\n".join(body).strip())
        if not t or first_line is None:
            return
        norm = " ".join(t.split())
        occ = counts.get(norm, 0)
        counts[norm] = occ + 1
        unit = MemoryUnit(
            id=unit_id(scope, source, "history", t, occ),
            kind="history",
            scope=scope,
            source=source,
            line=first_line + 1,
            text=t,
            timestamp=ts,
            extra={"cid": cid} if cid else {},
        )
        blocks.append(HistoryBlock(unit, first_line, last))

    for i, raw in enumerate(lines, line_offset):
        line = raw.rstrip("\r")
        if in_comment:
            if "-->" in line:
                in_comment = False
            continue
        if "<!--" in line:
            st = line.lstrip()
            if st.startswith("<!--"):
                in_comment = "-->" not in st[4:]
                continue
        m = _STAMP.match(line) if line[:1] == "[" else None
        if m is not None:
            close()
            ts, cid = _stamp_time(m), m.group(7)
            start = first_line = last = i
            # no real date or time: an undated entry of its own, the stamp kept in its text
            if ts is None:
                notes.append(ParseNote(i + 1, "stamp", m.group(0)))
                body = [line.rstrip()]
            else:
                body = [line[m.end() :].strip()]
            continue
        if start is None and first_line is None:
            if not line.strip():
                continue
            first_line = i
        body.append(line.rstrip())
        if line.strip():
            last = i
    close()
    return HistoryDoc(blocks, in_comment, notes)


def parse_history(text: str, *, scope: str, source: str) -> list[MemoryUnit]:
    """HISTORY.md text -> history units, in file order."""
    return [b.unit for b in scan_history(text, scope=scope, source=source)]


def format_stamp(ts: datetime, *, seconds: bool = False, cid: str | None = None) -> str:
    """`[2026-11-25 14:02]` (`seconds`: `14:02:05`), with ` #<cid>` before the bracket for a consolidation's entry."""
    body = f"{ts:%Y-%m-%d %H:%M:%S}" if seconds else f"{ts:%Y-%m-%d %H:%M}"
    return f"[{body}" + (f" #{cid}" if cid else "") + "]"


def _edge_trim(lines: list[str]) -> list[str]:
    lines = [x.rstrip() for x in lines]
    a, b = 0, len(lines)
    while a < b and not lines[a]:
        a += 1
    while b > a and not lines[b - 1]:
        b -= 1
    return lines[a:b]


def history_text_lines(text: str, *, undated: bool = False) -> list[str]:
    """Entry text as lines: newlines kept, trailing space and blank edges dropped.

    A line that would read as a stamp, real or only its shape, or as a comment start is escaped with a backslash, so it
    cannot start a new entry. Undated text keeps its first line's indentation (it has no stamp in front of it) and a
    first line that is only a stamp's shape (it starts the undated entry that keeps it, see the module docstring)."""
    text = text.replace("\r\n", "\n")
    lines = _edge_trim(text.split("\n")) if undated else [x.rstrip() for x in text.strip().split("\n")]
    if not lines:
        return [""]
    for j in range(0 if undated else 1, len(lines)):
        x = lines[j]
        stamp = parse_stamp(x) is not None if j == 0 else is_stamp_shaped(x)
        if stamp or x.lstrip().startswith("<!--"):
            lines[j] = "\\" + x
    return lines


def format_history_entry(ts: datetime, text: str, *, seconds: bool = False, cid: str | None = None) -> str:
    """One HISTORY.md entry (no trailing newline): `[YYYY-MM-DD HH:MM] text` (`seconds`: `HH:MM:SS`; `cid`: the
    consolidation's id inside the stamp)."""
    lines = history_text_lines(text)
    first = format_stamp(ts, seconds=seconds, cid=cid) + (" " + lines[0] if lines[0] else "")
    return "\n".join([first, *lines[1:]])
