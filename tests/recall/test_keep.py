"""The guarantee of memclaw.recall.ranking: what one signal alone ranks r-th ends within the first factor * r."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memclaw.recall.ranking import deadlines, keep_signal_ranks

IDS = [f"u{i}" for i in range(40)]


@st.composite
def rankings(draw):
    """An arbitrary fused order, two arbitrary signal lists over (mostly) the same units, arbitrary covers."""
    ids = draw(st.lists(st.sampled_from(IDS), unique=True, max_size=40))
    order = draw(st.permutations(ids))
    extra = draw(st.lists(st.sampled_from(IDS), unique=True, max_size=5))  # a signal may rank what order lacks
    pool = list(dict.fromkeys([*ids, *extra]))
    signals = [draw(st.lists(st.sampled_from(pool), unique=True)) if pool else [] for _ in range(2)]
    covers = draw(st.dictionaries(st.sampled_from(IDS), st.lists(st.sampled_from(IDS), max_size=2), max_size=10))
    return order, signals, covers


def _met(u, placed, covers):
    return u in placed or bool(set(covers.get(u, ())) & set(placed))


@settings(max_examples=400, deadline=None)
@given(rankings(), st.integers(min_value=2, max_value=4), st.one_of(st.none(), st.integers(1, 45)))
def test_every_signal_rank_r_is_met_within_factor_r(case, factor, limit):
    order, signals, covers = case
    out = keep_signal_ranks(order, signals, factor=factor, limit=limit, covered_by=covers)
    n = len(order) if limit is None else limit
    assert len(out) == len(set(out))
    assert set(out) <= set(order) | {u for s in signals for u in s}
    assert len(out) == min(n, len(set(order) | set(deadlines(signals, factor=factor, limit=n))))
    for ranked in signals:
        for r, u in enumerate(ranked, 1):
            if factor * r <= n:
                assert _met(u, out[: factor * r], covers), (u, r)


@settings(max_examples=300, deadline=None)
@given(rankings())
def test_without_covers_each_unit_itself_is_kept(case):
    order, signals, _covers = case
    out = keep_signal_ranks(order, signals)
    for ranked in signals:
        for r, u in enumerate(ranked, 1):
            if 2 * r <= len(order):
                assert u in out[: 2 * r]


@settings(max_examples=300, deadline=None)
@given(rankings())
def test_order_is_untouched_when_it_already_keeps_the_ranks(case):
    order, _signals, _covers = case
    # the fused order itself as both signals: rank r is at position r <= 2r, nothing moves
    assert keep_signal_ranks(order, [order, order]) == list(order)


@settings(max_examples=300, deadline=None)
@given(rankings())
def test_units_that_move_up_are_only_those_due(case):
    """Whatever is placed out of fused order was due: every unit ahead of a better-fused one is a signal's."""
    order, signals, _covers = case
    out = keep_signal_ranks(order, signals)
    due = deadlines(signals, factor=2, limit=len(order))
    pos = {u: i for i, u in enumerate(order)}
    for i, u in enumerate(out):
        if u not in pos:
            continue
        jumped = [v for v in out[i + 1 :] if v in pos and pos[v] < pos[u]]
        assert not jumped or u in due


def test_a_buried_signal_top_is_lifted_to_its_deadline_and_no_further():
    order = [f"x{i}" for i in range(10)] + ["v1"]
    out = keep_signal_ranks(order, [[], ["v1"]])
    assert out.index("v1") == 1  # rank 1 -> within the first 2, and the fused best stays first
    assert out[0] == "x0"


def test_a_covering_unit_meets_the_deadline():
    order = ["x0", "summary", "x1", "x2", "fact"]
    out = keep_signal_ranks(order, [["fact"], []], covered_by={"fact": ["summary"]})
    assert out == order  # the summary that covers the fact is within the first 2: nothing moves


def test_too_small_a_factor_is_refused():
    with pytest.raises(ValueError, match="factor 1"):
        keep_signal_ranks(["a"], [["a"], ["a"]], factor=1)
