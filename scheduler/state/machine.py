"""The scheduling state machine: one `Scheduler` per campaign, events in, commands out.

Life of a task: PENDING (placed on a peer, offer not yet sent, or waiting out a retry backoff) ->
OFFERED (offer sent; answered within ``offer_timeout_s`` or abandoned) -> LEASED (committed and
dispatched; each heartbeat extends the lease by its ttl, never past its end: `scheduler.state.leases`) ->
one ending: DONE, FAILED, UNSCHEDULABLE, UNVERIFIABLE (a `verify:` quorum that could not be placed on
independent peers: its tasks never run alone) or CANCELLED, reached exactly once and announced by one
`RecordOutcome`. A verified job short of peers that a challenge refused and will challenge again
(`placement.open_refusals`) is not planned for good at the start: its tasks wait unplaced (`awaits`,
`AwaitChallenge`) and the job is planned again with every discovery round, placed once its plan is
whole, ended as planned once no verdict it waits for is to come (or at the last one's due time).

Retry (`scheduler.state.retry`): a declined, lost, lapsed, overrun, released or retryably failed attempt
moves the task to another peer, or back to a busy (or leaving) one after a backoff; at most ``1 +
retry_budget`` attempts per task, released ones not counted. A fleet member that had a lease is never
replaced (its planned sends are passing): however it left, it ends failed and its merged row names it.
A result, progress or failure for any lease but the task's current one changes nothing (answered with
`SendCancel`). `SubmitterStopped` (Ctrl-C) withdraws what is out: pending again, no budget spent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import final

from protocol import FailureReason, ModelRef
from scheduler.language.campaign import Campaign
from scheduler.language.fleet import is_fleet
from scheduler.language.needs import Needs, campaign_needs, endpoint_models
from scheduler.state.events import (
    CancelRequested,
    Command,
    Event,
    FinishCampaign,
    LeaseLapsed,
    LeaseReleased,
    MessageArriving,
    OfferCommitted,
    OfferDeclined,
    OfferLost,
    PeersDiscovered,
    ProgressReported,
    RecordOutcome,
    ResultAccepted,
    ResultRejected,
    SendAck,
    SendCancel,
    SendDispatch,
    SendOffer,
    SendReclaim,
    SubmitterStopped,
    TaskFailedRemotely,
    Tick,
    void_lease,
)
from scheduler.state.fanout import awaiting, fanned
from scheduler.state.leases import granted, lapse_of, lease_deadline, reclaimed
from scheduler.state.placement import JobPlan, PeerView, awaited_until, plan_campaign, plan_job
from scheduler.state.quorum import replica_pool
from scheduler.state.retry import FINAL_FAILURES, SAME_PEER_LATER, backoff_s, due_offers, retry_step
from scheduler.state.settling import SettlingState, settle_groups
from scheduler.state.tasks import (
    STATUS_OF,
    Attempt,
    Cause,
    Lapse,
    SchedulerSnapshot,
    TaskProgress,
    TaskState,
    TaskView,
    close_last,
    leased_task,
    offered_task,
    withdrawn,
)
from scheduler.verification.draws import DrawKey
from scheduler.verification.reputation import PeerRecord


@final
class Scheduler:
    """The only owner of one campaign's scheduling state. Pure: time comes in as `now`."""

    def __init__(
        self,
        campaign_id: str,
        campaign: Campaign,
        models: Mapping[str, ModelRef],
        *,
        key: DrawKey,
        retry_budget: int = 3,
        offer_timeout_s: float = 10.0,
    ) -> None:
        """Start a campaign with no tasks yet: the first `PeersDiscovered` fans its jobs out. `key`
        is the campaign's secret (spot checks and replica peers are drawn from it): the node makes
        it once and keeps it in its store, never in the snapshot, never in an offer.

        Raises:
            UnresolvedModelError: a campaign model has no pinned `ModelRef`.
        """
        self._id = campaign_id
        self._key = key
        self._campaign = campaign
        self._models = {**models, **endpoint_models(campaign)}
        self._needs: tuple[Needs, ...] = campaign_needs(campaign, models)
        self._retry_budget = retry_budget
        self._offer_timeout_s = offer_timeout_s
        self._peers: dict[str, PeerView] = {}
        self._tasks: dict[str, TaskView] = {}
        self._planned = self._cancelled = self._finished = self._resuming = self._stopped = False
        self._waiting = False  # some job's tasks wait for a re-challenge (`_replan_awaiting`)
        self._now = 0.0  # the `now` of the event being handled
        self._records: dict[str, PeerRecord] = {}  # each peer's record of agreements (the node's store)
        self._errors: dict[str, tuple[float, ...]] = {}  # each class's pool of errors (the node's store)

    def handle(self, event: Event, now: float) -> list[Command]:
        """Apply one event at time `now` (wall-clock seconds), then act on deadlines that are due.

        Returns:
            The commands for the node to carry out, in order.
        """
        self._now = now
        out: list[Command] = self._resume(now) if self._resuming else []
        out += self._apply(event, now)
        if self._waiting and (isinstance(event, PeersDiscovered) or self._awaited_due(now)):
            out += self._replan_awaiting()
        out += self._settle_groups()
        out += self._expire(now)
        out += [] if self._stopped else self._send_due_offers(now)  # stopped: nothing new goes out
        if self._planned and not self._finished and all(t.ended for t in self._tasks.values()):
            self._finished = True
            out.append(FinishCampaign.tally([t.state for t in self._tasks.values()]))
        return out

    def next_deadline(self) -> float | None:
        """When to call `handle(Tick(), now)` next, or None if only an event can move things."""
        deadlines = [t.deadline for t in self._tasks.values() if not t.ended and t.deadline is not None]
        return min(deadlines, default=None)

    def know_records(
        self, records: Mapping[str, PeerRecord], errors: Mapping[str, tuple[float, ...]] | None = None
    ) -> None:
        """The peers' records of agreements and the classes' pools of honest replicas' process errors
        (`agreement.pool_error`: the bands) the node keeps: spot checks and settling read them."""
        self._records = dict(records)
        self._errors = dict(errors or {})

    @property
    def done(self) -> bool:
        """Whether every task has ended and `FinishCampaign` was emitted."""
        return self._finished

    def current_lease(self, task_id: str) -> str | None:
        """The only lease whose result the node may pass on as `ResultAccepted` (None: accept none)."""
        task = self._tasks.get(task_id)
        if task is None or task.state not in (TaskState.LEASED, TaskState.DONE):
            return None
        return task.lease_id

    def tasks(self) -> Sequence[TaskView]:
        """Every task in task order (jobs in file order, then n)."""
        return tuple(self._tasks.values())

    def peers(self) -> Sequence[PeerView]:
        """The peers the scheduler knows, as last discovered (without building a snapshot)."""
        return tuple(self._peers.values())

    def snapshot(self) -> SchedulerSnapshot:
        """All state as a plain frozen value, for the node's campaign store."""
        return SchedulerSnapshot(
            campaign_id=self._id,
            campaign=self._campaign,
            models=self._models,
            retry_budget=self._retry_budget,
            offer_timeout_s=self._offer_timeout_s,
            planned=self._planned,
            cancelled=self._cancelled,
            finished=self._finished,
            peers=self.peers(),
            tasks=self.tasks(),
        )

    @classmethod
    def restore(cls, snap: SchedulerSnapshot, key: DrawKey) -> Scheduler:
        """Rebuild a scheduler after a crash. Call `handle(Tick(), now)` right away: that first call
        re-arms every deadline from `now`, re-sends interrupted offers and emits `SendReclaim` for each
        lease granted before the crash."""
        scheduler = cls(
            snap.campaign_id,
            snap.campaign,
            snap.models,
            key=key,
            retry_budget=snap.retry_budget,
            offer_timeout_s=snap.offer_timeout_s,
        )
        scheduler._peers = {p.peer_id: p for p in snap.peers}
        scheduler._tasks = {t.task_id: t for t in snap.tasks}
        scheduler._planned, scheduler._cancelled = snap.planned, snap.cancelled
        scheduler._finished, scheduler._resuming = snap.finished, not snap.finished
        scheduler._waiting = any(t.awaits and not t.ended for t in snap.tasks)
        return scheduler

    def _apply(self, event: Event, now: float) -> list[Command]:
        match event:
            case PeersDiscovered():
                return self._on_peers(event)
            case OfferCommitted():
                return self._on_commit(event, now)
            case OfferDeclined():
                return self._on_decline(event, now)
            case OfferLost():
                return self._on_lost(event, now)
            case ProgressReported():
                return self._on_progress(event, now)
            case MessageArriving():
                return self._on_arriving(event, now)
            case ResultAccepted():
                return self._on_result(event)
            case TaskFailedRemotely(task_id=task, lease_id=lease, reason=reason, detail=detail, stage=stage):
                return self._on_failure(task, lease, reason, detail, now, stage.value if stage else "")
            case ResultRejected():
                detail = f"rejected result: {event.detail}"
                return self._on_failure(event.task_id, event.lease_id, event.reason, detail, now)
            case LeaseLapsed() | LeaseReleased():
                return self._on_lapse(event, now)
            case CancelRequested():
                return self._on_cancel(event)
            case SubmitterStopped():
                return self._withdraw(event.detail)
            case Tick():
                return []

    def _on_peers(self, event: PeersDiscovered) -> list[Command]:
        self._peers.update({p.peer_id: p for p in event.peers})
        if self._planned or self._cancelled:
            return []  # a job that waits for a re-challenge is planned again (`_replan_awaiting`)
        self._planned = True
        out: list[Command] = []
        peers = list(self._peers.values())
        for plan in plan_campaign(self._campaign, self._needs, peers, self._now):
            tasks, commands = self._fanned(plan)
            self._tasks.update({t.task_id: t for t in tasks})
            out += commands
        return out

    def _fanned(self, plan: JobPlan) -> tuple[list[TaskView], list[Command]]:
        """A job's tasks from its plan: waiting unplaced while a verdict it is short of is to come."""
        model = self._models[plan.job.model_key]
        if plan.awaiting:
            self._waiting = True
            return awaiting(self._id, plan, model, awaited_until(plan, tuple(self._peers.values())))
        return fanned(self._id, plan, model, self._now)

    def _awaited_due(self, now: float) -> bool:
        waits = (t for t in self._tasks.values() if t.awaits and not t.ended)
        return any(t.deadline is not None and t.deadline <= now for t in waits)

    def _replan_awaiting(self) -> list[Command]:
        """Each job whose tasks wait for a re-challenge planned again with the peers as they stand now
        (the tasks placed on other jobs' peers counting as load): placed when whole, or ended as
        planned once no verdict it waits for is to come; still waiting otherwise (its deadline the
        last awaited verdict's due time)."""
        jobs = sorted({t.job_index for t in self._tasks.values() if t.awaits and not t.ended})
        self._waiting = bool(jobs)
        if self._cancelled or not jobs:
            return []
        peers = tuple(self._peers.values())
        out: list[Command] = []
        for index in jobs:
            placed: dict[str, int] = {}
            for task in self._tasks.values():
                if not task.ended and task.peer_id is not None:
                    placed[task.peer_id] = placed.get(task.peer_id, 0) + 1
            job = self._campaign.jobs[index]
            verify = self._campaign.verify_of(job)
            plan = plan_job(job, self._needs[index], peers, placed=placed, verify=verify, now=self._now)
            if plan.awaiting:  # still short, a verdict still to come: wait on, until the latest one's due
                until = awaited_until(plan, peers)
                for task in [t for t in self._tasks.values() if t.job_index == index and t.awaits]:
                    self._put(task, deadline=until)
                continue
            tasks, commands = fanned(self._id, plan, self._models[job.model_key], self._now)
            self._replace_job(index, tasks)
            out += commands
        return out

    def _replace_job(self, index: int, tasks: Sequence[TaskView]) -> None:
        """The waiting tasks of job `index` replaced by its tasks as planned now, in task order."""
        rebuilt: dict[str, TaskView] = {}
        placed = False
        for task in self._tasks.values():
            if task.job_index != index:
                rebuilt[task.task_id] = task
            elif not placed:  # the job's tasks where its first waiting one stood
                rebuilt.update({t.task_id: t for t in tasks})
                placed = True
        self._tasks = rebuilt

    def _on_commit(self, event: OfferCommitted, now: float) -> list[Command]:
        task = offered_task(self._tasks, event.task_id, event.peer_id)
        if task is None:
            return [SendCancel(event.task_id, event.peer_id, event.lease_id, "the offer no longer stands")]
        attempts = (*task.attempts[:-1], task.attempts[-1].with_(lease_id=event.lease_id))
        timeout_s = self._campaign.jobs[task.job_index].spec.timeout_s
        lease = granted(task.model, event.lease_id, event.lease_ttl_s, timeout_s, now)
        progress = TaskProgress(queue_position=event.queue_position)
        self._put(task, state=TaskState.LEASED, attempts=attempts, progress=progress, **lease)
        return [SendDispatch(event.task_id, event.lease_id)]

    def _on_decline(self, event: OfferDeclined, now: float) -> list[Command]:
        task = offered_task(self._tasks, event.task_id, event.peer_id)
        why = f"declined {event.reason.value}" + (f": {event.detail}" if event.detail else "")
        later = event.reason in SAME_PEER_LATER
        return [] if task is None else self._retry(task, event.reason, why, now, same_peer=later)

    def _on_lost(self, event: OfferLost, now: float) -> list[Command]:
        task = offered_task(self._tasks, event.task_id, event.peer_id)
        why = f"offer lost: {event.detail or 'no answer'}"
        return [] if task is None else self._retry(task, Lapse.OFFER_LOST, why, now)

    def _on_progress(self, event: ProgressReported, now: float) -> list[Command]:
        task = leased_task(self._tasks, event.task_id, event.lease_id)
        if task is None:
            return void_lease(self._tasks.get(event.task_id), event.lease_id, "stale lease")
        progress = TaskProgress(
            phase=event.phase,
            done=event.done,
            total=event.total,
            median_ms=event.median_ms,
            queue_position=event.queue_position,
        )
        self._put(task, progress=progress, deadline=lease_deadline(task, now))  # never past the lease's end
        return []

    def _on_arriving(self, event: MessageArriving, now: float) -> list[Command]:
        """A message's bytes keep the lease as a heartbeat does (never past its end); the progress stays."""
        task = leased_task(self._tasks, event.task_id, event.lease_id)
        if task is not None:
            self._put(task, deadline=lease_deadline(task, now))
        return []

    def _on_result(self, event: ResultAccepted) -> list[Command]:
        task = self._tasks.get(event.task_id)
        if task is not None and task.lease_id == event.lease_id and task.state == TaskState.DONE:
            return [SendAck(event.task_id, event.lease_id)]  # delivered again: ack, never a second result
        if task is None or task.state != TaskState.LEASED or task.lease_id != event.lease_id:
            stale = "stale lease: result not accepted"
            return [SendCancel(event.task_id, event.peer_id, event.lease_id, stale)]
        final = task.progress.finished(event.median_ms)
        said = {
            "spread": event.spread,
            "core_spread": event.core_spread,
            "fingerprint": event.fingerprint,
            "pace_ms": event.pace_ms,
            "pace_cut": event.pace_cut,
        }
        task = self._put(task, progress=final, **said)
        out = self._end(task, TaskState.DONE, None, "")
        return [*out, SendAck(event.task_id, event.lease_id)]

    def _on_failure(
        self, task_id: str, lease_id: str, reason: FailureReason, detail: str, now: float, stage: str = ""
    ) -> list[Command]:
        task = leased_task(self._tasks, task_id, lease_id)
        if task is None:
            return []
        why = f"failed {reason.value}" + (f": {detail}" if detail else "")
        task = self._put(task, failure_stage=stage)
        if reason in FINAL_FAILURES:
            task = self._close_attempt(task, why, reason)
            return self._end(task, TaskState.FAILED, reason, detail or why)
        return self._retry(task, reason, why, now)

    def _on_lapse(self, event: LeaseLapsed | LeaseReleased, now: float) -> list[Command]:
        if (task := leased_task(self._tasks, event.task_id, event.lease_id)) is None:
            return []
        if isinstance(event, LeaseLapsed):
            return self._lapse(task, now)
        why = f"lease {event.lease_id} released: {event.detail or 'the worker is leaving'}"
        return self._retry(task, Lapse.RELEASED, why, now, same_peer=True)

    def _on_cancel(self, event: CancelRequested) -> list[Command]:
        self._cancelled = self._planned = True
        out: list[Command] = []
        for task in list(self._tasks.values()):
            if task.ended:
                continue
            if task.state in (TaskState.OFFERED, TaskState.LEASED) and task.peer_id is not None:
                out.append(SendCancel(task.task_id, task.peer_id, task.lease_id, "campaign cancelled"))
            out += self._end(task, TaskState.CANCELLED, Lapse.CANCELLED, event.detail or "campaign cancelled")
        return out

    def _withdraw(self, why: str) -> list[Command]:
        self._stopped = True
        out = [t for t in self._tasks.values() if t.state in (TaskState.OFFERED, TaskState.LEASED)]
        self._tasks.update({t.task_id: withdrawn(t) for t in out})
        return [SendCancel(t.task_id, t.peer_id, t.lease_id, why) for t in out if t.peer_id is not None]

    def _expire(self, now: float) -> list[Command]:
        out: list[Command] = []
        for task in list(self._tasks.values()):
            if task.deadline is None or task.deadline > now or task.peer_id is None:
                continue
            if task.state == TaskState.OFFERED:
                why = f"no answer to the offer within {self._offer_timeout_s:g} s"
                out.append(SendCancel(task.task_id, task.peer_id, None, why))
                out += self._retry(task, Lapse.OFFER_LOST, why, now)
            elif task.state == TaskState.LEASED:
                out += self._lapse(task, now)
        return out

    def _send_due_offers(self, now: float) -> list[Command]:
        """Offer every due pending task within each peer's capacity and the campaign's `max_inflight`."""
        due = due_offers(self._tasks.values(), self._peers, self._campaign.max_inflight, now)
        return [self._offer(task, now, (*task.attempts, Attempt(peer_id=peer))) for task, peer in due]

    def _offer(self, task: TaskView, now: float, attempts: tuple[Attempt, ...]) -> SendOffer:
        assert task.peer_id is not None
        job = self._campaign.jobs[task.job_index]
        self._put(task, state=TaskState.OFFERED, attempts=attempts, deadline=now + self._offer_timeout_s)
        return SendOffer(task.task_id, task.peer_id, job.index, job.spec, task.model, self._campaign.priority)

    def _resume(self, now: float) -> list[Command]:
        self._resuming = False
        out: list[Command] = []
        for task in list(self._tasks.values()):
            if task.state == TaskState.OFFERED:
                out.append(self._offer(task, now, task.attempts))
            elif task.state == TaskState.LEASED and task.peer_id is not None and task.lease_id is not None:
                self._put(task, **reclaimed(task, now))
                out.append(SendReclaim(task.task_id, task.peer_id, task.lease_id))
        return out

    def _lapse(self, task: TaskView, now: float) -> list[Command]:
        assert task.peer_id is not None
        cause, why = lapse_of(task, now, self._campaign.jobs[task.job_index].spec.timeout_s)
        cancel = SendCancel(task.task_id, task.peer_id, task.lease_id, why)
        return [cancel, *self._retry(task, cause, why, now)]

    def _retry(
        self, task: TaskView, cause: Cause, why: str, now: float, *, same_peer: bool = False
    ) -> list[Command]:
        """End the current attempt and place the task again, or end it failed with every attempt's story."""
        task = self._close_attempt(task, why, cause)
        story = tuple(f"{a.peer_id}: {a.outcome}" for a in task.attempts)
        if task.lease_id is not None and is_fleet(self._campaign.jobs[task.job_index].spec.generate):
            why = f"{why}; a fleet member is not replaced once leased: its planned sends are passing"
            return self._end(task, TaskState.FAILED, cause, why, story)  # lost, however it left
        pool = replica_pool(task, self._tasks, self._peers, self._campaign)  # a replica stays in its class
        step = retry_step(task, self._tasks, pool, self._needs[task.job_index], self._retry_budget)
        if step.peer is not None:
            peer, name = step.peer.peer_id, step.peer.profile.device_name
            self._put(
                task, state=TaskState.PENDING, peer_id=peer, device_name=name, lease_id=None, deadline=None
            )
        elif same_peer and not step.spent:
            later = now + backoff_s(len(task.attempts))
            self._put(task, state=TaskState.PENDING, lease_id=None, deadline=later)
        else:
            why = step.detail or f"{why}; no other feasible peer to retry on"
            return self._end(task, TaskState.FAILED, cause, why, story)
        return []

    def _close_attempt(self, task: TaskView, outcome: str, cause: Cause) -> TaskView:
        return self._put(task, attempts=close_last(task.attempts, outcome, cause))

    def _end(
        self, task: TaskView, state: TaskState, cause: Cause | None, why: str, reasons: tuple[str, ...] = ()
    ) -> list[Command]:
        assert not task.ended, f"{task.task_id} ended twice"
        if state == TaskState.DONE:
            task = self._close_attempt(task, "done", Lapse.DONE)
        ending = {"failure_reason": cause or "", "detail": why, "reasons": reasons, "ended_at": self._now}
        self._put(task, state=state, deadline=None, **ending)
        return [RecordOutcome(task.task_id, STATUS_OF[state], cause or "", why)]

    def _settle_groups(self) -> list[Command]:
        """Settle each replica group whose tasks have all ended, or add its next replica (`settling`)."""
        state = SettlingState(
            self._id,
            self._key,
            self._campaign,
            self._tasks,
            self._peers,
            self._needs,
            self._records,
            self._now,
            self._errors,
        )
        settled = settle_groups(state)
        self._tasks.update({t.task_id: t for t in (*settled.labelled, *settled.added)})
        self._records, self._errors = dict(settled.records), dict(settled.errors)
        return list(settled.commands)

    # -- small pieces -----------------------------------------------------------------------------

    def _put(self, task: TaskView, **changes: object) -> TaskView:
        updated = task.with_(**changes)
        self._tasks[task.task_id] = updated
        return updated
