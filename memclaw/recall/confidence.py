"""How much each signal knows about this query (pure): per-query weights and scales for adaptive fusion.

A fixed BM25 weight lets a weak lexical match outvote a strong semantic one (a recommendation asked in other words
than the preference was stated), and raw cosines, packed between ~0.15 and ~0.6, let BM25's spread decide the order
whatever the vector saw. Adaptive fusion reads each signal's own scores for this query instead:

- each signal is put on its own scale: BM25 relative to its best hit (`s / s1`), the cosine relative to its range
  above the relevance floor (`(c - floor) / (c1 - floor)`, with c1 at least `VECTOR_SPAN_FROM`: a best cosine of
  0.2 is a weak match, not a full one), so both run from 0 to 1 and each signal's order counts;
- each signal is weighted by what its scores say about this query: BM25 by how much of the query its best hit
  matches (`s1 / bound`, where the bound is the score of a unit matching every query term with saturated term
  frequency: a best hit that matched one common word of a long query knows little), the vector by how far its best
  stands out from the typical candidate (`c1 - median` over its first `GAP_UNITS` units: a best cosine barely above
  the crowd knows little). Each factor is relative to a typical value (`BM25_TYPICAL`, `VECTOR_TYPICAL`) and raised
  to a small power (`bm25_confidence`, `vector_confidence`), so the configured weights keep their meaning on a
  typical query and a signal's weight moves with its confidence, never to zero.

None of this looks at the data set or the kind of question: only at the two score lists of this one query.
"""

from __future__ import annotations

from collections.abc import Sequence

BM25_TYPICAL = 0.4
"""A typical best-BM25-to-bound ratio (the median on the development sets: 0.35 LoCoMo, 0.40 LongMemEval)."""
VECTOR_TYPICAL = 0.3
"""A typical gap between the best cosine and the median of the first GAP_UNITS (LoCoMo 0.30, LongMemEval 0.29)."""
VECTOR_SPAN_FROM = 0.3
"""The cosine's scale runs up to the best cosine or this, whichever is higher (no development query's best is lower
where it matters: the figures are the same with 0; it keeps a meaningless vector signal, a test embedder or an
unrelated store, from outvoting an exact word match)."""
GAP_UNITS = 50
"""The vector's gap is measured on its first units only, so it does not depend on how many were asked for."""


def bm25_confidence(scores: Sequence[float], bound: float) -> float:
    """How much of the query BM25's best hit matches, relative to a typical query (1.0 without hits or bound)."""
    if not scores or bound <= 0:
        return 1.0
    return min(max(scores[0] / bound, 1e-6), 1.0) / BM25_TYPICAL  # (the bound bounds: a ratio above 1 is rounding)


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
