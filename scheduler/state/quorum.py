"""Which peer joins a replica group: a retried replica's pool, and the peer of one more replica.

Both keep a group independent: the group's device class, a network none of its other tasks is on
(`networks.network_of`, never an unknown one), an owner none of them is of. One more replica (a spot
check, a tie-break) goes to the class's reference device first (`verify.reference`), else to the first
feasible peer in the order of the campaign's secret draw, so no peer can arrange to check itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.language.campaign import Campaign
from scheduler.language.needs import Needs
from scheduler.language.verify import Verify
from scheduler.state.placement import PeerView, rank
from scheduler.state.replication import candidate
from scheduler.state.tasks import TaskView
from scheduler.verification.classes import DeviceClass
from scheduler.verification.draws import DrawKey, Purpose
from scheduler.verification.references import reference_peers
from scheduler.verification.replicas import Candidate, pick_replicas


def replica_pool(
    task: TaskView, tasks: Mapping[str, TaskView], peers: Mapping[str, PeerView], campaign: Campaign
) -> list[PeerView]:
    """The peers a task may be retried on: any for an unreplicated task; for a replica, those of its
    group's class on a network (`networks.network_of`, never an unknown one) and of an owner none of
    the group's other live or done tasks is on or of."""
    if not task.replica_group:
        return list(peers.values())
    verify = campaign.verify_of(campaign.jobs[task.job_index])
    others = [
        t for t in tasks.values() if t.replica_group == task.replica_group and t.task_id != task.task_id
    ]
    held = [
        candidate(peers[t.peer_id], task.unit, verify) for t in others if t.peer_id and t.peer_id in peers
    ]
    hosts = {c.host for c in held} - {""}
    voters = {c.voter for c in held}
    pool = []
    for peer in peers.values():
        c = candidate(peer, task.unit, verify)
        if (
            c.device_class.key == task.device_class
            and c.host
            and c.host not in hosts
            and c.voter not in voters
        ):
            pool.append(peer)
    return pool


def more_peer(
    members: Sequence[TaskView],
    peers: Mapping[str, PeerView],
    needs: Needs,
    verify: Verify,
    placed: Mapping[str, int],
    key: DrawKey,
) -> Candidate | None:
    """A peer for one more replica: the group's class, none of its peers or hosts, in the order of
    the campaign's secret draw over the feasible ones (placement's ranking would let a peer that
    ranks itself second, or a second key of its owner's, predict that it checks the first); a
    reference device of the class first, when the group holds none."""
    unit = members[0].unit
    taken = [candidate(peers[t.peer_id], unit, verify) for t in members if t.peer_id and t.peer_id in peers]
    feasible = [candidate(r.peer, unit, verify) for r in rank(needs, list(peers.values()), placed=placed)]
    group = members[0].replica_group
    candidates = sorted(feasible, key=lambda c: key.draw(Purpose.REPLICA_PEER, f"{group}\x00{c.peer_id}"))
    got = pick_replicas(
        candidates,
        1,
        taken=[t.peer_id for t in members if t.peer_id],
        taken_hosts=[c.host for c in taken],
        device_class=DeviceClass(members[0].device_class),
        references=reference_peers(verify.reference, peers.values()),
        taken_owners=[c.voter for c in taken],
    )
    return got[0] if got else None
