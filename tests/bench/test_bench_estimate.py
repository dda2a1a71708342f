"""Benchmark time estimates (issue 19.10): `bench longmemeval --limit 5` said "~0 min" and took 260 s; `bench
perf` said "~0.0 min". The estimator says seconds under a minute, starts from a measured per-item cost and then
uses the run's own rate."""

from __future__ import annotations

import pytest

from memclaw.bench.estimate import SECONDS_PER_SESSION, Estimate, format_duration


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0, "~1 s"),
        (0.4, "~1 s"),
        (12.4, "~12 s"),
        (59.4, "~59 s"),
        (60, "~1.0 min"),
        (90, "~1.5 min"),
        (260, "~4.3 min"),
        (600, "~10 min"),
        (3540, "~59 min"),
        (3600, "~1 h"),
        (5400, "~1 h 30 min"),
    ],
)
def test_durations_are_said_in_seconds_under_a_minute(seconds, said):
    assert format_duration(seconds) == said


def test_the_issue_case_is_estimated_near_what_it_took():
    """5 LongMemEval_S questions, about 48 sessions each, took 260 s on 2 cores: the first estimate is within a
    factor of 1.5 of that (it was 0 min), and says minutes, not "0"."""
    est = Estimate(240, SECONDS_PER_SESSION, "session")
    assert 260 / 1.5 <= est.remaining_s() <= 260 * 1.5
    assert est.describe().startswith("~4.0 min (at 1 s per session, on 2 cores")


def test_after_the_first_items_the_measured_rate_decides():
    est = Estimate(240, 1.0, "session", fixed_s=10)
    assert est.remaining_s() == 250 and not est.measured
    est.record(48, 12.0)  # this machine (or an embedding cache) is four times faster than the known cost
    assert est.measured and est.remaining_s() == pytest.approx(192 * 0.25)
    assert est.describe() == "~48 s (measured: 0.25 s per session)"
    est.skip(48)  # a question the protocol leaves out costs nothing
    assert est.remaining_s() == pytest.approx(144 * 0.25)
    est.record(144, 30.0)
    assert est.remaining_s() == 0 and est.describe().startswith("~1 s")


def test_a_fixed_cost_is_counted_and_said():
    est = Estimate(1000, 1 / 200, "memory", fixed_s=15, basis="on 2 cores")
    assert est.remaining_s() == pytest.approx(20)
    assert est.describe() == "~20 s (at 5 ms per memory + 15 s, on 2 cores)"
