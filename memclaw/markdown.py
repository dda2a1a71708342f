"""The Markdown memory formats, parsed into memory units and rendered back (pure: no I/O).

MEMORY.md (facts)
    Markdown with ATX headings (`#` .. `######`). Each list item (`-`, `*`, `+`, `1.`, `1)`) is one fact; its
    continuation lines (indented under it, or following it directly) belong to it. A nested item is a fact of
    its own (its parent item's text is kept in `extra["parent"]`). A plain paragraph outside lists is one fact.
    A fenced code block (``` or ~~~) never splits a unit and is never read as items or headings: directly
    under an item it belongs to the item, standalone it is one fact. HTML comments are ignored. A fact's
    `section` is its heading path, "Work > Projects". A fact ending in a date, `... (2023-05-08)` or
    `... [2023-05-08]` (or starting with `[2023-05-08]`), gets that date as its timestamp; the text is kept
    as written. Setext headings and thematic breaks are not headings (a break line is ignored).

HISTORY.md (history entries)
    An entry starts at a line beginning `[YYYY-MM-DD HH:MM]` (also `[YYYY-MM-DD]`, `[YYYY-MM-DD HH:MM:SS]`)
    and runs until the next such line; trailing blank lines are dropped. Text before the first stamp is one
    undated entry. A comment block (a line starting `<!--`, up to the line holding `-->`) is ignored.

Parsing never raises, whatever the text (control characters, surrogate-escaped bytes, 5 MB files).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime

from memclaw.units import MemoryUnit, unit_id

_BULLET = re.compile(r"[-*+]|[0-9]{1,9}[.)]")
_HEADING = re.compile(r"#{1,6}")
_THEMATIC = re.compile(r"([-*_])(?:[ \t]*\1){2,}[ \t]*\Z")
_FENCE = re.compile(r"(`{3,}|~{3,})(.*)\Z", re.S)
_CLOSING_HASHES = re.compile(r"(?:^| )#+\Z")
_TRAILING_DATE = re.compile(r"(?:\(([0-9]{4}-[0-9]{2}-[0-9]{2})\)|\[([0-9]{4}-[0-9]{2}-[0-9]{2})\])\s*\Z")
_LEADING_DATE = re.compile(r"\[([0-9]{4}-[0-9]{2}-[0-9]{2})\]")
_STAMP = re.compile(r"\[([0-9]{4})-([0-9]{2})-([0-9]{2})(?: ([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?)?\]")
_SURROGATES = re.compile("[\ud800-\udfff]+")
SECTION_SEP = " > "
MAX_HEADING_LEVEL = 6


# ----- small helpers -------------------------------------------------------------------------------------
def clean_text(s: str) -> str:
    """Valid UTF-8 text: surrogates (undecodable bytes read with surrogateescape) become U+FFFD."""
    if s.isascii():
        return s
    return _SURROGATES.sub("\ufffd", s)


def _dedent(line: str, n: int) -> str:
    """Remove up to n leading whitespace characters."""
    i = 0
    while i < n and i < len(line) and line[i].isspace():
        i += 1
    return line[i:]


def _heading(s: str) -> tuple[int, str] | None:
    """(level, text) if the stripped line `s` is an ATX heading."""
    m = _HEADING.match(s)
    if m is None:
        return None
    rest = s[m.end() :]
    if rest and rest[0] not in " \t":
        return None
    text = " ".join(rest.split())
    text = _CLOSING_HASHES.sub("", text).strip()
    return m.end(), text


def _fence_open(s: str) -> tuple[str, int] | None:
    """(fence char, length) if the stripped line `s` opens a fenced code block."""
    m = _FENCE.match(s)
    if m is None:
        return None
    run = m.group(1)
    if run[0] == "`" and "`" in m.group(2):
        return None
    return run[0], len(run)


def _fence_closes(s: str, fence: tuple[str, int]) -> bool:
    ch, n = fence
    return len(s) >= n and s == ch * len(s)


def _bullet(s: str) -> int | None:
    """Length of the list marker if the stripped line `s` is a list item."""
    m = _BULLET.match(s)
    if m is None:
        return None
    k = m.end()
    if k < len(s) and s[k] not in " \t":
        return None
    return k


def _strip_comments(line: str, in_comment: bool) -> tuple[str, bool]:
    """Remove HTML comments from one line; returns (rest, whether a comment is still open)."""
    if in_comment:
        end = line.find("-->")
        if end < 0:
            return "", True
        line = line[end + 3 :]
    still_open = False
    while True:
        parts: list[str] = []
        pos = 0
        while True:
            start = line.find("<!--", pos)
            if start < 0:
                parts.append(line[pos:])
                break
            parts.append(line[pos:start])
            end = line.find("-->", start + 4)
            if end < 0:
                still_open = True
                break
            pos = end + 3
        out = "".join(parts)
        if "<!--" not in out:
            return out, still_open
        line = out  # removing a comment joined "<!" and "--" into a new opener: strip again


def split_trailing_date(text: str) -> tuple[str, str | None]:
    """`text` without the date it ends in, `... (2023-05-08)` or `... [2023-05-08]`, and that date as written
    (YYYY-MM-DD); `(text, None)` when it ends in none. The one reading of a fact's trailing date."""
    m = _TRAILING_DATE.search(text)
    if m is None:
        return text, None
    return text[: m.start()].rstrip(), m.group(1) or m.group(2)


def _date_of(text: str) -> datetime | None:
    raw = split_trailing_date(text)[1]
    if raw is None:
        m = _LEADING_DATE.match(text)
        raw = m.group(1) if m else None
    if raw is None:
        return None
    try:
        d = date.fromisoformat(raw)
    except ValueError:
        return None
    return datetime(d.year, d.month, d.day)


def parse_stamp(line: str) -> tuple[datetime, int] | None:
    """(timestamp, end of the stamp) if `line` begins with a valid history stamp."""
    m = _STAMP.match(line)
    if m is None:
        return None
    y, mo, d, h, mi, s = m.groups()
    try:
        ts = datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0))
    except ValueError:
        return None
    return ts, m.end()


def section_pieces(section: str | None) -> list[str]:
    """A section path "A > B" as its headings, whitespace-normalised, empty pieces dropped."""
    if not section:
        return []
    pieces = [" ".join(p.split()) for p in " ".join(section.split()).split(SECTION_SEP)]
    return [p for p in pieces if p]


def normalize_section(section: str | None) -> str | None:
    return SECTION_SEP.join(section_pieces(section)) or None


# ----- MEMORY.md -----------------------------------------------------------------------------------------
@dataclass
class FactBlock:
    """Where one fact sits in the file: 0-based line range [start, end] and how it is written."""

    unit: MemoryUnit
    start: int
    end: int
    style: str  # "bullet" | "paragraph" | "code"
    indent: int
    prefix: str  # bullets: the first line up to the text (indent, marker, spacing); else the indent
    unclosed: bool = False  # an unclosed code fence runs to the end of the file
    comment_before: bool = False  # an HTML comment was open when its first line began


@dataclass
class HeadingLine:
    index: int  # 0-based line
    level: int
    text: str
    path: str | None  # the section path in force after this heading


@dataclass
class MemoryDoc:
    facts: list[FactBlock]
    headings: list[HeadingLine]
    n_lines: int
    open_comment: bool  # the file ends inside an unclosed <!-- comment
    open_fence: bool  # the file ends inside an unclosed code fence
    stack: list[tuple[int, str]] = field(default_factory=list)  # the heading stack (level, text) at the end


@dataclass
class _Open:
    style: str
    start: int
    indent: int
    prefix: str
    section: str | None
    lines: list[str] = field(default_factory=list)
    end: int = 0
    blank: int = 0
    lazy: bool = False
    fence: tuple[str, int] | None = None
    fence_ws: int = 0
    fence_first: bool = False
    parent: str | None = None
    comment_before: bool = False


def scan_memory(
    text: str, *, scope: str, source: str, line_offset: int = 0, stack: Sequence[tuple[int, str]] = ()
) -> MemoryDoc:
    """Parse MEMORY.md text into fact blocks (units with their line ranges) and headings.

    `line_offset` and `stack` resume a parse after a clean boundary (see memclaw.incremental): the text starts
    at that 0-based line, under that heading stack, with no item, comment or fence open. Occurrence numbers of
    identical texts then count from 0 within `text` only."""
    lines = text.split("\n")
    if not line_offset and lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    facts: list[FactBlock] = []
    headings: list[HeadingLine] = []
    counts: dict[str, int] = {}
    stack = list(stack)
    section: str | None = SECTION_SEP.join(t for _, t in stack) or None
    items: list[tuple[int, str]] = []  # open list items (indent, first-line text) for parent lookup
    cur: _Open | None = None
    in_comment = False

    def close() -> None:
        nonlocal cur
        if cur is None:
            return
        o, cur = cur, None
        body = o.lines
        while body and not body[-1].strip():
            body.pop()
        if not body:
            return
        t = clean_text(body[0] if len(body) == 1 else "\n".join(body))
        norm = " ".join(t.split())
        if not norm:
            return
        occ = counts.get(norm, 0)
        counts[norm] = occ + 1
        extra = {"style": o.style}
        if o.fence_first:
            extra["fence_first"] = "1"
        if o.parent:
            extra["parent"] = clean_text(o.parent)
        unit = MemoryUnit(
            id=unit_id(scope, source, "fact", t, occ),
            kind="fact",
            scope=scope,
            source=source,
            line=o.start + 1,
            text=t,
            timestamp=_date_of(t),
            section=o.section and clean_text(o.section),
            extra=extra,
        )
        facts.append(
            FactBlock(unit, o.start, o.end, o.style, o.indent, o.prefix, o.fence is not None, o.comment_before)
        )

    for i, raw in enumerate(lines, line_offset):
        line = raw.rstrip("\r")
        if cur is not None and cur.fence is not None:
            s = line.strip()
            cur.end = i
            if _fence_closes(s, cur.fence):
                cur.lines.append(s)
                cur.fence = None
                cur.lazy = False
                if cur.style == "code":
                    close()
            else:
                cur.lines.append(_dedent(line, cur.fence_ws).rstrip())
            continue
        was_in_comment = in_comment
        if in_comment or "<!--" in line:
            line, in_comment = _strip_comments(line, in_comment)
            if not line.strip():
                continue  # a comment-only line is transparent
        body = line.lstrip()
        s = body.rstrip()
        if not s:
            if cur is not None:
                if cur.style == "paragraph":
                    close()
                else:
                    cur.blank += 1
                    cur.lazy = False
            continue
        wsn = len(line) - len(body)  # leading whitespace, in characters
        indent = wsn if not wsn or "\t" not in line[:wsn] else len(line[:wsn].expandtabs(4))
        c = s[0]
        if c == "#":
            h = _heading(s)
            if h is not None:
                close()
                level, htext = h
                while stack and stack[-1][0] >= level:
                    stack.pop()
                if htext:
                    stack.append((level, htext))
                section = SECTION_SEP.join(t for _, t in stack) or None
                headings.append(HeadingLine(i, level, htext, section))
                items.clear()
                continue
        if c in "`~":
            f = _fence_open(s)
            if f is not None:
                if cur is not None and cur.style == "bullet" and (indent > cur.indent or (cur.lazy and not cur.blank)):
                    if cur.lines:
                        cur.lines.extend([""] * cur.blank)
                    else:
                        cur.fence_first = True
                    cur.blank = 0
                    cur.lines.append(s)
                else:
                    close()
                    while items and items[-1][0] >= indent:
                        items.pop()
                    ws = line[:wsn]
                    cur = _Open("code", i, indent, ws, section, [s], fence_first=True)
                    cur.comment_before = was_in_comment
                cur.fence = f
                cur.fence_ws = wsn
                cur.end = i
                continue
        if c in "-*_" and _THEMATIC.match(s):
            close()
            items.clear()
            continue
        k = _bullet(s)
        if k is not None:
            close()
            while items and items[-1][0] >= indent:
                items.pop()
            parent = items[-1][1] if items else None
            after = s[k:]
            content = after.strip()
            ws = wsn
            gap = len(after) - len(after.lstrip())
            prefix = line[: ws + k + gap] if content else line[: ws + k] + " "
            cur = _Open("bullet", i, indent, prefix, section, [content] if content else [], end=i)
            cur.lazy = bool(content)
            cur.comment_before = was_in_comment
            cur.parent = parent
            items.append((indent, content))
            continue
        # plain text
        if cur is not None and cur.style == "bullet" and (indent > cur.indent or (cur.lazy and not cur.blank)):
            if cur.lines:
                cur.lines.extend([""] * cur.blank)
            cur.blank = 0
            cur.lines.append(s)
            cur.end = i
            cur.lazy = True
            continue
        if cur is not None and cur.style == "paragraph":
            cur.lines.append(s)
            cur.end = i
            continue
        close()
        while items and items[-1][0] >= indent:
            items.pop()
        cur = _Open("paragraph", i, indent, line[:wsn], section, [s], end=i)
        cur.comment_before = was_in_comment
    open_fence = cur is not None and cur.fence is not None
    close()
    return MemoryDoc(facts, headings, line_offset + len(lines), in_comment, open_fence, stack)


def parse_memory(text: str, *, scope: str, source: str) -> list[MemoryUnit]:
    """MEMORY.md text -> fact units, in file order."""
    return [b.unit for b in scan_memory(text, scope=scope, source=source).facts]


def heading_line(level: int, text: str) -> str:
    """An ATX heading that parses back to exactly `text`."""
    line = "#" * level
    if text:
        line += " " + text
        if _CLOSING_HASHES.search(text):
            line += " #"
    return line


def is_thematic_break(line: str) -> bool:
    """A line like `---`, `* * *` or `___` (ignored, never a fact)."""
    return _THEMATIC.match(line.strip()) is not None


def bullet_first_line(text_line: str) -> str:
    """`- text`, or `* text` where `- text` would read as a thematic break."""
    line = "- " + text_line
    return "* " + text_line if _THEMATIC.match(line) else line


def _fact_lines(u: MemoryUnit) -> tuple[list[str], bool]:
    """Markdown lines for one fact and whether it must stand apart (blank lines around it)."""
    body = u.text.split("\n")
    style = u.extra.get("style", "bullet")
    if style in ("code", "paragraph"):
        return body, True
    rest = ["  " + x if x else "" for x in body[1:]]
    if u.extra.get("fence_first"):
        return ["-", "  " + body[0], *rest], False
    return [bullet_first_line(body[0]), *rest], False


def render_memory(units: Iterable[MemoryUnit]) -> str:
    """Facts -> MEMORY.md text (headings from sections, one item per fact). History units are skipped."""
    out: list[str] = []
    cur: list[str] = []
    apart = False
    for u in units:
        if u.kind != "fact" or not u.text.strip():
            continue
        pieces = section_pieces(u.section)
        if len(pieces) > MAX_HEADING_LEVEL:
            pieces = pieces[: MAX_HEADING_LEVEL - 1] + [SECTION_SEP.join(pieces[MAX_HEADING_LEVEL - 1 :])]
        if pieces != cur:
            p = 0
            while p < min(len(pieces), len(cur)) and pieces[p] == cur[p]:
                p += 1
            if out and out[-1]:
                out.append("")
            if p == len(pieces):
                out.append("#" * (p + 1))  # an empty heading closes the deeper sections
            for j in range(p, len(pieces)):
                out.append(heading_line(j + 1, pieces[j]))
            out.append("")
            cur = pieces
        lines, standalone = _fact_lines(u)
        if (standalone or apart) and out and out[-1]:
            out.append("")
        out.extend(lines)
        apart = standalone
    return _keep_bom("\n".join(out) + "\n" if out else "")


def _keep_bom(text: str) -> str:
    """Parsing drops one leading byte-order mark: double a leading U+FEFF that is part of the text."""
    return "\ufeff" + text if text.startswith("\ufeff") else text


# ----- HISTORY.md ----------------------------------------------------------------------------------------
@dataclass
class HistoryBlock:
    unit: MemoryUnit
    start: int
    end: int


def scan_history(text: str, *, scope: str, source: str, line_offset: int = 0) -> list[HistoryBlock]:
    return scan_history_doc(text, scope=scope, source=source, line_offset=line_offset)[0]


def scan_history_doc(text: str, *, scope: str, source: str, line_offset: int = 0) -> tuple[list[HistoryBlock], bool]:
    """HISTORY.md text -> (entries, whether the text ends inside a comment block). `line_offset` resumes a parse
    at that 0-based line after a clean boundary (see memclaw.incremental)."""
    lines = text.split("\n")
    if not line_offset and lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    blocks: list[HistoryBlock] = []
    counts: dict[str, int] = {}
    in_comment = False
    start: int | None = None  # first line of the current entry (None: the undated prelude)
    ts: datetime | None = None
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
        stamp = parse_stamp(line) if line[:1] == "[" else None
        if stamp is not None:
            close()
            ts, end = stamp
            start = first_line = last = i
            body = [line[end:].strip()]
            continue
        if start is None and first_line is None:
            if not line.strip():
                continue
            first_line = i
        body.append(line.rstrip())
        if line.strip():
            last = i
    close()
    return blocks, in_comment


def parse_history(text: str, *, scope: str, source: str) -> list[MemoryUnit]:
    """HISTORY.md text -> history units, in file order."""
    return [b.unit for b in scan_history(text, scope=scope, source=source)]


def format_stamp(ts: datetime, *, seconds: bool = False) -> str:
    return f"[{ts:%Y-%m-%d %H:%M:%S}]" if seconds else f"[{ts:%Y-%m-%d %H:%M}]"


def _edge_trim(lines: list[str]) -> list[str]:
    lines = [x.rstrip() for x in lines]
    a, b = 0, len(lines)
    while a < b and not lines[a]:
        a += 1
    while b > a and not lines[b - 1]:
        b -= 1
    return lines[a:b]


def history_text_lines(text: str, *, undated: bool = False) -> list[str]:
    """Entry text as lines: newlines kept, trailing space and blank edges dropped, and a line that would read
    as a stamp or a comment start escaped with a backslash so it cannot start a new entry. Undated text keeps
    its first line's indentation (it has no stamp in front of it)."""
    text = text.replace("\r\n", "\n")
    lines = _edge_trim(text.split("\n")) if undated else [x.rstrip() for x in text.strip().split("\n")]
    if not lines:
        return [""]
    for j in range(0 if undated else 1, len(lines)):
        x = lines[j]
        if parse_stamp(x) is not None or x.lstrip().startswith("<!--"):
            lines[j] = "\\" + x
    return lines


def format_history_entry(ts: datetime, text: str, *, seconds: bool = False) -> str:
    """One HISTORY.md entry (no trailing newline): `[YYYY-MM-DD HH:MM] text` (`seconds`: `HH:MM:SS`)."""
    lines = history_text_lines(text)
    first = format_stamp(ts, seconds=seconds) + (" " + lines[0] if lines[0] else "")
    return "\n".join([first, *lines[1:]])


def render_history(units: Iterable[MemoryUnit]) -> str:
    """History units -> HISTORY.md text: undated text first, then one entry per unit, blank-line separated."""
    blocks: list[str] = []
    undated: list[str] = []
    for u in units:
        if u.kind != "history" or not u.text.strip():
            continue
        if u.timestamp is None:
            undated.append("\n".join(history_text_lines(u.text, undated=True)))
        else:
            blocks.append(format_history_entry(u.timestamp, u.text, seconds=bool(u.timestamp.second)))
    if undated:
        blocks.insert(0, "\n\n".join(undated))
    return _keep_bom("\n\n".join(blocks) + "\n" if blocks else "")
