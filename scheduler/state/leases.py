"""When a lease ends on the submitter, whatever its heartbeats say, and why a leased task lost its lease.

A heartbeat extends a lease by its ttl (`Scheduler._on_progress`), but never past the lease's end:
dispatch + the model's transfer allowance + the task's `timeout_s` x `OVERRUN`. A worker that commits
and then reports "queued" (or anything else) forever holds the task no longer than that; the lease
ends as a lapse with cause `Lapse.LEASE_OVERRUN`, apart from a silent lease's `Lapse.LEASE_LAPSED`.

The transfer allowance is `TRANSFER_BASE_S` plus the model's bytes at `TRANSFER_BYTES_PER_S`: the base
covers what a worker does before its timed run (a fetch's handshake, the child's start, a fleet
member's wait for its start instant, `FLEET_LEAD_S` = 5 s), the rate is a slow link's (8 Mbit/s, the
fault lab's impaired cap), so an honest worker that fetches the model and runs to its own timeout
always finishes inside it. The time a task waits in a worker's queue counts too: a task that cannot
start within its allowance is given back and tried elsewhere.
"""

from __future__ import annotations

from typing import Final

from protocol import ModelRef
from scheduler.state.tasks import Lapse, TaskView
from scheduler.verification.bounds import OVERRUN

TRANSFER_BASE_S: Final = 15.0
TRANSFER_BYTES_PER_S: Final = 1024.0 * 1024.0


def transfer_allowance_s(model: ModelRef) -> float:
    """Seconds allowed to bring the model to the worker and start: the base plus its bytes at 1 MiB/s."""
    return TRANSFER_BASE_S + model.size / TRANSFER_BYTES_PER_S


def lease_end(model: ModelRef, timeout_s: float, dispatched_at: float) -> float:
    """When a lease dispatched at `dispatched_at` ends, whatever its heartbeats say."""
    return dispatched_at + transfer_allowance_s(model) + timeout_s * OVERRUN


def granted(model: ModelRef, lease_id: str, ttl_s: float, timeout_s: float, now: float) -> dict[str, object]:
    """A lease's fields on the task, granted at `now` (committed and dispatched at once)."""
    ends = lease_end(model, timeout_s, now)
    return {
        "lease_id": lease_id,
        "lease_ttl_s": ttl_s,
        "lease_ends_at": ends,
        "deadline": min(now + ttl_s, ends),
    }


def reclaimed(task: TaskView, now: float) -> dict[str, object]:
    """A lease's fields after a restore: a ttl from `now` for the reclaim, the end moved no earlier."""
    beat = now + task.lease_ttl_s
    return {
        "deadline": beat,
        "lease_ends_at": None if task.lease_ends_at is None else max(task.lease_ends_at, beat),
    }


def lease_deadline(task: TaskView, now: float) -> float:
    """The next instant the scheduler acts on a leased task: its ttl from `now`, never past its end."""
    beat = now + task.lease_ttl_s
    return beat if task.lease_ends_at is None else min(beat, task.lease_ends_at)


def lapse_of(task: TaskView, now: float, timeout_s: float) -> tuple[Lapse, str]:
    """Why a leased task lost its lease at `now` (overrun past its end, or silence), in a sentence."""
    if task.lease_ends_at is not None and now >= task.lease_ends_at:
        allowance = transfer_allowance_s(task.model)
        return Lapse.LEASE_OVERRUN, (
            f"lease {task.lease_id} overran: not finished {allowance:.3g} s (model transfer) + "
            f"{timeout_s:g} s (timeout) x {OVERRUN:g} after dispatch, whatever its heartbeats said"
        )
    return Lapse.LEASE_LAPSED, f"lease {task.lease_id} lapsed: no heartbeat for {task.lease_ttl_s:g} s"


__all__ = [
    "TRANSFER_BASE_S",
    "TRANSFER_BYTES_PER_S",
    "granted",
    "lapse_of",
    "lease_deadline",
    "lease_end",
    "reclaimed",
    "transfer_allowance_s",
]
