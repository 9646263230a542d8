"""Each replica group's verification, as every view shows it: one agreed figure per (job, class).

Derived once, from the task views (`verification_groups`): the settling labelled each member with how
its group settled (`TaskView.verified`) and what the settlement said (`TaskView.agreement`: the agreed
figure, the band it judged with, the reference, the reason, each replica's network), so nothing here
is read back from a row's text. A group is one task measured by a quorum of peers of one class (a job
with `devices:` several groups, each its own); a spot-checked job's unchecked task is a group of one
(`single`), and a group whose quorum could not be placed is `unverifiable` with the shortfall as its
reason. `CampaignReport.verification` carries them (results.json), the renderers draw them
(`node.report.verifyreport`, the API, the dashboard), and `agreed_changes` compares two campaigns'
agreed figures for `report --diff`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Literal

from protocol import Value
from scheduler.state.tasks import TaskState, TaskView
from scheduler.verification.classes import DeviceClass

GroupOutcome = Literal["replicated", "disagreed", "single", "unverifiable", "pending", "failed"]
"""How a group ended: a figure agreed, none agreed, one result no replica checked, no quorum could
be placed, not settled yet, or no member measured at all."""


class ReplicaFigure(Value):
    """One replica of a group: who ran it, the figure it reported, its network and its verdict.

    Attributes:
        task_id: the replica's task.
        peer: its worker's peer id ("" never placed).
        device: its device's name.
        figure_ms: the figure settling compared (the median of its process medians); None without one.
        network: the network it counted as (`networks.network_of`, "relayed"; "" unknown).
        owner: its owner's short id where it declared one (`protocol.owner`; "" its own owner).
        verdict: its row's verdict: `replicated k/n (...)`, `outlier`, `disagreed`, `single`,
            `pending`, or how it ended without a result (`unverifiable`, `failed`, ...).
    """

    task_id: str
    peer: str = ""
    device: str = ""
    figure_ms: float | None = None
    network: str = ""
    owner: str = ""
    verdict: str = ""


class GroupVerification(Value):
    """One replica group's verification: the agreed figure, the band, the replicas, the outliers.

    Attributes:
        group: the group's id (its first task's id; an unplaced quorum's: its job's first task's).
        job_index: its job.
        device_class: its class's short name (`DeviceClass.name`), for display.
        class_id: its class's whole id (`DeviceClass.id`): what comparisons read ("" in files
            written before it).
        model: the model it measured.
        unit: where it ran (`TaskView.shown_unit`).
        outcome: how the group ended (`GroupOutcome`).
        agreed_ms: the agreed figure; None unless replicated.
        band: the relative band the replicas were judged with; None where nothing was compared.
        reference: the reference device that vouched for the figure, or "".
        networks: the networks the agreeing quorum came from.
        owners: the owners it came from (`replicas.voter_name`: one owner's devices are one vote).
        outliers: the peers whose figures were refused.
        reason: why, for people (each outlier with its figure, the band; the shortfall of an
            unverifiable group).
        replicas: every member, in task order.
    """

    group: str
    job_index: int
    device_class: str = ""
    class_id: str = ""
    model: str = ""
    unit: str = ""
    outcome: GroupOutcome
    agreed_ms: float | None = None
    band: float | None = None
    reference: str = ""
    networks: tuple[str, ...] = ()
    owners: tuple[str, ...] = ()
    outliers: tuple[str, ...] = ()
    reason: str = ""
    replicas: tuple[ReplicaFigure, ...] = ()

    @property
    def verified(self) -> bool:
        """Whether the group has a figure that stands as verified."""
        return self.outcome == "replicated" and self.agreed_ms is not None


def verification_groups(tasks: Iterable[TaskView]) -> tuple[GroupVerification, ...]:
    """Every replica group of the tasks (each task once, by id), in the order their first task
    comes, and a job's tasks whose quorum could not be placed as one group (they never got a group
    or a class); () when no job asked `verify:`."""
    groups: dict[str, dict[str, TaskView]] = {}
    for task in tasks:
        if task.replica_group:
            groups.setdefault(task.replica_group, {})[task.task_id] = task
        elif task.state == TaskState.UNVERIFIABLE:
            groups.setdefault(f"job-{task.job_index}/unplaced", {})[task.task_id] = task
    return tuple(group_of(tuple(members.values())) for members in groups.values())


def group_of(members: Sequence[TaskView]) -> GroupVerification:
    """One group's verification from its members (`verification_groups`)."""
    first = members[0]
    said = next((t.agreement for t in members if t.agreement is not None), None)
    networks = dict(said.networks) if said is not None else {}
    owners = dict(said.owners) if said is not None else {}
    outcome = _outcome(members)
    refused = next((t.detail for t in members if t.state == TaskState.UNVERIFIABLE and t.detail), "")
    return GroupVerification(
        group=first.replica_group or first.task_id,
        job_index=first.job_index,
        device_class=DeviceClass(first.device_class).name if first.device_class else "",
        class_id=DeviceClass(first.device_class).id if first.device_class else "",
        model=first.model.name,
        unit=first.shown_unit,
        outcome=outcome,
        agreed_ms=said.figure_ms if said is not None and outcome == "replicated" else None,
        band=said.band if said is not None else None,
        reference=said.reference if said is not None else "",
        networks=next((t.quorum_networks for t in members if t.quorum_networks), ()),
        owners=next((t.quorum_owners for t in members if t.quorum_owners), ()),
        outliers=tuple(t.peer_id or "" for t in members if _verdict(t) == "outlier"),
        reason=(said.reason if said is not None else "") or (refused if outcome == "unverifiable" else ""),
        replicas=tuple(_replica(t, networks, owners) for t in members),
    )


def _replica(task: TaskView, networks: dict[str, str], owners: dict[str, str]) -> ReplicaFigure:
    done = task.state == TaskState.DONE
    return ReplicaFigure(
        task_id=task.task_id,
        peer=task.peer_id or "",
        device=task.device_name,
        figure_ms=task.progress.median_ms if done else None,
        network=networks.get(task.peer_id or "", ""),
        owner=owners.get(task.peer_id or "", ""),
        verdict=_verdict(task),
    )


def _verdict(task: TaskView) -> str:
    """A member's verdict: its label once settled, `pending` before, else how it ended."""
    if task.state == TaskState.DONE:
        return task.verified or "pending"
    return task.state.value


def _outcome(members: Sequence[TaskView]) -> GroupOutcome:
    verdicts = [_verdict(t) for t in members]
    if any(v.startswith("replicated") for v in verdicts):
        return "replicated"
    if any(v.startswith(("disagreed", "outlier")) for v in verdicts):
        return "disagreed"
    if "single" in verdicts:
        return "single"
    if "pending" in verdicts or not all(t.ended for t in members):
        return "pending"
    return "unverifiable" if TaskState.UNVERIFIABLE.value in verdicts else "failed"


SHOWN: Final = 12
"""The most characters of a peer id a table shows (its end: ids share their `12D3KooW` start)."""


def short_peer(peer: str) -> str:
    """A peer id as the tables show it: its last `SHOWN` characters."""
    return peer if len(peer) <= SHOWN else f"…{peer[-SHOWN:]}"


class AgreedChange(Value):
    """One (job, class, unit) of two campaigns' verified groups compared (before = A, after = B).

    Attributes:
        job_index, device_class, unit, model: what was measured, and on which class.
        before_ms, after_ms: each side's agreed figure (None where that side has none).
        change_pct: B's agreed figure over A's, in percent, where both were verified.
        verdict: `beyond the band` (the change is wider than the wider of the two bands),
            `within the band`, or what one side lacks (`A not verified: single`, `only in B`).
        note: each side's band and replicas, for people.
    """

    job_index: int
    device_class: str
    unit: str
    model: str = ""
    before_ms: float | None = None
    after_ms: float | None = None
    change_pct: float | None = None
    verdict: str
    note: str = ""


def agreed_changes(
    before: Sequence[GroupVerification], after: Sequence[GroupVerification]
) -> tuple[AgreedChange, ...]:
    """Two campaigns' groups paired by job, class and unit (in order where a job has several of one
    class), each pair's agreed figures compared; a group with no partner is said to be alone. Two
    groups whose classes share a short name but not their whole id are two classes, each alone."""
    keyed: dict[tuple[int, str, str], tuple[list[GroupVerification], list[GroupVerification]]] = {}
    for side, groups in enumerate((before, after)):
        for g in groups:
            keyed.setdefault((g.job_index, g.device_class, g.unit), ([], []))[side].append(g)
    out: list[AgreedChange] = []
    for (job, cls, unit), (mine, theirs) in keyed.items():
        for k in range(max(len(mine), len(theirs))):
            a = mine[k] if k < len(mine) else None
            b = theirs[k] if k < len(theirs) else None
            if a is not None and b is not None and a.class_id and b.class_id and a.class_id != b.class_id:
                out += [_change(job, cls, unit, a, None), _change(job, cls, unit, None, b)]  # one name, two
            else:  # classes (a profile ground to share 32 bits): never compared
                out.append(_change(job, cls, unit, a, b))
    return tuple(out)


def _change(
    job: int, cls: str, unit: str, a: GroupVerification | None, b: GroupVerification | None
) -> AgreedChange:
    shown = a or b
    model = shown.model if shown is not None else ""
    row = AgreedChange(job_index=job, device_class=cls, unit=unit, model=model, verdict="")
    row = row.with_(
        before_ms=a.agreed_ms if a is not None else None,
        after_ms=b.agreed_ms if b is not None else None,
        note="; ".join(f"{n} {_said(g)}" for n, g in (("A", a), ("B", b)) if g is not None),
    )
    if a is None or b is None:
        return row.with_(verdict="only in A" if b is None else "only in B")
    if not (a.verified and b.verified):
        missing = [f"{n} {_unverified(g)}" for n, g in (("A", a), ("B", b)) if not g.verified]
        return row.with_(verdict="; ".join(missing))
    assert a.agreed_ms is not None
    assert b.agreed_ms is not None
    change = (b.agreed_ms - a.agreed_ms) / a.agreed_ms * 100.0 if a.agreed_ms > 0 else None
    width = max(a.band or 0.0, b.band or 0.0) * 100.0
    apart = change is not None and abs(change) > width
    return row.with_(change_pct=change, verdict="beyond the band" if apart else "within the band")


def _unverified(group: GroupVerification) -> str:
    """Why a side has no agreed figure: its outcome, or a replicated group settled before the agreed
    figure was kept (a campaign stored by an earlier version)."""
    if group.outcome == "replicated":
        return "replicated, its agreed figure not kept (stored before it was)"
    return f"not verified: {group.outcome}"


def _said(group: GroupVerification) -> str:
    """A side's group in a few words: its outcome, band and how many replicas."""
    band = f", band {group.band:.1%}" if group.band is not None else ""
    return f"{group.outcome} ({len(group.replicas)} replica(s){band})"
