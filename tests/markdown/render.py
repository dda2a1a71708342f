"""MEMORY.md and HISTORY.md rendered from units: the inverse of their parsers, which only tests use (round trips)."""

from __future__ import annotations

from collections.abc import Iterable

from memclaw.markdown._syntax import bullet_first_line, heading_line
from memclaw.markdown.formats import (
    MAX_HEADING_LEVEL,
    SECTION_SEP,
    format_history_entry,
    history_text_lines,
    is_stamp_shaped,
    section_pieces,
)
from memclaw.markdown.units import MemoryUnit


def keep_bom(text: str) -> str:
    """Parsing drops one leading byte-order mark: double a leading U+FEFF that is part of the text."""
    return "\ufeff" + text if text.startswith("\ufeff") else text


def _fact_lines(u: MemoryUnit) -> list[str]:
    """Markdown lines for one fact: an item, its further lines indented under it."""
    body = u.text.split("\n")
    rest = ["  " + x if x else "" for x in body[1:]]
    if u.extra.get("fence_first"):
        return ["-", "  " + body[0], *rest]
    return [bullet_first_line(body[0]), *rest]


def render_memory(units: Iterable[MemoryUnit]) -> str:
    """Facts -> MEMORY.md text (headings from sections, one item per fact). History units are skipped."""
    out: list[str] = []
    cur: list[str] = []
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
        out.extend(_fact_lines(u))
    return keep_bom("\n".join(out) + "\n" if out else "")


def render_history(units: Iterable[MemoryUnit]) -> str:
    """History units -> HISTORY.md text: undated text first, then one entry per unit, blank-line separated (an
    undated entry that starts with a stamp that is no date or time stays in its place among them)."""
    blocks: list[str] = []
    undated: list[str] = []
    for u in units:
        if u.kind != "history" or not u.text.strip():
            continue
        if u.timestamp is None:
            lines = "\n".join(history_text_lines(u.text, undated=True))
            (blocks if is_stamp_shaped(lines) else undated).append(lines)
        else:
            blocks.append(format_history_entry(u.timestamp, u.text, seconds=bool(u.timestamp.second),
                                               cid=u.extra.get("cid")))  # fmt: skip
    if undated:
        blocks.insert(0, "\n\n".join(undated))
    return keep_bom("\n\n".join(blocks) + "\n" if blocks else "")
