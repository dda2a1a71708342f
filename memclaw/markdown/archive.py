"""The archive's day files as text (pure: no I/O): their Markdown format, and their turns as memory units.

    # 2026-11-25

    ## 14:02 #c7f3a9b21
    - 14:02 **Maya**: Did Lena say which restaurant?
    - 14:03 **memclaw**: She said Taberna da Ribeira, on Rua dos Douradores.
      A second line of the same turn is indented by two spaces.

One file holds one day, one chunk per consolidation, one bullet per turn. A chunk header `## HH:MM #c<id>` gives
the chunk's first time and its consolidation id. The HISTORY entry `[2026-11-25 14:02 #c7f3a9b21]` and the facts
`... (2026-11-25 #c7f3a9b21)` of the same consolidation carry the same id.

Reading tolerates hand edits and never raises. A missing time or bold, other list markers, unindented continuation
lines, blank lines and a missing `# day` title all parse. Text before the first chunk is the day's preamble, never a
turn. A header that no longer parses joins its lines to the chunk above: the id is lost, the text is not. Rendering
a file that `render_day` wrote gives back the same text, a round trip a hypothesis property checks.

Each turn is one unit of kind `archive`, the passage recall ranks (docs/decisions/0012-the-excerpt-window.md). Its
text is `speaker: text`, which BM25 and the embedding model read. Its `extra` ties it to its chunk: `cid`, `turn`
(its 0-based position), `turns`, `chunk_line`, `speaker` and `near`. `near` is a digest of the turns before and
after it, which the index embeds a short turn with. A unit's id hashes scope, file, consolidation id and position,
not the text, so a hand edit keeps the id and re-embeds the turn and its neighbours.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import PurePosixPath

from memclaw.markdown.formats import clean_text
from memclaw.markdown.units import NEAR, MemoryUnit

CID = re.compile(r"c[0-9a-f]{8,16}")
# "c" + 8 hex digits
CID_LEN = 9
_CHUNK_HEADER = re.compile(r"##[ \t]+([0-9]{1,2}):([0-9]{2})(?::[0-9]{2})?[ \t]+#(c[0-9a-f]{8,16})[ \t]*\Z")
_DAY_TITLE = re.compile(r"#[ \t]+([0-9]{4}-[0-9]{2}-[0-9]{2})[ \t]*\Z")
_TURN = re.compile(
    # marker, optional time
    r"[-*+][ \t]+(?:([0-9]{1,2}):([0-9]{2})[ \t]+)?"
    # **speaker** or speaker, then text
    r"(?:\*\*(.+?)\*\*|([^\s:*][^:\n]{0,80}?)):(?:[ \t](.*)|\Z)"
)
_INDENT = "  "
SPEAKER_SEP = ": "


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
    # HH:MM of the message, when known
    at: time | None = None
    # 1-based line of the turn in its file (0: not from a file)
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class ArchiveChunk:
    cid: str
    when: datetime
    turns: tuple[ArchivedTurn, ...]
    # 1-based line of the header in its file (0: not from a file)
    line: int = 0


@dataclass
class ArchiveDay:
    day: date | None
    chunks: list[ArchiveChunk] = field(default_factory=list)
    # text before the first chunk that is not the day's title
    preamble: str = ""


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
    # [speaker, lines, at, line]
    turns: list[list] = []

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


# ----- a day file as memory units: one unit per archived turn -----------------------------------------
def day_of_source(source: str) -> date | None:
    """The day an archive file holds, from its name (`memory/archive/2026-11-25.md`)."""
    try:
        return date.fromisoformat(PurePosixPath(source).stem)
    except ValueError:
        return None


def chunk_of(source: str, extra: Mapping[str, str]) -> tuple[str, str, str] | None:
    """Which chunk an archived turn belongs to, from its source and `extra` (see the module docstring): its file,
    consolidation id and the chunk header's line; None for a unit that is not an archived turn."""
    cid, line = extra.get("cid"), extra.get("chunk_line")
    return (source, cid, line) if cid and line and extra.get("turn", "").isdigit() else None


def archive_turn_id(scope: str, source: str, cid: str, occurrence: int, turn: int) -> str:
    """`a` + 11 hex digits: the id of a chunk's turn (`occurrence` counts chunks of the same id in the file)."""
    h = hashlib.sha256(f"{scope}\x00{source}\x00archive\x00{cid}\x00{occurrence}\x00{turn}".encode())
    return "a" + h.hexdigest()[:11]


@dataclass
class ArchiveScan:
    """A parse of an archive day file, or of what was appended to one: its units and its chunk counts.

    `seen` counts the chunks of each id so far. A parse of a later append carries it over for the occurrence
    numbers in ids (memclaw.markdown.incremental)."""

    units: list[MemoryUnit]
    seen: dict[str, int]


def archive_units(text: str, *, scope: str, source: str) -> list[MemoryUnit]:
    """The turns of an archive day file, in file order (see the module docstring)."""
    return scan_archive(text, scope=scope, source=source).units


def scan_archive(
    text: str,
    *,
    scope: str,
    source: str,
    line_offset: int = 0,
    seen: dict[str, int] | None = None,
) -> ArchiveScan:
    """`archive_units` of `text`, which may be what was appended to a file whose earlier text was parsed already:
    then `line_offset` is the earlier text's line count minus one and `seen` its chunk ids' counts (an
    ArchiveScan's). The turns are dated with the day the file's name says (its title, if the name says none)."""
    day = day_of_source(source)
    doc = parse_day(text, day)
    base = doc.day or day or date(1970, 1, 1)
    seen = dict(seen or {})
    out: list[MemoryUnit] = []
    for chunk in doc.chunks:
        occ = seen.get(chunk.cid, 0)
        seen[chunk.cid] = occ + 1
        when = datetime.combine(base, chunk.when.time())
        n = len(chunk.turns)
        chunk_line = chunk.line + line_offset
        said = [(i, t, clean_text(t.text.strip())) for i, t in enumerate(chunk.turns)]
        said = [(i, t, f"{clean_text(t.speaker)}{SPEAKER_SEP}{body}") for i, t, body in said if body]
        for j, (i, t, text) in enumerate(said):
            ts = datetime.combine(base, t.at) if t.at is not None else when
            near = _digest(said[j - 1][2] if j else "", said[j + 1][2] if j + 1 < len(said) else "")
            extra = {"cid": chunk.cid, "turn": str(i), "turns": str(n), "chunk_line": str(chunk_line),
                     "speaker": t.speaker, NEAR: near}  # fmt: skip
            out.append(
                MemoryUnit(
                    id=archive_turn_id(scope, source, chunk.cid, occ, i),
                    kind="archive",
                    scope=scope,
                    source=source,
                    line=(t.line + line_offset) if t.line else chunk_line,
                    text=text,
                    timestamp=ts,
                    extra=extra,
                )
            )
    return ArchiveScan(out, seen)


def _digest(before: str, after: str) -> str:
    return hashlib.sha256(f"{before}\x00{after}".encode()).hexdigest()[:12]
