"""MEMORY.md (facts), parsed into memory units (pure: no I/O).

What the file holds:

- Headings, ATX (`#` .. `######`) or setext (`===` or `---` under a paragraph). A fact's `section` is its heading
  path, "Work > Projects".
- Facts: each list item (`-`, `*`, `+`, `1.`, `1)`) is one fact. Its continuation lines belong to it, and so does a
  fenced code block indented under it or following it directly. A nested item is a fact of its own, with its
  parent's text in `extra["parent"]`.
- A fact ending in a date, `... (2023-05-08)` or `... [2023-05-08]`, gets that date as its timestamp. So does one
  starting with `[2023-05-08]`. The text is kept as written.
- Not facts: a plain paragraph, a fenced code block that no item holds, and a date that does not exist. They stay
  in the file as they are, named in a parse note (`MemoryDoc.notes`, said by the sync: `describe_notes`). A fact
  with an impossible date stays, undated.
- Ignored: HTML comments (`<!-- ... -->`) and thematic breaks (`***`, `___`, or `---` not under a paragraph).

Parsing never raises, whatever the text: control characters, surrogate-escaped bytes, 5 MB files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memclaw.markdown._syntax import (
    atx_heading,
    bullet,
    dedent,
    fence_closes,
    fence_open,
    is_thematic_break,
    setext_level,
    strip_comments,
)
from memclaw.markdown.formats import (
    SECTION_SEP,
    ParseNote,
    clean_text,
    fact_cid,
    fact_date,
)
from memclaw.markdown.units import MemoryUnit, unit_id

NOTE_LINES = 6
"""How many line numbers one warning lists before it says how many more."""


@dataclass
class FactBlock:
    """Where one fact sits in the file: 0-based line range [start, end] and how it is written."""

    unit: MemoryUnit
    start: int
    end: int
    # "bullet" (a paragraph or a code block is not a fact)
    style: str
    indent: int
    # the first line up to the text (indent, marker, spacing)
    prefix: str
    # an HTML comment was open when its first line began
    comment_before: bool = False


@dataclass
class HeadingLine:
    # 0-based line of the heading's last line (an ATX heading's only line; a setext underline)
    index: int
    level: int
    text: str
    # the section path in force after this heading
    path: str | None
    # 0-based first line (a setext heading's text); -1: the same as `index`
    start: int = -1

    def __post_init__(self) -> None:
        if self.start < 0:
            self.start = self.index


@dataclass
class MemoryDoc:
    facts: list[FactBlock]
    headings: list[HeadingLine]
    n_lines: int
    # the file ends inside an unclosed <!-- comment
    open_comment: bool
    # the file ends inside an unclosed code fence
    open_fence: bool
    # the heading stack (level, text) at the end
    stack: list[tuple[int, str]] = field(default_factory=list)
    notes: list[ParseNote] = field(default_factory=list)


@dataclass
class _Open:
    # "bullet" | "paragraph" | "code"
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
    """Parse MEMORY.md text into fact blocks (units with their line ranges), headings and notes.

    With `line_offset` and `stack`, a parse resumes after a clean boundary (memclaw.markdown.incremental). The text
    then starts at that 0-based line, under that heading stack, with nothing open. Occurrence numbers of identical
    texts then count from 0 within `text` only."""
    lines = text.split("\n")
    if not line_offset and lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    facts: list[FactBlock] = []
    headings: list[HeadingLine] = []
    notes: list[ParseNote] = []
    counts: dict[str, int] = {}
    stack = list(stack)
    section: str | None = SECTION_SEP.join(t for _, t in stack) or None
    # open list items (indent, first-line text) for parent lookup
    items: list[tuple[int, str]] = []
    cur: _Open | None = None
    in_comment = False

    def close() -> None:
        nonlocal cur
        if cur is None:
            return
        o, cur = cur, None
        # a paragraph or a code block no item holds: not a fact
        if o.style != "bullet":
            notes.append(ParseNote(o.start + 1, o.style, "unclosed" if o.fence is not None else ""))
            return
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
        when, bad = fact_date(t)
        cid = fact_cid(t)
        if cid is not None:
            extra["cid"] = cid
        if bad is not None:
            notes.append(ParseNote(o.start + 1, "date", bad))
        unit = MemoryUnit(
            id=unit_id(scope, source, "fact", t, occ),
            kind="fact",
            scope=scope,
            source=source,
            line=o.start + 1,
            text=t,
            timestamp=when,
            section=o.section and clean_text(o.section),
            extra=extra,
        )
        facts.append(FactBlock(unit, o.start, o.end, o.style, o.indent, o.prefix, comment_before=o.comment_before))

    def heading(level: int, htext: str, first: int, last: int) -> None:
        nonlocal section
        while stack and stack[-1][0] >= level:
            stack.pop()
        if htext:
            stack.append((level, htext))
        section = SECTION_SEP.join(t for _, t in stack) or None
        headings.append(HeadingLine(last, level, htext, section, first))
        items.clear()

    for i, raw in enumerate(lines, line_offset):
        line = raw.rstrip("\r")
        if cur is not None and cur.fence is not None:
            s = line.strip()
            cur.end = i
            if fence_closes(s, cur.fence):
                cur.lines.append(s)
                cur.fence = None
                cur.lazy = False
                if cur.style == "code":
                    close()
            else:
                cur.lines.append(dedent(line, cur.fence_ws).rstrip())
            continue
        was_in_comment = in_comment
        if in_comment or "<!--" in line:
            line, in_comment = strip_comments(line, in_comment)
            if not line.strip():
                # a comment-only line is transparent
                continue
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
        # leading whitespace, in characters
        wsn = len(line) - len(body)
        indent = wsn if not wsn or "\t" not in line[:wsn] else len(line[:wsn].expandtabs(4))
        c = s[0]
        if c in "=-" and cur is not None and cur.style == "paragraph":
            level = setext_level(s, indent)
            # the paragraph above is a heading
            if level is not None:
                o, cur = cur, None
                heading(level, " ".join(" ".join(o.lines).split()), o.start, i)
                continue
        if c == "#":
            h = atx_heading(s)
            if h is not None:
                close()
                heading(h[0], h[1], i, i)
                continue
        if c in "`~":
            f = fence_open(s)
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
                    cur = _Open("code", i, indent, line[:wsn], section, [s], fence_first=True)
                cur.fence = f
                cur.fence_ws = wsn
                cur.end = i
                continue
        if c in "-*_" and is_thematic_break(s):
            close()
            items.clear()
            continue
        k = bullet(s)
        if k is not None:
            close()
            while items and items[-1][0] >= indent:
                items.pop()
            parent = items[-1][1] if items else None
            after = s[k:]
            content = after.strip()
            gap = len(after) - len(after.lstrip())
            prefix = line[: wsn + k + gap] if content else line[: wsn + k] + " "
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
    open_fence = cur is not None and cur.fence is not None
    close()
    return MemoryDoc(facts, headings, line_offset + len(lines), in_comment, open_fence, stack, notes)


def parse_memory(text: str, *, scope: str, source: str) -> list[MemoryUnit]:
    """MEMORY.md text -> fact units, in file order."""
    return [b.unit for b in scan_memory(text, scope=scope, source=source).facts]


def describe_notes(source: str, notes: Sequence[ParseNote]) -> list[str]:
    """The parse notes of one file (MEMORY.md's, or HISTORY.md's: memclaw.markdown.formats) as warnings, one line
    per kind, each naming the file, the lines and the fix."""
    out: list[str] = []
    for kind, what, fix in (
        ("paragraph", "a paragraph, not a fact (only list items are facts)", 'start it with "- " to have it recalled'),
        ("code", "a code block outside a list item, not a fact", "indent it under the item it belongs to"),
    ):
        found = [n.line for n in notes if n.kind == kind]
        if found:
            out.append(f"{source} {_lines(found)} {what}: {fix}")
    for n in notes:
        if n.kind == "code" and n.detail == "unclosed":
            out.append(f"{source} line {n.line}: the code block is never closed and hides the rest of the file: "
                       "close it with a line of ```")  # fmt: skip
        if n.kind == "date":
            out.append(f"{source} line {n.line}: {n.detail} is not a date, so the fact is undated: write a real "
                       "date (YYYY-MM-DD)")  # fmt: skip
        if n.kind == "stamp":
            # `[2026-11-31 10:00]` or `[2026-02-30]`
            what = "date and time" if ":" in n.detail else "date"
            out.append(f"{source} line {n.line}: {n.detail} is not a real {what}, so the entry is undated (kept "
                       "on its own): write a real one, [YYYY-MM-DD HH:MM]")  # fmt: skip
    return out


def _lines(found: list[int]) -> str:
    if len(found) == 1:
        return f"line {found[0]} is"
    shown = ", ".join(map(str, found[:NOTE_LINES]))
    more = f" and {len(found) - NOTE_LINES} more" if len(found) > NOTE_LINES else ""
    return f"lines {shown}{more} are each"
