"""The worker's task runner: a priority queue of dispatched tasks, one measurement at a time.

Measurements that share a device disturb each other, so by default one runs at a time; committed
tasks wait in a short queue ordered by priority, then age. Each job outlives the stream that brought it:
its signed result waits in the outbox; a worker that leaves hands unfinished jobs back (signed releases).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, final

import psutil
import trio

import drivers
from node.errors import DiskFull, disk_full, megabytes
from node.events import EventSink, quiet
from node.transfer.blob import UploadSlots
from node.transfer.cache import ModelCache
from node.transfer.fetch import FetchError, UrlPolicy, download
from node.worker.holders import ChannelOpener, fetch_from_holders
from node.worker.job import Job, Outcome, failure, signed_release, signed_result
from node.worker.outbox import Outbox
from node.worker.targets import Targets, endpoint_of
from protocol import (
    DeviceProfile,
    Failure,
    FailureReason,
    Load,
    Measurement,
    OfferBody,
    Phase,
    Result,
    Stage,
)

if TYPE_CHECKING:
    from trio_typing import TaskStatus

log = logging.getLogger(__name__)


@final
class Runner:
    """Holds the committed jobs and runs dispatched ones in priority order."""

    def __init__(
        self,
        *,
        peer_id: str,
        private_key: bytes,
        profile: DeviceProfile,
        cache: ModelCache,
        outbox: Outbox,
        policy: UrlPolicy,
        open_blob: ChannelOpener,
        max_queue: int = 4,
        allow_code_models: bool = False,
        events: EventSink = quiet,
        uploads: UploadSlots | None = None,
        targets: Targets | None = None,
    ) -> None:
        self._peer_id = peer_id
        self._key = private_key
        self._profile = profile
        self._cache = cache
        self._outbox = outbox
        self._policy = policy
        self._open_blob = open_blob
        self._max_queue = max_queue
        self._allow_code_models = allow_code_models
        self._emit = events
        self._uploads = uploads
        self._targets = targets or Targets(policy)
        self._jobs: dict[str, Job] = {}
        self._ready: list[tuple[tuple[int, int], Job]] = []
        self._wakeup = trio.Event()
        self._seq = itertools.count()
        self._running: Job | None = None
        self._leaving = False

    # -- bookkeeping ------------------------------------------------------------------------------

    def load(self) -> Load:
        """What this worker is doing right now, for adverts and /sark/profile."""
        queued = sum(1 for j in self._jobs.values() if j is not self._running and j.outcome is None)
        return Load(
            running=int(self._running is not None),
            queued=queued,
            max_queue=self._max_queue,
            cpu_busy=round(psutil.cpu_percent(interval=None) / 100 * (psutil.cpu_count() or 1), 2),
            mem_available_mb=psutil.virtual_memory().available >> 20,
        )

    @property
    def leaving(self) -> bool:
        """Whether this worker is leaving: it takes no more offers."""
        return self._leaving

    def leave(self, reason: str) -> list[Job]:
        """Take no more offers; hand back every unfinished job (returned): its outcome becomes a signed
        release (sent on its stream, if it has one), its measurement is killed or it never runs."""
        self._leaving = True
        released = [job for job in self._jobs.values() if job.outcome is None]
        for job in released:
            job.cancel.set()
            job.stop.cancel()
            self._finish(job, signed_release(job, self._peer_id, self._key, reason))
        return released

    def owed(self) -> list[Job]:
        """Jobs whose outcome is ready but not yet written to their stream (an orphan has none)."""
        jobs = self._jobs.values()
        return [j for j in jobs if j.outcome is not None and not j.sent.is_set() and j.orphaned_at is None]

    def has_room(self, keep: int = 0) -> bool:
        """Is a place free in the queue (the running job's and `max_queue` more), `keep` of them left
        aside (a stranger's offer leaves the last place to the worker's own submitters)?"""
        return sum(1 for j in self._jobs.values() if j.outcome is None) < self._max_queue + 1 - keep

    def commit(self, offer: OfferBody) -> Job:
        """Reserve a place for an accepted offer and grant it a fresh lease."""
        job = Job(offer=offer, lease_id=f"L{secrets.token_hex(8)}", seq=next(self._seq))
        self._jobs[job.lease_id] = job
        return job

    def queue_position(self, job: Job) -> int:
        """How many jobs will run before this one."""
        ahead = [j for j in self._jobs.values() if j.outcome is None and j is not job]
        running = int(self._running is not None and self._running is not job)
        waiting = sum(1 for j in ahead if j is not self._running and j.sort_key() < job.sort_key())
        return running + waiting

    def job(self, lease_id: str) -> Job | None:
        return self._jobs.get(lease_id)

    def dispatch(self, job: Job) -> None:
        """The submitter confirmed: the job may run when its turn comes."""
        if not job.dispatched:
            job.dispatched = True
            job.orphaned_at = None
            heapq.heappush(self._ready, (job.sort_key(), job))
            self._wakeup.set()

    def orphan(self, job: Job, grace_s: float) -> None:
        """The stream broke before dispatch: keep the lease for `grace_s` in case the submitter
        comes back and reclaims it, then forget it."""
        job.orphaned_at = trio.current_time() + grace_s
        self._wakeup.set()

    def drop(self, job: Job) -> None:
        """Give back the place of a commit that was never dispatched, at once."""
        if not job.dispatched:
            self._jobs.pop(job.lease_id, None)

    def _sweep(self) -> None:
        now = trio.current_time()
        for job in list(self._jobs.values()):
            if not job.dispatched and job.orphaned_at is not None and job.orphaned_at <= now:
                self._jobs.pop(job.lease_id, None)

    def cancel(self, job: Job) -> None:
        """Stop a job: kill its measurement if it runs, skip it if it waits."""
        job.cancel.set()
        job.stop.cancel()
        if (not job.dispatched or job is not self._running) and job.outcome is None:
            self._finish(
                job,
                Failure(
                    task_id=job.task_id,
                    lease_id=job.lease_id,
                    reason=FailureReason.CANCELLED,
                    detail="cancelled by the submitter",
                ),
            )
            self._emit_outcome(job)  # it never ran: `serve` skips it and says nothing

    def acknowledged(self, job: Job) -> None:
        """The submitter has the outcome: the lease is over."""
        self._outbox.ack(job.task_id, job.lease_id)
        self._jobs.pop(job.lease_id, None)

    def stored(self, task_id: str, lease_id: str) -> Result | None:
        """A result kept in the outbox from an earlier stream (or an earlier run of this worker)."""
        return self._outbox.get(task_id, lease_id)

    def forget(self, task_id: str, lease_id: str) -> None:
        """A stored result was acknowledged."""
        self._outbox.ack(task_id, lease_id)
        self._jobs.pop(lease_id, None)

    def _finish(self, job: Job, outcome: Outcome) -> None:
        if job.outcome is None:
            job.outcome = outcome
            if isinstance(outcome, Result):
                try:
                    self._outbox.put(outcome)
                except DiskFull as exc:  # delivered from memory still; only a crash of ours would lose it
                    log.warning("task %s: %s; the result is kept in memory only", job.task_id, exc.detail)
            job.finished.set()

    # -- execution -------------------------------------------------------------------------------

    async def serve(self, *, task_status: TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run dispatched jobs one at a time, forever."""
        task_status.started()
        while True:
            while not self._ready:
                self._sweep()
                self._wakeup = trio.Event()
                with trio.move_on_after(1.0):
                    await self._wakeup.wait()
            _, job = heapq.heappop(self._ready)
            if job.outcome is not None:
                continue
            self._running = job
            self._emit("run", task=job.task_id, lease=job.lease_id, submitter=job.offer.submitter)
            try:
                self._finish(job, await self._execute(job))
            finally:
                self._running = None
            self._emit_outcome(job)  # a release set while it ran wins over the killed measurement's failure

    def _emit_outcome(self, job: Job) -> None:
        outcome = job.outcome
        assert outcome is not None
        self._emit(
            "outcome",
            task=job.task_id,
            lease=job.lease_id,
            kind=outcome.kind,
            reason=getattr(outcome, "reason", ""),
            detail=getattr(outcome, "detail", ""),
        )

    async def _execute(self, job: Job) -> Outcome:
        try:
            job.phase = Phase.FETCHING
            endpoint = endpoint_of(job.offer.spec)
            if job.offer.spec.peaks is not None:  # the unit's peaks: no model bytes, one measuring child
                return await self._peak(job)
            if endpoint is not None:  # a model server: no model bytes, the requests are the task
                job.phase = Phase.MEASURING
                measured = await self._targets.measure(job.offer.spec, endpoint, job.stop)
                return await sealed(job, self._peer_id, self._key, self._profile, measured)
            path = await self._acquire_model(job)
            async with self._alone(job):
                job.phase = Phase.LOADING
                measurement = await _killable(partial(self._measure, job, path), job.cancel)
        except drivers.TaskFailed as exc:
            return Failure(
                task_id=job.task_id,
                lease_id=job.lease_id,
                reason=exc.reason,
                detail=exc.detail[:2000],
                stage=exc.stage,
            )
        except Exception as exc:  # task boundary: a bug met by one task fails that task, not the worker
            if disk_full(exc):
                return self._no_space(job)
            if isinstance(exc, FetchError):
                stage = Stage.VERIFY if exc.reason == FailureReason.DIGEST_MISMATCH else Stage.FETCH
                return failure(job, exc.reason, stage, exc.detail)
            log.exception("task %s failed on an internal error", job.task_id)
            stage = Stage.FETCH if job.phase == Phase.FETCHING else Stage.LOAD
            cause = f"internal error: {type(exc).__name__}: {exc}"
            return failure(job, FailureReason.INTERNAL, stage, cause)
        return await sealed(job, self._peer_id, self._key, self._profile, measurement)

    async def _peak(self, job: Job) -> Outcome:
        """A peaks task's figure (`drivers.measure_peak`), measured with no upload from this worker."""
        async with self._alone(job):
            job.phase = Phase.MEASURING
            with job.stop:
                measurement = await drivers.measure_peak(job.offer.spec)
                return await sealed(job, self._peer_id, self._key, self._profile, measurement)
        return failure(job, FailureReason.CANCELLED, Stage.RUN, "cancelled by the submitter")

    @asynccontextmanager
    async def _alone(self, job: Job) -> AsyncIterator[None]:
        """The measurement's span, with no model upload from this worker inside it (`UploadSlots`):
        emits `measuring` when it starts and `measured` (started, ended: wall-clock seconds) at its end."""
        async with nullcontext() if self._uploads is None else self._uploads.measuring():
            started = time.time()
            self._emit("measuring", task=job.task_id, started=started)
            try:
                yield
            finally:
                self._emit("measured", task=job.task_id, started=started, ended=time.time())

    def _no_space(self, job: Job) -> Failure:
        """The model cache's disk is full: the partial model goes (a resumable one would hold the space),
        the task fails with reason `disk` naming the folder, and the worker serves on."""
        model = job.offer.model
        self._cache.temp_path(model.sha256).unlink(missing_ok=True)
        what = f"storing model {model.name}" + (f" ({megabytes(model.size)})" if model.size else "")
        log.warning("task %s: no space left on %s while %s", job.task_id, self._cache.root, what)
        return failure(job, FailureReason.DISK, Stage.FETCH, DiskFull(self._cache.root, what).detail)

    def _measure(self, job: Job, path: Path) -> Measurement:
        return drivers.measure(
            path,
            job.offer.spec,
            model_sha256=job.offer.model.sha256,
            allow_code_models=self._allow_code_models,
            on_progress=job.on_progress,
            cancel=job.cancel,
            fmt=job.offer.model.format,
            name=job.offer.model.name,
        )

    async def _acquire_model(self, job: Job) -> Path:
        model = job.offer.model
        cached = await trio.to_thread.run_sync(self._cache.path_for, model.sha256)
        if cached is not None:
            self._emit("model", task=job.task_id, sha256=model.sha256, source="cache", bytes=0)
            return cached
        if model.size > self._policy.max_bytes:
            raise FetchError(
                FailureReason.TOO_LARGE, f"model is {model.size} bytes, cap {self._policy.max_bytes}"
            )
        if model.sources:
            path = await self._download(model.sources, model.sha256)
            self._emit(
                "model", task=job.task_id, sha256=model.sha256, source="url", bytes=path.stat().st_size
            )
            return path
        path, peer = await fetch_from_holders(
            job.offer, self._peer_id, self._cache, self._policy.max_bytes, self._open_blob
        )
        source = "blob" if peer == job.offer.submitter else "peer"
        self._emit("model", task=job.task_id, sha256=model.sha256, source=source, peer=peer, bytes=model.size)
        return path

    async def _download(self, urls: tuple[str, ...], sha256: str) -> Path:
        error: FetchError | None = None
        for url in urls:
            temp = self._cache.temp_path(sha256)
            try:
                digest, _ = await download(url, temp, sha256=sha256, policy=self._policy)
            except FetchError as exc:
                error = exc
                log.info("model download from %s failed: %s", url, exc.detail)
                continue
            commit = partial(self._cache.commit, digest=digest)  # download hashed what it wrote
            return await trio.to_thread.run_sync(commit, sha256, temp)
        assert error is not None
        raise error


async def _killable(measure: Callable[[], Measurement], cancel: threading.Event) -> Measurement:
    """Run a blocking measurement in a thread; when this task is cancelled (the node is stopping), set
    `cancel`, on which the harness kills its child within a poll, instead of waiting the run out."""
    try:
        # trio_typing's stubs (libp2p's dependency) still call the flag `cancellable`
        return await trio.to_thread.run_sync(measure, abandon_on_cancel=True)  # type: ignore[call-arg]
    except trio.Cancelled:
        cancel.set()
        raise


async def sealed(
    job: Job, worker: str, key: bytes, profile: DeviceProfile, measurement: Measurement
) -> Outcome:
    """`signed_result` in a thread, off the node's loop. A result of thousands of request records is
    validated, cut to fit one envelope and sealed in seconds of CPU on a busy machine, and on the loop
    that silenced the lease's heartbeats: a fleet member's 3 s lease lapsed at load 9 with its result in
    hand (`tests/labs/e2e/test_fleet_floor.py`, a fresh clone's suite beside `kit.load 4`). In a thread
    the loop gets the interpreter at every switch interval (5 ms), as the endpoint client's own loop
    does (`node.worker.targets.in_own_loop`); the heartbeats go on until the outcome is set."""
    return await trio.to_thread.run_sync(partial(signed_result, job, worker, key, profile, measurement))
