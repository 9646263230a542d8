"""Which peers replicate a task: N distinct identities of N distinct owners on N distinct networks, all of
one device class.

A quorum is only worth something if its members are independent. One owner can mint any number of
libp2p keys on one machine, so identities alone prove nothing: replicas must also come from distinct
networks (`networks.network_of` of the IP address the submitter's connection saw, not an address the
peer advertises: advertised addresses are the peer's word); a peer on an unknown network (relayed)
is in no replicated group. Replicas must also be of distinct owners (`protocol.owner`: a device's
advert may carry its owner's signed statement; one owner's devices are one vote, as BOINC's one
result per user per work unit), and the lab switch (`same_host: allow`) relaxes only the network rule,
never this one. What this cannot separate: one owner with many machines on many addresses that
declares no owner key, or identical devices under one owner that agree on the same lie (README,
"What verification proves"; reference devices answer the latter).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from protocol import short_owner
from scheduler.verification.classes import DeviceClass


@dataclass(frozen=True)
class Candidate:
    """A feasible peer for a replicated task, best first in the order given.

    Attributes:
        peer_id: the worker.
        device_class: its class for the task's unit (`classes.device_class`).
        host: the network the submitter's connection to it came from (`networks.network_of`; ""
            unknown or relayed: never placed in a replicated group, since it cannot count toward a
            quorum), or with the lab switch its own id.
        owner: its owner's id from a verified owner statement ("": none stated, its own owner).
    """

    peer_id: str
    device_class: DeviceClass
    host: str = ""
    owner: str = ""

    @property
    def voter(self) -> str:
        """Whose vote it is in a quorum: its owner's, else its own."""
        return self.owner or self.peer_id


def pick_replicas(
    candidates: Sequence[Candidate],
    count: int,
    *,
    taken: Iterable[str] = (),
    taken_hosts: Iterable[str] = (),
    device_class: DeviceClass | None = None,
    references: Collection[str] = (),
    taken_owners: Iterable[str] = (),
) -> tuple[Candidate, ...]:
    """Up to `count` candidates of one class, distinct in identity, owner (`Candidate.voter`) and
    network (none unknown), in the given order, except that a reference device of the class
    (`references`) comes first, one a group (none when a taken peer is one already).

    Args:
        candidates: feasible peers, best first (placement's ranking).
        count: how many replicas are wanted.
        taken: peers that already hold a replica of the task (never picked again).
        taken_hosts: their networks.
        device_class: the class the task's replicas are in, once its first replica is placed; None
            picks the first class, in the order of its best-ranked peer, that has `count`
            independent peers (else the one with most).
        references: the submitter's own devices (`verify.reference`): never counted as taken by
            another group, so one joins every quorum of its class.
        taken_owners: the voters (`Candidate.voter`) of the peers in `taken`: none of theirs is picked.

    Returns:
        Fewer than `count` when no class has enough independent peers: the caller says so.
    """
    held = set(taken)
    if references and not held & set(references):
        candidates = sorted(candidates, key=lambda c: c.peer_id not in references)  # stable
    else:
        references = ()
    taken_by = _Taken(set(taken_hosts), set(taken_owners))
    if device_class is not None:
        return _pick_in(candidates, count, device_class, held, taken_by, references)
    best: tuple[Candidate, ...] = ()
    for cls in dict.fromkeys(c.device_class for c in candidates):
        got = _pick_in(candidates, count, cls, set(held), taken_by.copy(), references)
        if len(got) == count:
            return got
        best = got if len(got) > len(best) else best
    return best


def checkable(peer: Candidate, candidates: Sequence[Candidate], references: Collection[str] = ()) -> bool:
    """Whether one more replica of `peer`'s task has somewhere to go: a candidate of its class, of
    another owner on another network (a spot check's; a class of one has none)."""
    return bool(
        pick_replicas(
            candidates,
            1,
            taken=(peer.peer_id,),
            taken_hosts=(peer.host,),
            taken_owners=(peer.voter,),
            device_class=peer.device_class,
            references=references,
        )
    )


@dataclass(frozen=True)
class _Taken:
    """The networks and the voters a group already holds."""

    hosts: set[str]
    voters: set[str]

    def copy(self) -> _Taken:
        return _Taken(set(self.hosts), set(self.voters))


def _pick_in(
    candidates: Sequence[Candidate],
    count: int,
    cls: DeviceClass,
    peers: set[str],
    taken: _Taken,
    references: Collection[str],
) -> tuple[Candidate, ...]:
    chosen: list[Candidate] = []
    for c in candidates:
        if len(chosen) == count:
            break
        if c.device_class != cls or c.peer_id in peers or not c.host or c.host in taken.hosts:
            continue
        if c.voter in taken.voters:
            continue  # one owner's devices are one vote
        if c.peer_id in references and any(x.peer_id in references for x in chosen):
            continue  # one reference a group is enough: the others' tasks go to other groups
        chosen.append(c)
        peers.add(c.peer_id)
        taken.hosts.add(c.host)
        taken.voters.add(c.voter)
    return tuple(chosen)


def by_class(candidates: Iterable[Candidate]) -> Mapping[DeviceClass, tuple[Candidate, ...]]:
    """Candidates grouped by class, each group in the given order."""
    groups: dict[DeviceClass, list[Candidate]] = {}
    for c in candidates:
        groups.setdefault(c.device_class, []).append(c)
    return {k: tuple(v) for k, v in groups.items()}


def voter_name(peer_id: str, owner: str) -> str:
    """Whose vote a peer is, as rows and `plan` name it: its owner's short id (`owner-` and 8 hex
    digits), or, for a device that declared no owner (its own), `…` and its peer id's last 8 characters."""
    return short_owner(owner) if owner else f"…{peer_id[-8:]}"
