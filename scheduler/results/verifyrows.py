"""A row's verification columns: how its replica group settled it, the networks its quorum came from,
its device class, its peer's claim."""

from __future__ import annotations

from scheduler.state.placement import PeerView
from scheduler.state.settling import flagged
from scheduler.state.tasks import TaskState, TaskView
from scheduler.verification.classes import DeviceClass, device_class


def verify_columns(task: TaskView, peer: PeerView | None) -> dict[str, str]:
    """Verified, QuorumNetworks, DeviceClass and Claim. Verified: how the task's group settled it
    (`replicated k/n`, `outlier: why`, `disagreed: why`), `single` for an accepted result no other
    replica checked, `pending` while its group is unsettled, "" for a task without a result.
    QuorumNetworks: a replicated row's agreeing networks, ";"-joined. Claim: the peer's
    `claim_unverified` mark and why (`scheduler.verification.claims`)."""
    verified = ""
    if task.state == TaskState.DONE:
        verified = task.verified or ("pending" if task.replica_group else "single")
        if flagged(verified) and task.verify_detail:
            verified = f"{verified}: {task.verify_detail}"
    cls = class_name(task, peer)
    claim = f"claim_unverified: {'; '.join(peer.claim)}" if peer is not None and peer.claim else ""
    networks = ";".join(task.quorum_networks) if verified.startswith("replicated") else ""
    return {"Verified": verified, "QuorumNetworks": networks, "DeviceClass": cls, "Claim": claim}


def class_name(task: TaskView, peer: PeerView | None) -> str:
    """The name of a task's device class: its replica group's, else its peer's ("" neither)."""
    if task.device_class:
        return DeviceClass(task.device_class).name
    return device_class(peer.profile, task.unit).name if peer is not None else ""
