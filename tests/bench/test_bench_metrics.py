"""Benchmark metrics against hand-computed values (pure)."""

from __future__ import annotations

import math

import pytest

from memclaw.bench import metrics as M

COVER = {
    "a": frozenset({"D1:1"}),
    "b": frozenset({"D1:2", "D1:3"}),
    "c": frozenset(),
    "d": frozenset({"D1:1", "D1:4"}),
    "e": frozenset({"D2:9"}),
}
EVIDENCE = ("D1:1", "D1:4")
RANKED = ["c", "a", "b", "d"]


def test_evidence_recall_counts_the_union_of_the_top_k():
    assert M.evidence_recall(RANKED, COVER, EVIDENCE, 1) == 0.0
    assert M.evidence_recall(RANKED, COVER, EVIDENCE, 2) == 0.5  # "a" covers D1:1
    assert M.evidence_recall(RANKED, COVER, EVIDENCE, 3) == 0.5  # "b" covers nothing asked for
    assert M.evidence_recall(RANKED, COVER, EVIDENCE, 4) == 1.0  # "d" adds D1:4
    assert M.evidence_recall(RANKED, COVER, EVIDENCE, 20) == 1.0  # k beyond the list
    assert M.evidence_recall([], COVER, EVIDENCE, 5) == 0.0
    assert M.evidence_recall(["zzz"], COVER, EVIDENCE, 5) == 0.0  # unknown unit covers nothing
    with pytest.raises(ValueError):
        M.evidence_recall(RANKED, COVER, [], 5)


def test_hit_and_reciprocal_rank():
    assert M.hit_at_k(RANKED, COVER, EVIDENCE, 1) == 0.0
    assert M.hit_at_k(RANKED, COVER, EVIDENCE, 2) == 1.0
    assert M.reciprocal_rank(RANKED, COVER, EVIDENCE) == 0.5
    assert M.reciprocal_rank(["d"], COVER, EVIDENCE) == 1.0
    assert M.reciprocal_rank(["c", "b", "e"], COVER, EVIDENCE) == 0.0


def test_ndcg_binary_with_ideal_over_the_whole_corpus():
    rel = M.relevant_units(COVER, EVIDENCE)
    assert rel == {"a", "d"}
    # relevant at ranks 2 and 4: (1/log2 3 + 1/log2 5) / (1 + 1/log2 3)
    want = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert M.ndcg_at_k(RANKED, rel, 10) == pytest.approx(want)
    assert M.ndcg_at_k(RANKED, rel, 10) == pytest.approx(0.650921, abs=1e-6)
    assert M.ndcg_at_k(["a", "d"], rel, 10) == pytest.approx(1.0)
    assert M.ndcg_at_k(RANKED, rel, 1) == 0.0
    assert M.ndcg_at_k(RANKED, set(), 10) == 0.0


def test_percentile_interpolates_like_numpy():
    assert M.percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert M.percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)
    assert M.percentile([7.0], 95) == 7.0
    assert M.percentile([], 50) == 0.0


def test_summarize_overall_and_per_category():
    s1 = M.score_question(RANKED, COVER, EVIDENCE, category="1", latency_ms=10.0)
    s2 = M.score_question(["e"], COVER, ("D2:9",), category="2", latency_ms=30.0)
    assert s1.recall == {1: 0.0, 3: 0.5, 5: 1.0, 10: 1.0, 20: 1.0}
    assert s1.recall_all == {1: 0.0, 3: 0.0, 5: 1.0, 10: 1.0, 20: 1.0}
    out = M.summarize([s1, s2])
    assert out["n"] == 2
    assert out["recall@1"] == 0.5  # (0 + 1) / 2
    assert out["recall@3"] == 0.75  # (0.5 + 1) / 2
    assert out["hit@1"] == 0.5
    assert out["mrr"] == 0.75  # (1/2 + 1) / 2
    assert out["p50_ms"] == 20.0
    assert out["p95_ms"] == 29.0
    assert set(out["by_category"]) == {"1", "2"}
    assert out["by_category"]["1"]["recall@3"] == 0.5
    assert out["by_category"]["2"]["ndcg@10"] == 1.0


def test_longmemeval_metrics():
    cover = {"u1": frozenset({"s1"}), "u2": frozenset({"s2"}), "u3": frozenset({"s3"})}
    s = M.score_lme(["u2", "u1", "u3"], cover, {"s1", "s3"}, question_type="multi-session", latency_ms=5.0)
    assert s.recall_any == {1: 0.0, 5: 1.0, 10: 1.0}
    assert s.recall_all == {1: 0.0, 5: 1.0, 10: 1.0}
    assert s.ndcg_any[1] == 0.0
    assert s.ndcg_any[5] == pytest.approx((1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3)))
    s2 = M.score_lme(["u1", "u2"], cover, {"s1", "s3"}, question_type="temporal-reasoning", latency_ms=7.0)
    assert s2.recall_any[1] == 1.0 and s2.recall_all[10] == 0.0
    out = M.summarize_lme([s, s2])
    assert out["recall_all@5"] == 0.5
    assert out["recall_any@1"] == 0.5
    assert set(out["by_question_type"]) == {"multi-session", "temporal-reasoning"}


def test_sessions_by_their_best_turn():
    """The archive's count view at session level: turns of one session count once, at the rank of the first."""
    cover = {"t1": frozenset({"s1"}), "t2": frozenset({"s1"}), "t3": frozenset({"s2"}), "t4": frozenset({"s3"}),
             "t5": frozenset({"s1"}), "t6": frozenset({"s4"}), "x": frozenset()}  # fmt: skip
    ranked = ["t1", "t2", "x", "t5", "t3", "t4", "t6"]
    assert M.items_in_order(ranked, cover) == ["s1", "s2", "s3", "s4"]
    s = M.score_lme(ranked, cover, {"s1", "s4"}, question_type="multi-session", latency_ms=1.0)
    # five turns reach only s1 and s2: the turn view misses s4 at 5, the session view at 1 and 3 sessions...
    assert s.recall_all[5] == 0.0 and s.recall_any[1] == 1.0
    assert s.sessions_any == {1: 1.0, 5: 1.0, 10: 1.0}
    assert s.sessions_all == {1: 0.0, 5: 1.0, 10: 1.0}  # ...and finds both within its first 5 sessions
    out = M.summarize_lme([s])
    assert out["sessions_all@5"] == 1.0 and out["recall_all@5"] == 0.0
    # a unit that is a whole session (the `history` corpus): the two views agree
    hist = {"h1": frozenset({"s1"}), "h2": frozenset({"s2"}), "h3": frozenset({"s3"})}
    h = M.score_lme(["h2", "h3", "h1"], hist, {"s1"}, question_type="x", latency_ms=1.0)
    assert h.sessions_any == h.recall_any and h.sessions_all == h.recall_all
