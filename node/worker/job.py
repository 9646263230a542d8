"""One committed task on a worker (`Job`) and the signed outcomes it ends with: a result cut to fit
one envelope (`node.worker.fit`), a failure naming the stage, or a release when the worker leaves."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import trio

from node.worker.fit import fit_result
from protocol import (
    DOMAIN_RELEASE,
    DOMAIN_RESULT,
    MAX_ENVELOPE,
    DeviceProfile,
    Failure,
    FailureReason,
    Measurement,
    OfferBody,
    Phase,
    Release,
    ReleaseBody,
    Result,
    ResultBody,
    Stage,
)
from protocol.records import seal

Outcome = Result | Failure | Release


@dataclass(eq=False)
class Job:
    """One committed task on this worker, from commit to acknowledged outcome."""

    offer: OfferBody
    lease_id: str
    seq: int
    phase: Phase = Phase.QUEUED
    done: int = 0
    total: int = 0
    median_ms: float | None = None
    dispatched: bool = False
    orphaned_at: float | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    stop: trio.CancelScope = field(default_factory=trio.CancelScope)  # an endpoint task's requests
    finished: trio.Event = field(default_factory=trio.Event)
    outcome: Outcome | None = None
    sent: trio.Event = field(default_factory=trio.Event)  # the outcome is written to the submitter's stream

    @property
    def task_id(self) -> str:
        return self.offer.task_id

    def sort_key(self) -> tuple[int, int]:
        """Higher priority first, then older first."""
        return (-self.offer.priority, self.seq)

    def on_progress(self, phase: Phase, done: int, total: int) -> None:
        """Called by the harness (from its thread) as the child reports phases."""
        self.phase, self.done, self.total = phase, done, total


def failure(job: Job, reason: FailureReason, stage: Stage, cause: str) -> Failure:
    """The task's failure, its detail starting with the model's name and the stage."""
    detail = f"{job.offer.model.name}: {stage.value} failed: {cause}"
    return Failure(
        task_id=job.task_id, lease_id=job.lease_id, reason=reason, detail=detail[:2000], stage=stage
    )


def signed_result(
    job: Job, worker: str, key: bytes, profile: DeviceProfile, measurement: Measurement
) -> Result | Failure:
    """The signed result, cut to fit one envelope (`node.worker.fit`); a failure if it cannot fit."""
    whole = ResultBody(
        campaign_id=job.offer.campaign_id,
        task_id=job.task_id,
        lease_id=job.lease_id,
        worker=worker,
        submitter=job.offer.submitter,
        model_sha256=job.offer.model.sha256,
        device=profile,
        measurement=measurement,
        finished_at=time.time(),
    )
    if (body := fit_result(whole, job.offer.spec)) is None:
        cause = f"the result does not fit one envelope of {MAX_ENVELOPE} bytes even cut"
        return failure(job, FailureReason.TOO_LARGE, Stage.RUN, cause)
    envelope = seal(body, DOMAIN_RESULT, key)
    return Result(task_id=job.task_id, lease_id=job.lease_id, envelope=envelope)


def signed_release(job: Job, worker: str, key: bytes, reason: str) -> Release:
    """The signed hand-back of the job's lease: the worker is leaving (`node.worker.leave`)."""
    body = ReleaseBody(
        campaign_id=job.offer.campaign_id,
        task_id=job.task_id,
        lease_id=job.lease_id,
        worker=worker,
        submitter=job.offer.submitter,
        issued_at=time.time(),
        reason=reason[:2000],
    )
    envelope = seal(body, DOMAIN_RELEASE, key)
    return Release(task_id=job.task_id, lease_id=job.lease_id, envelope=envelope)


__all__ = ["Job", "Outcome", "failure", "signed_release", "signed_result"]
