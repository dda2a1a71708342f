"""Parse only what was appended to a memory file since the last sync, exactly as a full parse would.

A sync records a FileMark per file: the size, sha256 and line count of the bytes it parsed, and the parser's state
at their end. The fast path holds when the file still starts with exactly those bytes and the appended text begins
at a clean boundary. Then the file's units are the earlier parse's, followed by the appended text's parsed from that
state. A hand edit anywhere before the end changes the digest and rules the fast path out.

A clean boundary, per kind of file:

* MEMORY.md: the first non-blank appended line is an ATX heading or a list item at column 0, without a comment
  opener. A bare `-` does not count: it could underline the paragraph above. Such a line closes the open fact where
  the end of the file closed it, so only the heading stack carries over.
* HISTORY.md: the first non-blank appended line starts with a history stamp. It closes the last entry where the end
  of the file did.
* An archive day file (memclaw.markdown.archive): the first non-blank appended line heads a chunk. The count of
  earlier chunks per id carries over, in the mark's `stack`, for the occurrence numbers in turn ids.

Occurrence numbers continue from the earlier parse. The earlier units of one text hold occurrences 0..c-1, so the
next occurrence is the first c whose id is not among them.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from memclaw.markdown._syntax import atx_heading, bullet, is_thematic_break, setext_level
from memclaw.markdown.archive import is_chunk_header, scan_archive
from memclaw.markdown.formats import parse_stamp, scan_history_doc
from memclaw.markdown.memory_md import ParseNote, scan_memory
from memclaw.markdown.unit_size import cap_units
from memclaw.markdown.units import Kind, MemoryUnit, unit_id

ENCODING = "utf-8"
ERRORS = "surrogateescape"


@dataclass(frozen=True)
class FileMark:
    """What a parse of one memory file saw: enough to parse only what is appended to it later."""

    # bytes parsed
    size: int
    # sha256 of those bytes
    digest: bytes
    # len(text.split("\n"))
    n_lines: int
    # the text ends with a newline, outside any comment or code fence
    resumable: bool
    stack: tuple[tuple[int, str], ...] = ()
    """MEMORY.md: the heading stack (level, text) at the end; an archive day file: (count, chunk id) of each chunk
    id seen (memclaw.markdown.archive.ArchiveScan.seen)."""

    @property
    def section(self) -> str | None:
        """The section a fact appended at the end of the file falls under."""
        from memclaw.markdown.formats import SECTION_SEP

        return SECTION_SEP.join(t for _, t in self.stack) or None

    def to_json(self) -> list[Any]:
        """Plain JSON values (the index state stores marks as JSON)."""
        return [self.size, self.digest.hex(), self.n_lines, self.resumable, [[lv, tx] for lv, tx in self.stack]]

    @classmethod
    def from_json(cls, v: Any) -> FileMark:
        """Raises ValueError for anything but a list written by `to_json`."""
        if not isinstance(v, list) or len(v) != 5:
            raise ValueError("bad file mark")
        size, digest, n_lines, resumable, stack = v
        if not (type(size) is int and isinstance(digest, str) and type(n_lines) is int):
            raise ValueError("bad file mark")
        if not isinstance(resumable, bool) or not isinstance(stack, list):
            raise ValueError("bad file mark")
        pairs = []
        for item in stack:
            if not (isinstance(item, list) and len(item) == 2 and type(item[0]) is int and isinstance(item[1], str)):
                raise ValueError("bad file mark")
            pairs.append((item[0], item[1]))
        return cls(size, bytes.fromhex(digest), n_lines, resumable, tuple(pairs))


def decode(data: bytes) -> str:
    return data.decode(ENCODING, ERRORS)


def parse_file(
    data: bytes, *, kind: Kind, scope: str, source: str, notes: list[ParseNote] | None = None
) -> tuple[list[MemoryUnit], FileMark]:
    """A full parse of one memory file's bytes, and its mark. MEMORY.md's parse notes (what is not a fact, dates
    that are none: memclaw.markdown.memory_md) and HISTORY.md's (stamps that are no date or time:
    memclaw.markdown.formats) are added to `notes` when it is given. A unit over the size limit is cut
    to it
    (memclaw.markdown.unit_size)."""
    units, mark = _parse(data, hashlib.sha256(data), kind=kind, scope=scope, source=source, first_line=0, stack=(),
                         notes=notes)  # fmt: skip
    return cap_units(units), mark


def parse_appended(
    data: bytes,
    mark: FileMark,
    *,
    kind: Kind,
    scope: str,
    source: str,
    known: Container[str],
    notes: list[ParseNote] | None = None,
) -> tuple[list[MemoryUnit], FileMark] | None:
    """The units appended since `mark` (with the ids a full parse gives them) and the new mark; None when
    `data` is not the marked bytes plus an append at a clean boundary (then parse the whole file).
    `known` holds the ids of the units parsed up to the mark; the appended text's parse notes go to `notes`. Ids are
    those of the whole texts: a unit over the size limit is cut only after its id is known
    (memclaw.markdown.unit_size)."""
    if not mark.resumable or len(data) < mark.size:
        return None
    view = memoryview(data)
    h = hashlib.sha256(view[: mark.size])
    if h.digest() != mark.digest:
        return None
    tail = decode(data[mark.size :])
    if not clean_boundary(tail, kind):
        return None
    h.update(view[mark.size :])
    units, new_mark = _parse(data, h, kind=kind, scope=scope, source=source, first_line=mark.n_lines - 1,
                             stack=mark.stack, text=tail, notes=notes)  # fmt: skip
    # occurrences continue from the mark
    if kind == "archive":
        return cap_units(units), new_mark
    return cap_units(_continue_occurrences(units, known)), new_mark


def clean_boundary(tail: str, kind: Kind) -> bool:
    """Whether appended text starts where the parser's state at the end of the earlier text cannot leak in
    (see the module docstring). Empty or blank-only text qualifies."""
    for raw in tail.split("\n"):
        line = raw.rstrip("\r")
        s = line.strip()
        if not s:
            continue
        if kind == "history":
            return line[:1] == "[" and parse_stamp(line) is not None
        if kind == "archive":
            return is_chunk_header(line)
        if "<!--" in line:
            return False
        if s[0] == "#":
            return atx_heading(s) is not None
        if line[0].isspace() or s[0] in "`~" or is_thematic_break(s) or setext_level(s, 0) is not None:
            # a bare `-` is an item, or the underline of a paragraph the earlier text ended in
            return False
        return bullet(s) is not None
    return True


def _parse(
    data: bytes,
    h: Any,
    *,
    kind: Kind,
    scope: str,
    source: str,
    first_line: int,
    stack: tuple[tuple[int, str], ...],
    text: str | None = None,
    notes: list[ParseNote] | None = None,
) -> tuple[list[MemoryUnit], FileMark]:
    if text is None:
        text = decode(data)
    ends_nl = data.endswith(b"\n")
    if kind == "fact":
        doc = scan_memory(text, scope=scope, source=source, line_offset=first_line, stack=stack)
        units = [b.unit for b in doc.facts]
        if notes is not None:
            notes.extend(doc.notes)
        mark = FileMark(len(data), h.digest(), doc.n_lines, ends_nl and not (doc.open_comment or doc.open_fence),
                        tuple(doc.stack))  # fmt: skip
    elif kind == "archive":
        scan = scan_archive(text, scope=scope, source=source, line_offset=first_line,
                            seen={cid: n for n, cid in stack})  # fmt: skip
        units = scan.units
        seen = tuple((n, cid) for cid, n in scan.seen.items())
        mark = FileMark(len(data), h.digest(), first_line + text.count("\n") + 1, ends_nl, seen)
    else:
        hdoc = scan_history_doc(text, scope=scope, source=source, line_offset=first_line)
        units = [b.unit for b in hdoc.blocks]
        if notes is not None:
            notes.extend(hdoc.notes)
        mark = FileMark(len(data), h.digest(), first_line + text.count("\n") + 1, ends_nl and not hdoc.open_comment)
    return units, mark


def _continue_occurrences(units: list[MemoryUnit], known: Container[str]) -> list[MemoryUnit]:
    """Renumber the occurrences of the appended units after those of the earlier units of the same text."""
    base: dict[str, int] = {}
    out: list[MemoryUnit] = []
    local: dict[str, int] = {}
    for u in units:
        norm = " ".join(u.text.split())
        if norm not in base:
            c = 0
            while unit_id(u.scope, u.source, u.kind, norm, c) in known:
                c += 1
            base[norm] = c
        j = local.get(norm, 0)
        local[norm] = j + 1
        if base[norm]:
            u = dataclasses.replace(u, id=unit_id(u.scope, u.source, u.kind, u.text, base[norm] + j))
        out.append(u)
    return out
