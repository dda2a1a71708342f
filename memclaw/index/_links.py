"""Links between the units of one scope: each fact to the history entry of the consolidation that wrote it.

Sync builds them and the scope state keeps them.
A matching fact lifts its summary, and the memory section skips a fact whose summary is in.
A fact and its history entry carry the same consolidation id, `extra["cid"]`, and are linked by that id alone.
So several consolidations on one day never lift each other's summaries.
A fact without an id, dated by hand or written before ids, is linked to every history entry of its date.
Archive turns are never linked here: recall ties them by id at query time (memclaw.recall.archive).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from memclaw.markdown.units import MemoryUnit

if TYPE_CHECKING:
    from memclaw.index.unittable import UnitTable


def session_links(table: UnitTable) -> dict[str, list[str]]:
    """Fact id -> the ids of the history entries it is linked to (see the module docstring)."""
    by_cid: dict[str, list[str]] = defaultdict(list)
    by_day: dict[str, list[str]] = defaultdict(list)
    ids = table.ids
    for row in table.rows_of("history"):
        cid = table.cid_at(row)
        if cid:
            by_cid[cid].append(ids[row])
        day = table.day_of(row)
        if day:
            by_day[day].append(ids[row])
    links: dict[str, list[str]] = {}
    for row in table.rows_of("fact"):
        cid = table.cid_at(row)
        targets = by_cid.get(cid) if cid else by_day.get(table.day_of(row) or "")
        if targets:
            links[ids[row]] = targets
    return links


def changes_links(units: Iterable[MemoryUnit]) -> bool:
    """Whether adding these units can change the links: a history entry, or a fact with a date or an id."""
    return any(u.kind == "history" or (u.kind == "fact" and (u.timestamp or u.extra.get("cid"))) for u in units)


def entries_by_cid(table: UnitTable) -> dict[str, list[str]]:
    """Consolidation id -> the ids of the history entries that carry it (what recall ties archive turns to)."""
    out: dict[str, list[str]] = {}
    ids = table.ids
    for row in table.rows_of("history"):
        cid = table.cid_at(row)
        if cid:
            out.setdefault(cid, []).append(ids[row])
    return out
