"""Where a fact added to MEMORY.md goes: under its section (the last facts of that section, else right after its
heading), creating the missing headings below the nearest existing parent, or at the very end of the file when
the file ends in that section."""

from __future__ import annotations

from pathlib import Path

from memclaw.errors import MemoryFileError
from memclaw.markdown.formats import MAX_HEADING_LEVEL, SECTION_SEP, section_pieces
from memclaw.markdown.memory_md import MemoryDoc
from memclaw.markdown.syntax import bullet_first_line, heading_line, joins_item_above


def place_adds(
    doc: MemoryDoc, lines: list[str], adds: list[tuple[str, str]], insert: dict[int, list[str]], path: Path
) -> None:
    """Decide where each added fact goes: under its section (creating the headings)."""
    # The end of the file: make sure the last line ends with a newline.
    if lines[-1] != "":
        lines[-1] += "\r" if lines[0].endswith("\r") else ""
        lines.append("")
    eof = len(lines) - 1
    groups: dict[str, list[str]] = {}
    for t, sec in adds:
        groups.setdefault(sec, []).append(t)
    slots = [
        _section_slot(doc, lines, sec, [bullet_first_line(t) for t in texts], eof) for sec, texts in groups.items()
    ]
    # Blocks meant for one place go in an order that keeps each under its heading: bullets for the section there
    # first, then new headings nested in it, then new top-level headings (which end the sections above them).
    for pos, new, _rank in sorted(slots, key=lambda slot: slot[2]):
        if pos == eof and (doc.open_comment or doc.open_fence):
            what = "an unclosed HTML comment (<!--)" if doc.open_comment else "an unclosed code fence (```)"
            raise MemoryFileError(f"{path} ends inside {what}: close it, then add the fact again")
        insert.setdefault(pos, []).extend(new)


def _section_slot(
    doc: MemoryDoc, lines: list[str], section: str, bullets: list[str], eof: int
) -> tuple[int, list[str], int]:
    """(line to insert at, the lines, rank: 0 bullets alone, 1 under new nested headings, 2 a new top heading)."""
    if eof_section(doc) == section and not (doc.open_comment or doc.open_fence):
        return eof, bullets, 0  # the file ends in this section: at the very end (what append_fact's fast path does)
    in_section = [b for b in doc.facts if b.unit.section == section]
    if in_section:
        # After the section's last fact; a fact holding an unclosed code fence runs to the end of the file (its last
        # line included), so the line after it is the end, never past it (place_adds then refuses that spot).
        pos = min(max(b.end for b in in_section) + 1, eof)
        return pos, bullets + ([""] if joins_item_above(lines[pos]) else []), 0
    heads = [h for h in doc.headings if h.path == section]
    if heads:
        pos = heads[-1].index + 1
        return pos, bullets + ([""] if joins_item_above(lines[pos]) else []), 0
    pieces = section_pieces(section)
    for j in range(len(pieces) - 1, 0, -1):
        prefix = SECTION_SEP.join(pieces[:j])
        found = [h for h in doc.headings if h.path == prefix]
        if not found:
            continue
        h = found[-1]
        if h.level >= MAX_HEADING_LEVEL:
            break
        pos = eof
        for later in doc.headings:
            if later.index > h.index and later.level <= h.level:
                pos = later.start
                break
        new = _heading_block(pieces[j:], h.level + 1, bullets)
        blank_before = pos > 0 and lines[pos - 1].strip() != ""
        return pos, ([""] if blank_before else []) + new + ([""] if pos != eof else []), 1
    blank_before = eof > 0 and lines[eof - 1].strip() != ""
    return eof, ([""] if blank_before else []) + _heading_block(pieces, 1, bullets), 2


def eof_section(doc: MemoryDoc) -> str | None:
    """The section a line appended at the end of the file falls under (as FileMark.section)."""
    return SECTION_SEP.join(t for _, t in doc.stack) or None


def _heading_block(pieces: list[str], level: int, bullets: list[str]) -> list[str]:
    room = MAX_HEADING_LEVEL - level + 1
    if len(pieces) > room:
        pieces = pieces[: room - 1] + [SECTION_SEP.join(pieces[room - 1 :])]
    out: list[str] = []
    for k, p in enumerate(pieces):
        out.append(heading_line(level + k, p))
    return [*out, "", *bullets]
