"""The harness's own statistics: the median's confidence interval and the warm-up rule.

The summary statistics and the stability verdict are `protocol.stats` (the submitter recomputes them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from protocol.stats import median, percentile


def median_ci(sorted_values: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free confidence interval of the median, from order statistics.

    The count of samples below the true median is Binomial(n, 1/2), so [x_(k), x_(n-k+1)] covers it
    with probability 1 - 2 P(Bin(n, 1/2) < k); k is the largest rank that keeps that at least
    `confidence` (exact binomial up to n = 1000, the normal approximation above).

    Args:
        sorted_values: the sample in ascending order.
        confidence: the coverage wanted, between 0 and 1.

    Returns:
        (low, high), or None when the sample is too small for that coverage (n < 6 at 95%).
    """
    n = len(sorted_values)
    tail = (1.0 - confidence) / 2.0
    if n > 1000:
        k = math.floor(n / 2.0 - _normal_quantile(1.0 - tail) * math.sqrt(n) / 2.0)
    else:
        k, below, total = 0, 0, 2**n
        while k < n and (below + math.comb(n, k)) / total <= tail:  # below = P(Bin < k+1) once added
            below += math.comb(n, k)
            k += 1
    if k < 1:
        return None
    return sorted_values[k - 1], sorted_values[n - k]


def _normal_quantile(p: float) -> float:
    """The standard normal quantile, by bisection on erfc (plenty for a confidence bound)."""
    low, high = -10.0, 10.0
    for _ in range(80):
        mid = (low + high) / 2.0
        if 0.5 * math.erfc(-mid / math.sqrt(2.0)) < p:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


def ci_within(values: Sequence[float], target_pct: float, confidence: float = 0.95) -> bool:
    """Whether the median's confidence interval is within `target_pct` percent of the median both ways."""
    s = sorted(values)
    interval = median_ci(s, confidence)
    if interval is None:
        return False
    mid = percentile(s, 50.0)
    return mid > 0 and max(mid - interval[0], interval[1] - mid) <= target_pct / 100.0 * mid


def warmed_up(samples: Sequence[float], k: int = 5, tol: float = 0.05) -> bool:
    """Whether warm-up may stop: the rolling median settled twice in a row.

    With at least 2k + 1 samples, the medians of the last k and of the k before agree within
    `tol` (raised to 2 x MAD / median of the latest window when that is noisier), for both the latest window
    and the one ending a sample earlier.

    Args:
        samples: warm-up times so far, in order.
        k: window length.
        tol: relative bound between consecutive window medians.

    Returns:
        True when warm-up may stop.
    """
    if len(samples) < 2 * k + 1:
        return False
    recent = samples[-k:]  # noise estimate from the latest window only, so a trend does not pass for noise
    mid = median(recent)
    bound = max(tol, 2.0 * median([abs(v - mid) for v in recent]) / mid) if mid > 0 else tol
    return all(_settled(samples[: len(samples) - shift], k, bound) for shift in (0, 1))


def _settled(samples: Sequence[float], k: int, bound: float) -> bool:
    last, prev = median(samples[-k:]), median(samples[-2 * k : -k])
    return prev > 0 and abs(last - prev) <= bound * prev
