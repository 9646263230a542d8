"""The retry policy: which failures end a task, which peer a task tries next, and how long it waits.

A retry goes to the best feasible peer (placement's ranking) that this task has not tried and that
holds no other live or done task of the same job, so a job never measures one device twice; peers
that lost an offer or a lease (silent or overrun), or handed one back, anywhere in the campaign come
last, and a peer whose figures were refused (`DISTRUSTED`) is never tried again. A peer that declined
"not now" (busy, queue full) or released the lease (it was leaving: a restarted service comes back)
may be offered the same task again after an exponential backoff when nobody else fits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from protocol import DeclineReason, FailureReason
from scheduler.language.needs import Needs
from scheduler.state.placement import PeerView, rank
from scheduler.state.tasks import Attempt, Cause, Lapse, TaskState, TaskView

FINAL_FAILURES: Final = frozenset(
    {
        FailureReason.UNIT_UNAVAILABLE,
        FailureReason.DIGEST_MISMATCH,
        FailureReason.FORMAT,
        FailureReason.LOAD,
        FailureReason.INPUT,
        FailureReason.FALLBACK,
        FailureReason.SERVER,  # the server failed every request: another vantage point meets the same
    }
)
"""Failures that would fail the same way on any device: the task ends, no retry."""

BLAMELESS: Final[frozenset[Cause]] = frozenset({FailureReason.UNKNOWN_LEASE, FailureReason.FETCH})
"""Attempt causes that need not be the peer's fault (it lost a lease, or could not fetch the model,
because the submitter was down): the same peer may be offered the task again."""

SAME_PEER_LATER: Final = frozenset({DeclineReason.BUSY, DeclineReason.QUEUE_FULL})
"""Declines that mean "not now": the same peer may be offered again after a backoff."""

SUSPECT_CAUSES: Final[frozenset[Cause]] = frozenset(
    {Lapse.OFFER_LOST, Lapse.LEASE_LAPSED, Lapse.LEASE_OVERRUN, Lapse.RELEASED}
)
"""Attempt causes that make a peer a last resort for every retry in the campaign (a released lease: the
peer is leaving; an overrun one: it held a task past its bound)."""

FREE_CAUSES: Final[frozenset[Cause]] = frozenset({Lapse.RELEASED})
"""Attempt causes that do not count against the retry budget, once per peer: a worker that leaves and hands
its lease back says nothing about the task. A second release of the same task by the same peer (a worker
that keeps leaving) counts, so the budget still bounds every task."""

DISTRUSTED: Final[frozenset[Cause]] = frozenset({FailureReason.INCONSISTENT, FailureReason.INVALID})
"""Attempt causes that mean a peer sent figures its own samples refute: no retry in the campaign goes
to it (its tasks placed already still run, and each of its results is checked like any other)."""

MAX_BACKOFF_S: Final = 30.0
_HOLDING: Final = frozenset({TaskState.PENDING, TaskState.OFFERED, TaskState.LEASED, TaskState.DONE})


def backoff_s(attempts: int) -> float:
    """How long to wait before offering a task again to a peer that said "not now": 2, 4, 8 ... 30 s."""
    return min(MAX_BACKOFF_S, 2.0**attempts)


def spent(attempts: Iterable[Attempt]) -> int:
    """How many of a task's attempts count against its retry budget: all but each peer's first `FREE_CAUSES`
    attempt."""
    freed: set[str] = set()
    count = 0
    for attempt in attempts:
        if attempt.cause in FREE_CAUSES and attempt.peer_id not in freed:
            freed.add(attempt.peer_id)
        else:
            count += 1
    return count


def placed_load(tasks: Iterable[TaskView]) -> dict[str, int]:
    """Live tasks of this campaign per peer, which ranking counts as load."""
    placed: dict[str, int] = {}
    for task in tasks:
        if task.peer_id is not None and not task.ended:
            placed[task.peer_id] = placed.get(task.peer_id, 0) + 1
    return placed


def next_peer(
    task: TaskView, tasks: Mapping[str, TaskView], peers: Iterable[PeerView], needs: Needs
) -> PeerView | None:
    """The peer a task should try next, or None if no untried feasible peer is left.

    Args:
        task: the task whose attempt just ended (that attempt included in its attempts).
        tasks: every task of the campaign, by id.
        peers: the candidate pool.
        needs: the task's job's needs.
    """
    tried = {a.peer_id for a in task.attempts if a.cause not in BLAMELESS}
    taken = {  # a replica's peers must differ within its group only (another group's may take it)
        t.peer_id
        for t in tasks.values()
        if t.job_index == task.job_index
        and t.task_id != task.task_id
        and t.state in _HOLDING
        and t.replica_group == task.replica_group
    }
    liars = {a.peer_id for t in tasks.values() for a in t.attempts if a.cause in DISTRUSTED}
    pool = [p for p in peers if p.peer_id not in tried | taken | liars]
    ranked = rank(needs, pool, placed=placed_load(tasks.values()))
    suspects = {a.peer_id for t in tasks.values() for a in t.attempts if a.cause in SUSPECT_CAUSES}
    ranked.sort(key=lambda r: r.peer.peer_id in suspects)  # stable: rank order otherwise
    return ranked[0].peer if ranked else None


@dataclass(frozen=True)
class RetryStep:
    """Where a task whose attempt ended goes: a peer, or none (`spent`: the budget is, and `detail`
    says so)."""

    peer: PeerView | None = None
    spent: bool = False
    detail: str = ""


def retry_step(
    task: TaskView, tasks: Mapping[str, TaskView], peers: Iterable[PeerView], needs: Needs, budget: int
) -> RetryStep:
    """The next peer for a task within its retry budget (`next_peer`), or why none."""
    if spent(task.attempts) > budget:
        return RetryStep(
            spent=True, detail=f"gave up after {len(task.attempts)} attempts (retry budget {budget})"
        )
    return RetryStep(peer=next_peer(task, tasks, peers, needs))


def in_flight(tasks: Iterable[TaskView]) -> dict[str, int]:
    """Tasks of this campaign offered to or leased on each peer right now."""
    live: dict[str, int] = {}
    for task in tasks:
        if task.peer_id is not None and task.state in (TaskState.OFFERED, TaskState.LEASED):
            live[task.peer_id] = live.get(task.peer_id, 0) + 1
    return live


def due_offers(
    tasks: Iterable[TaskView], peers: Mapping[str, PeerView], max_inflight: int, now: float
) -> list[tuple[TaskView, str]]:
    """The pending tasks to offer now, each with its peer: due (no deadline or past it), never more to a
    peer than it can hold, nor more in flight at once than `max_inflight` (0: no limit); the rest wait.

    Args:
        tasks: every task of the campaign, in task order.
        peers: the candidate pool by peer id (an unknown peer is offered one task at a time).
        max_inflight: the campaign's cap on tasks offered or leased at once; 0 for none.
        now: the current time.
    """
    tasks = list(tasks)
    busy = in_flight(tasks)
    limit = max_inflight or len(tasks)
    due: list[tuple[TaskView, str]] = []
    for task in tasks:
        peer, ripe = task.peer_id, task.deadline is None or task.deadline <= now
        if task.state != TaskState.PENDING or peer is None or not ripe:
            continue
        if sum(busy.values()) >= limit:
            break
        if busy.get(peer, 0) >= capacity_of(peers.get(peer)):
            continue
        busy[peer] = busy.get(peer, 0) + 1
        due.append((task, peer))
    return due


def capacity_of(peer: PeerView | None) -> int:
    """How many tasks a peer can hold at once (running plus its queue), from its advertised load.

    An unknown peer (e.g. after a restore, before discovery) is offered one task at a time.
    """
    if peer is None:
        return 1
    load = peer.load
    return max(1, 1 + load.max_queue - load.running - load.queued)
