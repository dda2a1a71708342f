"""BM25: Lucene idf from the first memory, InvertedBM25 == rank-bm25 reference, removals, persistence."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from memclaw.errors import DerivedIndexError, UsageError
from memclaw.index._bm25 import DEFAULT_B, DEFAULT_K1, InvertedBM25, LexicalIndex, lucene_idf
from memclaw.index.tokenizer import Tokenizer
from tests.index.bm25_reference import RankBM25Index

BACKENDS = [InvertedBM25, RankBM25Index]


def _bm25(tf: float, dl: float, avgdl: float, n: int, df: int, k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5)) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))


@pytest.mark.parametrize("cls", BACKENDS)
def test_one_memory_matches_with_a_positive_score(cls: type[LexicalIndex]) -> None:
    ix = cls()
    ix.add("m1", ["dog", "name", "rex"])
    hits = ix.search(["dog"], 5)
    assert [h[0] for h in hits] == ["m1"]
    assert hits[0][1] == pytest.approx(_bm25(1, 3, 3, 1, 1), abs=1e-12)
    assert hits[0][1] > 0
    assert ix.search(["cat"], 5) == []


@pytest.mark.parametrize("cls", BACKENDS)
def test_two_memories_sharing_the_term_both_score_and_rarer_terms_rank(cls: type[LexicalIndex]) -> None:
    ix = cls()
    ix.add("a", ["dog", "cat"])
    ix.add("b", ["dog", "bird"])
    hits = ix.search(["dog"], 5)
    # A term in every document still counts (rank-bm25's own idf gives 0 or less here; see below).
    assert [h[0] for h in hits] == ["a", "b"]  # equal scores: ties break by id
    assert hits[0][1] == hits[1][1] == pytest.approx(_bm25(1, 2, 2, 2, 2), abs=1e-12)
    assert hits[0][1] > 0
    ranked = ix.search(["bird", "dog"], 5)
    assert [h[0] for h in ranked] == ["b", "a"]
    assert ranked[0][1] == pytest.approx(_bm25(1, 2, 2, 2, 1) + _bm25(1, 2, 2, 2, 2), abs=1e-12)


def test_plain_bm25okapi_gives_nothing_for_two_memories() -> None:
    """Why memclaw does not use BM25Okapi's own idf: with two memories a shared term scores <= 0."""
    scores = BM25Okapi([["dog", "cat"], ["dog", "bird"]]).get_scores(["dog"])
    assert all(s <= 0 for s in scores)


def test_lucene_idf_is_positive_for_every_df() -> None:
    for n in range(1, 50):
        for df in range(1, n + 1):
            assert lucene_idf(n, df) > 0
    assert lucene_idf(10, 1) > lucene_idf(10, 5) > lucene_idf(10, 10)


@pytest.mark.parametrize("cls", BACKENDS)
def test_search_contract(cls: type[LexicalIndex]) -> None:
    ix = cls()
    for i in range(10):
        ix.add(f"d{i}", ["common"] + ["rare"] * (i % 3) + ["pad"] * i)
    hits = ix.search(["rare", "common"], 4)
    assert len(hits) == 4
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert len(ix.search(["rare", "common"], 100)) == 10
    assert ix.search(["rare"], 0) == []
    assert ix.search([], 5) == []
    assert ix.search(["nothing", "here"], 5) == []
    # Repeated query tokens count again (as rank-bm25 does).
    one = dict(ix.search(["rare"], 100))
    two = dict(ix.search(["rare", "rare"], 100))
    assert two.keys() == one.keys() and all(two[i] == pytest.approx(2 * one[i]) for i in one)


@pytest.mark.parametrize("cls", BACKENDS)
def test_ties_break_by_id_at_the_k_boundary(cls: type[LexicalIndex]) -> None:
    ix = cls()
    for name in ["e", "b", "d", "a", "c"]:
        ix.add(name, ["same", "text"])
    assert [i for i, _ in ix.search(["same"], 3)] == ["a", "b", "c"]


@pytest.mark.parametrize("cls", BACKENDS)
def test_add_replace_remove_len_ids(cls: type[LexicalIndex]) -> None:
    ix = cls()
    ix.add("x", ["apple"])
    ix.add("y", ["pear"])
    ix.add("x", ["banana"])  # replaces
    assert len(ix) == 2 and ix.ids() == {"x", "y"} and "x" in ix
    assert ix.search(["apple"], 5) == []
    assert [i for i, _ in ix.search(["banana"], 5)] == ["x"]
    assert ix.remove("x") is True
    assert ix.remove("x") is False
    assert ix.remove("never") is False
    assert ix.ids() == {"y"} and "x" not in ix
    assert ix.search(["banana"], 5) == []
    # N and avgdl follow removals: "pear" now scores as in a one-document index.
    assert ix.search(["pear"], 5)[0][1] == pytest.approx(_bm25(1, 1, 1, 1, 1), abs=1e-12)
    ix.remove("y")
    assert len(ix) == 0 and ix.search(["pear"], 5) == []


@pytest.mark.parametrize("cls", BACKENDS)
def test_empty_documents_are_kept_but_never_match(cls: type[LexicalIndex]) -> None:
    ix = cls()
    ix.add("empty", [])
    assert ix.ids() == {"empty"} and ix.search(["x"], 5) == []
    ix.add("full", ["x", "y"])
    hits = ix.search(["x"], 5)
    assert [i for i, _ in hits] == ["full"]
    assert hits[0][1] == pytest.approx(_bm25(1, 2, 1, 2, 1), abs=1e-12)  # the empty doc counts in N and avgdl


@pytest.mark.parametrize("cls", BACKENDS)
def test_max_score_bounds_every_hit(cls: type[LexicalIndex]) -> None:
    ix = cls()
    for i in range(20):
        ix.add(str(i), ["t"] * (i % 5 + 1) + ["u"] * (i % 3))
    q = ["t", "u", "zzz"]
    bound = ix.max_score(q)
    assert bound == pytest.approx((lucene_idf(20, 20) + lucene_idf(20, 13)) * (DEFAULT_K1 + 1))
    assert all(0 < s <= bound for _, s in ix.search(q, 50))
    assert ix.max_score(["zzz"]) == 0.0


def test_inverted_compacts_after_many_removals() -> None:
    ix, ref = InvertedBM25(), RankBM25Index()
    for i in range(40):
        toks = [f"w{i % 7}", f"v{i % 3}", "all"]
        ix.add(f"d{i}", toks)
        ref.add(f"d{i}", toks)
    for i in range(0, 40, 4):
        ix.remove(f"d{i}")
        ref.remove(f"d{i}")
    assert ix._n_dead == 10  # 10 of 40 slots: not yet compacted
    _assert_same(ix, ref, ["w1", "v2", "all"])
    ix.remove("d1")
    ref.remove("d1")
    assert ix._n_dead == 0 and len(ix._ids) == 29  # compacted: slots renumbered
    _assert_same(ix, ref, ["w1", "v2", "all"])
    # A term whose documents were all removed disappears from the postings.
    for i in range(40):
        if f"d{i}" in ix and i % 7 == 3:
            ix.remove(f"d{i}")
            ref.remove(f"d{i}")
    before = ix.n_terms
    ix.compact()
    assert ix.n_terms == before - 1 and ix.idf("w3") == 0.0
    _assert_same(ix, ref, ["w3", "w1", "all"])


def _assert_same(ix: LexicalIndex, ref: LexicalIndex, query: list[str]) -> None:
    got, want = ix.search(query, 10_000), ref.search(query, 10_000)
    assert [i for i, _ in got] == [i for i, _ in want]
    for (_, a), (_, b) in zip(got, want, strict=True):
        assert abs(a - b) <= 1e-9
    assert abs(ix.max_score(query) - ref.max_score(query)) <= 1e-9


_VOCAB = [f"t{i}" for i in range(12)]
_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.sampled_from([f"d{i}" for i in range(15)]),
            st.lists(st.sampled_from(_VOCAB), max_size=12),
        ),
        st.tuples(st.just("remove"), st.sampled_from([f"d{i}" for i in range(15)]), st.just([])),
        st.tuples(st.just("reload"), st.just(""), st.just([])),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(
    ops=_ops,
    queries=st.lists(st.lists(st.sampled_from(_VOCAB + ["unseen"]), min_size=1, max_size=5), min_size=1, max_size=4),
    k1=st.sampled_from([1.2, 1.5]),
    b=st.sampled_from([0.0, 0.75, 1.0]),
    k=st.integers(1, 20),
)
def test_inverted_equals_rank_bm25_reference(ops, queries, k1: float, b: float, k: int, tmp_path_factory) -> None:
    ix, ref = InvertedBM25(k1, b), RankBM25Index(k1, b)
    path = tmp_path_factory.mktemp("bm25") / "lexical.bm25"
    for op, doc_id, tokens in ops:
        if op == "add":
            ix.add(doc_id, tokens)
            ref.add(doc_id, tokens)
        elif op == "remove":
            assert ix.remove(doc_id) == ref.remove(doc_id)
        else:  # save and load mid-way: later adds/removes then mix loaded (frozen) and fresh postings
            ix.save(path)
            ix = InvertedBM25.load(path)
        if len(ix) and op != "reload":
            _assert_same(ix, ref, [tokens[0] if tokens else "t0", "t1"])
    assert ix.ids() == ref.ids() and len(ix) == len(ref)
    ix.save(path)
    loaded = InvertedBM25.load(path)
    for q in queries:
        _assert_same(ix, ref, q)
        _assert_same(loaded, ref, q)
        a, b_ = ix.search(q, k), ref.search(q, k)
        assert [i for i, _ in a] == [i for i, _ in b_]
    # The loaded index keeps working incrementally.
    loaded.add("new", ["t1", "t1", "t2"])
    ref.add("new", ["t1", "t1", "t2"])
    loaded.remove("d0")
    ref.remove("d0")
    _assert_same(loaded, ref, ["t1", "t2", "t3"])


@pytest.mark.parametrize("cls", BACKENDS)
def test_save_load_round_trip(cls: type[LexicalIndex], tmp_path: Path) -> None:
    ix = cls(k1=1.4, b=0.6)
    ix.add("a", ["tea", "ünïcode", "tea"])
    ix.add("b", ["coffee"])
    ix.add("c", [])
    ix.remove("b")
    path = tmp_path / "sub" / "lexical.bm25"
    ix.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["lexical.bm25"]  # no temp file left behind
    loaded = cls.load(path)
    assert type(loaded) is cls and (loaded.k1, loaded.b) == (1.4, 0.6)
    assert loaded.ids() == {"a", "c"} and loaded.fingerprint == ix.fingerprint
    assert loaded.search(["ünïcode", "tea"], 5) == ix.search(["ünïcode", "tea"], 5)


@pytest.mark.parametrize("cls", BACKENDS)
def test_damaged_files_raise_index_error(cls: type[LexicalIndex], tmp_path: Path) -> None:
    ix = cls()
    for i in range(30):
        ix.add(f"d{i}", [f"w{i % 4}", "x"])
    path = tmp_path / "lexical.bm25"
    ix.save(path)
    raw = path.read_bytes()
    bad = tmp_path / "bad.bm25"
    damaged = {
        "truncated": raw[: len(raw) // 2],
        "truncated to the header": raw[:20],
        "flipped byte": raw[:-5] + bytes([raw[-5] ^ 0xFF]) + raw[-4:],
        "garbage": b"not an index at all",
        "empty": b"",
    }
    for why, data in damaged.items():
        bad.write_bytes(data)
        with pytest.raises(DerivedIndexError, match="reindex"):
            cls.load(bad)
        assert why
    with pytest.raises(DerivedIndexError, match="missing"):
        cls.load(tmp_path / "nope.bm25")


def test_loading_the_other_kind_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "r.bm25"
    r = RankBM25Index()
    r.add("a", ["x"])
    r.save(p)
    with pytest.raises(DerivedIndexError, match="expected 'inverted'"):
        InvertedBM25.load(p)
    i = InvertedBM25()
    i.save(p)
    with pytest.raises(DerivedIndexError, match="expected 'rank_bm25'"):
        RankBM25Index.load(p)


def test_fingerprint_and_parameters() -> None:
    assert InvertedBM25().fingerprint != RankBM25Index().fingerprint
    assert InvertedBM25(1.5).fingerprint != InvertedBM25(1.2).fingerprint
    assert InvertedBM25(b=0.5).fingerprint != InvertedBM25().fingerprint
    assert isinstance(InvertedBM25(), LexicalIndex) and isinstance(RankBM25Index(), LexicalIndex)
    with pytest.raises(UsageError, match="invalid BM25 parameters"):
        InvertedBM25(k1=-1)


def test_with_the_real_tokenizer_recall_finds_the_memory() -> None:
    tok = Tokenizer()
    memories = {
        "f1": "Caroline went to the LGBTQ support group on 7 May 2023.",
        "f2": "Melanie painted a sunrise over the lake last year.",
        "f3": "Caroline is researching adoption agencies.",
        "h1": "[2023-05-08 13:56] Melanie and Caroline talked about running and pottery classes.",
    }
    ix = InvertedBM25()
    for i, text in memories.items():
        ix.add(i, tok.tokenize(text))
    assert ix.search(tok.tokenize("When did Caroline go to the support groups?"), 3)[0][0] == "f1"
    assert ix.search(tok.tokenize("What did Melanie paint?"), 3)[0][0] == "f2"
    assert ix.search(tok.tokenize("Who runs?"), 3)[0][0] == "h1"
    assert tok.tokenize("What was it?") == []  # stop words only: no BM25 query at all


@pytest.mark.parametrize("cls", BACKENDS)
def test_doc_freq_counts_the_live_documents_holding_a_term(cls: type[LexicalIndex]) -> None:
    ix = cls()
    ix.add("m1", ["dog", "name", "biscuitron", "biscuitron"])
    ix.add("m2", ["dog", "walk"])
    ix.add("m3", ["biscuitron"])
    assert (ix.doc_freq("dog"), ix.doc_freq("biscuitron"), ix.doc_freq("cat")) == (2, 2, 0)
    ix.remove("m3")
    assert ix.doc_freq("biscuitron") == 1
