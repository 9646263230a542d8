"""Statistics against hand-computed values; the warm-up rule; the stability verdict."""

from __future__ import annotations

import math

import pytest

from drivers.measuring.stats import warmed_up
from protocol.stats import instability, percentile, spread_pct, summarize


def test_summary_of_a_sample_with_one_outlier_matches_hand_computation() -> None:
    s = summarize([4.0, 1.0, 100.0, 3.0, 2.0])
    assert (s.n, s.min, s.max, s.mean, s.median) == (5, 1.0, 100.0, 22.0, 3.0)
    # deviations -21 -20 -19 -18 78: squares sum 7610, / (n - 1) = 1902.5
    assert s.stddev == pytest.approx(math.sqrt(1902.5))
    # ranks q/100 * 4 over [1, 2, 3, 4, 100]: p90 at 3.6, p95 at 3.8, p99 at 3.96
    assert s.p90 == pytest.approx(4 + 0.6 * 96)
    assert s.p95 == pytest.approx(4 + 0.8 * 96)
    assert s.p99 == pytest.approx(4 + 0.96 * 96)
    assert s.cv == pytest.approx(math.sqrt(1902.5) / 22.0)
    assert s.mad == 1.0  # |x - 3| = 2 1 0 1 97
    assert s.iqr == 2.0  # q1 = 2, q3 = 4
    assert s.outliers == 1  # fences -1 and 7


def test_even_sample_interpolates_the_median_and_percentiles() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0])
    assert s.median == 2.5
    assert s.p90 == pytest.approx(3.7)  # rank 2.7
    assert s.iqr == pytest.approx(3.25 - 1.75)
    assert s.stddev == pytest.approx(math.sqrt(5.0 / 3.0))
    assert s.outliers == 0


@pytest.mark.parametrize(
    ("values", "expected_stddev"),
    [([], 0.0), ([7.5], 0.0), ([2.0, 2.0, 2.0], 0.0)],
)
def test_degenerate_samples(values: list[float], expected_stddev: float) -> None:
    s = summarize(values)
    assert s.n == len(values)
    assert s.stddev == expected_stddev
    assert s.cv == 0.0


def test_percentile_endpoints_and_empty() -> None:
    assert percentile([1.0, 5.0], 0.0) == 1.0
    assert percentile([1.0, 5.0], 100.0) == 5.0
    with pytest.raises(ValueError, match="empty"):
        percentile([], 50.0)


def test_spread_between_process_medians() -> None:
    assert spread_pct([10.0, 11.0, 12.0]) == pytest.approx(2 / 11 * 100)
    assert spread_pct([10.0]) == 0.0


def test_a_tight_quiet_agreeing_sample_is_stable() -> None:
    s = summarize([10.0, 10.1, 9.9, 10.05, 9.95])
    assert instability(s, [10.0, 10.2, 9.9], background_cores=0.05) == ()


@pytest.mark.parametrize(
    ("values", "medians", "background", "fragment"),
    [
        ([1.0, 1.0, 1.0, 5.0], [1.0], 0.0, "stddev"),
        ([10.0] * 20 + [16.0], [10.0], 0.0, "min or max"),
        ([10.0, 10.0, 10.0], [10.0], 0.9, "background load"),
        ([10.0, 10.0, 10.0], [5.0, 10.0, 10.0], 0.0, "process medians"),
        ([29513.725], [29513.725], 0.0, "only 1 sample(s): too few to judge"),  # issue 49: never "stable"
        ([10.0, 10.0, 10.0, 10.0], [10.0], 0.0, "only 4 sample(s)"),
    ],
)
def test_each_instability_rule(
    values: list[float], medians: list[float], background: float, fragment: str
) -> None:
    reasons = instability(summarize(values), medians, background)
    assert any(fragment in r for r in reasons), reasons


def test_warm_up_stops_only_after_two_settled_windows() -> None:
    assert not warmed_up([1.0] * 10)  # fewer than 2k + 1
    assert warmed_up([1.0] * 11)
    assert not warmed_up([float(v) for v in range(100, 79, -1)])  # still falling by 1 a run
    assert warmed_up([9.0, 5.0] + [1.0] * 11)
