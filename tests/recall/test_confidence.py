"""Adaptive fusion (pure): each signal on its own scale for the query, weighted by how much it knows about it."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memclaw.recall.fusion import (
    BM25_TYPICAL,
    GAP_UNITS,
    VECTOR_SPAN_FROM,
    VECTOR_TYPICAL,
    bm25_confidence,
    fuse,
    signal_weights,
    vector_confidence,
)
from tests.recall.ranking_params import params

ADAPTIVE = params(method="adaptive", bm25_weight=0.6, vector_weight=1.0, min_similarity=0.15)


def test_bm25_knows_more_when_its_best_hit_matches_more_of_the_query():
    assert bm25_confidence([4.0, 1.0], bound=10.0) == pytest.approx(0.4 / BM25_TYPICAL)
    assert bm25_confidence([9.0], bound=10.0) > bm25_confidence([2.0], bound=10.0)
    assert bm25_confidence([], bound=10.0) == 1.0 and bm25_confidence([3.0], bound=0.0) == 1.0


def test_the_vector_knows_more_when_its_best_stands_out_of_the_crowd():
    crowd = [0.40, 0.39, 0.38, 0.37, 0.36]
    standout = [0.70, 0.39, 0.38, 0.37, 0.36]
    assert vector_confidence(standout) > vector_confidence(crowd)
    assert vector_confidence(standout) == pytest.approx((0.70 - 0.38) / VECTOR_TYPICAL)
    assert vector_confidence([0.5, 0.3]) == pytest.approx((0.5 - 0.4) / VECTOR_TYPICAL)  # even count: mean of two
    assert vector_confidence([]) == 1.0


def test_the_gap_is_measured_on_the_first_units_only_whatever_was_asked_for():
    head = [0.8 - 0.001 * i for i in range(GAP_UNITS)]
    assert vector_confidence(head) == vector_confidence(head + [0.15] * 200)


def test_weights_follow_confidence_and_keep_their_meaning_on_a_typical_query():
    typical = signal_weights(
        [BM25_TYPICAL * 10], [0.6, 0.3, 0.3], bm25_weight=0.6, vector_weight=1.0, bm25_power=0.25,
        vector_power=0.25, bound=10.0,
    )  # fmt: skip
    assert typical == pytest.approx((0.6, 1.0))
    weak_words = signal_weights(
        [1.0], [0.6, 0.3, 0.3], bm25_weight=0.6, vector_weight=1.0, bm25_power=0.25, vector_power=0.25, bound=10.0
    )
    assert weak_words[0] < typical[0] and weak_words[1] == typical[1]
    off = signal_weights([1.0], [0.9, 0.1], bm25_weight=0.6, vector_weight=1.0, bm25_power=0, vector_power=0, bound=9)
    assert off == (0.6, 1.0)  # power 0: the configured weights as they are


def test_a_strong_semantic_match_outranks_a_weak_lexical_one():
    """The issue's preference questions: BM25's best hit matched one word of a long query ("need"), the answer
    session states the preference in other words; with a fixed weight BM25's best always scores its full weight."""
    bm25 = [("lexical", 2.0), ("other", 1.5)]  # of a bound of 20: a tenth of the query matched
    vector = [("semantic", 0.62), ("lexical", 0.30), ("other", 0.29), ("x", 0.28), ("y", 0.27)]
    adaptive = fuse(bm25, vector, ADAPTIVE, bm25_bound=20.0)
    assert adaptive[0].id == "semantic"
    weighted = fuse(bm25, vector, params(method="weighted", bm25_weight=0.7, vector_weight=1.0))
    assert weighted[0].id == "lexical"  # the previous default: 0.7 + 0.30 against 0.62


def test_each_signal_runs_from_zero_to_one_on_its_own_scale():
    out = {h.id: h for h in fuse([("a", 8.0), ("b", 2.0)], [("b", 0.55), ("c", 0.15)], ADAPTIVE, bm25_bound=0.0)}
    wb, wv = signal_weights(
        [8.0, 2.0], [0.55, 0.15], bm25_weight=0.6, vector_weight=1.0, bm25_power=0.25, vector_power=0.25, bound=0.0
    )
    assert out["a"].score == pytest.approx(wb)  # BM25's best, no vector
    assert out["b"].score == pytest.approx(wb * 0.25 + wv)  # a quarter of BM25's best, the vector's best
    assert out["c"].score == pytest.approx(0.0)  # at the vector's floor


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0.01, 50), max_size=12),
    st.lists(st.floats(0.15, 1.0), max_size=12),
    st.floats(0, 100),
)
def test_adaptive_scores_are_finite_ordered_and_follow_each_signal(bm, vec, bound):
    bm25 = [(f"b{i}", s) for i, s in enumerate(sorted(bm, reverse=True))]
    vector = [(f"v{i}", s) for i, s in enumerate(sorted(vec, reverse=True))]
    out = fuse(bm25, vector, ADAPTIVE, bm25_bound=bound)
    scores = [h.score for h in out]
    assert all(s == s and s >= 0 for s in scores) and scores == sorted(scores, reverse=True)
    by = {h.id: h.score for h in out}
    for lst in (bm25, vector):  # units found by one signal only keep that signal's order
        assert [by[i] for i, _ in lst] == sorted((by[i] for i, _ in lst), reverse=True)


def test_a_weak_best_cosine_is_not_scaled_up_to_a_full_match():
    """With a meaningless vector signal (best cosine 0.24, barely above the floor) the exact word match wins."""
    bm25 = [("solaris", 1.2)]  # "where do I work" -> "I work at Solaris Energy": half the query's bound
    vector = [("shelf", 0.24), ("a", 0.20), ("b", 0.19), ("c", 0.18), ("solaris", 0.16)]
    out = fuse(bm25, vector, ADAPTIVE, bm25_bound=2.4)
    assert out[0].id == "solaris"
    scale = (0.24 - 0.15) / (VECTOR_SPAN_FROM - 0.15)
    wb, wv = signal_weights([1.2], [s for _i, s in vector], bm25_weight=0.6, vector_weight=1.0, bm25_power=0.25,
                            vector_power=0.25, bound=2.4)  # fmt: skip
    assert next(h for h in out if h.id == "shelf").score == pytest.approx(wv * scale)
