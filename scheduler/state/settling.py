"""A replica group's verdict inside the scheduler: settle it, or ask for one more replica.

A stage with its own types, as Nomad's reconciler is: `settle_groups` takes a `SettlingState` (what it
reads of the machine) and returns `Settled` (labels, added replicas, commands, the peers' records),
which the machine applies; it holds no state of its own and changes none. It calls `verdict` for each
group once all its tasks have ended (`agreement.settle` over the accepted ones). Two replicas that
disagree (`pending`) and a spot check the draw picks (`reputation.should_check`: the campaign's secret
key and the task id) ask for one more replica on another peer of the group's class on another host
(`quorum.more_peer`: which one is a secret draw too, so no peer can arrange to check itself); the machine adds
it as a task of the same job and group, so the campaign does not end before it settles. Otherwise each
accepted task gets its row's label (`TaskView.verified`) and the node is told what the group says of
each peer (`ReplicasSettled.evidence`, weighed by `evidence.weigh`: a majority on one network, or of
fresh keys, counts little or nothing against anyone), to keep each peer's record
(`reputation.PeerRecord`) in its store. A group
with a reference device's result (`verify.reference`) is settled against it (`references.judge`), its
rows name it, and one more replica goes to the reference of the class first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace

from protocol import short_owner
from scheduler.language.campaign import Campaign
from scheduler.language.needs import Needs
from scheduler.language.verify import Verify
from scheduler.state.events import Command, RecordOutcome, ReplicasSettled
from scheduler.state.placement import PeerView
from scheduler.state.quorum import more_peer
from scheduler.state.retry import placed_load
from scheduler.state.tasks import Agreement, Lapse, Status, TaskState, TaskView, task_id_of
from scheduler.verification.agreement import (
    POOL_KEEP,
    Outcome,
    Replica,
    Settlement,
    band,
    pair_error,
    pooled_spread,
    process_error,
    teaches,
)
from scheduler.verification.draws import DrawKey
from scheduler.verification.evidence import weigh
from scheduler.verification.networks import network_of
from scheduler.verification.references import judge, reference_peers
from scheduler.verification.replicas import Candidate, voter_name
from scheduler.verification.reputation import PeerRecord, distrusted, should_check

MORE = "more"
"""`verdict`'s answer when the group needs one more replica."""


@dataclass(frozen=True)
class SettlingState:
    """What settling reads of the machine, and never writes: a stage's input, as Nomad's reconciler
    takes its snapshot. The machine builds one per pass (`Scheduler.handle`).

    Attributes:
        campaign_id: the campaign's id (task ids).
        key: the campaign's secret (`draws.DrawKey`): spot checks and the next replica's peer.
        campaign: the campaign (each job's `verify:`).
        tasks: every task by id, in task order.
        peers: the peers the scheduler knows, by id.
        needs: each job's needs, by job index (ranking a peer for one more replica).
        records: each peer's record of agreements, as the node's store keeps them.
        now: the `now` of the event being handled (an added replica that cannot run ends then).
        errors: each class's pool (`pool_key`): its honest replicas' process errors, oldest first,
            as the node's store keeps them across campaigns (`agreement.pool_error`).
    """

    campaign_id: str
    key: DrawKey
    campaign: Campaign
    tasks: Mapping[str, TaskView]
    peers: Mapping[str, PeerView]
    needs: Sequence[Needs]
    records: Mapping[str, PeerRecord]
    now: float
    errors: Mapping[str, tuple[float, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Settled:
    """What settling asks the machine to apply, each in the order it was decided.

    Attributes:
        labelled: accepted replicas with their row's label and reason (`TaskView.verified`,
            `verify_detail`); a group settled again (a member turned distrusted) is labelled again.
        added: one more replica for a group that needs one: pending on the peer picked, or ended
            unverifiable when no peer of the class on another network is left.
        commands: `ReplicasSettled` for each settled group, `RecordOutcome` for each added replica
            that ended at once.
        records: every peer's record of agreements after these settlements.
        errors: every class's pool after them (the agreeing replicas' errors added).
    """

    labelled: tuple[TaskView, ...] = ()
    added: tuple[TaskView, ...] = ()
    commands: tuple[Command, ...] = ()
    records: Mapping[str, PeerRecord] = field(default_factory=dict)
    errors: Mapping[str, tuple[float, ...]] = field(default_factory=dict)


@dataclass
class _Decided:
    """Settling's decisions so far within one call (the rounds add to it); `Settled` once done."""

    records: dict[str, PeerRecord]
    errors: dict[str, tuple[float, ...]]
    labelled: list[TaskView] = field(default_factory=list)
    added: list[TaskView] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)

    def tasks(self, tasks: Mapping[str, TaskView]) -> dict[str, TaskView]:
        """`tasks` with every decision so far laid over it (added replicas after the rest)."""
        return {**tasks, **{t.task_id: t for t in (*self.labelled, *self.added)}}


def settle_groups(state: SettlingState) -> Settled:
    """Every group whose tasks have all ended: its labels and `ReplicasSettled`, or one more task
    (settled at once in a second round when no peer is left for it: it is added ended). A peer that
    turns distrusted in a round has the groups it agreed in settled again in the next."""
    out = _Decided(dict(state.records), dict(state.errors))
    for _ in range(3):
        before = distrusted(out.records)
        _settle_round(state, out.tasks(state.tasks), out)
        turned = distrusted(out.records).keys() - before.keys()
        if not turned and not any(t.ended for t in out.added):
            break
    return Settled(tuple(out.labelled), tuple(out.added), tuple(out.commands), out.records, out.errors)


def _settle_round(state: SettlingState, tasks: Mapping[str, TaskView], out: _Decided) -> None:
    campaign = state.campaign
    suspects = distrusted(out.records).keys() - references_of(campaign, state.peers)  # the submitter's own
    for members in unsettled_groups(tasks.values(), suspects).values():
        first = members[0]
        verify = resolved(campaign.verify_of(campaign.jobs[first.job_index]), state.peers)
        processes = campaign.jobs[first.job_index].spec.processes
        spread = pooled_spread(out.errors.get(pool_key(first), ()), processes)
        found = verdict(members, verify, spread, out.records, state.key)
        if isinstance(found, str):
            n = sum(1 for t in out.tasks(tasks).values() if t.job_index == first.job_index)
            needs = state.needs[first.job_index]
            pick = more_peer(members, state.peers, needs, verify, placed_load(tasks.values()), state.key)
            task_id = task_id_of(state.campaign_id, first.job_index, n)
            added, command = _replica(task_id, first, pick, state.peers, state.now)
            out.added.append(added)
            out.commands.extend(command)
            continue
        networks = quorum_networks(found.settlement, state.peers)
        owners = quorum_owners(found.settlement, state.peers)
        pooled = min(POOL_KEEP, sum(1 for e in out.errors.get(pool_key(first), ()) if e > 0))
        said = agreement_of(found.settlement, members, spread, state.peers, pooled)
        out.labelled.extend(
            tasks[i].with_(
                verified=label,
                verify_detail=why,
                quorum_networks=networks,
                quorum_owners=owners,
                agreement=said,
            )
            for i, (label, why) in found.labels.items()
        )
        _record(state, members, found.settlement, processes, out)


def _record(
    state: SettlingState, members: Sequence[TaskView], settled: Settlement, processes: int, out: _Decided
) -> None:
    """`ReplicasSettled` for a settled group with what it says of each fresh replica's peer
    (`evidence.weigh`: weighed by its partners' records, a majority against a peer counting only
    from two networks or a reference device), those records updated, and the process errors of
    those that agreed added to their class's pool."""
    # a group settled again (a member turned distrusted) counts only its new replicas' records
    fresh = {t.peer_id for t in members if not t.verified}
    timed = [t.peer_id or "" for t in members if t.state == TaskState.DONE and t.progress.median_ms]
    networks = {p: network_of(state.peers[p].host) for p in timed if p in state.peers}
    owners = {p: state.peers[p].owner.owner_id for p in timed if p in state.peers}
    verify = resolved(state.campaign.verify_of(state.campaign.jobs[members[0].job_index]), state.peers)
    said = weigh(settled, timed, networks, out.records, verify.reference, state.now, owners)
    evidence = tuple((p, ev) for p, ev in said if p in fresh)
    agreed = tuple(p for p, ev in evidence if ev.agreed)
    outliers = tuple(p for p, ev in evidence if not ev.agreed and ev.weight > 0)
    offsets = tuple((p, ev.offset) for p, ev in evidence if ev.offset is not None and ev.weight > 0)
    pool = pool_key(members[0])
    errors = _errors(members, agreed, processes, pooled_spread(out.errors.get(pool, ()), processes))
    out.errors[pool] = (*out.errors.get(pool, ()), *errors)[-POOL_KEEP:]
    out.commands.append(
        ReplicasSettled(
            members[0].replica_group,
            settled.outcome.value,
            agreed,
            outliers,
            settled.reason,
            offsets,
            pool,
            errors,
            evidence,
        )
    )
    for peer, ev in evidence:
        out.records[peer] = out.records.get(peer, PeerRecord()).after(ev)


def _errors(
    members: Sequence[TaskView], agreed: Sequence[str], processes: int, class_spread: float
) -> tuple[float, ...]:
    """What the agreeing replicas add to their class's pool: each one's process error, from its
    processes' spread (of those whose whole spread is within FAR of the class's: `agreement.teaches`),
    or with one process from its distance to the others (`agreement.pair_error`)."""
    mine = [t for t in members if t.peer_id in agreed]
    if processes > 1:
        return tuple(process_error(t.spread, processes) for t in mine if teaches(t.spread, class_spread))
    figures = [t.progress.median_ms or 0.0 for t in mine]
    return tuple(pair_error(f, figures[:i] + figures[i + 1 :]) for i, f in enumerate(figures))


def _replica(
    task_id: str, first: TaskView, pick: Candidate | None, peers: Mapping[str, PeerView], now: float
) -> tuple[TaskView, list[Command]]:
    """One more task in `first`'s group on the picked peer (pending), or ended unschedulable."""
    fresh = TaskView(
        task_id=task_id,
        job_index=first.job_index,
        unit=first.unit,
        model=first.model,
        replica_group=first.replica_group,
        device_class=first.device_class,
    )
    if pick is not None:
        peer = peers[pick.peer_id]
        return fresh.with_(peer_id=peer.peer_id, device_name=peer.profile.device_name), []
    why = (
        "no further peer of the class of another owner on another network for one more replica "
        "(verify.replicas: distinct owners and networks; same_host: allow lets one machine's peers do it, "
        "a lab only)"
    )
    ended = fresh.with_(
        state=TaskState.UNVERIFIABLE, failure_reason=Lapse.NO_QUORUM, detail=why, ended_at=now
    )
    return ended, [RecordOutcome(task_id, Status.UNVERIFIABLE, Lapse.NO_QUORUM, why)]


@dataclass(frozen=True)
class Labels:
    """A settled group: each accepted task's label and reason, and the settlement."""

    labels: dict[str, tuple[str, str]]
    settlement: Settlement


def quorum_networks(settled: Settlement, peers: Mapping[str, PeerView]) -> tuple[str, ...]:
    """The networks a replicated group's agreeing peers came from, each once, sorted ("relayed" for
    one whose address was never seen); () for a group not replicated."""
    if settled.outcome != Outcome.REPLICATED:
        return ()
    found = {network_of(peers[p].host) or "relayed" for p in settled.agreed if p in peers}
    return tuple(sorted(found))


def quorum_owners(settled: Settlement, peers: Mapping[str, PeerView]) -> tuple[str, ...]:
    """The owners a replicated group's agreeing peers came from, each once, sorted (`voter_name`);
    () for a group not replicated."""
    if settled.outcome != Outcome.REPLICATED:
        return ()
    return tuple(
        sorted({voter_name(p, peers[p].owner.owner_id if p in peers else "") for p in settled.agreed})
    )


def agreement_of(
    settled: Settlement,
    members: Sequence[TaskView],
    class_spread: float,
    peers: Mapping[str, PeerView],
    pooled: int = 0,
) -> Agreement:
    """What a settled group's members keep of it for every view: the agreed figure, the band it was
    judged with (none for a result compared with nothing), the reference, the reason, and each timed
    replica's network ("relayed": never seen; "" for a peer no longer known) and declared owner."""
    timed = [t.peer_id for t in members if t.state == TaskState.DONE and t.progress.median_ms is not None]
    known = [p for p in timed if p]
    return Agreement(
        figure_ms=settled.figure_ms,
        band=band(class_spread) if len(known) > 1 else None,
        class_spread=class_spread if len(known) > 1 else None,
        pooled=pooled,
        reference=settled.reference,
        reason=settled.reason,
        networks=tuple((p, (network_of(peers[p].host) or "relayed") if p in peers else "") for p in known),
        owners=tuple(
            (p, short_owner(peers[p].owner.owner_id)) for p in known if p in peers and peers[p].owner.owner_id
        ),
    )


def unsettled_groups(
    tasks: Iterable[TaskView], suspects: Set[str] = frozenset()
) -> dict[str, list[TaskView]]:
    """Groups whose tasks have all ended and none of whose accepted tasks carries a label yet, and
    groups settled with a distrusted peer (`suspects`) in their agreeing majority (it turned
    distrusted since: they are settled again without it, with one more replica when the rest are
    no majority)."""
    groups: dict[str, list[TaskView]] = {}
    for task in tasks:
        if task.replica_group:
            groups.setdefault(task.replica_group, []).append(task)
    return {
        g: members
        for g, members in groups.items()
        if all(t.ended for t in members)
        and any(t.state == TaskState.DONE for t in members)
        and (
            not any(t.verified for t in members)
            or any(t.peer_id in suspects and t.verified.startswith("replicated") for t in members)
        )
    }


def verdict(
    members: Sequence[TaskView],
    verify: Verify,
    class_spread: float,
    records: Mapping[str, PeerRecord],
    key: DrawKey,
) -> Labels | str:
    """`MORE`, or the group's labels (see the module docstring)."""
    done = [t for t in members if t.state == TaskState.DONE and t.progress.median_ms is not None]
    wanted = verify.replicas if verify.replicas > 1 else min(len(members), 2)
    if verify.replicas == 1 and len(members) == 1 and len(done) == 1:
        first = done[0]
        if first.peer_id and should_check(
            records.get(first.peer_id, PeerRecord()), verify.spot_check, key, first.task_id
        ):
            return MORE
    missing = _reference_missing(members, verify)
    if missing and verify.reference_fallback != "allow":  # never settled by strangers alone
        return Labels(
            _labels(done, Settlement(Outcome.UNVERIFIABLE, reason=missing), verify), _nothing(missing)
        )
    replicas = [
        Replica(
            t.peer_id or "",
            t.progress.median_ms or 0.0,
            t.spread,
            t.fingerprint,
            t.core_spread,
            t.pace_ms,
            t.pace_cut,
        )
        for t in done
    ]
    settled = judge(replicas, wanted, class_spread, distrusted(records), verify.reference)
    if settled.outcome == Outcome.PENDING:
        if len(members) <= wanted:
            return MORE
        settled = Settlement(Outcome.DISAGREED, reason=f"{settled.reason}; no further replica ran")
    if not settled.reference and missing:
        said = f"{missing}: settled by the majority (verify.reference_fallback: allow)"
        settled = replace(settled, reason="; ".join(r for r in (settled.reason, said) if r))
    return Labels(_labels(done, settled, verify), settled)


def _nothing(why: str) -> Settlement:
    """A group its missing reference leaves unsettled: no figure, no agreement, nothing said of anyone."""
    return Settlement(Outcome.UNVERIFIABLE, reason=why)


def _reference_missing(members: Sequence[TaskView], verify: Verify) -> str:
    """Why a group that held a reference device's task has no result of it ("" otherwise): its
    attempt ended without a result, and a retry went to another peer of the class.

    The cheater's view: a liar in the group sees the reference's peer id in the campaign and may be
    able to make its attempt fail (a flood, a held challenge slot); what it wins is a group with no
    figure, `Unverifiable` with this reason (exit 1), never its own lie settled by the majority,
    unless the campaign allowed the fallback."""
    reported = {t.peer_id for t in members if t.state == TaskState.DONE}
    for attempt in (a for t in members for a in t.attempts):
        if attempt.peer_id in verify.reference and attempt.peer_id not in reported:
            why = attempt.outcome or "no result"
            if verify.reference_fallback == "allow":
                return f"the reference {attempt.peer_id} did not report ({why})"
            return (
                f"verify.reference: the reference {attempt.peer_id} did not report ({why}): a class is "
                "never settled without its reference; verify: {reference_fallback: allow} would let the "
                "majority settle it"
            )
    return ""


def _labels(done: Sequence[TaskView], settled: Settlement, verify: Verify) -> dict[str, tuple[str, str]]:
    labels: dict[str, tuple[str, str]] = {}
    outlying = {peer for peer, _ in settled.outliers}
    for task in done:
        if settled.outcome == Outcome.REPLICATED and task.peer_id in settled.agreed:
            label = settled.label(len(done)) + _vouched_by(settled, verify)
            detail = f"agreed at {settled.figure_ms:.4g} ms" + (
                f"; {settled.reason}" if settled.reason else ""
            )
        elif settled.outcome == Outcome.UNVERIFIABLE:
            label, detail = "unverifiable", settled.reason
        elif settled.outcome == Outcome.REPLICATED or task.peer_id in outlying:
            label, detail = "outlier", settled.reason
        else:
            label, detail = settled.label(len(done)), settled.reason
        labels[task.task_id] = (label, detail)
    return labels


def _vouched_by(settled: Settlement, verify: Verify) -> str:
    """What a replicated row adds to its label: the reference that vouched, and the lab switch."""
    said = [f"reference {settled.reference}"] if settled.reference else []
    said += ["same host"] if verify.same_host == "allow" else []
    return f" ({'; '.join(said)})" if said else ""


def references_of(campaign: Campaign, peers: Mapping[str, PeerView]) -> frozenset[str]:
    """Every reference device any job of the campaign names (`verify.reference`: a peer id, or an
    owner id for every device of that owner among `peers`)."""
    named = {p for job in campaign.jobs for p in campaign.verify_of(job).reference}
    return reference_peers(named, peers.values())


def resolved(verify: Verify, peers: Mapping[str, PeerView]) -> Verify:
    """`verify` with its references as peer ids: an owner id listed adds every device of that owner
    among `peers` (`references.reference_peers`)."""
    if not verify.reference:
        return verify
    return verify.with_(reference=tuple(sorted(reference_peers(verify.reference, peers.values()))))


def flagged(verified: str) -> bool:
    """Whether a row's Verified keeps its figure from standing as the task's (an outlier, a
    replica of a group that disagreed, or of one whose named reference gave no result)."""
    return verified.startswith(("outlier", "disagreed", "unverifiable"))


def pool_key(task: TaskView) -> str:
    """The pool a task's replicas' errors go to: its device class and its model (models of one class
    scatter differently: 2.4 % to 7.4 % on this machine)."""
    return f"{task.device_class}/{task.model.sha256[:16]}"
