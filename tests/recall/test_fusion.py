"""Pure fusion logic: RRF, weighted fusion, floors, links, recency."""

from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from memclaw.recall.dates import DateRange
from memclaw.recall.fusion import Fused, apply_floors, date_boost, fuse, link_boost, recency_boost
from tests.recall.ranking_params import params


def test_rrf_combines_ranks_and_keeps_provenance():
    p = params(rrf_k=60)
    out = fuse([("a", 5.0), ("b", 3.0)], [("b", 0.8), ("c", 0.7)], p)
    assert [h.id for h in out] == ["b", "a", "c"]
    b = out[0]
    assert (b.bm25_rank, b.bm25_score, b.vector_rank, b.vector_similarity) == (2, 3.0, 1, 0.8)
    assert abs(b.score - (1 / 62 + 1 / 61)) < 1e-12


def test_keyword_only_hit_survives_floors():
    # A hit that only BM25 found (vector similarity too low to be a candidate) is kept on its own evidence.
    p = params(min_similarity=0.3)
    bm, vec = apply_floors([("kw", 2.0)], [("kw", 0.1), ("other", 0.5)], p)
    out = fuse(bm, vec, p)
    assert [h.id for h in out] == ["other", "kw"] or [h.id for h in out] == ["kw", "other"]
    kw = next(h for h in out if h.id == "kw")
    assert kw.bm25_rank == 1 and kw.vector_rank is None


def test_floors_drop_unrelated_vectors_and_zero_bm25():
    p = params(min_similarity=0.25)
    bm, vec = apply_floors([("a", 0.0)], [("x", 0.1)], p)
    assert bm == [] and vec == []


def test_weighted_fusion_normalises_bm25():
    p = params(method="weighted", bm25_weight=1.0, vector_weight=1.0)
    out = fuse([("a", 10.0), ("b", 5.0)], [("b", 0.9)], p)
    assert out[0].id == "b" and abs(out[0].score - 1.4) < 1e-9
    assert abs(out[1].score - 1.0) < 1e-9


def test_link_boost_lifts_linked_history_entry():
    p = params()
    hits = fuse([("fact1", 3.0), ("h_other", 2.0)], [], p)
    out = link_boost(hits, {"fact1": ["h_session"]}, weight=0.5)
    ids = [h.id for h in out]
    assert "h_session" in ids
    linked = next(h for h in out if h.id == "h_session")
    assert linked.boosts["link"] > 0 and linked.bm25_rank is None


def test_recency_boost_touches_history_only():
    now = datetime(2026, 1, 1)
    p = params()
    hits = fuse([("old", 1.0), ("new", 1.0), ("fact", 1.0)], [], p)
    ts = {"old": now - timedelta(days=400), "new": now - timedelta(days=1), "fact": now}
    kinds = {"old": "history", "new": "history", "fact": "fact"}
    out = recency_boost(hits, ts, kinds, now=now, half_life_days=30, weight=0.3)
    by = {h.id: h for h in out}
    assert "recency" not in by["fact"].boosts
    assert by["new"].boosts["recency"] > by["old"].boosts["recency"]


ranked = st.lists(st.tuples(st.sampled_from("abcdefgh"), st.floats(0.01, 10)), max_size=8, unique_by=lambda t: t[0])


@settings(deadline=None)  # (a busy machine is no failure)
@given(ranked, ranked)
def test_fusion_is_a_sorted_union_without_duplicates(bm, vec):
    bm = sorted(bm, key=lambda t: -t[1])
    vec = sorted([(i, min(s / 10, 1.0)) for i, s in vec], key=lambda t: -t[1])
    out = fuse(bm, vec, params())
    ids = [h.id for h in out]
    assert len(ids) == len(set(ids))
    assert set(ids) == {i for i, _ in bm} | {i for i, _ in vec}
    assert all(out[i].score >= out[i + 1].score for i in range(len(out) - 1))


def test_date_boost_lifts_units_stamped_in_range_and_adds_date_only_extras():
    may = DateRange(datetime(2023, 5, 1), datetime(2023, 6, 1), "in May 2023")
    hits = [Fused("strong", 1.0), Fused("in-may", 0.6), Fused("undated", 0.5)]
    stamps = {
        "strong": datetime(2023, 7, 1),
        "in-may": datetime(2023, 5, 20),
        "undated": None,
        "extra-new": datetime(2023, 5, 30),
        "extra-old": datetime(2023, 5, 2),
    }
    out = date_boost(hits, stamps, [may], weight=0.5, extra=["extra-new", "extra-old"])
    assert [h.id for h in out] == ["in-may", "strong", "undated", "extra-new", "extra-old"]
    assert out[0].boosts == {"date": 0.5} and abs(out[0].score - 1.1) < 1e-12
    assert out[3].bm25_rank is None and out[3].vector_rank is None and out[3].score == 0.5
    assert "date" not in out[1].boosts


def test_date_boost_without_ranges_or_weight_changes_nothing():
    hits = [Fused("a", 1.0)]
    stamps = {"a": datetime(2023, 5, 2)}
    may = DateRange(datetime(2023, 5, 1), datetime(2023, 6, 1), "May 2023")
    assert date_boost(hits, stamps, [], weight=0.5) == hits
    assert date_boost(hits, stamps, [may], weight=0.0, extra=["b"]) == hits and hits[0].score == 1.0


def test_a_date_lifts_what_was_said_just_after_the_span_by_its_share():
    week = DateRange(datetime(2023, 11, 9), datetime(2023, 11, 16), "the week before 16 November 2023")
    hits = [Fused("inside", 0.1), Fused("next-day", 0.1), Fused("a-week-on", 0.1), Fused("long-after", 0.1)]
    stamps = {
        "inside": datetime(2023, 11, 12),
        "next-day": datetime(2023, 11, 16, 15, 59),  # "last week I was in Lisbon", said once it was over
        "a-week-on": datetime(2023, 11, 22, 23),
        "long-after": datetime(2023, 11, 23, 1),  # beyond the span's own length after it
    }
    out = {h.id: h for h in date_boost(hits, stamps, [week], weight=0.5, scale=2.0, after=0.5)}
    assert out["inside"].boosts["date"] == 1.0
    assert out["next-day"].boosts["date"] == 0.5 and out["a-week-on"].boosts["date"] == 0.5
    assert "date" not in out["long-after"].boosts
    day = DateRange(datetime(2023, 11, 9), datetime(2023, 11, 10), "on 9 November")
    out = {h.id: h for h in date_boost([Fused("x", 0.0), Fused("y", 0.0)], {"x": datetime(2023, 11, 10, 8),
           "y": datetime(2023, 11, 11, 8)}, [day], weight=0.5, scale=2.0, after=0.5)}  # fmt: skip
    assert out["x"].boosts["date"] == 0.5 and "date" not in out["y"].boosts  # a day's window is one day
