"""An archive day file on disk (`memory/archive/YYYY-MM-DD.md`): appending a chunk, forgetting chunks or turns,
and a chunk as one row of `memory list`.

An append follows HISTORY.md's discipline (memclaw.markdown.files.append_block): a true append under the file's
lock, fsynced, never through a symlink. It is idempotent by consolidation id.

Forgetting rewrites the file once, locked, verified and atomic, and keeps every other byte. A chunk spans from its
header to the next header. A turn spans from its bullet to the next bullet or header, less the blank lines that end
its chunk. Parsed again, the new text must hold exactly the old turns less those removed; else nothing is written
(MemoryFileError).
See docs/decisions/0033-the-archive-modules-and-consolidation-steps.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from memclaw.errors import MemoryFileError
from memclaw.markdown.archive import ArchiveChunk, append_chunk, day_of_source, parse_day, scan_archive
from memclaw.markdown.files import append_block, atomic_write, encode_text, locked, read_text
from memclaw.markdown.units import MemoryUnit

FIRST_WORDS = 12


def append_archive_chunk(path: Path, chunk: ArchiveChunk) -> bool:
    """Append `chunk` to the day file at `path`, created with the chunk's `# YYYY-MM-DD` title when missing. A chunk
    whose consolidation id the file holds already is not written again: False, nothing changed."""

    def make(current: str) -> str | None:
        new = append_chunk(current, chunk)
        if new == current:
            return None
        return new[len(current) :].lstrip("\n") if new.startswith(current) else new

    return append_block(Path(path), make)


@dataclass
class Removed:
    """What a rewrite of one day file removed: whole chunks (as `chunk_row`s) and single turns."""

    chunks: list[MemoryUnit] = field(default_factory=list)
    turns: list[MemoryUnit] = field(default_factory=list)


def chunk_row(chunk: ArchiveChunk, *, scope: str, source: str) -> MemoryUnit:
    """A chunk as `memory list` shows it: id = its consolidation id, the time of its first turn, its speakers
    (`extra["speakers"]`, one per line, in order of appearance) and turn count (`extra["turns"]`), the text its
    first words."""
    day = day_of_source(source) or chunk.when.date()
    speakers = "\n".join(dict.fromkeys(t.speaker for t in chunk.turns))
    words = " ".join(" ".join(t.text for t in chunk.turns).split()[:FIRST_WORDS])
    return MemoryUnit(
        id=chunk.cid,
        kind="archive",
        scope=scope,
        source=source,
        line=chunk.line,
        text=words,
        timestamp=datetime.combine(day, chunk.when.time()),
        extra={"speakers": speakers, "turns": str(len(chunk.turns))},
    )


def chunk_rows(text: str, *, scope: str, source: str) -> list[MemoryUnit]:
    """Every chunk of a day file's text as a `chunk_row`, in file order."""
    return [chunk_row(c, scope=scope, source=source) for c in parse_day(text, day_of_source(source)).chunks]


def remove_from_day(
    path: Path, *, scope: str, source: str, cids: Collection[str], turn_ids: Collection[str]
) -> Removed:
    """Remove every chunk whose id is in `cids` and every turn whose unit id is in `turn_ids` from the day file at
    `path` (see the module docstring). Ids the file does not hold are ignored (the caller checked them)."""
    path = Path(path)
    with locked(path):
        text = read_text(path) or ""
        lines = text.split("\n")
        # each line with its own line end
        pieces = [ln + "\n" for ln in lines[:-1]] + [lines[-1]]
        doc = parse_day(text, day_of_source(source))
        units = scan_archive(text, scope=scope, source=source).units
        heads = sorted(c.line for c in doc.chunks)
        out = Removed()
        # 0-based line numbers
        drop: set[int] = set()
        for chunk in doc.chunks:
            # 1-based, exclusive
            end = next((h for h in heads if h > chunk.line), len(lines) + 1)
            if chunk.cid in cids:
                drop.update(range(chunk.line - 1, end - 1))
                out.chunks.append(chunk_row(chunk, scope=scope, source=source))
                continue
            starts = [t.line for t in chunk.turns]
            for i, t in enumerate(chunk.turns):
                unit = _unit_at(units, chunk.line, i)
                if unit is None or unit.id not in turn_ids:
                    continue
                stop = starts[i + 1] if i + 1 < len(starts) else end
                # the blank lines that end the chunk stay
                if i + 1 == len(starts):
                    while stop - 1 > t.line and not lines[stop - 2].strip():
                        stop -= 1
                drop.update(range(t.line - 1, stop - 1))
                out.turns.append(unit)
        if not drop:
            return out
        new_text = "".join(x for n, x in enumerate(pieces) if n not in drop)
        _verify(path, text, new_text, out, scope=scope, source=source)
        atomic_write(path, encode_text(new_text))
    return out


def _unit_at(units: list[MemoryUnit], chunk_line: int, turn: int) -> MemoryUnit | None:
    return next((u for u in units if u.extra["chunk_line"] == str(chunk_line) and u.extra["turn"] == str(turn)), None)


def _verify(path: Path, old: str, new: str, removed: Removed, *, scope: str, source: str) -> None:
    def turns(text: str, skip: set[str]) -> Counter:
        return Counter((u.extra["cid"], u.text) for u in scan_archive(text, scope=scope, source=source).units
                       if u.extra["cid"] not in skip)  # fmt: skip

    gone = {r.id for r in removed.chunks}
    want = turns(old, gone)
    want.subtract(Counter((u.extra["cid"], u.text) for u in removed.turns))
    if turns(new, set()) != +want:
        raise MemoryFileError(
            f"could not edit {path} safely (its text is unusual around what was forgotten); nothing was changed: "
            "remove it by hand"
        )
