"""The archive in `memory list` and `memory forget`: a scope's chunks as rows, and forgetting archived turns, whole
chunks (by consolidation id) or whole days (`YYYY-MM-DD`: that day's file of the scope).

Every id is checked before anything is written; a day's file is removed under its lock. What was forgotten is
returned as rows `memory forget` reports: a turn as its unit, a chunk as its row
(memclaw.markdown.archive_file.chunk_row), a day as one row whose id is the day.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

from memclaw.markdown.archive import CID
from memclaw.markdown.units import MemoryUnit
from memclaw.workspace import Workspace

_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def is_day_id(s: str) -> bool:
    """`YYYY-MM-DD`, a real date: what `memory forget` reads as a day of the archive."""
    if not _DAY.fullmatch(s):
        return False
    try:
        date.fromisoformat(s)
    except ValueError:
        return False
    return True


def is_chunk_id(s: str) -> bool:
    return CID.fullmatch(s) is not None


def archive_rows(ws: Workspace, scope: str) -> list[MemoryUnit]:
    """Every chunk of the scope's archive as a row (memclaw.markdown.archive_file.chunk_row), oldest day first."""
    from memclaw.markdown.archive_file import chunk_rows
    from memclaw.markdown.files import read_text

    out: list[MemoryUnit] = []
    for path in ws.archive_files(scope):
        out += chunk_rows(read_text(path) or "", scope=scope, source=ws.source_of(path))
    return out


@dataclass
class ArchivePlan:
    """What `forget` will remove from the archive: per day file, chunk ids and turn ids; whole days."""

    chunks: dict[Path, set[str]] = field(default_factory=dict)
    turns: dict[Path, set[str]] = field(default_factory=dict)
    days: dict[str, Path] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.chunks or self.turns or self.days)


def plan_forget(
    ws: Workspace, scope: str, ids: Sequence[str], turns: dict[str, MemoryUnit]
) -> tuple[ArchivePlan, list[str]]:
    """Sort the archive's ids among `ids` (turn ids found in `turns`, chunk ids, days) into a plan; also returns the
    ids that are none of these in the scope's archive."""
    plan = ArchivePlan()
    rows = None
    unknown = []
    for i in ids:
        if i in turns:
            path = ws.root / turns[i].source
            plan.turns.setdefault(path, set()).add(i)
        elif is_day_id(i):
            path = ws.archive_file(scope, date.fromisoformat(i))
            if path.is_file():
                plan.days[i] = path
            else:
                unknown.append(i)
        elif is_chunk_id(i):
            rows = archive_rows(ws, scope) if rows is None else rows
            where = {ws.root / r.source for r in rows if r.id == i}
            for path in where:
                plan.chunks.setdefault(path, set()).add(i)
            if not where:
                unknown.append(i)
        else:
            unknown.append(i)
    return plan, unknown


def forget_archive(ws: Workspace, scope: str, plan: ArchivePlan) -> list[MemoryUnit]:
    """Carry out a plan: the rows of what was removed (days first, then chunks and turns, file by file)."""
    from memclaw.markdown.archive_file import chunk_rows, remove_from_day
    from memclaw.markdown.files import locked, read_text

    out: list[MemoryUnit] = []
    for day, path in sorted(plan.days.items()):
        with locked(path):
            text = read_text(path) or ""
            rows = chunk_rows(text, scope=scope, source=ws.source_of(path))
            path.unlink(missing_ok=True)
        n_turns = sum(int(r.extra["turns"]) for r in rows)
        out.append(
            MemoryUnit(
                id=day,
                kind="archive",
                scope=scope,
                source=ws.source_of(path),
                line=1,
                text=f"the whole day: {len(rows)} conversation(s), {n_turns} turn(s)",
                timestamp=datetime.fromisoformat(day),
                extra={"turns": str(n_turns)},
            )  # fmt: skip
        )
    for path in sorted(set(plan.chunks) | set(plan.turns)):
        if path in plan.days.values():
            continue
        removed = remove_from_day(path, scope=scope, source=ws.source_of(path), cids=plan.chunks.get(path, set()),
                                  turn_ids=plan.turns.get(path, set()))  # fmt: skip
        out += removed.chunks + removed.turns
    return out
