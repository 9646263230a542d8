"""What the node tells the scheduler (events, past tense) and what the scheduler asks of it (commands).

All are small frozen values. The node turns wire messages, timers and user actions into events,
feeds them to `Scheduler.handle` with the current time, and carries out the commands it gets back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from protocol import DeclineReason, FailureReason, ModelRef, Phase, Stage, TaskSpec
from scheduler.state.placement import PeerView, Reason
from scheduler.state.tasks import Cause, Status, TaskState, TaskView
from scheduler.verification.reputation import Evidence

DEFAULT_LEASE_TTL_S: Final = 30.0

# -- events ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeersDiscovered:
    """The node found (or refreshed) these candidates. The first one fixes the campaign's fan-out."""

    peers: tuple[PeerView, ...]


@dataclass(frozen=True)
class OfferCommitted:
    """A worker committed to a task and granted a lease (its `Commit` message)."""

    task_id: str
    peer_id: str
    lease_id: str
    queue_position: int = 0
    lease_ttl_s: float = DEFAULT_LEASE_TTL_S


@dataclass(frozen=True)
class OfferDeclined:
    """A worker declined an offer, with a reason from the closed set."""

    task_id: str
    peer_id: str
    reason: DeclineReason
    detail: str = ""


@dataclass(frozen=True)
class OfferLost:
    """The offer never got an answer: unreachable, or the stream failed before a commit."""

    task_id: str
    peer_id: str
    detail: str = ""


@dataclass(frozen=True)
class ProgressReported:
    """A heartbeat from a leased task: where it is and, while measuring, its median so far."""

    task_id: str
    lease_id: str
    phase: Phase
    done: int = 0
    total: int = 0
    median_ms: float | None = None
    queue_position: int = 0


@dataclass(frozen=True)
class MessageArriving:
    """Bytes of a leased worker's next message are arriving, the message not yet whole: the worker is
    there. A result of megabytes (a closed loop's thousands of records) is one frame on a slow or busy
    link, and no heartbeat can pass it on the stream; its bytes keep the lease as a heartbeat does."""

    task_id: str
    lease_id: str


@dataclass(frozen=True)
class ResultAccepted:
    """The node verified a result's signature and that its lease is `current_lease(task_id)`."""

    task_id: str
    lease_id: str
    peer_id: str
    median_ms: float | None = None  # the result's inference median: a finished task's progress shows it
    spread: float = 0.0  # its relative standard error (`agreement.spread_of`): a replica's band
    fingerprint: str = ""  # its output fingerprints, joined: replicas must agree on it
    core_spread: float | None = (
        None  # the same of the processes its figure rests on (`agreement.core_spread`)
    )
    pace_ms: float | None = None  # a timed closed loop's slot time a request (`agreement.pace_of`)
    pace_cut: float = 0.0  # what the duration's cut moves it by (`agreement.Pace.cut`)


@dataclass(frozen=True)
class ResultRejected:
    """A result failed the node's checks (signature, signer, task, lease, campaign or model; its figures,
    `scheduler.verification.figures`): never stored.

    The scheduler fails the attempt with `reason` (internal for a check of the envelope; inconsistent
    or invalid for its figures) and retries within the budget, never again on a peer whose figures
    were refused.
    """

    task_id: str
    lease_id: str
    peer_id: str
    detail: str = ""
    reason: FailureReason = FailureReason.INTERNAL


@dataclass(frozen=True)
class TaskFailedRemotely:
    """A worker reported that a leased task ended without a measurement."""

    task_id: str
    lease_id: str
    reason: FailureReason
    detail: str = ""
    stage: Stage | None = None


@dataclass(frozen=True)
class LeaseLapsed:
    """A lease went without a heartbeat past its deadline, or its stream broke (the scheduler also
    detects a silent lease itself)."""

    task_id: str
    lease_id: str
    detail: str = ""


@dataclass(frozen=True)
class LeaseReleased:
    """A leaving worker handed a lease back unfinished (its signed `Release`, verified by the node): the
    task is offered elsewhere at once, and the attempt does not count against the retry budget (a fleet
    member is not offered again: it is lost, `Scheduler._retry`)."""

    task_id: str
    lease_id: str
    peer_id: str
    detail: str = ""


@dataclass(frozen=True)
class CancelRequested:
    """The user cancelled the campaign."""

    detail: str = ""


@dataclass(frozen=True)
class SubmitterStopped:
    """The submitter stops for now (Ctrl-C) and will resume later: every task out on offer or lease is
    withdrawn (a `SendCancel` to its worker) and waits, pending, for the resumed run."""

    detail: str = "the submitter stopped"


@dataclass(frozen=True)
class Tick:
    """Time passed: the node calls with this at `next_deadline()` (or after a restore)."""


Event = (
    PeersDiscovered
    | OfferCommitted
    | OfferDeclined
    | OfferLost
    | ProgressReported
    | MessageArriving
    | ResultAccepted
    | ResultRejected
    | TaskFailedRemotely
    | LeaseLapsed
    | LeaseReleased
    | CancelRequested
    | SubmitterStopped
    | Tick
)

# -- commands -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SendOffer:
    """Open a negotiation with a worker: offer it this task (signed by the node)."""

    task_id: str
    peer_id: str
    job_index: int
    spec: TaskSpec
    model: ModelRef
    priority: int


@dataclass(frozen=True)
class SendDispatch:
    """Tell the committed worker to start (or queue) the task under this lease."""

    task_id: str
    lease_id: str


@dataclass(frozen=True)
class SendAck:
    """Acknowledge a stored result, so the worker may forget it."""

    task_id: str
    lease_id: str


@dataclass(frozen=True)
class SendCancel:
    """Withdraw an offer (lease None) or void a lease on that worker; best effort."""

    task_id: str
    peer_id: str
    lease_id: str | None
    reason: str = ""


@dataclass(frozen=True)
class SendReclaim:
    """After a restore: ask the worker for a lease granted before the crash (result, progress or failure)."""

    task_id: str
    peer_id: str
    lease_id: str


@dataclass(frozen=True)
class MarkUnschedulable:
    """A job could not get all its tasks placed: why, per peer (empty mapping: no peers at all)."""

    job_index: int
    task_ids: tuple[str, ...]
    reasons: Mapping[str, tuple[Reason, ...]]
    detail: str


@dataclass(frozen=True)
class AwaitChallenge:
    """A verified job short of peers that a challenge refused and will challenge again waits for their
    next verdict (`placement.open_refusals`): said once, when it begins to wait."""

    job_index: int
    task_ids: tuple[str, ...]
    detail: str


@dataclass(frozen=True)
class RecordOutcome:
    """A task ended (exactly once): store its row. For Complete, store the result before `SendAck`."""

    task_id: str
    status: Status
    reason: Cause | Literal[""] = ""
    detail: str = ""


@dataclass(frozen=True)
class FinishCampaign:
    """Every task has ended: write the reports and stop. Emitted exactly once. Each count is named for
    the ending (`TaskState`) it counts."""

    done: int
    failed: int
    unschedulable: int
    cancelled: int
    unverifiable: int = 0

    @classmethod
    def tally(cls, states: Sequence[TaskState]) -> FinishCampaign:
        """How many tasks reached each ending."""
        return cls(
            done=states.count(TaskState.DONE),
            failed=states.count(TaskState.FAILED),
            unschedulable=states.count(TaskState.UNSCHEDULABLE),
            cancelled=states.count(TaskState.CANCELLED),
            unverifiable=states.count(TaskState.UNVERIFIABLE),
        )


@dataclass(frozen=True)
class ReplicasSettled:
    """A replica group settled (`scheduler.state.settling`): the node keeps each peer's record of
    agreements in its store (`agreed` peers agreed with the majority, `outliers` did not; `offsets`:
    each one's log of its figure over the others', `agreement.Settlement.offsets`); `errors`: the
    agreeing replicas' process errors, for the node to add to the class's pool (`pool`) in its store;
    `evidence`: what the group says of each fresh replica's peer, weighed (`evidence.weigh`), which
    the node adds to its records (`PeerRecord.after`); `outliers` are the peers it counts against
    (weight above 0), `offsets` those it counts."""

    group: str
    outcome: str
    agreed: tuple[str, ...] = ()
    outliers: tuple[str, ...] = ()
    detail: str = ""
    offsets: tuple[tuple[str, float], ...] = ()
    pool: str = ""
    errors: tuple[float, ...] = ()
    evidence: tuple[tuple[str, Evidence], ...] = ()


Command = (
    SendOffer
    | SendDispatch
    | SendAck
    | SendCancel
    | SendReclaim
    | MarkUnschedulable
    | AwaitChallenge
    | RecordOutcome
    | FinishCampaign
    | ReplicasSettled
)


def void_lease(task: TaskView | None, lease_id: str, reason: str) -> list[Command]:
    """Cancel a lease that is not the task's current one (none if it is the done task's own)."""
    if task is None or (task.state == TaskState.DONE and task.lease_id == lease_id):
        return []
    peer = next((a.peer_id for a in task.attempts if a.lease_id == lease_id), None)
    return [SendCancel(task.task_id, peer, lease_id, reason)] if peer is not None else []
