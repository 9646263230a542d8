"""A replicated job's placement: its tasks in groups of `verify.replicas`, each group one device
class on distinct peers, owners and hosts (`replicas.pick_replicas` over placement's ranking).

`devices:` counts groups (figures), not tasks: `any` is one group, `n` is n groups, `all` makes as
many full groups as the feasible peers allow, each peer in at most one (a class whose peers cannot
fill a group is left out). A group is placed whole or not at all: the tasks of one that cannot be
filled with independent peers end `Unverifiable` and never run alone (the shortfall names the rule
and the field that would allow it: `same_host: allow` where the peers share a machine). A job with
spot checks (`verify.spot_check`) is placed as an unreplicated one: each task is its own group, and
the machine adds a replica when the draw says so; only on peers that one more replica could check
(`spot_checkable`): a class of one is unverifiable there too, never shown `single`. A reference
device (`verify.reference`) joins every group of its class (`replicas.pick_replicas`);
`class_references` says which classes have one that can, for `plan`. A named reference that is
missing (`reference_gap`) holds the classes it could belong to: their groups are not placed, and the
shortfall names the reference, why it is missing and `reference_fallback: allow`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final, Generic, Protocol, TypeVar

from protocol import ComputeUnit
from scheduler.language.verify import Verify
from scheduler.verification.classes import DeviceClass, device_class
from scheduler.verification.networks import network_of
from scheduler.verification.peers import Advertised
from scheduler.verification.references import reference_peers
from scheduler.verification.replicas import Candidate, by_class, checkable, pick_replicas


class Placeable(Protocol):
    """A ranked peer as grouping reads it (placement's `Ranked` is one; placement calls this module,
    so this module names what it reads rather than importing placement back)."""

    @property
    def peer(self) -> Advertised: ...


PlacedT = TypeVar("PlacedT", bound=Placeable)


def candidate(peer: Advertised, unit: ComputeUnit, verify: Verify) -> Candidate:
    """A peer as a replica candidate: its host's network (`networks.network_of`) and its owner. With
    `same_host: allow` its identity stands for its network, so any two peers pair (the lab's way
    around one machine; the row says so); two devices of one owner never pair, switch or not."""
    host = peer.peer_id if verify.same_host == "allow" else network_of(peer.host)
    return Candidate(peer.peer_id, device_class(peer.profile, unit), host, peer.owner.owner_id)


@dataclass(frozen=True)
class Groups(Generic[PlacedT]):
    """A replicated job's placement.

    Attributes:
        chosen: the peers of every full group, group after group (a group that cannot be filled
            with independent peers gets none: its tasks do not run alone).
        wanted: how many tasks the job wants (replicas x groups).
        shortfall: why fewer than `wanted` were chosen, naming the rule and the field that would
            allow more, or "".
    """

    chosen: tuple[PlacedT, ...]
    wanted: int
    shortfall: str = ""


@dataclass(frozen=True)
class ReferenceGap:
    """The classes a missing named reference holds back, and why ("" and none: nothing missing).

    Attributes:
        held: the classes among a job's feasible peers that no reference of theirs can join while a
            named one is missing: their groups are not placed (`Unverifiable`).
        why: the reference(s) missing and why, with the field that would let the majority settle.
    """

    held: frozenset[DeviceClass] = frozenset()
    why: str = ""


NO_GAP: Final = ReferenceGap()
"""Nothing held: no named reference is missing, or the campaign allows the fallback."""

FALLBACK: Final = "verify: {reference_fallback: allow} would let the majority settle it"


def reference_gap(
    peers: Sequence[Advertised], matching: Sequence[Advertised], unit: ComputeUnit, verify: Verify
) -> ReferenceGap:
    """Which classes among `matching` (a job's feasible peers, of all the discovered `peers`) a
    missing named reference holds back. A reference is missing when it is not among `matching` with
    a known network (not found, relayed, or refused for this job; an owner id with no device found).
    One the submitter found is of a class it can name: that class is held, unless another reference
    of it joins. One it never found could be of any class: every class with no reference of its own
    that joins is held. Nothing is held where the campaign allows the fallback.

    The cheater's view: a liar sees which peers the campaign names (it may be one of the others of
    the class) and can try to make the reference absent; it cannot make the class settle without it.
    """
    if not verify.strict_reference:
        return NO_GAP
    classes = {c.peer_id: c for c in (candidate(p, unit, verify) for p in matching)}
    joins = {
        c.device_class
        for c in classes.values()
        if c.host and c.peer_id in reference_peers(verify.reference, matching)
    }
    held: set[DeviceClass] = set()
    said: list[str] = []
    for name in verify.reference:
        found = [p for p in peers if name in (p.peer_id, p.owner.owner_id)]
        if not found:
            held |= {c.device_class for c in classes.values()} - joins
            said.append(f"{name} not found (offline, or not discovered)")
            continue
        for p in found:
            mine = classes.get(p.peer_id)
            if mine is not None and mine.host:
                continue
            cls = device_class(p.profile, unit)
            if cls in joins or cls not in {c.device_class for c in classes.values()}:
                continue
            held.add(cls)
            why = "relayed: its network is unknown" if mine is not None else "it does not fit this job"
            said.append(f"{p.peer_id} cannot join ({why})")
    if not held:
        return NO_GAP
    why = f"verify.reference: {'; '.join(said)}: a class is never settled without its reference; {FALLBACK}"
    return ReferenceGap(frozenset(held), why)


def place_groups(
    matching: Sequence[PlacedT],
    devices: str | int,
    unit: ComputeUnit,
    verify: Verify,
    gap: ReferenceGap = NO_GAP,
) -> Groups[PlacedT]:
    """Full groups of independent peers; the tasks of a group that cannot be filled are
    unverifiable (the shortfall says why and which field would allow it). The classes `gap`
    holds (their named reference missing) make no group."""
    size = verify.replicas
    by_id = {r.peer.peer_id: r for r in matching}
    limit = 1 if devices == "any" else len(matching) if devices == "all" else int(devices)
    refs = reference_peers(verify.reference, (r.peer for r in matching))
    pool = [c for r in matching if (c := candidate(r.peer, unit, verify)).device_class not in gap.held]
    got = _fill(pool, size, limit, refs)
    chosen = tuple(by_id[c.peer_id] for c in got)
    groups = limit if devices != "all" else max(1, len(chosen) // size)
    wanted = size * groups
    if len(chosen) == wanted:
        return Groups(chosen, wanted)
    if gap.held and len(_fill([candidate(r.peer, unit, verify) for r in matching], size, limit, refs)) > len(
        got
    ):
        return Groups(chosen, wanted, f"{gap.why}; {len(chosen) // size} of {groups} quorum(s) placed")
    rule = (
        f"verify.replicas: {size} peers of one device class, of distinct owners on distinct networks, "
        "per task (IPv4 /24, IPv6 /64, loopback one; a relayed peer none); "
        f"{len(chosen) // size} of {groups} quorum(s) placed"
    )
    fix = (
        "more peers of the class of other owners on other networks, or fewer verify.replicas, would allow it"
    )
    if verify.same_host != "allow":
        lab = [candidate(r.peer, unit, verify.with_(same_host="allow")) for r in matching]
        if len(_fill(lab, size, limit, refs)) > len(chosen):
            fix = "verify: {same_host: allow} would let peers on one machine make one (a lab only)"
    return Groups(chosen, wanted, f"{rule}; {fix}")


def spot_checkable(
    matching: Sequence[PlacedT], unit: ComputeUnit, verify: Verify, gap: ReferenceGap = NO_GAP
) -> tuple[tuple[PlacedT, ...], str]:
    """The peers a spot check could reach, in order, and why the others are left out ("" none):
    a peer's task is shown only where one more replica could check it, on a peer of its class of
    another owner on another network (`pick_replicas`), and its own network is known. A class of
    one (a unique claim, one machine, one owner) is unverifiable, never `single`; so is a class
    `gap` holds (its named reference missing)."""
    refs = reference_peers(verify.reference, (r.peer for r in matching))
    candidates = [candidate(r.peer, unit, verify) for r in matching]
    pairs = zip(matching, candidates, strict=True)
    reach = tuple(
        r for r, c in pairs if c.host and c.device_class not in gap.held and checkable(c, candidates, refs)
    )
    if len(reach) == len(matching):
        return reach, ""
    if gap.held and len(spot_checkable(matching, unit, verify)[0]) > len(reach):
        return reach, gap.why
    rule = (
        f"verify.spot_check: a task runs only where a peer of its device class, of another owner on "
        f"another network, could check it; {len(matching) - len(reach)} of {len(matching)} feasible "
        "peers have none (a class of one, or one machine, owner or unknown network)"
    )
    fix = "more peers of the class of other owners on other networks would allow it"
    if verify.same_host != "allow":
        lab, _ = spot_checkable(matching, unit, verify.with_(same_host="allow"))
        if len(lab) > len(reach):
            fix = "verify: {same_host: allow} would let peers on one machine check each other (a lab only)"
    return reach, f"{rule}; {fix}"


def _fill(
    candidates: Sequence[Candidate], size: int, limit: int, references: Collection[str]
) -> tuple[Candidate, ...]:
    """Up to `limit` full groups of `size` independent candidates, group after group; a class
    that cannot fill a group gives none (a group of fewer would verify nothing). A reference device
    is in every group of its class, so it is never taken."""
    chosen: list[Candidate] = []
    taken: set[str] = set()
    for _ in range(limit):
        got = pick_replicas(candidates, size, taken=taken, references=references)
        if len(got) < size:
            break
        chosen.extend(got)
        taken.update(c.peer_id for c in got if c.peer_id not in references)
    return tuple(chosen)


@dataclass(frozen=True)
class ClassReference:
    """Whether a device class among a job's feasible peers has a reference device in its quorums.

    Attributes:
        device_class: the class.
        reference: the reference device that joins its quorums, or "" (none of the class, or none
            that can: `why_not`).
        why_not: why no reference joins ("" when one does).
    """

    device_class: DeviceClass
    reference: str
    why_not: str = ""


def class_references(
    peers: Sequence[Advertised], unit: ComputeUnit, verify: Verify, gap: ReferenceGap = NO_GAP
) -> tuple[ClassReference, ...]:
    """Each class among `peers` (a job's feasible ones), in order, with the reference that joins its
    quorums or why none does: none of the class is listed, or its network is unknown (relayed: it
    cannot count toward a quorum), or a named one is missing (`gap`: the class is unverifiable)."""
    out: list[ClassReference] = []
    refs = reference_peers(verify.reference, peers)
    for cls, members in by_class(candidate(p, unit, verify) for p in peers).items():
        mine = [c for c in members if c.peer_id in refs]
        joins = [c for c in mine if c.host]
        if joins:
            out.append(ClassReference(cls, joins[0].peer_id))
        elif cls in gap.held:
            out.append(ClassReference(cls, "", f"unverifiable: {gap.why}"))
        elif mine:
            why = f"reference {mine[0].peer_id}: its network is unknown (relayed): it counts toward no quorum"
            out.append(ClassReference(cls, "", why))
        else:
            out.append(ClassReference(cls, "", "no reference device of this class (verify.reference)"))
    return tuple(out)


def class_of(peer: Advertised, unit: ComputeUnit) -> DeviceClass:
    """A peer's class for a unit (what a replica group records)."""
    return device_class(peer.profile, unit)
