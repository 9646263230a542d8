"""A peer's offsets against reference devices: a test that needs no estimate of its own spread.

A peer's record adds up the log of its figure over its partners' (`reputation.PeerRecord`), and
judges the mean by the offsets' own scatter: it has to estimate both from the same few comparisons,
so it waits for `reputation.BIAS_MIN` (8) of them. Where a reference device (the submitter's own)
settled the group (`references.vouched`), more is known: the reference's figure is the submitter's
own word, and the standard error of one offset is the class's, as the submitter measured it
(`agreement.comparison_error` of the pooled spread: what the band is built from), not anything the
peer's figures say. The mean offset is then the precision-weighted mean of the offsets, its standard
error one over the root of their summed precision, and a handful of comparisons decide.

    mean   = sum(w x / e^2) / sum(w / e^2)       (x clipped to +-CLIP e)
    error  = 1 / sqrt(sum(w / e^2))
    biased <=> n >= REFERENCE_MIN  and  |mean| - Z * error > tolerance

The error is the class's alone, never widened by the peer's own scatter: a liar that lies on some
tasks and tells the truth on others (`--strategy predicting`, `scattered`) would otherwise choose its
own error by how it mixes them, as a band set by a replica's own spread once let it choose its
tolerance. What keeps one hiccup of an honest machine (a figure 1.5x slow) from deciding is the clip:
one offset counts at most `CLIP` standard errors, the band's half-width, so it takes several.

Why 4 and not 8 (benchmarks/notes/replication_sim.md, "Verification by replication"): a reference
takes one replica of each task of its class, so each stranger gets about half the comparisons it would
get among strangers (10 a campaign in the simulation, not 20), and a liar at 0.85-0.9x hides inside
one comparison's band where process medians scatter by 6-7.4 %. With the class's error known, the
sample's spread need not be estimated, so the count that guards it can fall from 8 to 4.

Pure: `reputation.PeerRecord` holds one `ReferenceOffsets` and the store keeps its three sums.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

REFERENCE_MIN: Final = 4.0
"""Comparisons with a reference (weighed) before the mean offset against it is judged."""
CLIP: Final = 3.5
"""The most standard errors one offset counts for (`agreement.K`: the band's half-width)."""


@dataclass(frozen=True)
class ReferenceOffsets:
    """The sums a peer's offsets against reference devices are judged by.

    Attributes:
        weight: the weight of its comparisons with a reference (`n` above).
        total: sum of weight x offset / error^2.
        precision: sum of weight / error^2.
    """

    weight: float = 0.0
    total: float = 0.0
    precision: float = 0.0

    def after(self, offset: float, error: float, weight: float) -> ReferenceOffsets:
        """These sums with one more offset (clipped to `CLIP` standard errors), of standard error
        `error`, counted `weight` times (unchanged for a non-finite or non-positive one)."""
        usable = math.isfinite(offset) and math.isfinite(error) and error > 0 and weight > 0
        if not usable:
            return self
        p = weight / (error * error)
        clipped = max(-CLIP * error, min(CLIP * error, offset))
        return ReferenceOffsets(self.weight + weight, self.total + p * clipped, self.precision + p)

    def scaled(self, factor: float) -> ReferenceOffsets:
        """These sums times `factor` (decay: the mean stays, its error grows)."""
        return ReferenceOffsets(self.weight * factor, self.total * factor, self.precision * factor)

    @property
    def mean(self) -> float | None:
        """The precision-weighted mean offset (negative: it reports itself faster); None before any."""
        return self.total / self.precision if self.precision > 0 else None

    def error(self) -> float:
        """The standard error of `mean`, from the class's errors alone; infinite before any."""
        return 1.0 / math.sqrt(self.precision) if self.precision > 0 else math.inf

    def biased(self, tolerance: float, z: float) -> bool:
        """Off the reference for good: at least `REFERENCE_MIN` comparisons, and the mean beyond
        `tolerance` by `z` standard errors."""
        mean = self.mean
        if self.weight < REFERENCE_MIN - 1e-9 or mean is None:
            return False
        return abs(mean) - z * self.error() > tolerance

    def cleared(self, tolerance: float) -> bool:
        """Its mean within `tolerance` by one standard error (true with no comparison: nothing
        against a reference to clear)."""
        mean = self.mean
        return mean is None or abs(mean) + self.error() <= tolerance
