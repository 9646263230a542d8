"""The scheduler's record of each task, and the snapshot a node stores to resume a campaign."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Final, Literal

from protocol import ComputeUnit, DeclineReason, FailureReason, ModelRef, Phase, Value
from scheduler.language.campaign import Campaign
from scheduler.language.endpoints import endpoint_unit
from scheduler.state.placement import PeerView


class TaskState(enum.StrEnum):
    """Where a task is. The last five are endings: a task reaches exactly one of them, once."""

    PENDING = "pending"
    OFFERED = "offered"
    LEASED = "leased"
    DONE = "done"
    FAILED = "failed"
    UNSCHEDULABLE = "unschedulable"
    UNVERIFIABLE = "unverifiable"  # verification was asked, and no independent quorum could be placed
    CANCELLED = "cancelled"


ENDED: Final = frozenset(
    {
        TaskState.DONE,
        TaskState.FAILED,
        TaskState.UNSCHEDULABLE,
        TaskState.UNVERIFIABLE,
        TaskState.CANCELLED,
    }
)


def state_counts(states: Iterable[TaskState]) -> dict[TaskState, int]:
    """How many tasks stand in each state, every state in `TaskState`'s order (zeros kept): the one
    tally of a campaign's progress that every view shows (the dashboard, the `finished` event line)."""
    counts = Counter(states)
    return {state: counts[state] for state in TaskState}


class Status(enum.StrEnum):
    """A result row's Status column: the seeds' values plus Unschedulable and Unverifiable (a task
    whose `verify:` quorum could not be placed on independent machines: it did not run alone)."""

    COMPLETE = "Complete"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    UNSCHEDULABLE = "Unschedulable"
    UNVERIFIABLE = "Unverifiable"


STATUS_OF: Final[dict[TaskState, Status]] = {
    TaskState.DONE: Status.COMPLETE,
    TaskState.FAILED: Status.FAILED,
    TaskState.UNSCHEDULABLE: Status.UNSCHEDULABLE,
    TaskState.UNVERIFIABLE: Status.UNVERIFIABLE,
    TaskState.CANCELLED: Status.CANCELLED,
}


class Lapse(enum.StrEnum):
    """The scheduler's own causes, beside the worker's (`FailureReason`, `DeclineReason`): how a lease or
    an offer ended without the worker's verdict on the task."""

    DONE = "done"  # an attempt that produced the task's result
    OFFER_LOST = "offer_lost"  # no answer to an offer, or the stream broke before a lease
    LEASE_LAPSED = "lease_lapsed"  # a leased worker stopped sending heartbeats
    RELEASED = "released"  # a leaving worker handed its lease back (a signed release)
    LEASE_OVERRUN = "lease_overrun"  # a lease outlived dispatch + transfer allowance + timeout (`leases`)
    NO_FEASIBLE_PEER = "no_feasible_peer"  # placement found no peer (an Unschedulable ending)
    NO_QUORUM = "no_quorum"  # peers fit, but not enough independent ones for `verify:` (Unverifiable)
    CANCELLED = "cancelled"  # the campaign was cancelled


Cause = Lapse | FailureReason | DeclineReason
"""Why an attempt or a task ended: a closed vocabulary (tests and the retry rules compare these)."""


class Attempt(Value):
    """One offer of a task to one peer, and how it ended ("" while it is still live).

    Attributes:
        peer_id: the peer offered to.
        lease_id: the lease it granted, if it committed.
        outcome: how the attempt ended, for people.
        cause: why it ended (a `Cause`), "" while it is live.
    """

    peer_id: str
    lease_id: str | None = None
    outcome: str = ""
    cause: Cause | Literal[""] = ""


def close_last(attempts: tuple[Attempt, ...], outcome: str, cause: Cause) -> tuple[Attempt, ...]:
    """The attempts with the last one ended as `outcome` (`cause`), unless it has ended already."""
    if not attempts or attempts[-1].outcome:
        return attempts
    ended = Attempt(
        peer_id=attempts[-1].peer_id, lease_id=attempts[-1].lease_id, outcome=outcome, cause=cause
    )
    return (*attempts[:-1], ended)


class TaskProgress(Value):
    """The latest heartbeat of a leased task."""

    phase: Phase | None = None
    done: int = 0
    total: int = 0
    median_ms: float | None = None
    queue_position: int = 0

    def finished(self, median_ms: float | None) -> TaskProgress:
        """The progress of a task whose result was accepted: last phase, every run done, its median."""
        total = max(self.total, self.done, 1)
        return TaskProgress(phase=Phase.MEASURING, done=total, total=total, median_ms=median_ms)


class Agreement(Value):
    """What a replica group's settlement said, kept on each member it labelled: what every view shows
    of the group (`scheduler.results.verifygroups`), never read back from a row's text.

    Attributes:
        figure_ms: the agreed figure (the majority's median, or the reference's); None unless replicated.
        band: the relative band the replicas were judged with (`agreement.band` of the class's spread,
            as the settling used it); None for a result no other replica was compared with.
        reference: the reference device that vouched for the figure, or "".
        reason: the settlement's reason for people (who was the outlier, its figure, the band).
        networks: each timed replica's peer and the network it counted as (`networks.network_of`;
            "relayed" for one whose address was never seen), in the group's order.
        owners: each timed replica's peer and its owner's short id (`protocol.short_owner`), for
            those that declared one (`protocol.owner`).
        class_spread: the class's spread the band was computed from (`agreement.pooled_spread`).
        pooled: how many honest replicas' errors the class's pool held then (under `POOL_MIN`: the
            spread is PRIOR's, which anyone can check; from it on, the submitter's store's word).
    """

    figure_ms: float | None = None
    band: float | None = None
    class_spread: float | None = None
    pooled: int = 0
    reference: str = ""
    reason: str = ""
    networks: tuple[tuple[str, str], ...] = ()
    owners: tuple[tuple[str, str], ...] = ()


class TaskView(Value):
    """One task as the scheduler holds it: what the live view, the store and the reports read.

    Attributes:
        task_id: ``{campaign_id}-job-{index}-{n}``.
        job_index: its job.
        unit: the compute unit.
        model: the pinned model.
        state: where it is.
        peer_id: the peer it is offered to, leased on, or ended on (None if never placed).
        device_name: that peer's device name.
        lease_id: the current lease (None unless leased or done).
        lease_ttl_s: the lease's heartbeat window.
        lease_ends_at: when the lease ends whatever its heartbeats say (`scheduler.state.leases`); None
            unless leased (and in snapshots stored before leases ended).
        attempts: every offer so far, oldest first.
        reasons: why it ended other than done (rejections, causes), or "".
        failure_reason: why it ended other than done (a `Cause`), "" when done.
        failure_stage: the worker's stage that failed (a Stage value: fetch, verify, inspect, load,
            run) when the worker reported one, else "".
        detail: a sentence for people.
        progress: the latest heartbeat.
        deadline: when the scheduler acts on its own next (offer timeout, lease lapse, retry backoff).
        ended_at: when it ended (wall-clock seconds, the `now` of the event that ended it), None while live.
        replica_group: the first task id of its replica group ("" unless its job is verified:
            `scheduler.language.verify`); a group's tasks measure one thing on peers of one class.
        device_class: the key of its group's device class (`scheduler.verification.classes`), "" unless
            grouped.
        spread: its accepted result's relative standard error (`agreement.spread_of`).
        core_spread: the same of the processes its figure rests on (`agreement.core_spread`): what says
            whether it can vouch; None for a result accepted before it was kept.
        fingerprint: its accepted result's output fingerprints, joined ("" none).
        pace_ms: its accepted result's slot time a request, a timed closed loop's (`agreement.pace_of`);
            None for any other task. pace_cut: what the duration's cut moves it by (`agreement.Pace`).
        verified: how its group settled it, as the row says: `replicated k/n`, `outlier`, `single`,
            `disagreed` ("" while unsettled or not verified).
        verify_detail: the settlement's reason (who disagreed, the band).
        quorum_networks: the networks its agreeing quorum came from (`networks.network_of`; "relayed"
            for a peer whose address was never seen), set when its group settled `replicated`.
        quorum_owners: the owners its agreeing quorum came from (`replicas.voter_name`), set with them.
        agreement: what its group's settlement said (the agreed figure, the band, each replica's
            network), set with `verified`; None while unsettled or not verified.
        awaits: why a task of a job not yet placed waits (`placement.open_refusals`: a peer its job is
            short of is challenged again later; the job is planned again with each discovery round,
            and at `deadline` at the latest), "" otherwise.
    """

    task_id: str
    job_index: int
    unit: ComputeUnit
    model: ModelRef
    state: TaskState = TaskState.PENDING
    peer_id: str | None = None
    device_name: str = ""
    lease_id: str | None = None
    lease_ttl_s: float = 0.0
    lease_ends_at: float | None = None
    attempts: tuple[Attempt, ...] = ()
    reasons: tuple[str, ...] = ()
    failure_reason: Cause | Literal[""] = ""
    failure_stage: str = ""
    detail: str = ""
    progress: TaskProgress = TaskProgress()
    deadline: float | None = None
    ended_at: float | None = None
    replica_group: str = ""
    device_class: str = ""
    spread: float = 0.0
    core_spread: float | None = None
    fingerprint: str = ""
    pace_ms: float | None = None
    pace_cut: float = 0.0
    verified: str = ""
    verify_detail: str = ""
    quorum_networks: tuple[str, ...] = ()
    quorum_owners: tuple[str, ...] = ()
    agreement: Agreement | None = None
    awaits: str = ""

    @property
    def ended(self) -> bool:
        """Whether the task has reached its one ending."""
        return self.state in ENDED

    @property
    def status(self) -> Status | None:
        """Its result row's Status, once ended."""
        return STATUS_OF.get(self.state)

    @property
    def shown_phase(self) -> Phase | None:
        """The phase every view shows: the latest heartbeat's while the task is leased, none otherwise
        (an ended task's last heartbeat said `measuring`, which it no longer is)."""
        return self.progress.phase if self.state is TaskState.LEASED else None

    @property
    def shown_unit(self) -> str:
        """What every view says it ran on: its compute unit, or for an endpoint task which endpoint
        (`Endpoint (black-box)`, `Endpoint (gray-box)`): the server ran it, not the worker's unit."""
        return endpoint_unit(self.model) or self.unit.value


class SchedulerSnapshot(Value):
    """Everything a `Scheduler` holds, as a plain value (store `model_dump_json()`, resume from it).

    Attributes:
        version: the snapshot format.
        campaign_id: the campaign.
        campaign: the validated campaign.
        models: the pinned models by key.
        retry_budget: retries allowed per task.
        offer_timeout_s: how long an offer may go unanswered.
        planned: whether the fan-out has happened.
        cancelled: whether the user cancelled.
        finished: whether FinishCampaign was emitted.
        peers: the candidate pool last seen.
        tasks: every task, in task order.
    """

    version: int = 1
    campaign_id: str
    campaign: Campaign
    models: dict[str, ModelRef]
    retry_budget: int
    offer_timeout_s: float
    planned: bool = False
    cancelled: bool = False
    finished: bool = False
    peers: tuple[PeerView, ...] = ()
    tasks: tuple[TaskView, ...] = ()


def withdrawn(task: TaskView) -> TaskView:
    """A task taken back from its peer before it ended (the submitter stopped): pending on the same
    peer again, with no lease, and its last attempt struck, so a withdrawal spends no retry budget."""
    return task.with_(
        state=TaskState.PENDING,
        attempts=task.attempts[:-1],
        lease_id=None,
        deadline=None,
        progress=TaskProgress(),
    )


def leased_task(tasks: Mapping[str, TaskView], task_id: str, lease_id: str) -> TaskView | None:
    """The task if `lease_id` is its current lease (LEASED), else None: another lease changes nothing."""
    task = tasks.get(task_id)
    ok = task is not None and task.state == TaskState.LEASED and task.lease_id == lease_id
    return task if ok else None


def offered_task(tasks: Mapping[str, TaskView], task_id: str, peer_id: str) -> TaskView | None:
    """The task if it is OFFERED to `peer_id` and waits on its answer, else None."""
    task = tasks.get(task_id)
    ok = task is not None and task.state == TaskState.OFFERED and task.peer_id == peer_id
    return task if ok else None


def task_id_of(campaign_id: str, job_index: int, n: int) -> str:
    """The deterministic task id: the seeds' JobId shape plus the task's number within its job."""
    return f"{campaign_id}-job-{job_index}-{n}"
