"""What a settled replica group says of each of its peers, weighed by who said it (issue 38, scope 4).

A majority against a peer is only as good as its members. `weigh` turns one `agreement.Settlement`
into one `reputation.Evidence` a peer, each naming its partners (who the peer was compared with, and
their networks) and weighed by them:

- an agreeing member: one agreement; its offset from the rest of the majority weighs as much as
  those partners' `reputation.standing` (a new partner a quarter, a distrusted one nothing), so fresh
  keys that agree with a peer on a lie cannot shift its mean offset far;
- an outlier of a replicated group: a disagreement only when the majority against it is independent,
  a reference device of the submitter's among it or its members on `NETWORKS_MIN` networks or more
  (`networks.network_of`: one machine is one network, whatever the lab switch lets a quorum be), and
  then weighing the majority's mean standing; otherwise weight 0 (the record keeps that those
  partners were overruled, for `peers`);
- a group that disagreed (no majority): each peer gets a disagreement of half the mean standing of
  the others, since nobody can tell which of them was wrong: a liar in a class of two pays for every
  large lie, its honest partner pays as little as the liar's standing is worth, and neither is
  ever distrusted on one partner's word (`reputation.WITNESSES_MIN`). Its offsets add nothing.

A reference device (the submitter's own, `verify.reference`) weighs in full and is named with the
network `reputation.REFERENCE`: its word alone is independent evidence, and each offset against it
carries its standard error as the class's spread has it (`Settlement.error`, `offsets`). One owner's
devices (`owners`: each peer's verified owner, `protocol.owner`) are one witness: a partner is named
by its owner's id, once, and a majority counts its owners as it counts its networks.

Pure: the networks and records come in, the evidence goes out; the state machine (`state.settling`)
and benchmarks/replication_sim.py both call it.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping, Sequence
from typing import Final

from scheduler.verification.agreement import Outcome, Settlement
from scheduler.verification.reputation import NETWORKS_MIN, REFERENCE, Evidence, PeerRecord, standing

DISAGREED_SHARE: Final = 0.5
"""What a group with no majority counts against each of its peers, times the others' standing."""


def weigh(
    settled: Settlement,
    group: Sequence[str],
    networks: Mapping[str, str],
    records: Mapping[str, PeerRecord],
    references: Collection[str] = (),
    at: float = 0.0,
    owners: Mapping[str, str] | None = None,
) -> tuple[tuple[str, Evidence], ...]:
    """Each of `group` (the peers of the group's timed replicas) with what the settlement says of
    it; a group that is neither replicated nor disagreed says nothing. `owners`: peer -> its owner's
    id, for peers that declared one (the rest are their own)."""
    owners = owners or {}

    def worth(partners: Sequence[str]) -> float:
        weights = [1.0 if p in references else standing(records.get(p, PeerRecord())) for p in partners]
        return statistics.mean(weights) if weights else 0.0

    def named(partners: Sequence[str]) -> tuple[tuple[str, str], ...]:
        said = {owners.get(p) or p: REFERENCE if p in references else networks.get(p, "") for p in partners}
        return tuple(said.items())  # one owner's devices: one witness

    out: list[tuple[str, Evidence]] = []
    if settled.outcome == Outcome.REPLICATED:
        majority = list(settled.agreed)
        counts = independent(majority, networks, references, owners)
        for peer in group:
            error = settled.error if peer != settled.reference else 0.0  # against a reference
            if peer in majority:
                others = [p for p in majority if p != peer]
                ev = Evidence(True, worth(others), settled.offset_of(peer), named(others), at, error)
            else:
                weight = worth(majority) if counts else 0.0
                ev = Evidence(False, weight, settled.offset_of(peer), named(majority), at, error)
            out.append((peer, ev))
    elif settled.outcome == Outcome.DISAGREED:
        for peer in group:
            others = [p for p in group if p != peer]
            out.append((peer, Evidence(False, DISAGREED_SHARE * worth(others), None, named(others), at)))
    return tuple(out)


def independent(
    majority: Sequence[str],
    networks: Mapping[str, str],
    references: Collection[str],
    owners: Mapping[str, str] | None = None,
) -> bool:
    """Whether a majority may count a disagreement against its outliers: it holds a reference
    device (the submitter's own), or its members span `NETWORKS_MIN` known networks and as many
    owners (`owners`: a peer that declared none is its own)."""
    if set(majority) & set(references):
        return True
    voters = {(owners or {}).get(p) or p for p in majority}
    return len({networks.get(p, "") for p in majority} - {""}) >= NETWORKS_MIN and len(voters) >= NETWORKS_MIN
