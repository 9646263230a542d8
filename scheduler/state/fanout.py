"""A job's plan made tasks: one per chosen peer (pending, in its replica group), and the tasks no
peer could take, ended at once with why: `Unschedulable` when no peer fits, `Unverifiable` when
peers fit but too few independent ones to make the quorum `verify:` asks (`JobPlan.unverifiable`:
such a task never runs alone). A verified job short of peers that a challenge refused and will
challenge again is not placed yet (`awaiting`): its tasks wait, unplaced, for the next verdict."""

from __future__ import annotations

from protocol import ModelRef
from scheduler.state.events import AwaitChallenge, Command, MarkUnschedulable, RecordOutcome
from scheduler.state.placement import JobPlan
from scheduler.state.tasks import STATUS_OF, Lapse, TaskState, TaskView, task_id_of
from scheduler.verification.classes import device_class


def fanned(
    campaign_id: str, plan: JobPlan, model: ModelRef, now: float
) -> tuple[list[TaskView], list[Command]]:
    """A job's tasks (placed ones first, then the ended ones) and the commands that announce the
    ended ones: `MarkUnschedulable` with every peer's reasons, one `RecordOutcome` each."""
    placed, unplaced = fan_out(campaign_id, plan, model)
    if not plan.shortfall:
        return [*placed, *unplaced], []
    state, cause = (
        (TaskState.UNVERIFIABLE, Lapse.NO_QUORUM)
        if plan.unverifiable
        else (TaskState.UNSCHEDULABLE, Lapse.NO_FEASIBLE_PEER)
    )
    lines = tuple(f"{r.device_name} ({r.peer_id}): {'; '.join(r.details)}" for r in plan.rejected)
    reasons = {r.peer_id: r.reasons for r in plan.rejected}
    ids = tuple(t.task_id for t in unplaced)
    out: list[Command] = [MarkUnschedulable(plan.job.index, ids, reasons, plan.shortfall)]
    ended = []
    for task in unplaced:
        why = plan.shortfall
        ended.append(task.with_(state=state, failure_reason=cause, detail=why, reasons=lines, ended_at=now))
        out.append(RecordOutcome(task.task_id, STATUS_OF[state], cause, why))
    return [*placed, *ended], out


def awaiting(
    campaign_id: str, plan: JobPlan, model: ModelRef, until: float
) -> tuple[list[TaskView], list[Command]]:
    """A job that waits for a re-challenge (`plan.awaiting`): its tasks as planned now, none placed,
    each saying why it waits, with `until` (when the last awaited verdict is due) as its deadline; and
    the `AwaitChallenge` that says so once. The job is planned whole again when a verdict comes."""
    placed, unplaced = fan_out(campaign_id, plan, model)
    n = len(plan.awaiting)
    detail = (
        f"waits for the next challenge of {n} peer(s) its challenge refused (challenged again later "
        f"in the campaign); unverifiable if none passes: {plan.shortfall}"
    )
    tasks = [
        TaskView(
            task_id=t.task_id,
            job_index=t.job_index,
            unit=t.unit,
            model=t.model,
            awaits=detail,
            deadline=until,
        )
        for t in (*placed, *unplaced)
    ]
    return tasks, [AwaitChallenge(plan.job.index, tuple(t.task_id for t in tasks), detail)]


def fan_out(campaign_id: str, plan: JobPlan, model: ModelRef) -> tuple[list[TaskView], list[TaskView]]:
    """A job's tasks from its plan: one per chosen peer (pending), then the ones no peer could take.

    Returns:
        The placed tasks, numbered first, and the unplaced ones (still pending: the caller ends them).
    """
    unit = plan.job.spec.compute_unit
    size = plan.verify.replicas
    grouped = plan.verify.replicated and plan.needs.replicable
    placed = [
        TaskView(
            task_id=task_id_of(campaign_id, plan.job.index, n),
            job_index=plan.job.index,
            unit=unit,
            model=model,
            peer_id=ranked.peer.peer_id,
            device_name=ranked.peer.profile.device_name,
            replica_group=task_id_of(campaign_id, plan.job.index, n // size * size) if grouped else "",
            device_class=device_class(ranked.peer.profile, unit).key if grouped else "",
        )
        for n, ranked in enumerate(plan.chosen)
    ]
    unplaced = [
        TaskView(
            task_id=task_id_of(campaign_id, plan.job.index, n),
            job_index=plan.job.index,
            unit=unit,
            model=model,
        )
        for n in range(len(plan.chosen), plan.wanted)
    ]
    return placed, unplaced
