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

Fleet members lost or late
--------------------------

A member that leaves once leased (released, lapsed, overrun or failed) is lost, not replaced
(`machine._retry` ends it failed with its cause): its share of the schedule is passing while a spare is
offered, probed, committed and dispatched, so a replacement could only send those requests late (at once, as
a burst the schedule never asked for) or drop them, and either way the fleet's load would no longer be the
one asked; ending the member keeps the server's load the schedule's, and the merged row says who is missing.
A member offered late before any lease (another declined or lost the offer) is dealt only the sends planned
at least `OFFER_MARGIN_S` (1 s) after its offer (`scheduler.state.fleet.still_ahead`), so no member ever
sends a planned time that has passed.

Leases, releases and causes
---------------------------

`protocol/machine.py` holds every legal move; an illegal one is a Local/RemoteProtocolError and the
conversation is in ERROR for good. Offers are signed, carry a nonce, an expiry and the recipient; a worker
declines with a closed reason. A commit grants a lease; progress messages are heartbeats, and so are the
bytes of a message still arriving (`MessageArriving`: a result of megabytes is one frame, and no heartbeat
passes it on the stream); a lease with nothing heard past its deadline lapses and the task is offered
elsewhere within its retry budget. A lease also ends, whatever its heartbeats say, at dispatch + the model's
transfer allowance (15 s plus its bytes at 1 MiB/s, a slow link's rate) + `timeout_s` x 1.05
(`scheduler/state/leases.py`; `TaskView.lease_ends_at`, which caps every heartbeat's deadline): cause
`Lapse.LEASE_OVERRUN`, a `SendCancel` to the worker, a retry elsewhere within the budget, so a worker that
commits and reports "queued" forever holds the task no longer than that. A task's wait in a worker's queue
counts; a restored lease keeps its end but gets one ttl to be reclaimed. Only a result carrying the current
lease id is accepted. A worker that leaves (SIGTERM or SIGINT, `node/worker/leave.py`) declines new offers
`shutting_down` and sends each lease it holds unfinished a `release` (after commit or dispatch; final, no
ack; a `ReleaseBody` signed under `sark/release/v1` naming campaign, task, lease, worker and submitter); the
submitter verifies it like a result (`attempt.verify_release`; one that does not verify counts as a lapse)
and the scheduler gets `LeaseReleased`, cause `Lapse.RELEASED`: the task goes to the next peer at once, or
back to the same one after a backoff when nobody else fits (a restarted service); each peer's first release
of a task spends no retry budget, and the releasing peer becomes a last resort like a lapsed one. The
leaving worker kills its measuring child, stops republishing, puts a last advert that expires within 2 s
(kad-dht has no unprovide; provider records lapse with their TTL and `/sark/profile` stops with the host)
and closes the host. Every attempt and every ending keeps its cause from one closed vocabulary,
`scheduler.Cause`: the worker's `FailureReason` and `DeclineReason`, and the scheduler's own `Lapse`
(offer_lost, lease_lapsed, lease_overrun, no_feasible_peer, cancelled, done, released); the retry rules and
the tests compare these, and a stored snapshot with any other cause is refused.
"""

from __future__ import annotations

from scheduler.state.events import (
    DEFAULT_LEASE_TTL_S,
    AwaitChallenge,
    CancelRequested,
    Command,
    Event,
    FinishCampaign,
    LeaseLapsed,
    LeaseReleased,
    MarkUnschedulable,
    MessageArriving,
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
    open_refusals,
    plan_job,
    rank,
    unit_problem,
)
from scheduler.state.replication import ClassReference, ReferenceGap, class_references, reference_gap
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
    "AwaitChallenge",
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
    "MessageArriving",
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
    "ReferenceGap",
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
    "open_refusals",
    "plan_job",
    "rank",
    "reference_gap",
    "saturated",
    "state_counts",
    "still_ahead",
    "task_id_of",
    "transfer_allowance_s",
    "unit_problem",
]
