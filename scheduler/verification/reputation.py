"""A peer's record of agreements, and adaptive spot checks: how often its results are replicated.

Full replication doubles a campaign's tasks (plus one more replica per disagreement). A campaign may
ask `verify: {spot_check: p}` instead: a task runs on one peer and is replicated with a probability
that depends on that peer's record, as BOINC's adaptive replication does (Anderson, "BOINC: A
Platform for Volunteer Computing", 2019, section 6.4):

- a peer the submitter has seen agree fewer than `TRUST_AFTER` times since its last disagreement
  (a new peer, or one caught) is replicated every time: p = 1;
- a peer with such a streak whose mean offset from its class is cleared (below) is replicated
  with probability `p` (the campaign's);
- a peer caught as an outlier has its streak reset, so p = 1 again until it earns it back, and its
  unverified (`single`) results of the campaign are run again elsewhere (the cost is counted).

The draw is pure and secret: a keyed hash of the task id under the campaign's key (`draws.DrawKey`,
kept by the submitter, never sent), so a resumed campaign decides the same way and a peer cannot
tell a checked task from an unchecked one before it reports: its offers are the same either way.

A peer's offset from its class. One replicated task compares a peer with its class once, within a
band wide enough for one replica's noise: a peer reporting 0.9x its latency passes most single
comparisons where process medians scatter by 6 % or more. But it reports 0.9x every time, and noise
does not: the record keeps, over every replicated result, the log of the peer's figure over the
others' (the rest of the agreeing majority, or the agreed figure for an outlier). Honest devices of
one class sit within about 1 % of each other, so a mean offset beyond `BIAS_TOLERANCE` by `BIAS_Z`
standard errors, over at least `BIAS_MIN` comparisons, is a peer that misreports its speed (or a
device that is not what its class says): it is `biased`, hence `distrusted`, and the campaign
settles again every group it was an agreeing member of (`scheduler.state.settling`). Evidence adds up
across tasks and, through the store, across campaigns.

What it costs (benchmarks/replication_sim.py): the extra tasks are p of the trusted peers' tasks plus
every task of untrusted peers, plus one replica per disagreement and the re-runs after a catch. What
it gives up: a cheater's results before its first check are shown as `single` (not verified) until
it is caught; only `replicated` rows are verified figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

from scheduler.verification.draws import DrawKey, Purpose

TRUST_AFTER: Final = 5
"""Agreements in a row before a peer's results are only spot-checked."""
BIAS_MIN: Final = 8
"""Comparisons with its class before a peer's mean offset is judged."""
BIAS_TOLERANCE: Final = 0.04
"""How far (log of a ratio, about 4 %) an honest device may sit from its class for good: boards of
one class differ by about 1 %, and a figure's own noise averages out over the comparisons."""
BIAS_Z: Final = 3.0
"""Standard errors of the mean offset it must clear the tolerance by."""
BIAS_SD_FLOOR: Final = 0.01
"""The smallest spread of offsets assumed (a few equal offsets prove less than their spread says)."""


@dataclass(frozen=True)
class PeerRecord:
    """What the submitter has seen of one peer's replicated results (kept in its store).

    Attributes:
        agreed: results that agreed with a majority.
        disagreed: results outside a majority (outliers).
        streak: agreements since the last disagreement.
        offsets: comparisons of its figure with its class's (`offset`).
        offset_sum: the sum of their logs of ratios.
        offset_squares: the sum of their squares.
    """

    agreed: int = 0
    disagreed: int = 0
    streak: int = 0
    offsets: int = 0
    offset_sum: float = 0.0
    offset_squares: float = 0.0

    def after(self, agreed: bool, offset: float | None = None) -> PeerRecord:
        """The record after one more replicated result of this peer; `offset` is the log of its
        figure over the others' (`agreement.Settlement.offsets`), when there was one."""
        kept = self
        if offset is not None and math.isfinite(offset):
            kept = replace(
                self,
                offsets=self.offsets + 1,
                offset_sum=self.offset_sum + offset,
                offset_squares=self.offset_squares + offset * offset,
            )
        if agreed:
            return replace(kept, agreed=kept.agreed + 1, streak=kept.streak + 1)
        return replace(kept, disagreed=kept.disagreed + 1, streak=0)

    @property
    def offset(self) -> float | None:
        """Its mean offset from its class: the mean log of its figure over the others' (negative:
        it reports itself faster); None before any comparison."""
        return self.offset_sum / self.offsets if self.offsets else None

    def _offset_error(self) -> float:
        """The standard error of the mean offset (its offsets' spread, at least `BIAS_SD_FLOOR`,
        over the root of their number; with one, the floor)."""
        if self.offsets < 2:
            return BIAS_SD_FLOOR
        mean = self.offset_sum / self.offsets
        variance = (self.offset_squares - self.offsets * mean * mean) / (self.offsets - 1)
        return max(math.sqrt(max(variance, 0.0)), BIAS_SD_FLOOR) / math.sqrt(self.offsets)

    @property
    def biased(self) -> bool:
        """Its figures sit off its class's for good: over at least `BIAS_MIN` comparisons, the mean
        offset is beyond `BIAS_TOLERANCE` by `BIAS_Z` standard errors."""
        if self.offsets < BIAS_MIN or self.offset is None:
            return False
        return abs(self.offset) - BIAS_Z * self._offset_error() > BIAS_TOLERANCE

    @property
    def distrusted(self) -> bool:
        """Caught more often than it agreed, at least twice: its replicas no longer count towards a
        majority (`agreement.settle`). An honest peer is an outlier by noise a few times in a
        hundred and agrees the rest; a peer that reports a false speed is an outlier nearly every
        time it meets an honest one, so two cheaters of one class cannot outvote the truth for long.
        A `biased` peer is distrusted however often it agreed."""
        return (self.disagreed >= 2 and self.disagreed > self.agreed) or self.biased

    def why_distrusted(self) -> str:
        """For people: what its record shows ("" when it is not distrusted)."""
        if self.biased and self.offset is not None:
            return (
                f"its figures ran {math.exp(self.offset):.3g}x its class's over {self.offsets} "
                f"comparisons (honest devices of one class sit within {BIAS_TOLERANCE:.0%} of it)"
            )
        if self.distrusted:
            return f"outside the majority {self.disagreed} times, inside it {self.agreed}"
        return ""

    @property
    def trusted(self) -> bool:
        """Whether its results are only spot-checked: `TRUST_AFTER` agreements in a row, and its
        mean offset cleared: within `BIAS_TOLERANCE` by one standard error. Until its record says
        which it is, a peer is checked every time: on a quiet class that takes about `TRUST_AFTER`
        comparisons, on a noisy one more (one comparison tells less there), so a cheater that
        agrees within one comparison's band is still compared until its offset gives it away."""
        cleared = self.offset is None or abs(self.offset) + self._offset_error() <= BIAS_TOLERANCE
        return self.streak >= TRUST_AFTER and cleared


def distrusted(records: Mapping[str, PeerRecord]) -> dict[str, str]:
    """The distrusted peers among `records`, each with why (`PeerRecord.why_distrusted`): what
    `agreement.settle` keeps out of every majority and names in its reasons."""
    return {peer: r.why_distrusted() for peer, r in records.items() if r.distrusted}


def check_probability(record: PeerRecord, spot_check: float) -> float:
    """How likely a task placed on this peer is replicated (1 until it is trusted)."""
    return spot_check if record.trusted else 1.0


def should_check(record: PeerRecord, spot_check: float, key: DrawKey, task_id: str) -> bool:
    """Whether this task, placed on this peer, gets a second replica: the campaign's secret draw."""
    return key.draw(Purpose.SPOT_CHECK, task_id) < check_probability(record, spot_check)
