"""Retrieval metrics (pure): evidence recall@k, hit@k, MRR, nDCG@k, LongMemEval's recall_any/all@k, percentiles.

A system's answer to a question is a ranked list of unit ids. `cover` maps a unit id to the evidence items it
covers (LoCoMo: dialogue turn ids such as "D1:3"; LongMemEval: session ids). A unit is *relevant* when it covers
at least one of the question's evidence items (binary relevance for MRR and nDCG).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

RECALL_KS: tuple[int, ...] = (1, 3, 5, 10, 20)
HIT_KS: tuple[int, ...] = (1, 3, 5, 10)
NDCG_K = 10
LME_KS: tuple[int, ...] = (1, 5, 10)
BUDGETS: tuple[int, ...] = (128, 256, 512, 1024)
"""Memory-section budgets (tokens) of the budgeted view: the units a system ranks are put into a memory section of
B tokens by memclaw.context.memory_section (the code that fills the prompt), and only the units it keeps count."""
TOKEN_KS: tuple[int, ...] = (5, 10)
"""The count view's cost: what the top k units would cost in the memory section (tokens@k)."""

Cover = Mapping[str, frozenset[str] | set[str]]


def covered(ranked: Sequence[str], cover: Cover, k: int) -> set[str]:
    """Union of the evidence items covered by the top k units."""
    out: set[str] = set()
    for uid in ranked[:k]:
        out |= cover.get(uid, frozenset())
    return out


def evidence_recall(ranked: Sequence[str], cover: Cover, evidence: Iterable[str], k: int) -> float:
    """Share of the question's evidence items covered by the union of the top k units (0..1)."""
    ev = set(evidence)
    if not ev:
        raise ValueError("a question without evidence cannot be scored; filter it out before scoring")
    return len(covered(ranked, cover, k) & ev) / len(ev)


def items_in_order(ranked: Sequence[str], cover: Cover) -> list[str]:
    """The evidence items the ranking covers, each once, in the order of the first unit covering it (LongMemEval's
    archive: sessions ranked by their best turn)."""
    out: dict[str, None] = {}
    for uid in ranked:
        out.update(dict.fromkeys(sorted(cover.get(uid, frozenset()))))
    return list(out)


def hit_at_k(ranked: Sequence[str], cover: Cover, evidence: Iterable[str], k: int) -> float:
    """1.0 when at least one of the top k units covers an evidence item."""
    ev = set(evidence)
    return 1.0 if any(cover.get(u, frozenset()) & ev for u in ranked[:k]) else 0.0


def reciprocal_rank(ranked: Sequence[str], cover: Cover, evidence: Iterable[str]) -> float:
    """1 / rank of the first relevant unit in the returned list (0 when none is relevant)."""
    ev = set(evidence)
    for i, u in enumerate(ranked, 1):
        if cover.get(u, frozenset()) & ev:
            return 1.0 / i
    return 0.0


def ndcg_at_k(ranked: Sequence[str], relevant: set[str] | frozenset[str], k: int) -> float:
    """Binary nDCG@k: gain 1 for a relevant unit at rank i, discounted by log2(i + 1); the ideal ranking puts
    min(len(relevant), k) relevant units first. 0 when nothing is relevant in the whole corpus."""
    if not relevant:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 1) for i, u in enumerate(ranked[:k], 1) if u in relevant)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(relevant), k) + 1))
    return dcg / ideal


def relevant_units(cover: Cover, evidence: Iterable[str]) -> set[str]:
    """Every unit of the corpus that covers at least one evidence item (for the nDCG ideal)."""
    ev = set(evidence)
    return {u for u, c in cover.items() if c & ev}


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return 0.0
    xs = sorted(values)
    pos = (len(xs) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class QuestionScore:
    """One system's scores on one question."""

    category: str
    recall: dict[int, float]
    hit: dict[int, float]
    rr: float
    ndcg: float
    latency_ms: float
    recall_all: dict[int, float] = field(default_factory=dict)
    # B -> evidence recall of the units a B-token section keeps
    budget: dict[int, float] = field(default_factory=dict)
    # "@5" / "@128t" -> memory-section tokens they cost
    tokens: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Budgeted:
    """One ranked list seen through the memory section: the units kept at each budget, and what things cost."""

    # B -> unit ids the section keeps
    kept: dict[int, list[str]]
    # "@5", "@10" (top k, whatever fits) and "@128t", ... (what the kept units use)
    tokens: dict[str, float]


def score_question(
    ranked: Sequence[str],
    cover: Cover,
    evidence: Iterable[str],
    *,
    category: str,
    latency_ms: float,
    relevant: set[str] | None = None,
    budgeted: Budgeted | None = None,
    credit: Cover | None = None,
) -> QuestionScore:
    """Every LoCoMo metric of one ranked list. `relevant` defaults to relevant_units(cover, evidence). `credit`:
    what a unit the memory section serves earns in the budgeted view (default `cover`; an archived turn: itself)."""
    ev = frozenset(evidence)
    rel = relevant if relevant is not None else relevant_units(cover, ev)
    recall = {k: evidence_recall(ranked, cover, ev, k) for k in RECALL_KS}
    earn = cover if credit is None else credit
    budget = {b: evidence_recall(ids, earn, ev, len(ids)) for b, ids in budgeted.kept.items()} if budgeted else {}
    return QuestionScore(
        category=category,
        recall=recall,
        hit={k: hit_at_k(ranked, cover, ev, k) for k in HIT_KS},
        rr=reciprocal_rank(ranked, cover, ev),
        ndcg=ndcg_at_k(ranked, set(rel), NDCG_K),
        latency_ms=latency_ms,
        recall_all={k: 1.0 if recall[k] >= 1.0 else 0.0 for k in RECALL_KS},
        budget=budget,
        tokens=dict(budgeted.tokens) if budgeted else {},
    )


def _mean(xs: Sequence[float]) -> float:
    return round(sum(xs) / len(xs), 4) if xs else 0.0


def _token_means(scores: Sequence[QuestionScore] | Sequence[LMEScore]) -> dict[str, float]:
    """Mean memory-section tokens per question: `tokens@5` (the top 5), `tokens@256t` (what a 256-token section
    actually uses)."""
    keys = sorted({k for s in scores for k in s.tokens}, key=lambda k: (k.endswith("t"), int(k.strip("@t"))))
    return {f"tokens{k}": round(sum(s.tokens.get(k, 0.0) for s in scores) / len(scores), 1) for k in keys}


def aggregate(scores: Sequence[QuestionScore]) -> dict[str, float]:
    """Means over questions (recall@k, recall_all@k, hit@k, mrr, ndcg@10) and latency p50/p95 in ms."""
    out: dict[str, float] = {"n": len(scores)}
    for k in RECALL_KS:
        out[f"recall@{k}"] = _mean([s.recall[k] for s in scores])
    for k in HIT_KS:
        out[f"hit@{k}"] = _mean([s.hit[k] for s in scores])
    out["mrr"] = _mean([s.rr for s in scores])
    out[f"ndcg@{NDCG_K}"] = _mean([s.ndcg for s in scores])
    for k in RECALL_KS:
        out[f"recall_all@{k}"] = _mean([s.recall_all.get(k, 0.0) for s in scores])
    for b in BUDGETS:
        if all(b in s.budget for s in scores):
            out[f"recall@{b}t"] = _mean([s.budget[b] for s in scores])
    out.update(_token_means(scores))
    lat = [s.latency_ms for s in scores]
    out["p50_ms"] = round(percentile(lat, 50), 2)
    out["p95_ms"] = round(percentile(lat, 95), 2)
    return out


def summarize(scores: Sequence[QuestionScore]) -> dict:
    """Overall metrics plus `by_category` ("1".."4", only categories present), as in the issue's JSON shape."""
    out: dict = aggregate(scores)
    cats = sorted({s.category for s in scores}, key=lambda c: (len(c), c))
    out["by_category"] = {c: aggregate([s for s in scores if s.category == c]) for c in cats}
    return out


# ----- LongMemEval (session-level relevance, official metric names) ------------------------------------------


@dataclass
class LMEScore:
    question_type: str
    recall_any: dict[int, float]
    recall_all: dict[int, float]
    ndcg_any: dict[int, float]
    latency_ms: float
    budget_any: dict[int, float] = field(default_factory=dict)
    budget_all: dict[int, float] = field(default_factory=dict)
    tokens: dict[str, float] = field(default_factory=dict)
    sessions_any: dict[int, float] = field(default_factory=dict)
    sessions_all: dict[int, float] = field(default_factory=dict)


def score_lme(
    ranked: Sequence[str],
    cover: Cover,
    answer_sessions: Iterable[str],
    *,
    question_type: str,
    latency_ms: float,
    budgeted: Budgeted | None = None,
    credit: Cover | None = None,
) -> LMEScore:
    """recall_any@k: some answer session is covered by the top k; recall_all@k: every answer session is;
    ndcg_any@k: binary nDCG@k where a unit is relevant when it covers an answer session. `credit`: what a served
    unit earns in the budgeted view (default `cover`; an archived turn: its session when it is a `has_answer`
    turn). sessions_any/all@k: the same over the first k distinct sessions the ranking covers, each ranked by its
    best unit (the official session-level protocol when a unit is a turn; equal to recall_any/all@k when a unit is
    a session)."""
    ans = frozenset(answer_sessions)
    if not ans:
        raise ValueError("a question without answer sessions cannot be scored; filter it out before scoring")
    rel = relevant_units(cover, ans)
    ra, rl, nd = {}, {}, {}
    for k in LME_KS:
        got = covered(ranked, cover, k) & ans
        ra[k] = 1.0 if got else 0.0
        rl[k] = 1.0 if got == ans else 0.0
        nd[k] = ndcg_at_k(ranked, rel, k)
    order = items_in_order(ranked, cover)
    s_any = {k: 1.0 if set(order[:k]) & ans else 0.0 for k in LME_KS}
    s_all = {k: 1.0 if ans <= set(order[:k]) else 0.0 for k in LME_KS}
    b_any, b_all = {}, {}
    for b, ids in budgeted.kept.items() if budgeted else ():
        got = covered(ids, cover if credit is None else credit, len(ids)) & ans
        b_any[b], b_all[b] = (1.0 if got else 0.0), (1.0 if got == ans else 0.0)
    tokens = dict(budgeted.tokens) if budgeted else {}
    return LMEScore(question_type, ra, rl, nd, latency_ms, b_any, b_all, tokens, s_any, s_all)


def aggregate_lme(scores: Sequence[LMEScore]) -> dict[str, float]:
    out: dict[str, float] = {"n": len(scores)}
    for k in LME_KS:
        out[f"recall_any@{k}"] = _mean([s.recall_any[k] for s in scores])
        out[f"recall_all@{k}"] = _mean([s.recall_all[k] for s in scores])
        out[f"ndcg_any@{k}"] = _mean([s.ndcg_any[k] for s in scores])
    for k in LME_KS:
        if all(k in s.sessions_any for s in scores):
            out[f"sessions_any@{k}"] = _mean([s.sessions_any[k] for s in scores])
            out[f"sessions_all@{k}"] = _mean([s.sessions_all[k] for s in scores])
    for b in BUDGETS:
        if all(b in s.budget_any for s in scores):
            out[f"recall_any@{b}t"] = _mean([s.budget_any[b] for s in scores])
            out[f"recall_all@{b}t"] = _mean([s.budget_all[b] for s in scores])
    out.update(_token_means(scores))
    lat = [s.latency_ms for s in scores]
    out["p50_ms"] = round(percentile(lat, 50), 2)
    out["p95_ms"] = round(percentile(lat, 95), 2)
    return out


def summarize_lme(scores: Sequence[LMEScore]) -> dict:
    out: dict = aggregate_lme(scores)
    types = sorted({s.question_type for s in scores})
    out["by_question_type"] = {t: aggregate_lme([s for s in scores if s.question_type == t]) for t in types}
    return out


def question_values(score: QuestionScore | LMEScore) -> dict[str, float]:
    """One question's recall metrics by the keys of the run's summary (recall@k, recall_all@k, recall@Bt; for
    LongMemEval recall_any/all@k, sessions_any/all@k, recall_any/all@Bt): what memclaw.bench.paired compares."""
    agg = aggregate_lme([score]) if isinstance(score, LMEScore) else aggregate([score])
    return {k: v for k, v in agg.items() if k.startswith(("recall", "sessions"))}
