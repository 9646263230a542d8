"""A peer's record of agreements, and adaptive spot checks: how often its results are replicated.

Full replication doubles a campaign's tasks (plus one more replica per disagreement). A campaign may
ask `verify: {spot_check: p}` instead: a task runs on one peer and is replicated with a probability
that depends on that peer's record, as BOINC's adaptive replication does (Anderson, "BOINC: A
Platform for Volunteer Computing", 2019, section 6.4):

- a peer the submitter has seen agree fewer than `TRUST_AFTER` times since its last disagreement
  (a new peer, or one caught) is replicated every time: p = 1;
- a peer with such a streak is replicated with probability `p` (the campaign's);
- a peer caught as an outlier has its streak reset, so p = 1 again until it earns it back, and its
  unverified (`single`) results of the campaign are run again elsewhere (the cost is counted).

The draw is pure: a hash of the campaign's seed and the task id, so a resumed campaign decides the
same way and a peer cannot predict which of its tasks are checked without the seed.

What it costs (benchmarks/replication_sim.py): the extra tasks are p of the trusted peers' tasks plus
every task of untrusted peers, plus one replica per disagreement and the re-runs after a catch. What
it gives up: a cheater's results before its first check are shown as `single` (not verified) until
it is caught; only `replicated` rows are verified figures.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Final

TRUST_AFTER: Final = 5
"""Agreements in a row before a peer's results are only spot-checked."""


@dataclass(frozen=True)
class PeerRecord:
    """What the submitter has seen of one peer's replicated results (kept in its store).

    Attributes:
        agreed: results that agreed with a majority.
        disagreed: results outside a majority (outliers).
        streak: agreements since the last disagreement.
    """

    agreed: int = 0
    disagreed: int = 0
    streak: int = 0

    def after(self, agreed: bool) -> PeerRecord:
        """The record after one more replicated result of this peer."""
        if agreed:
            return replace(self, agreed=self.agreed + 1, streak=self.streak + 1)
        return replace(self, disagreed=self.disagreed + 1, streak=0)

    @property
    def distrusted(self) -> bool:
        """Caught more often than it agreed, at least twice: its replicas no longer count towards a
        majority (`agreement.settle`). An honest peer is an outlier by noise a few times in a
        hundred and agrees the rest; a peer that reports a false speed is an outlier nearly every
        time it meets an honest one, so two cheaters of one class cannot outvote the truth for long."""
        return self.disagreed >= 2 and self.disagreed > self.agreed

    @property
    def trusted(self) -> bool:
        """Whether its results are only spot-checked."""
        return self.streak >= TRUST_AFTER


def check_probability(record: PeerRecord, spot_check: float) -> float:
    """How likely a task placed on this peer is replicated (1 until it is trusted)."""
    return spot_check if record.trusted else 1.0


def draw(seed: int, task_id: str) -> float:
    """A uniform draw in [0, 1) fixed by the campaign's seed and the task."""
    digest = hashlib.sha256(f"{seed}:{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def should_check(record: PeerRecord, spot_check: float, seed: int, task_id: str) -> bool:
    """Whether this task, placed on this peer, gets a second replica."""
    return draw(seed, task_id) < check_probability(record, spot_check)
