"""The ranking stage of recall (pure): one query's signal lists in, its ranked hits out.

The stages, in order: floors per signal, fusion, the agent's weight on its own archived turns, the date lift
(`stamp_in`), the session-link and consolidation lifts, the optional recency lift, one hit per text.
Last comes the placement (`keep_signal_ranks`): what one signal alone ranks r-th stays within the first
`keep_factor * r` hits. The agent's own turns are exempt when `keep_agent_turns` is off: their weight ranks them.
Recall (memclaw.recall.search) and the fusion lab both rank through `rank`, so the lab replays the product.

The placement is an earliest-deadline schedule. Each unit a signal ranks r-th is due by position `factor * r`,
met by the unit itself or by a unit that covers it, such as its session's history entry. Position by position,
the best-fused unit is placed unless that would leave a deadline unmeetable. Then the best-fused unit that meets
a deadline due first is placed instead. The schedule is always feasible for `factor >= n_signals`: at most
`floor(t / factor)` units per signal are due by t, so at most t in all.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from memclaw.markdown.formats import event_days
from memclaw.recall.archive import cid_boost, weigh_agent_turns
from memclaw.recall.dates import DateRange
from memclaw.recall.fusion import (
    Fused,
    FusionParams,
    apply_floors,
    date_boost,
    fuse,
    fusion_scale,
    link_boost,
    recency_boost,
)

RECENCY_WEIGHT = 0.3
"""With `recall.recency_half_life_days` set, the recency lift of a history entry is at most this share of the best
score."""
DATE_ONLY_MAX_DAYS = 31
"""A query naming a range up to this long ("last week", "on 8 May") also recalls units stamped inside it that
match no word of the query; a wider range ("in 2023") only lifts units that match on their own."""


def stamp_in(u: RankUnit, ranges: Sequence[DateRange]) -> datetime | None:
    """The date the date lift reads for `u`, or None when it is undated and names no day inside a range.

    That is its stamp, unless the stamp is outside every range and its text names a day or span inside one.
    Then it is the first day of that overlap: "Meeting with Ana on 2026-12-03" (memclaw.markdown.formats.event_days).
    A range that is the time of the question (`stamps=False`, "what should I cook tonight") ignores stamps.
    Only a day the text names meets it."""
    ts = u.timestamp
    if ts is not None and any(r.stamps and ts in r for r in ranges):
        return ts
    for start, end in event_days(u.text, u.kind, ts):
        for r in ranges:
            if max(start, r.start) < min(end, r.end):
                return max(start, r.start)
    if ts is not None and any(ts in r for r in ranges):
        # stamped in a range that only says when the question is asked
        return None
    return ts


class RankUnit(Protocol):
    """What ranking reads of a unit (memclaw.markdown.units.MemoryUnit is one)."""

    @property
    def kind(self) -> str: ...
    @property
    def timestamp(self) -> datetime | None: ...
    @property
    def text(self) -> str: ...


@dataclass(frozen=True, kw_only=True)
class RankSettings:
    """The ranking stage's settings. The values come from RecallConfig (`memclaw.recall.search.rank_settings`)."""

    fusion: FusionParams
    date_weight: float
    """A query naming a date range lifts the units stamped inside it by this share of the best score (0: off)."""
    date_scale: Literal["best", "full"]
    """The date lift is a share of the best fused score (`best`) or of the fusion's full scale.
    With `full`, a named date outweighs a weak match of the words, not a strong one."""
    date_after: float
    """Units stamped just after a named range gain this share of the date lift: within its length, at most a week."""
    link_weight: float
    """A unit lifts the units it links to by this share of its score (0: no links)."""
    recency_half_life_days: float | None
    keep_factor: int
    """Above 0: what a signal ranks r-th stays within the first keep_factor * r, itself or a unit covering it."""
    agent_weight: float
    """The agent's own archived turns (`RankInput.agent_turns`) keep this share of their fused score."""
    keep_agent_turns: bool
    """False, with `agent_weight` below 1: the placement skips the agent's own archived turns.
    They hold their signal rank with no place of their own, and the weight ranks them."""
    archive_min_similarity: float
    """An archived turn found by its vector alone, with no BM25 match, needs at least this cosine."""
    date_only_max_days: int = DATE_ONLY_MAX_DAYS
    """A named range up to this long also brings in units stamped inside it that no signal found."""
    recency_weight: float = RECENCY_WEIGHT


@dataclass(kw_only=True)
class RankInput:
    """One query's evidence. `bm25` and `vector`: (unit id, score) best first, before the floors; `dated_in(ranges,
    n)`: up to n ids of units stamped inside the ranges (or, facts and summaries, naming a day inside them: `stamp_in`),
    newest first."""

    bm25: Sequence[tuple[str, float]]
    vector: Sequence[tuple[str, float]]
    units: Mapping[str, RankUnit]
    links: Mapping[str, Sequence[str]] = field(default_factory=dict)
    ranges: Sequence[DateRange] = ()
    dated_in: Callable[[Sequence[DateRange], int], list[str]] | None = None
    now: datetime | None = None
    bm25_bound: float = 0.0
    """The query's BM25 upper bound (a unit matching every query term with saturated term frequency)."""
    entries_of: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Consolidation id -> its history entries: an archived turn that matches lifts them (memclaw.recall.archive;
    `units` is then the scope's unit table)."""
    agent_turns: Callable[[str], bool] | None = None
    """Whether a unit is an archived turn the agent said itself (memclaw.recall.archive.agent_turns)."""


def rank(inp: RankInput, s: RankSettings, *, k: int, n_cand: int, kind: str | None = None) -> list[Fused]:
    """The top k hits of one query (see the module docstring). `kind` keeps only units of that kind; `n_cand`
    caps the units a date range brings in on its own."""
    units = inp.units
    bm25, vector = apply_floors(inp.bm25, inp.vector, s.fusion)
    vector = archive_floor(vector, bm25, units, s.archive_min_similarity)
    fused = fuse(bm25, vector, s.fusion, bm25_bound=inp.bm25_bound)
    if inp.agent_turns is not None:
        fused = weigh_agent_turns(fused, inp.agent_turns, weight=s.agent_weight)
    if inp.ranges and s.date_weight > 0:
        narrow = [r for r in inp.ranges if r.days <= s.date_only_max_days]
        extra = inp.dated_in(narrow, n_cand) if narrow and inp.dated_in is not None else []
        extra = [i for i in extra if not kind or units[i].kind == kind]
        stamps = {i: stamp_in(units[i], inp.ranges) for i in [*(f.id for f in fused), *extra]}
        scale = fusion_scale(s.fusion) if s.date_scale == "full" else None
        fused = date_boost(
            fused, stamps, inp.ranges, weight=s.date_weight, extra=extra, scale=scale, after=s.date_after
        )
    if s.link_weight > 0 and inp.links:
        fused = link_boost(fused, inp.links, weight=s.link_weight)
    if s.link_weight > 0 and inp.entries_of:
        fused = cid_boost(fused, units, inp.entries_of, weight=s.link_weight)  # type: ignore[arg-type]
    if s.recency_half_life_days:
        now = inp.now or datetime.now()
        fused = recency_boost(
            fused,
            {f.id: units[f.id].timestamp for f in fused},
            {f.id: units[f.id].kind for f in fused},
            now=now,
            half_life_days=s.recency_half_life_days,
            weight=s.recency_weight,
        )
    distinct = _Distinct(units, kind)
    if not s.keep_factor:
        return distinct.first(fused, k)
    return _placed(fused, bm25, vector, inp, s, distinct, k)


def archive_floor(
    vector: Sequence[tuple[str, float]], bm25: Sequence[tuple[str, float]], units: Mapping[str, RankUnit], floor: float
) -> list[tuple[str, float]]:
    """The vector candidates without the archived turns that only their vector found, below `floor`: a short chat
    line sits near almost any query ("Can you check the flight to Lisbon?" at 0.15 to "passport"). A turn that
    shares a word with the query keeps its vector."""
    if floor <= 0:
        return list(vector)
    words = {i for i, _s in bm25}
    return [(i, c) for i, c in vector if c >= floor or i in words or units[i].kind != "archive"]


def _placed(
    fused: Sequence[Fused],
    bm25: Sequence[tuple[str, float]],
    vector: Sequence[tuple[str, float]],
    inp: RankInput,
    s: RankSettings,
    distinct: _Distinct,
    k: int,
) -> list[Fused]:
    """The first k distinct hits, placed so that what a signal alone ranks r-th is within the first keep_factor * r.
    Each signal's list counts as recall would show it alone: one unit per text, of the kind asked for.
    A signal's unit and its fused hit of the same text are one memory."""
    lists = [distinct.ids((i for i, _s in sig), k // s.keep_factor) for sig in (bm25, vector)]
    order = distinct.first(fused, k)
    rep = {distinct.key(f.id): f.id for f in order}
    pos = {f.id: j for j, f in enumerate(fused)}
    due = {i for lst in lists for i in lst}
    covers = {c for i in due for c in inp.links.get(i, ()) if c in pos and distinct.wanted(c)}
    # buried signal units and what covers them, fused order
    for i in sorted(due | covers, key=pos.__getitem__):
        rep.setdefault(distinct.key(i), i)
    by_id = {f.id: f for f in fused}
    ranked = list(dict.fromkeys([*(f.id for f in order), *sorted(rep.values(), key=pos.__getitem__)]))
    unplaced = _unplaced(inp, s)
    signals = [[None if unplaced(i) else rep[distinct.key(i)] for i in lst] for lst in lists]
    kept = keep_signal_ranks(ranked, signals, factor=s.keep_factor, limit=k, covered_by=inp.links)
    return [by_id[i] for i in kept]


def _unplaced(inp: RankInput, s: RankSettings) -> Callable[[str], bool]:
    """The units the placement does not apply to: stamped outside the dates the query names (`_outside`), and the
    agent's own turns when they are weighed down and `keep_agent_turns` is off (the weight ranks them)."""
    outside = _outside(inp, inp.units) if s.date_weight > 0 else (lambda _i: False)
    agent = inp.agent_turns
    if agent is None or s.agent_weight >= 1 or s.keep_agent_turns:
        return outside
    return lambda i: outside(i) or agent(i)


def _outside(inp: RankInput, units: Mapping[str, RankUnit]) -> Callable[[str], bool]:
    """When the query names dates: is the unit stamped outside them? A named date outranks what one signal found
    outside it (such a unit holds its signal rank with no place of its own; the guarantee holds inside)."""
    if not inp.ranges:
        return lambda _i: False
    return lambda i: not ((ts := stamp_in(units[i], inp.ranges)) is not None and any(ts in r for r in inp.ranges))


class _Distinct:
    """One hit per text (the first in rank order), of the kind asked for; texts compared case- and space-blind."""

    def __init__(self, units: Mapping[str, RankUnit], kind: str | None) -> None:
        self.units = units
        self.kind = kind
        self._keys: dict[str, str] = {}

    def key(self, uid: str) -> str:
        k = self._keys.get(uid)
        if k is None:
            k = self._keys[uid] = " ".join(self.units[uid].text.lower().split())
        return k

    def wanted(self, uid: str) -> bool:
        return self.kind is None or self.units[uid].kind == self.kind

    def ids(self, ids, n: int) -> list[str]:
        """The first n ids of distinct texts."""
        out: list[str] = []
        seen: set[str] = set()
        for i in ids:
            if len(out) >= n:
                break
            if self.wanted(i) and (key := self.key(i)) not in seen:
                seen.add(key)
                out.append(i)
        return out

    def first(self, fused: Sequence[Fused], n: int) -> list[Fused]:
        """The first n hits of distinct texts."""
        out: list[Fused] = []
        seen: set[str] = set()
        for f in fused:
            if len(out) >= n:
                break
            if self.wanted(f.id) and (key := self.key(f.id)) not in seen:
                seen.add(key)
                out.append(f)
        return out


def deadlines(signals: Sequence[Sequence[str | None]], *, factor: int, limit: int) -> dict[str, int]:
    """unit id -> the last position (1-based) by which it must be placed: `factor * r` for its best rank r over the
    signals, only where that is within `limit`. A None in a signal list is a rank with no deadline."""
    due: dict[str, int] = {}
    for ranked in signals:
        for r, uid in enumerate(ranked[: limit // factor], 1):
            d = factor * r
            if uid is not None and d < due.get(uid, limit + 1):
                due[uid] = d
    return due


def keep_signal_ranks(
    order: Sequence[str],
    signals: Sequence[Sequence[str | None]],
    *,
    factor: int = 2,
    limit: int | None = None,
    covered_by: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """The first `limit` ids of `order`, the fused ranking, placed to keep each signal's ranks.

    Every unit a signal list ranks r-th is met within the first `factor * r` positions: itself or a `covered_by` unit.
    Needs `factor >= len(signals)`. Ids a signal ranks that `order` lacks are placed as needed.
    A None in a signal list holds its rank without a deadline."""
    if factor < len(signals):
        raise ValueError(f"factor {factor} cannot keep {len(signals)} signals' ranks (it needs >= {len(signals)})")
    n = len(order) if limit is None else limit
    due = deadlines(signals, factor=factor, limit=n)
    rest = list(dict.fromkeys([*order, *due]))
    if not due:
        return rest[:n]
    # unit -> the pending deadlines its placement meets
    meets: dict[str, list[str]] = {u: [u] for u in due}
    for u in due:
        for c in (covered_by or {}).get(u, ()):
            if c != u:
                meets.setdefault(c, []).append(u)
    if _already_kept(rest[:n], due, meets):
        # the usual case: fusion buried nothing
        return rest[:n]
    out: list[str] = []
    pending = dict(due)
    # the pending deadlines, kept sorted
    ds = sorted(due.values())
    while rest and len(out) < n:
        pos = len(out) + 1
        tight = _first_tight(ds, pos) if ds else None
        pick = 0
        if tight is not None:
            pick = next(i for i, u in enumerate(rest) if _meets_by(meets, pending, u, tight))
        u = rest.pop(pick)
        out.append(u)
        for j in meets.get(u, ()):
            d = pending.pop(j, None)
            if d is not None:
                del ds[bisect.bisect_left(ds, d)]
    return out


def _already_kept(head: Sequence[str], due: Mapping[str, int], meets: Mapping[str, Sequence[str]]) -> bool:
    """Every deadline is met by the first units as they are."""
    met: set[str] = set()
    for pos, u in enumerate(head, 1):
        for j in meets.get(u, ()):
            if j not in met:
                if due[j] < pos:
                    return False
                met.add(j)
    return len(met) == len(due)


def _meets_by(meets: Mapping[str, Sequence[str]], pending: Mapping[str, int], u: str, t: int) -> bool:
    """Placing `u` meets a pending deadline due by `t`."""
    return any(pending.get(j, t + 1) <= t for j in meets.get(u, ()))


def _first_tight(ds: Sequence[int], pos: int) -> int | None:
    """The first deadline with no slack left (as many deadlines due by it as positions from `pos` up to it)."""
    for j, t in enumerate(ds, 1):
        if t - pos + 1 == j and (j == len(ds) or ds[j] != t):
            return t
    return None
