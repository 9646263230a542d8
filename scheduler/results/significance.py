"""The Mann-Whitney U test that decides whether two campaigns' latencies differ (`scheduler.results.report`).

Pure: the normal approximation with tie and continuity corrections, two-sided, as
`scipy.stats.mannwhitneyu(a, b, method="asymptotic")` computes it (tests pin reference values).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from protocol import Value


class MannWhitney(Value):
    """The outcome of a two-sided Mann-Whitney U test."""

    u: float
    z: float
    p_value: float


def _ranks(values: Sequence[float]) -> tuple[list[float], float]:
    """Average ranks (1-based) of `values`, and the tie term sum(t^3 - t) over groups of ties."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    return ranks, ties


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> MannWhitney:
    """Two-sided Mann-Whitney U test of `a` against `b` (normal approximation, tie and continuity corrected).

    Args:
        a: the first sample, not empty.
        b: the second sample, not empty.

    Returns:
        U of `a`, the z score and the two-sided p-value (1.0 when every value is tied).
    """
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError("the Mann-Whitney test needs two non-empty samples")
    ranks, ties = _ranks([*a, *b])
    n = n1 + n2
    u1 = math.fsum(ranks[:n1]) - n1 * (n1 + 1) / 2.0
    mean = n1 * n2 / 2.0
    variance = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return MannWhitney(u=u1, z=0.0, p_value=1.0)
    z = max(abs(u1 - mean) - 0.5, 0.0) / math.sqrt(variance)
    return MannWhitney(u=u1, z=math.copysign(z, u1 - mean), p_value=min(1.0, math.erfc(z / math.sqrt(2.0))))


__all__ = ["MannWhitney", "mann_whitney"]
