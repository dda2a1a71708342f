"""The archive's Markdown format (pure: no I/O): one file per day, one chunk per consolidation, one bullet per turn.

    # 2026-11-25

    ## 14:02 #c7f3a9b21
    - 14:02 **Maya**: Did Lena say which restaurant?
    - 14:03 **memclaw**: She said Taberna da Ribeira, on Rua dos Douradores.
      A second line of the same turn is indented by two spaces.

A chunk header is `## HH:MM #c<id>`: the chunk's first time and its consolidation id, the id that the HISTORY
entry (`[2026-11-25 14:02 #c7f3a9b21]`) and the facts (`... (2026-11-25 #c7f3a9b21)`) of the same consolidation
carry. A turn is `- HH:MM **speaker**: text`; its further lines are indented by two spaces.

Reading is tolerant of hand edits: a missing time or missing bold (`- Maya: text`), other list markers (`*`, `+`),
unindented continuation lines, blank lines, an edited or missing `# day` title, and text before the first chunk
(kept as the day's preamble, never a turn) all parse. A header that no longer parses makes its lines part of the
chunk above (nothing is lost, the id is). Parsing never raises. Rendering a parsed file gives back the same text
when it was written by `render_day` (round trip, checked by a hypothesis property).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, time

CID = re.compile(r"c[0-9a-f]{8,16}")
CID_LEN = 9  # "c" + 8 hex digits
_CHUNK_HEADER = re.compile(r"##[ \t]+([0-9]{1,2}):([0-9]{2})(?::[0-9]{2})?[ \t]+#(c[0-9a-f]{8,16})[ \t]*\Z")
_DAY_TITLE = re.compile(r"#[ \t]+([0-9]{4}-[0-9]{2}-[0-9]{2})[ \t]*\Z")
_TURN = re.compile(
    r"[-*+][ \t]+(?:([0-9]{1,2}):([0-9]{2})[ \t]+)?"  # marker, optional time
    r"(?:\*\*(.+?)\*\*|([^\s:*][^:\n]{0,80}?)):(?:[ \t](.*)|\Z)"  # **speaker** or speaker, then text
)
_INDENT = "  "


def is_chunk_header(line: str) -> bool:
    """Whether a line (without its line end) heads a chunk: `## HH:MM #c<id>`."""
    return _CHUNK_HEADER.match(line.rstrip()) is not None


def consolidation_id(fingerprint: str) -> str:
    """The id of the consolidation of a chunk of session messages, from that chunk's fingerprint (hex): the same
    chunk retried after a crash gets the same id, so every write it repeats can be recognised and skipped."""
    hexd = "".join(ch for ch in fingerprint.lower() if ch in "0123456789abcdef")
    if len(hexd) < CID_LEN - 1:
        raise ValueError("a consolidation id needs at least 8 hex digits of fingerprint")
    return "c" + hexd[: CID_LEN - 1]


@dataclass(frozen=True)
class ArchivedTurn:
    speaker: str
    text: str
    at: time | None = None  # HH:MM of the message, when known
    line: int = field(default=0, compare=False)  # 1-based line of the turn in its file (0: not from a file)


@dataclass(frozen=True)
class ArchiveChunk:
    cid: str
    when: datetime
    turns: tuple[ArchivedTurn, ...]
    line: int = 0  # 1-based line of the header in its file (0: not from a file)


@dataclass
class ArchiveDay:
    day: date | None
    chunks: list[ArchiveChunk] = field(default_factory=list)
    preamble: str = ""  # text before the first chunk that is not the day's title


def clean_speaker(name: str) -> str:
    """A speaker as a turn line can carry it: one line, no `*` or `:` (they delimit it), never empty."""
    s = " ".join(name.replace("*", " ").replace(":", " ").split())
    return s[:80] or "?"


def speaker_is(name: str) -> Callable[[str], bool]:
    """Whether a turn's speaker is `name`, both as a turn line carries a speaker (`clean_speaker`), without case
    (answers kept per speaker); a blank name is no one's."""
    want = clean_speaker(name).casefold() if name.strip() else None
    seen: dict[str, bool] = {}

    def said_by(speaker: str) -> bool:
        got = seen.get(speaker)
        if got is None:
            got = seen[speaker] = want is not None and clean_speaker(speaker).casefold() == want
        return got

    return said_by


def render_turn(t: ArchivedTurn) -> str:
    lines = t.text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines = [ln.rstrip() for ln in lines]
    while len(lines) > 1 and not lines[-1]:
        lines.pop()
    stamp = f"{t.at:%H:%M} " if t.at is not None else ""
    head = f"- {stamp}**{clean_speaker(t.speaker)}**:" + (f" {lines[0]}" if lines[0] else "")
    return "\n".join([head, *[(_INDENT + ln) if ln else "" for ln in lines[1:]]])


def render_chunk(c: ArchiveChunk) -> str:
    head = f"## {c.when:%H:%M} #{c.cid}"
    return "\n".join([head, *(render_turn(t) for t in c.turns)])


def render_day(day: ArchiveDay) -> str:
    parts: list[str] = []
    if day.day is not None:
        parts.append(f"# {day.day.isoformat()}")
    if day.preamble.strip():
        parts.append(day.preamble.strip("\n"))
    parts += [render_chunk(c) for c in day.chunks]
    return "\n\n".join(parts) + "\n" if parts else ""


def append_chunk(text: str, chunk: ArchiveChunk) -> str:
    """`text` (a day file, possibly empty) with `chunk` appended; unchanged when a chunk with its id is already
    there (a repeated write after a crash)."""
    if any(c.cid == chunk.cid for c in parse_day(text).chunks):
        return text
    head = "" if text.strip() else f"# {chunk.when.date().isoformat()}\n\n"
    sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
    return (text + sep if text.strip() else head) + render_chunk(chunk) + "\n"


def parse_day(text: str, day: date | None = None) -> ArchiveDay:
    """A day file -> its chunks (see the module docstring). `day` dates the chunks when the title is missing."""
    out = ArchiveDay(day)
    pre: list[str] = []
    cur: dict | None = None
    turns: list[list] = []  # [speaker, lines, at, line]

    def close() -> None:
        if cur is None:
            return
        done = tuple(ArchivedTurn(s, _join(lines), at, n) for s, lines, at, n in turns)
        out.chunks.append(ArchiveChunk(cur["cid"], cur["when"], done, cur["line"]))

    for n, raw in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
        line = raw.rstrip()
        m = _DAY_TITLE.match(line)
        if m and cur is None and out.day is None and not pre:
            out.day = _date(m.group(1))
            continue
        h = _CHUNK_HEADER.match(line)
        if h is not None:
            close()
            hh, mm = int(h.group(1)), int(h.group(2))
            when = datetime.combine(out.day or date(1970, 1, 1), time(min(hh, 23), min(mm, 59)))
            cur, turns = {"cid": h.group(3), "when": when, "line": n}, []
            continue
        if cur is None:
            pre.append(raw)
            continue
        t = _TURN.match(line)
        if t is not None and not raw.startswith((" ", "\t")):
            at = time(min(int(t.group(1)), 23), min(int(t.group(2)), 59)) if t.group(1) else None
            turns.append([(t.group(3) or t.group(4)).strip(), [t.group(5) or ""], at, n])
        elif turns:
            turns[-1][1].append(raw[len(_INDENT) :] if raw.startswith(_INDENT) else raw.lstrip(" \t"))
        elif line:
            turns.append(["?", [line.strip()], None, n])
    close()
    out.preamble = "\n".join(pre).strip("\n")
    return out


def _join(lines: list[str]) -> str:
    lines = [ln.rstrip() for ln in lines]
    while len(lines) > 1 and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def _date(s: str) -> date | None:
    try:
        return date.fromisoformat(s)
    except ValueError:
        return None
