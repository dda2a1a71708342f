"""An archive day file as memory units (pure): one unit per archived turn, of kind `archive`.

A turn is the passage recall ranks (measured in the issue-22 lab against windows of 2-4 turns: one-turn passages
served as excerpts keep the most answers per token, docs/decisions/0012-the-excerpt-window.md). Each unit's text is
`speaker: text`,
what BM25 and the embedding model read; its timestamp is the turn's time on the file's day (the chunk's time when
the turn has none); `extra` ties it to its chunk: `cid` (the consolidation id), `turn` (its 0-based position in the
chunk), `turns` (the chunk's length), `chunk_line` (the chunk header's line), `speaker`, and `near` (a digest of the
texts of the turns before and after it: the index embeds a short turn with them, so an edit of one re-embeds them).

Ids are stable when a turn's text is edited by hand (they hash scope, file, consolidation id and turn position,
not the text), so an edit re-embeds that turn and the turns beside it (`near`); `content_hash` sees the new text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import PurePosixPath

from memclaw.markdown.archive import parse_day
from memclaw.markdown.formats import clean_text
from memclaw.markdown.units import NEAR, MemoryUnit

SPEAKER_SEP = ": "


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
    """A parse of an archive day file (or of what was appended to one): its units, and what a parse of a later
    append carries over (memclaw.markdown.incremental): how many chunks of each id came so far (the occurrence
    numbers in ids)."""

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
