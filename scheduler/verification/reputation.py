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

Against a reference device the record knows more: the reference's figure is the submitter's own,
and one offset's standard error is the class's (`Evidence.error`), so those offsets are kept apart
(`offsets.ReferenceOffsets`) and judged by that error alone from 4 comparisons, never by the
peer's own scatter (which a liar mixing lies with the truth would choose).

Who the evidence came from (issue 38, scope 4). A peer's record is only as good as the peers it was
compared with, and one owner can mint any number of keys. So each piece of evidence comes weighed
(`evidence.weigh`, the settlement's partners' own records: a new or untrusted partner counts less, a
distrusted one not at all, and a majority against a peer counts only from two networks or more or
with a reference device), and the record keeps who it came from (`Witness`: each partner's id and
network, what it counted against the peer and what it was overruled for). No peer is `biased` or
`distrusted` on fewer than `WITNESSES_MIN` distinct partners over `NETWORKS_MIN` networks: two
Sybils on one machine, or two anywhere, cannot turn a record however often they outvote it.
Records decay with a half-life (`HALF_LIFE_S`, `PeerRecord.decayed`): evidence from months ago
weighs half what it did, so a record says what a peer is doing now.

What it costs (benchmarks/replication_sim.py): the extra tasks are p of the trusted peers' tasks plus
every task of untrusted peers, plus one replica per disagreement and the re-runs after a catch. What
it gives up: a cheater's results before its first check are shown as `single` (not verified) until
it is caught; only `replicated` rows are verified figures.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from scheduler.verification.draws import DrawKey, Purpose
from scheduler.verification.offsets import ReferenceOffsets

TRUST_AFTER: Final = 5
"""Agreements in a row before a peer's results are only spot-checked."""
BIAS_MIN: Final = 8
"""Comparisons with its class (weighed) before a peer's mean offset is judged."""
BIAS_TOLERANCE: Final = 0.04
"""How far (log of a ratio, about 4 %) an honest device may sit from its class for good: boards of
one class differ by about 1 %, and a figure's own noise averages out over the comparisons."""
BIAS_Z: Final = 3.0
"""Standard errors of the mean offset it must clear the tolerance by."""
BIAS_SD_FLOOR: Final = 0.01
"""The smallest spread of offsets assumed (a few equal offsets prove less than their spread says)."""
OUTVOTED_MIN: Final = 3
"""Disagreements (weighed) before a peer is `outvoted`: with two, an honest peer in a class where 30 %
are one owner's keys on distinct networks (the network rule cannot see them) was distrusted in the
simulation when two pairs of them outvoted it before its second agreement (1 honest peer in 100, at
6 % and 7.4 % noise); with three, none over three fleets (benchmarks/replication_sim.py, poison)."""
WITNESSES_MIN: Final = 3
"""Distinct partners a peer's evidence must come from before it is `biased` or `distrusted`."""
NETWORKS_MIN: Final = 2
"""Distinct networks those partners must span (`networks.network_of`; unknown ones count none)."""
REFERENCE: Final = "reference"
"""The network a reference device (the submitter's own) is named with: its evidence alone counts."""
WITNESSES_KEEP: Final = 16
"""The partners a record names (the most recent): enough to say whose evidence it is."""
HALF_LIFE_S: Final = 30 * 86400.0
"""A record's half-life: evidence a month old weighs half (`PeerRecord.decayed`)."""
RESET_WEIGHT: Final = 0.5
"""A disagreement of at least this weight ends a peer's streak of agreements (its spot checks);
a lighter one (fresh partners, a pair that disagreed with a new peer) does not."""


@dataclass(frozen=True)
class Witness:
    """One partner a peer was compared with, and what that partner's evidence did to its record.

    Attributes:
        peer_id: the partner.
        network: its network (`networks.network_of`; "" unknown).
        against: the weight of disagreements counted against the peer with it on the other side.
        overruled: disagreements with it on the other side that counted nothing (the majority
            was one network, or its members were not established).
        compared: the weight of offsets the peer was given against it.
    """

    peer_id: str
    network: str = ""
    against: float = 0.0
    overruled: float = 0.0
    compared: float = 0.0

    def scaled(self, factor: float) -> Witness:
        """This witness with its weights times `factor` (decay)."""
        return replace(
            self,
            against=self.against * factor,
            overruled=self.overruled * factor,
            compared=self.compared * factor,
        )


@dataclass(frozen=True)
class Evidence:
    """What one settled group says of one of its peers (`evidence.weigh` builds it).

    Attributes:
        agreed: inside the agreeing majority (an agreement), or not (a disagreement).
        weight: how much it counts: a disagreement's weight, and an offset's (0: nothing).
        offset: the log of its figure over the others' (`agreement.Settlement.offsets`), if any.
        partners: (peer id, network) of those it was compared with (the others of its majority for
            a member, the majority for an outlier, the other replicas of a group that disagreed).
        at: when (seconds since the epoch: the record decays to it first).
        error: where a reference device settled the group, the standard error of `offset` as the
            class's spread has it (`agreement.comparison_error`); 0 otherwise.
    """

    agreed: bool
    weight: float = 1.0
    offset: float | None = None
    partners: tuple[tuple[str, str], ...] = ()
    at: float = 0.0
    error: float = 0.0


@dataclass(frozen=True)
class PeerRecord:
    """What the submitter has seen of one peer's replicated results (kept in its store).

    Attributes:
        agreed: results that agreed with a majority (decayed).
        disagreed: the weight of results counted against it (`Evidence.weight`, decayed).
        streak: agreements since the last disagreement of weight `RESET_WEIGHT` or more (decayed).
        offsets: the weight of comparisons of its figure with its class's (`offset`).
        offset_sum: the weighted sum of their logs of ratios.
        offset_squares: the weighted sum of their squares.
        updated: when it last changed (seconds since the epoch; 0: before this was kept).
        witnesses: the partners its evidence came from, the most recent `WITNESSES_KEEP`.
        referenced: its offsets against reference devices, judged by the class's error
            (`offsets.ReferenceOffsets`).
    """

    agreed: float = 0
    disagreed: float = 0
    streak: float = 0
    offsets: float = 0
    offset_sum: float = 0.0
    offset_squares: float = 0.0
    updated: float = 0.0
    witnesses: tuple[Witness, ...] = ()
    referenced: ReferenceOffsets = field(default_factory=ReferenceOffsets)

    def decayed(self, now: float) -> PeerRecord:
        """This record as it stands at `now`: every count and weight halved per `HALF_LIFE_S` since
        it was last updated (unchanged before that time, or when it never was)."""
        if self.updated <= 0 or now <= self.updated:
            return self
        f = 0.5 ** ((now - self.updated) / HALF_LIFE_S)
        return PeerRecord(
            self.agreed * f,
            self.disagreed * f,
            self.streak * f,
            self.offsets * f,
            self.offset_sum * f,
            self.offset_squares * f,
            now,
            tuple(w.scaled(f) for w in self.witnesses),
            self.referenced.scaled(f),
        )

    def after(self, ev: Evidence) -> PeerRecord:
        """The record after one more settled group of this peer (decayed to `ev.at` first)."""
        r = self.decayed(ev.at)
        offsets, total, squares = r.offsets, r.offset_sum, r.offset_squares
        counted = ev.offset is not None and math.isfinite(ev.offset) and ev.weight > 0
        if counted and ev.offset is not None:
            offsets, total, squares = (
                offsets + ev.weight,
                total + ev.weight * ev.offset,
                squares + ev.weight * ev.offset * ev.offset,
            )
        agreed, disagreed, streak = r.agreed, r.disagreed, r.streak
        if ev.agreed:
            agreed, streak = agreed + 1, streak + 1
        else:
            disagreed += ev.weight
            streak = 0 if ev.weight >= RESET_WEIGHT else streak
        witnesses = _witnessed(r.witnesses, ev, counted)
        updated = max(r.updated, ev.at)
        referenced = r.referenced
        if counted and ev.offset is not None and ev.error > 0:
            referenced = referenced.after(ev.offset, ev.error, ev.weight)
        return PeerRecord(agreed, disagreed, streak, offsets, total, squares, updated, witnesses, referenced)

    @property
    def offset(self) -> float | None:
        """Its mean offset from its class: the weighted mean log of its figure over the others'
        (negative: it reports itself faster); None before any comparison."""
        return self.offset_sum / self.offsets if self.offsets > 0 else None

    def _offset_error(self) -> float:
        """The standard error of the mean offset (its offsets' spread, at least `BIAS_SD_FLOOR`,
        over the root of their weight; with less than two, the floor)."""
        if self.offsets < 2:
            return BIAS_SD_FLOOR
        mean = self.offset_sum / self.offsets
        variance = (self.offset_squares - self.offsets * mean * mean) / (self.offsets - 1)
        return max(math.sqrt(max(variance, 0.0)), BIAS_SD_FLOOR) / math.sqrt(self.offsets)

    def independent(self, kind: str) -> bool:
        """Whether its evidence of `kind` ("against": disagreements, "compared": offsets) came from
        `WITNESSES_MIN` distinct partners over `NETWORKS_MIN` networks, or from a reference device
        (the submitter's own: `REFERENCE`)."""
        those = [w for w in self.witnesses if getattr(w, kind) > 0]
        networks = {w.network for w in those} - {""}
        if REFERENCE in networks:
            return True
        return len(those) >= WITNESSES_MIN and len(networks) >= NETWORKS_MIN

    @property
    def biased(self) -> bool:
        """Its figures sit off its class's for good: over at least `BIAS_MIN` comparisons from
        independent partners (`independent`), the mean offset is beyond `BIAS_TOLERANCE` by
        `BIAS_Z` standard errors; or its offsets against reference devices alone are, by the
        class's error (`offsets.ReferenceOffsets.biased`: from 4 comparisons)."""
        if self.referenced.biased(BIAS_TOLERANCE, BIAS_Z):
            return True
        if self.offsets < BIAS_MIN or self.offset is None:
            return False
        off = abs(self.offset) - BIAS_Z * self._offset_error() > BIAS_TOLERANCE
        return off and self.independent("compared")

    @property
    def outvoted(self) -> bool:
        """Counted against more than it agreed, at least `OUTVOTED_MIN` times, by independent partners."""
        return self.disagreed >= OUTVOTED_MIN and self.disagreed > self.agreed and self.independent("against")

    @functools.cached_property
    def distrusted(self) -> bool:
        """Its replicas no longer count towards a majority (`agreement.settle`): it was counted
        against more often than it agreed, at least `OUTVOTED_MIN` times (`outvoted`), or it is
        `biased`; either only on evidence from `WITNESSES_MIN` partners over `NETWORKS_MIN`
        networks. An honest peer is an outlier by noise a few times in a hundred and agrees the
        rest; a peer that reports a false speed is an outlier nearly every time it meets honest ones.
        Read once per record (a record never changes; a settlement asks it of every peer for each
        of its groups)."""
        return self.outvoted or self.biased

    def why_distrusted(self) -> str:
        """For people: what its record shows and on whose evidence ("" when it is not distrusted)."""
        against = self.referenced
        if against.biased(BIAS_TOLERANCE, BIAS_Z) and against.mean is not None:
            return (
                f"its figures ran {math.exp(against.mean):.3g}x the reference's over {against.weight:.3g} "
                f"comparisons (standard error {against.error():.1%} from its class's spread; honest devices "
                f"of one class sit within {BIAS_TOLERANCE:.0%}); {self.evidence('compared')}"
            )
        if self.biased and self.offset is not None:
            return (
                f"its figures ran {math.exp(self.offset):.3g}x its class's over {self.offsets:.3g} "
                f"comparisons (honest devices of one class sit within {BIAS_TOLERANCE:.0%} of it); "
                f"{self.evidence('compared')}"
            )
        if self.outvoted:
            return (
                f"counted outside the majority {self.disagreed:.3g} times, inside it {self.agreed:.3g}; "
                f"{self.evidence('against')}"
            )
        return ""

    def evidence(self, kind: str) -> str:
        """Whose evidence of `kind` ("against", "compared", "overruled") the record holds: each
        partner with its network and weight, or "none"."""
        those = sorted((w for w in self.witnesses if getattr(w, kind) > 0), key=lambda w: -getattr(w, kind))
        said = ", ".join(
            f"{w.peer_id} ({w.network or 'no known network'}) {getattr(w, kind):.3g}" for w in those
        )
        label = {"against": "against it", "compared": "compared with", "overruled": "overruled"}[kind]
        return f"{label}: {said or 'none'}"

    @property
    def trusted(self) -> bool:
        """Whether its results are only spot-checked: `TRUST_AFTER` agreements in a row, and its
        mean offset cleared: within `BIAS_TOLERANCE` by one standard error. Until its record says
        which it is, a peer is checked every time: on a quiet class that takes about `TRUST_AFTER`
        comparisons, on a noisy one more (one comparison tells less there), so a cheater that
        agrees within one comparison's band is still compared until its offset gives it away. Its
        offsets against reference devices must clear too, by the class's error
        (`offsets.ReferenceOffsets.cleared`), which its own few tight figures cannot narrow."""
        cleared = self.offset is None or abs(self.offset) + self._offset_error() <= BIAS_TOLERANCE
        cleared = cleared and self.referenced.cleared(BIAS_TOLERANCE)
        return self.streak >= TRUST_AFTER - 1e-9 and cleared


def _witnessed(kept: tuple[Witness, ...], ev: Evidence, counted: bool) -> tuple[Witness, ...]:
    """`kept` with `ev`'s partners added (each moved to the end: the most recent last), the last
    `WITNESSES_KEEP`."""
    by_id = {w.peer_id: w for w in kept}
    share = ev.weight / len(ev.partners) if ev.partners else 0.0
    for peer_id, network in ev.partners:
        w = by_id.pop(peer_id, Witness(peer_id, network))
        by_id[peer_id] = replace(
            w,
            network=network or w.network,
            against=w.against + (ev.weight if not ev.agreed else 0.0),
            overruled=w.overruled + (1.0 if not ev.agreed and ev.weight <= 0 else 0.0),
            compared=w.compared + (share if counted else 0.0),
        )
    return tuple(by_id.values())[-WITNESSES_KEEP:]


def standing(record: PeerRecord) -> float:
    """How much a partner's word weighs in another peer's record: 0 when it is distrusted, a
    quarter when it is new, rising to 1 once it agreed `TRUST_AFTER` times."""
    if record.distrusted:
        return 0.0
    return 0.25 + 0.75 * min(1.0, record.agreed / TRUST_AFTER)


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
