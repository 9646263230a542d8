"""A row's verification columns: how its replica group settled it, the networks and the owners its
quorum came from, its device class, its peer's claim."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Final

from scheduler.state.placement import PeerView
from scheduler.state.settling import flagged
from scheduler.state.tasks import TaskState, TaskView
from scheduler.verification.classes import DeviceClass, device_class


def verify_columns(task: TaskView, peer: PeerView | None) -> dict[str, str]:
    """Verified, QuorumNetworks, QuorumOwners, DeviceClass and Claim. Verified: how the task's group
    settled it (`replicated k/n`, `outlier: why`, `disagreed: why`), `single` for an accepted result no other
    replica checked, `pending` while its group is unsettled, `unverifiable` for a task whose quorum
    could not be placed (its Status says so too), "" for another task without a result.
    QuorumNetworks: a replicated row's agreeing networks, ";"-joined; QuorumOwners: their owners
    (`replicas.voter_name`: an owner's short id, or a device's own id's end), ";"-joined. Claim: the peer's
    `claim_unverified` mark and why (`scheduler.verification.claims`)."""
    verified = "unverifiable" if task.state == TaskState.UNVERIFIABLE else ""
    if task.state == TaskState.DONE:
        verified = task.verified or ("pending" if task.replica_group else "single")
        if flagged(verified) and task.verify_detail:
            verified = f"{verified}: {task.verify_detail}"
    cls = class_name(task, peer)
    claim = f"claim_unverified: {'; '.join(peer.claim)}" if peer is not None and peer.claim else ""
    replicated = verified.startswith("replicated")
    networks = ";".join(task.quorum_networks) if replicated else ""
    owners = ";".join(task.quorum_owners) if replicated else ""
    return {
        "Verified": verified,
        "QuorumNetworks": networks,
        "QuorumOwners": owners,
        "DeviceClass": cls,
        "Claim": claim,
    }


def class_name(task: TaskView, peer: PeerView | None) -> str:
    """The name of a task's device class: its replica group's, else its peer's ("" neither)."""
    return class_id(task, peer)[:12]


def class_id(task: TaskView, peer: PeerView | None) -> str:
    """The whole id of a task's device class (`DeviceClass.id`), what a rule naming a class compares:
    its replica group's, else its peer's ("" neither)."""
    if task.device_class:
        return DeviceClass(task.device_class).id
    return device_class(peer.profile, task.unit).id if peer is not None else ""


KINDS: Final = ("verified", "unverifiable", "outlier", "disagreed", "single", "pending")
"""What `verification_counts` counts, in the order a line says them."""


def verification_counts(tasks: Iterable[TaskView]) -> dict[str, int]:
    """How many rows of verified jobs (replicated, spot-checked) ended each way: `verified` (a
    replicated row of the agreeing majority), `unverifiable`, `outlier`, `disagreed`, `single` (a
    spot-checked job's row no draw checked), `pending`; {} when no job asked `verify:`. Every kind
    is present, zero or not."""
    counts: Counter[str] = Counter()
    for task in tasks:
        if task.state == TaskState.UNVERIFIABLE:
            counts["unverifiable"] += 1
        elif task.state == TaskState.DONE and task.replica_group:
            label = task.verified or "pending"
            counts["verified" if label.startswith("replicated") else label.split(" ")[0]] += 1
    return {kind: counts[kind] for kind in KINDS} if counts else {}


def verification_line(counts: dict[str, int]) -> str:
    """`verification: 4 verified, 2 unverifiable, 1 outlier` (kinds with none left out, but the first
    two always said), or "" for a campaign that asked no verification."""
    said = [f"{n} {kind}" for kind, n in counts.items() if n or kind in KINDS[:2]]
    return f"verification: {', '.join(said)}" if counts else ""
