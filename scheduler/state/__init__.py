"""The scheduling state machine: a campaign's tasks placed on peers, offered, leased, retried, ended.

Pure, like the rest of `scheduler`: events in (`events`), commands out, time an argument
(`Scheduler.handle(event, now)`, `Scheduler.next_deadline`). One task of `node.submitter` owns a
`Scheduler` and feeds it; nobody else mutates it. It builds on the campaign language and on
verification's judgements (`scheduler.verification`: classes, replicas, agreement, reputation); where
those meet the tasks (a replicated job's groups, a group's verdict) is here, in `replication` and
`settling`.

Modules:
    placement  PeerView, feasible (Verdict with reasons), rank (Ranked with Score), explain (Plan)
    replication  a replicated job's placement: groups of verify.replicas, one class each (a reference
               device in each of its class's: class_references says which classes have one)
    tasks      TaskState (and state_counts), TaskView (its Agreement once settled), Status, SchedulerSnapshot,
               task ids
    fanout     a job's plan made tasks: placed ones pending, the rest ended (Unschedulable, Unverifiable)
    retry      which failures end a task, which peer a retry goes to, backoff
    leases     when a lease ends whatever its heartbeats say: dispatch + transfer allowance + timeout
    events     events in (PeersDiscovered, OfferCommitted, ...) and commands out (SendOffer, ...)
    fleet      fleet load: the seeded schedule and its deal, clock offsets, lag, saturation
    quorum     which peer joins a replica group: a retried replica's pool, one more replica's peer
    settling   a replica group's verdict in the machine: labels, or one more replica
    machine    Scheduler: one per campaign, handle(event, now) -> commands
"""

from __future__ import annotations

from scheduler.state.events import (
    DEFAULT_LEASE_TTL_S,
    CancelRequested,
    Command,
    Event,
    FinishCampaign,
    LeaseLapsed,
    LeaseReleased,
    MarkUnschedulable,
    OfferCommitted,
    OfferDeclined,
    OfferLost,
    PeersDiscovered,
    ProgressReported,
    RecordOutcome,
    ReplicasSettled,
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
)
from scheduler.state.fleet import (
    FLEET_UNIT,
    ClockRound,
    clock_offset,
    deal,
    lag_p99_ms,
    saturated,
    still_ahead,
)
from scheduler.state.leases import transfer_allowance_s
from scheduler.state.machine import Scheduler
from scheduler.state.placement import (
    JobPlan,
    Misfit,
    PeerView,
    Plan,
    Ranked,
    Reason,
    Rejection,
    Score,
    Verdict,
    device_kind,
    endpoint_problem,
    explain,
    feasible,
    plan_job,
    rank,
    unit_problem,
)
from scheduler.state.replication import ClassReference, class_references
from scheduler.state.retry import FINAL_FAILURES
from scheduler.state.tasks import (
    Agreement,
    Attempt,
    Cause,
    Lapse,
    SchedulerSnapshot,
    Status,
    TaskProgress,
    TaskState,
    TaskView,
    state_counts,
    task_id_of,
)

__all__ = [
    "DEFAULT_LEASE_TTL_S",
    "FINAL_FAILURES",
    "FLEET_UNIT",
    "Agreement",
    "Attempt",
    "CancelRequested",
    "Cause",
    "ClassReference",
    "ClockRound",
    "Command",
    "Event",
    "FinishCampaign",
    "JobPlan",
    "Lapse",
    "LeaseLapsed",
    "LeaseReleased",
    "MarkUnschedulable",
    "Misfit",
    "OfferCommitted",
    "OfferDeclined",
    "OfferLost",
    "PeerView",
    "PeersDiscovered",
    "Plan",
    "ProgressReported",
    "Ranked",
    "Reason",
    "RecordOutcome",
    "Rejection",
    "ReplicasSettled",
    "ResultAccepted",
    "ResultRejected",
    "Scheduler",
    "SchedulerSnapshot",
    "Score",
    "SendAck",
    "SendCancel",
    "SendDispatch",
    "SendOffer",
    "SendReclaim",
    "Status",
    "SubmitterStopped",
    "TaskFailedRemotely",
    "TaskProgress",
    "TaskState",
    "TaskView",
    "Tick",
    "Verdict",
    "class_references",
    "clock_offset",
    "deal",
    "device_kind",
    "endpoint_problem",
    "explain",
    "feasible",
    "lag_p99_ms",
    "plan_job",
    "rank",
    "saturated",
    "state_counts",
    "still_ahead",
    "task_id_of",
    "transfer_allowance_s",
    "unit_problem",
]
