"""Verification: whether a result's figures can stand, and whether peers that measured one thing agree.

Pure, like the rest of `scheduler`, and built on the campaign language alone: these judgements know
nothing of the scheduler's tasks, and a peer only as `peers.Advertised` (id, host, profile), so the
state machine and the results room build on them, never the other way. A single result is checked
against its own raw parts and against physics (`figures`, `bounds`, `sendcheck`), each refusal a
value with its reason.
Replicas are picked from peers of one device class on distinct hosts (`classes`, `replicas`); their
figures agree or not (`agreement`); a peer's record of that feeds its spot checks (`reputation`); an
advertised calibration is believed or not (`claims`), or measured by a drawn product (`challenge`).
Where these meet the scheduler's tasks (a replicated job's placement, a replica group settled) is
`scheduler.state`'s: `replication`, `settling`.

Modules:
    figures    check_figures: a result's figures derived again from its raw parts, or a Refusal
    bounds     out_of_bounds: readings without raw parts held to physics, the worker's profile, the task;
               placed_profile
    sendcheck  check_sends: a load client's records against the schedule the submitter gave it (a fleet
               member's deal, a lone open loop's seed), or a Refusal
    classes    device classes: the profile parts two peers share exactly when their timings should agree
    replicas   pick_replicas: N peers of one class, distinct identity, owner, network; checkable; voter_name
    networks   network_of: a host's network (IPv4 /24, IPv6 /64, mapped v4 as v4, loopback one, relayed "")
    agreement  when replicas agree (a band from their pooled spread), settle: replicated k/n, disagreed
    references judge: a group with a reference device (the submitter's own) settled against its figure
    reputation a peer's record of agreements, whose evidence it holds, decaying; adaptive spot checks
    offsets    ReferenceOffsets: a peer's offsets against reference devices, judged by its class's error
    evidence   weigh: what a settled group says of each peer, weighed by its partners' records and networks
    draws      DrawKey: the campaign's secret, and the keyed draws of every choice a worker could exploit
    claims     a peer's advertised calibration against physics and its class: claim_unverified
    challenge  a drawn matmul's sizing, seed and checked rows, its rows and time judged: claim_unverified
    peers      Advertised: what a judgement reads of a peer (id, host, profile; PeerView is one)
"""

from __future__ import annotations

from scheduler.verification import challenge
from scheduler.verification.agreement import (
    POOL_KEEP,
    Outcome,
    Replica,
    Settlement,
    pool_error,
    pooled_spread,
    process_error,
    settle,
    spread_of,
)
from scheduler.verification.bounds import OVERRUN, placed_profile
from scheduler.verification.claims import claim_problems
from scheduler.verification.classes import DeviceClass, device_class
from scheduler.verification.draws import SECRET_BYTES, DrawKey, Purpose
from scheduler.verification.evidence import weigh
from scheduler.verification.figures import Refusal, check_figures
from scheduler.verification.offsets import ReferenceOffsets
from scheduler.verification.peers import Advertised
from scheduler.verification.references import judge, reference_peers, vouched
from scheduler.verification.replicas import Candidate, by_class, checkable, pick_replicas, voter_name
from scheduler.verification.reputation import Evidence, PeerRecord, Witness, distrusted, should_check
from scheduler.verification.sendcheck import LATE_SLACK_S, check_sends, draws_seed

__all__ = [
    "LATE_SLACK_S",
    "OVERRUN",
    "POOL_KEEP",
    "SECRET_BYTES",
    "Advertised",
    "Candidate",
    "DeviceClass",
    "DrawKey",
    "Evidence",
    "Outcome",
    "PeerRecord",
    "Purpose",
    "ReferenceOffsets",
    "Refusal",
    "Replica",
    "Settlement",
    "Witness",
    "by_class",
    "challenge",
    "check_figures",
    "check_sends",
    "checkable",
    "claim_problems",
    "device_class",
    "distrusted",
    "draws_seed",
    "judge",
    "pick_replicas",
    "placed_profile",
    "pool_error",
    "pooled_spread",
    "process_error",
    "reference_peers",
    "settle",
    "should_check",
    "spread_of",
    "voter_name",
    "vouched",
    "weigh",
]
