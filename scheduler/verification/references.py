"""Reference devices: the submitter's own devices, trusted in every quorum of their class.

A quorum of strangers proves what a majority of independent peers agree on, and independence is
counted by what is costly to fake (networks). What it cannot see is one owner with identical devices
on several networks agreeing on the same lie: two of its keys outvote an honest third. A reference
device (`verify: {reference: [peer ids]}`) is one the submitter runs itself: placement puts one of
its class in every quorum (`replicas.pick_replicas`), and here its figure is the truth the others are
judged against. A replica that agrees with it (same outputs, within the class's band) is `replicated`
with it; one that does not is the outlier whatever the others say, so two keys of one owner agreeing
on a lie against the reference lose. The reference is never barred (its spread and its record are the
submitter's own machine's), and the settlement names it (`Settlement.reference`), so the row says who
vouched. A group without its reference's result (a class with none, or its task did not end done) is
settled by the majority as before (`agreement.settle`).

Each offset against the reference comes with its standard error as the class's spread has it
(`Settlement.error`), so a peer's record can judge its offsets against references by a figure it
did not set (`offsets.ReferenceOffsets`: from 4 comparisons, where offsets among strangers wait for 8).

`reference` may name an owner id (`owner-...`, `sark-node owner id`): every device of that owner is a
reference (`reference_peers`).

What it costs: the reference runs one task of every replicated task of its class, so its class's
replicated throughput is its own; what it gives up: a reference that is slow on a given day makes
honest replicas outliers (the submitter's device defines its class's figure).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence

from scheduler.verification.agreement import (
    Outcome,
    Replica,
    Settlement,
    agree,
    apart_by_pace,
    band,
    barred,
    comparison_error,
    settle,
)
from scheduler.verification.peers import Advertised


def reference_peers(named: Collection[str], peers: Iterable[Advertised]) -> frozenset[str]:
    """The peers `verify.reference` names: each peer id listed, and every peer whose owner id is listed
    (every device of a trusted owner; its owner as its verified statement says, `protocol.owner_of`,
    so a statement copied from the owner's device makes no reference: it is refused)."""
    listed = frozenset(named)
    return listed | {p.peer_id for p in peers if p.owner.owner_id and p.owner.owner_id in listed}


def judge(
    replicas: Sequence[Replica],
    wanted: int,
    class_spread: float,
    distrusted: Mapping[str, str],
    references: Collection[str] = (),
) -> Settlement:
    """The verdict over a task's replicas: against the first of `references` among them
    (`vouched`), else by the majority (`agreement.settle`); one result alone is `single`."""
    reference = next((r for r in replicas if r.peer_id in references), None)
    if reference is None or len(replicas) < 2:  # a result alone is `single`, the reference's too
        return settle(replicas, wanted, class_spread, distrusted)
    return vouched(reference, replicas, class_spread, distrusted)


def vouched(
    reference: Replica, replicas: Sequence[Replica], class_spread: float, distrusted: Mapping[str, str]
) -> Settlement:
    """`replicated` with the reference and every replica that agrees with it; every other replica
    is an outlier, with why (outputs, band, or it cannot vouch: distrusted or too scattered)."""
    others = [r for r in replicas if r is not reference]
    kept_out = barred(others, class_spread, {p: w for p, w in distrusted.items() if p != reference.peer_id})
    inside = [r for r in others if r.peer_id not in kept_out and agree(r, reference, class_spread)]
    outside = [r for r in others if r not in inside]
    why = "; ".join(_outlier(r, reference, class_spread, kept_out) for r in outside)
    offsets = tuple(
        (r.peer_id, math.log(r.median_ms / reference.median_ms))
        for r in others
        if r.fingerprint == reference.fingerprint and r.median_ms > 0 and reference.median_ms > 0
    )
    return Settlement(
        Outcome.REPLICATED,
        tuple(sorted(r.peer_id for r in (reference, *inside))),
        tuple((r.peer_id, r.median_ms) for r in outside),
        reference.median_ms,
        why,
        offsets,
        reference=reference.peer_id,
        error=comparison_error(class_spread),
    )


def _outlier(r: Replica, reference: Replica, class_spread: float, kept_out: Mapping[str, str]) -> str:
    if r.fingerprint != reference.fingerprint:
        return f"{r.peer_id}: outputs differ from the reference's ({reference.peer_id})"
    if r.peer_id in kept_out:
        return f"{r.peer_id}: {r.median_ms:.4g} ms, {kept_out[r.peer_id]}"
    by_pace = apart_by_pace(r, reference, class_spread)
    if by_pace is not None:
        return f"{r.peer_id} against the reference {reference.peer_id}: {by_pace}"
    return (
        f"{r.peer_id}: {r.median_ms:.4g} ms against the reference {reference.peer_id}'s "
        f"{reference.median_ms:.4g} ms (band {band(class_spread):.1%})"
    )
