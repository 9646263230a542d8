"""Summary statistics of timing samples, and the stability verdict across processes.

Pure: the worker computes its figures with these functions and the submitter recomputes them with
the same ones from the raw samples a result carries (`protocol.aggregate`).

Percentiles use linear interpolation between closest ranks (numpy's default, Hyndman-Fan type 7);
stddev is the sample standard deviation (n - 1); MAD is the unscaled median absolute deviation;
outliers are the samples beyond 1.5 IQR from the quartiles.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from protocol.base import Stats

# pyperf-style stability bounds.
MAX_CV: Final = 0.10
MAX_MIN_MAX_DEVIATION: Final = 0.50
MAX_BACKGROUND_CORES: Final = 0.2
MAX_PROCESS_SPREAD_PCT: Final = 10.0
MIN_SAMPLES: Final = 5
"""Fewer samples than this say nothing of their own spread: such a figure is never called stable."""


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of an already sorted sample, linearly interpolated.

    Args:
        sorted_values: the sample in ascending order, not empty.
        q: the percentile, between 0 and 100.

    Returns:
        The interpolated value at rank q / 100 * (n - 1).
    """
    if not sorted_values:
        raise ValueError("percentile of an empty sample")
    rank = q / 100.0 * (len(sorted_values) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    frac = rank - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * frac


def median(values: Sequence[float]) -> float:
    """The median of a sample (interpolated for an even count)."""
    return percentile(sorted(values), 50.0)


def summarize(values: Sequence[float]) -> Stats:
    """All summary statistics of a sample; an empty sample gives all zeros.

    Args:
        values: the sample, in any order.

    Returns:
        The protocol's `Stats` value.
    """
    n = len(values)
    if n == 0:
        return Stats(
            n=0, min=0.0, max=0.0, mean=0.0, median=0.0, stddev=0.0, p90=0.0, p95=0.0, p99=0.0, cv=0.0
        )
    s = sorted(values)
    mean = math.fsum(s) / n
    stddev = math.sqrt(math.fsum((v - mean) ** 2 for v in s) / (n - 1)) if n > 1 else 0.0
    med = percentile(s, 50.0)
    q1, q3 = percentile(s, 25.0), percentile(s, 75.0)
    iqr = q3 - q1
    low_fence, high_fence = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    return Stats(
        n=n,
        min=s[0],
        max=s[-1],
        mean=mean,
        median=med,
        stddev=stddev,
        p90=percentile(s, 90.0),
        p95=percentile(s, 95.0),
        p99=percentile(s, 99.0),
        cv=stddev / mean if mean > 0 else 0.0,
        mad=median([abs(v - med) for v in s]),
        iqr=iqr,
        outliers=sum(1 for v in s if v < low_fence or v > high_fence),
    )


NO_SAMPLES: Final[Stats] = summarize([])
"""The statistics of no sample (all zeros): a phase a measurement does not have."""


def spread_pct(medians: Sequence[float]) -> float:
    """How far apart process medians are: (max - min) / median of medians, in percent."""
    if len(medians) < 2:
        return 0.0
    mid = median(medians)
    return (max(medians) - min(medians)) / mid * 100.0 if mid > 0 else 0.0


def instability(
    stats: Stats, process_medians: Sequence[float], background_cores: float, of: str = ""
) -> tuple[str, ...]:
    """Why a measurement should not be trusted as it stands; empty when it looks stable.

    Args:
        stats: the statistics of all timed samples.
        process_medians: the median of each child process.
        background_cores: CPU cores other processes used while this one measured.
        of: what the samples are, named in the reasons ("TPOT": a generation is judged on its time
            per output token, since end-to-end times vary with each answer's length); "" for latency.

    Returns:
        Human-readable reasons, one per rule broken.
    """
    reasons: list[str] = []
    what = f"{of} " if of else ""
    if stats.n < MIN_SAMPLES:
        reasons.append(f"{what}only {stats.n} sample(s): too few to judge (at least {MIN_SAMPLES})")
    if stats.n > 1 and stats.cv >= MAX_CV:
        reasons.append(f"{what}stddev is {stats.cv * 100:.1f}% of the mean (>= {MAX_CV * 100:.0f}%)")
    if stats.mean > 0 and (
        (stats.mean - stats.min) / stats.mean >= MAX_MIN_MAX_DEVIATION
        or (stats.max - stats.mean) / stats.mean >= MAX_MIN_MAX_DEVIATION
    ):
        reasons.append(f"{what}min or max is >= {MAX_MIN_MAX_DEVIATION * 100:.0f}% from the mean")
    if background_cores > MAX_BACKGROUND_CORES:
        reasons.append(f"background load of {background_cores:.2f} cores (> {MAX_BACKGROUND_CORES})")
    spread = spread_pct(process_medians)
    if spread > MAX_PROCESS_SPREAD_PCT:
        reasons.append(f"{what}process medians {spread:.1f}% apart (> {MAX_PROCESS_SPREAD_PCT:.0f}%)")
    return tuple(reasons)


def split(values: Sequence[float], counts: Sequence[int]) -> tuple[tuple[float, ...], ...]:
    """`values` cut into consecutive parts of the given lengths (one per process)."""
    parts, start = [], 0
    for count in counts:
        parts.append(tuple(values[start : start + count]))
        start += count
    return tuple(parts)
