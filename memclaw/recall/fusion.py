"""Rank fusion (pure): BM25 and vector candidate lists in, one ranked list with per-signal provenance out.

Floors apply per signal before fusion, so a keyword-only hit is judged by its BM25 score alone.
Adaptive fusion puts each signal on its own scale for the query and weighs it by its confidence.
A signal's confidence reads only this query's two score lists, never the data set or the kind of question.
Why and how it was measured: docs/decisions/0020-adaptive-fusion.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from memclaw.recall.dates import DateRange

BM25_TYPICAL = 0.4
"""A typical best-BM25-to-bound ratio (the median on the development sets: 0.35 LoCoMo, 0.40 LongMemEval)."""
VECTOR_TYPICAL = 0.3
"""A typical gap between the best cosine and the median of the first GAP_UNITS (LoCoMo 0.30, LongMemEval 0.29)."""
VECTOR_SPAN_FROM = 0.3
"""The cosine's scale runs up to the best cosine or this, whichever is higher.
It keeps a meaningless vector signal, such as a test embedder's, from outvoting an exact word match."""
GAP_UNITS = 50
"""The vector's gap is measured on its first units only, so it does not depend on how many were asked for."""


def bm25_confidence(scores: Sequence[float], bound: float) -> float:
    """How much of the query BM25's best hit matches, relative to a typical query (1.0 without hits or bound)."""
    if not scores or bound <= 0:
        return 1.0
    # the bound bounds: a ratio above 1 is rounding
    return min(max(scores[0] / bound, 1e-6), 1.0) / BM25_TYPICAL


def vector_confidence(sims: Sequence[float]) -> float:
    """How far the best cosine stands out from the median of the first GAP_UNITS, relative to a typical query
    (1.0 without hits). `sims` best first."""
    if not sims:
        return 1.0
    head = sims[:GAP_UNITS]
    n = len(head)
    median = head[n // 2] if n % 2 else (head[n // 2 - 1] + head[n // 2]) / 2
    return max(head[0] - median, 1e-6) / VECTOR_TYPICAL


def signal_weights(
    bm25: Sequence[float],
    vector: Sequence[float],
    *,
    bm25_weight: float,
    vector_weight: float,
    bm25_power: float,
    vector_power: float,
    bound: float,
) -> tuple[float, float]:
    """This query's (BM25 weight, vector weight): each configured weight times its signal's confidence raised to
    its power. `bm25` and `vector`: the signals' scores, best first, after the floors."""
    wb = bm25_weight * bm25_confidence(bm25, bound) ** bm25_power if bm25_power else bm25_weight
    wv = vector_weight * vector_confidence(vector) ** vector_power if vector_power else vector_weight
    return wb, wv


FusionMethod = Literal["rrf", "weighted", "adaptive"]


@dataclass(frozen=True, kw_only=True)
class FusionParams:
    """How two signals fuse. The values come from RecallConfig (`memclaw.recall.search.rank_settings`)."""

    method: FusionMethod
    rrf_k: int
    bm25_weight: float
    vector_weight: float
    min_similarity: float
    min_bm25: float
    bm25_confidence: float
    vector_confidence: float
    """adaptive: the powers of each signal's confidence for this query in its weight (`signal_weights`)."""
    vector_span_from: float = VECTOR_SPAN_FROM
    """adaptive: the cosine's scale runs from the floor up to the best cosine, or up to this if the best is lower."""


@dataclass
class Fused:
    id: str
    score: float = 0.0
    bm25_rank: int | None = None
    bm25_score: float | None = None
    vector_rank: int | None = None
    vector_similarity: float | None = None
    boosts: dict[str, float] = field(default_factory=dict)


def apply_floors(
    bm25: Sequence[tuple[str, float]], vector: Sequence[tuple[str, float]], p: FusionParams
) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Keep only candidates that are evidence of relevance on their own signal."""
    bm = [(i, s) for i, s in bm25 if s > p.min_bm25]
    vec = [(i, s) for i, s in vector if s >= p.min_similarity]
    return bm, vec


def fuse(
    bm25: Sequence[tuple[str, float]],
    vector: Sequence[tuple[str, float]],
    p: FusionParams,
    *,
    bm25_scale: float | None = None,
    bm25_bound: float = 0.0,
) -> list[Fused]:
    """Fuse two best-first candidate lists, already floored. Ties break by id for determinism.

    With `rrf`, the score is the sum of weight / (rrf_k + rank).
    With `weighted`, it is `bm25_weight * bm25 / bm25_scale + vector_weight * cosine`.
    `bm25_scale` is the query's BM25 upper bound, or the best BM25 score of the list when none is given.
    A strong cosine match is then not out-ranked by a unit that is mediocre on both signals.
    With `adaptive`, each signal is on its own scale for this query, weighted by its confidence (`signal_weights`).
    `bm25_bound` is the query's BM25 upper bound: the score of a unit matching every query term, saturated."""
    hits: dict[str, Fused] = {}
    for rank, (i, s) in enumerate(bm25, 1):
        h = hits.setdefault(i, Fused(i))
        if h.bm25_rank is None:
            h.bm25_rank, h.bm25_score = rank, float(s)
    for rank, (i, s) in enumerate(vector, 1):
        h = hits.setdefault(i, Fused(i))
        if h.vector_rank is None:
            h.vector_rank, h.vector_similarity = rank, float(s)
    if p.method == "rrf":
        for h in hits.values():
            h.score = _rrf(h.bm25_rank, p.rrf_k) * p.bm25_weight + _rrf(h.vector_rank, p.rrf_k) * p.vector_weight
    elif p.method == "adaptive":
        _adaptive(hits, [s for _i, s in bm25], [s for _i, s in vector], p, bm25_bound)
    else:
        scale = bm25_scale or max((h.bm25_score or 0.0 for h in hits.values()), default=0.0)
        for h in hits.values():
            b = (h.bm25_score or 0.0) / scale if scale > 0 else 0.0
            v = max(0.0, h.vector_similarity or 0.0)
            h.score = p.bm25_weight * b + p.vector_weight * v
    return sorted(hits.values(), key=lambda h: (-h.score, h.id))


def _adaptive(
    hits: Mapping[str, Fused], bm25: Sequence[float], vector: Sequence[float], p: FusionParams, bound: float
) -> None:
    wb, wv = signal_weights(
        bm25,
        vector,
        bm25_weight=p.bm25_weight,
        vector_weight=p.vector_weight,
        bm25_power=p.bm25_confidence,
        vector_power=p.vector_confidence,
        bound=bound,
    )
    top = bm25[0] if bm25 else 0.0
    span = (max(vector[0], p.vector_span_from) - p.min_similarity) if vector else 0.0
    for h in hits.values():
        b = h.bm25_score / top if top > 0 and h.bm25_score is not None else 0.0
        if h.vector_similarity is None:
            v = 0.0
        else:
            v = max(0.0, (h.vector_similarity - p.min_similarity) / span) if span > 0 else 1.0
        h.score = wb * b + wv * v


def fusion_scale(p: FusionParams) -> float:
    """The fused score of a unit first on both signals with a perfect cosine.
    A lift that does not depend on how well the words matched, such as a named date's, is measured in it."""
    if p.method == "rrf":
        return (p.bm25_weight + p.vector_weight) / (p.rrf_k + 1)
    return p.bm25_weight + p.vector_weight


def _rrf(rank: int | None, k: int) -> float:
    return 0.0 if rank is None else 1.0 / (k + rank)


def recency_boost(
    hits: list[Fused],
    timestamps: Mapping[str, datetime | None],
    kinds: Mapping[str, str],
    *,
    now: datetime,
    half_life_days: float,
    weight: float,
) -> list[Fused]:
    """Boost history entries (never facts: they are evergreen) by age, with the given half-life.
    The boost is `weight * 0.5 ** (age / half_life)` times the best fused score, so it can reorder
    near-ties but not lift an irrelevant entry over a strong match."""
    if not hits:
        return hits
    scale = hits[0].score
    for h in hits:
        ts = timestamps.get(h.id)
        if kinds.get(h.id) != "history" or ts is None:
            continue
        age_days = max(0.0, (now - ts).total_seconds() / 86400.0)
        b = weight * scale * math.pow(0.5, age_days / half_life_days)
        h.score += b
        h.boosts["recency"] = b
    return sorted(hits, key=lambda h: (-h.score, h.id))


def date_boost(
    hits: list[Fused],
    timestamps: Mapping[str, datetime | None],
    ranges: Sequence[DateRange],
    *,
    weight: float,
    extra: Sequence[str] = (),
    scale: float | None = None,
    after: float = 0.0,
    after_days: int = 7,
) -> list[Fused]:
    """Lift the units stamped inside a date range the query names, such as "in August 2023" or "last week".

    The gain is `weight` times `scale`, the fusion's full scale (`fusion_scale`), or times the best fused score.
    `extra` are in-range units with no signal of their own; they enter with the date gain alone.
    So they rank below every in-range unit that also matches the query, and their provenance shows why.
    `after`: units stamped just after a range gain that share of the gain, within its length and `after_days`.
    They hold what was said about the range once it was over: "last week I was in Lisbon"."""
    if weight <= 0 or not ranges:
        return hits
    by_id = {h.id: h for h in hits}
    for i in extra:
        by_id.setdefault(i, Fused(i))
    top = scale or max((h.score for h in hits), default=0.0) or 1.0
    gain = weight * top
    for h in by_id.values():
        ts = timestamps.get(h.id)
        if ts is None:
            continue
        if any(ts in r for r in ranges):
            h.score += gain
            h.boosts["date"] = gain
        elif after > 0 and any(_just_after(ts, r, after_days) for r in ranges):
            h.score += after * gain
            h.boosts["date"] = after * gain
    # stable: ties keep fused order, extras newest first
    return sorted(by_id.values(), key=lambda h: -h.score)


def _just_after(ts: datetime, r: DateRange, days: int) -> bool:
    t = ts.replace(tzinfo=None)
    return r.end <= t < r.end + min(r.end - r.start, timedelta(days=days))


def link_boost(hits: list[Fused], links: Mapping[str, Sequence[str]], *, weight: float) -> list[Fused]:
    """A matching unit lifts the units it links to (e.g. a fact lifts the history entry of its session):
    each linked unit gains `weight` times the best score among the units linking to it. Linked units not yet
    in the list are added (they carry no signal of their own, which their provenance shows)."""
    if weight <= 0 or not hits:
        return hits
    by_id = {h.id: h for h in hits}
    gains: dict[str, float] = {}
    for h in hits:
        for target in links.get(h.id, ()):
            gains[target] = max(gains.get(target, 0.0), weight * h.score)
    for target, g in gains.items():
        t = by_id.get(target)
        if t is None:
            t = by_id[target] = Fused(target)
        t.score += g
        t.boosts["link"] = g
    return sorted(by_id.values(), key=lambda h: (-h.score, h.id))
