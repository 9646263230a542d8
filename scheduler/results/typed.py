"""A task's result as a typed value: what every output renders, built once from the store.

A `TaskResult` is a task with either the verified body whose measurement is
the one the submitter derived from the worker's raw parts, or how the task ended (its status, reason
and detail, from the scheduler). Its row is rendered from it through the registry (`row_of`); the
report's entries and the REST API take their figures from its measurement, never from a row's text.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol import GenerationStats, Measurement, ResultBody
from scheduler.results.prices import Price
from scheduler.results.rows import failure_row, result_row
from scheduler.state.tasks import Status, TaskView


@dataclass(frozen=True)
class TaskResult:
    """One task as the outputs show it.

    Attributes:
        task: the task as the scheduler holds it.
        created_utc: when its result was stored, or when the files are written for a task that has none.
        body: the verified body, its measurement the derived one (None: the task ended without one).
        samples_ms: the raw inference samples.
        status, reason, detail: how a task without a body ended.
        merged: a fleet job's merged figures (`fleetrows.merged_stats`); `task` is then its first member.
        price: what an hour of its device costs and who said so (`costrows.priced`; None: not priced).
    """

    task: TaskView
    created_utc: str
    body: ResultBody | None = None
    samples_ms: tuple[float, ...] = ()
    status: Status = Status.COMPLETE
    reason: str = ""
    detail: str = ""
    merged: GenerationStats | None = None
    price: Price | None = None

    @property
    def measurement(self) -> Measurement | None:
        """The derived measurement, if the task has one."""
        return self.body.measurement if self.body is not None else None


def measured(
    task: TaskView, body: ResultBody, derived: Measurement, samples_ms: tuple[float, ...], created_utc: str
) -> TaskResult:
    """A completed task: its signed body shown with the measurement the submitter derived from its raw
    parts (`derived`), with its raw inference samples, stored at `created_utc`."""
    return TaskResult(task, created_utc, body.with_(measurement=derived), samples_ms)


def ended(task: TaskView, created_utc: str) -> TaskResult:
    """A task without a result: its ending as the scheduler holds it (a live one: still running)."""
    status = task.status or Status.FAILED
    detail = task.detail or ("" if task.ended else f"still {task.state.value} when the campaign stopped")
    if task.reasons:
        detail = f"{detail}: {'; '.join(task.reasons)}" if detail else "; ".join(task.reasons)
    return TaskResult(task, created_utc, status=status, reason=task.failure_reason, detail=detail)


def row_of(result: TaskResult) -> dict[str, str]:
    """The task's row, every cell rendered from the typed value by the registry."""
    if result.body is not None:
        return result_row(result.task, result.body, "verified", result.created_utc)
    return failure_row(result.task, result.status, result.reason, result.detail, result.created_utc)
