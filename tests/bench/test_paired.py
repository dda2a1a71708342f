"""The hybrid against each single signal question by question: counts, the sign test, the flag's note (pure; a
real run's counts: tests/bench/test_bench_run.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from memclaw.bench.paired import ALL, paired_counts, paired_note, sign_test
from memclaw.bench.signal_view import run_paired, signal_view_md


def test_sign_test_exact_values():
    assert sign_test(0, 0) == 1.0  # nothing differs
    assert sign_test(3, 4) == 1.0  # a trade of a few questions each way
    assert sign_test(6, 0) == pytest.approx(2 / 64)  # every one of six the same way
    assert sign_test(0, 10) == pytest.approx(2 / 1024)
    assert sign_test(8, 2) == pytest.approx(2 * (1 + 10 + 45) / 1024)
    assert sign_test(5, 5) == 1.0


@dataclass
class Q:
    kind: str
    v: dict[str, float]


def test_paired_counts_per_group_and_metric_ties_left_out():
    hyb = [Q("a", {"r@5": 1, "r@10": 1}), Q("a", {"r@5": 0, "r@10": 1}), Q("b", {"r@5": 0.5, "r@10": 1})]
    vec = [Q("a", {"r@5": 0, "r@10": 1}), Q("a", {"r@5": 1, "r@10": 1}), Q("b", {"r@5": 0.25, "r@10": 0})]
    out = paired_counts(hyb, {"vector-raw": vec}, group=lambda q: q.kind, values=lambda q: q.v, keys=["r@5", "r@10"])
    assert out["vector-raw"][ALL] == {"r@5": [2, 1], "r@10": [1, 0]}
    assert out["vector-raw"]["a"] == {"r@5": [1, 1]}  # r@10 tied on both questions of a: no cell
    assert out["vector-raw"]["b"] == {"r@5": [1, 0], "r@10": [1, 0]}
    with pytest.raises(ValueError, match="2 scores against the hybrid's 3"):
        paired_counts(hyb, {"bm25-raw": vec[:2]}, group=lambda q: q.kind, values=lambda q: q.v, keys=["r@5"])


def test_run_paired_needs_the_hybrid_and_a_single_signal():
    qs = [Q("a", {"r@5": 1.0})]
    assert run_paired({"hybrid": qs}, group=lambda q: q.kind, values=lambda q: q.v) == {}
    assert run_paired({"vector-raw": qs, "grep": qs}, group=lambda q: q.kind, values=lambda q: q.v) == {}
    got = run_paired({"hybrid": qs, "vector-raw": [Q("a", {"r@5": 0.0})], "grep": qs},
                     group=lambda q: q.kind, values=lambda q: q.v)  # fmt: skip
    assert set(got) == {"vector-raw"} and got["vector-raw"]["a"] == {"r@5": [1, 0]}  # grep is no signal of it


def test_the_flag_carries_the_questions_won_and_lost():
    systems = {
        "hybrid": {"recall_all@5": 0.83, "n": 53, "by_question_type": {"multi": {"n": 53, "recall_all@5": 0.83}}},
        "vector-raw": {"recall_all@5": 0.85, "n": 53, "by_question_type": {"multi": {"n": 53, "recall_all@5": 0.85}}},
    }
    paired = {"vector-raw": {ALL: {"recall_all@5": [3, 4]}, "multi": {"recall_all@5": [3, 4]}}}
    lines = signal_view_md({"systems": systems, "paired": paired}, by="by_question_type", keys=["recall_all@5"])
    row = next(ln for ln in lines if ln.startswith("| multi "))
    assert "**all@5** 0.830 < 0.850 (vector-raw; per question 3 won, 4 lost, p 1.00)" in row
    # a run made before the counts existed: the flag as it was
    old = signal_view_md({"systems": systems}, by="by_question_type", keys=["recall_all@5"])
    assert "**all@5** 0.830 < 0.850 (vector-raw) |" in next(ln for ln in old if ln.startswith("| multi "))
    assert paired_note(paired, "bm25-raw", "multi", "recall_all@5") == ""
