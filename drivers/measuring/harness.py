"""The parent side of a measurement: fresh spawned children, one after another, aggregated.

Each child runs under the task's overall deadline and memory limit and is killed on timeout or
cancel. A child that crashes, runs out of memory or times out becomes a `TaskFailed` with the
matching reason, named for the model and placed at the stage the child had reached; the parent
process itself is never at risk. The parent never parses the model: it reads the file's name (the
format) and, only when the caller does not know it, hashes the bytes.
"""

from __future__ import annotations

import functools
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import wait
from pathlib import Path
from typing import Final

from drivers.errors import TaskFailed
from drivers.files.formats import detect_format
from drivers.files.models import sha256_file
from drivers.measuring.jobs import ChildJob
from drivers.measuring.spawning import Child, Entry, NotStarted, start_child
from drivers.measuring.telemetry import merged
from protocol import (
    FailureReason,
    GenerationStats,
    Measurement,
    ModelFormat,
    Phase,
    RequestRecord,
    RuntimeRates,
    Stage,
    TaskSpec,
)
from protocol.aggregate import derive
from protocol.genstats import summarize_generation
from protocol.stats import median

POLL_S: Final = 0.1  # how often the parent looks at the cancel event while it waits on the child
Progress = Callable[[Phase, int, int], None]


def measure(
    model_path: Path,
    spec: TaskSpec,
    *,
    model_sha256: str = "",
    allow_code_models: bool = False,
    on_progress: Progress | None = None,
    cancel: threading.Event | None = None,
    fmt: ModelFormat | None = None,
    name: str = "",
) -> Measurement:
    """Benchmark one model on one compute unit in `spec.processes` fresh child processes.

    Blocking; call it from a worker thread. The median of the result's `inference_ms` is the median
    of the process medians; every other statistic is over all timed samples, which are kept raw.

    Args:
        model_path: the model file.
        spec: the task: unit, runs, warm-ups, loads, processes, timeout, memory limit, inputs.
        model_sha256: the model's digest if the caller knows it (computed otherwise).
        allow_code_models: the owner opted in to torch programs that run code when loaded.
        on_progress: called with (phase, done, total) from this thread as children report.
        cancel: set it to kill the running child and stop.
        fmt: the model's format when the file name does not say it (content-addressed caches).
        name: the model's name for people, used in failures (default: the file's name).

    Returns:
        The aggregated measurement.

    Raises:
        TaskFailed: with the reason (unit unavailable, format, fallback, timeout, out of memory, ...),
            its `stage`, and a detail that starts with the model's name and the stage.
    """
    name = name or model_path.name
    try:
        fmt = fmt or detect_format(model_path)
    except TaskFailed as exc:
        raise exc.located(name, Stage.INSPECT) from None
    job = ChildJob(str(model_path.resolve()), fmt, spec, allow_code_models, name=name)
    deadline = time.monotonic() + spec.timeout_s
    results = []
    for index in range(spec.processes):
        report = _scaled(on_progress, index, spec.processes)
        results.append(_run_child(job, deadline, report, cancel))
    return aggregate(results, spec, model_sha256 or sha256_file(model_path))


def _scaled(on_progress: Progress | None, index: int, processes: int) -> Progress | None:
    if on_progress is None:
        return None
    callback = on_progress

    def report(phase: Phase, done: int, total: int) -> None:
        callback(phase, index * total + done, processes * total)

    return report


def _run_child(
    job: ChildJob, deadline: float, on_progress: Progress | None, cancel: threading.Event | None
) -> Measurement:
    entry = Entry(
        "drivers.measuring.child" if job.spec.generate is None else "drivers.measuring.genchild", "main"
    )
    try:
        child = start_child(entry, (job,), name="sark-measure")
    except NotStarted as exc:
        raise TaskFailed(FailureReason.INTERNAL, exc.detail).located(job.name, Stage.INSPECT) from None
    try:
        return _collect(child, job, deadline, on_progress, cancel)
    finally:
        child.stop()


def _collect(
    child: Child,
    job: ChildJob,
    deadline: float,
    on_progress: Progress | None,
    cancel: threading.Event | None,
) -> Measurement:
    stage = Stage.INSPECT
    while True:
        if cancel is not None and cancel.is_set():
            raise TaskFailed(FailureReason.CANCELLED, "cancelled").located(job.name, stage)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            failure = TaskFailed(FailureReason.TIMEOUT, f"timed out after {job.spec.timeout_s:g} s")
            raise failure.located(job.name, stage)
        if not wait([child.receiver], timeout=min(remaining, POLL_S)):
            continue
        try:
            message = child.receive()
        except NotStarted as exc:
            raise TaskFailed(FailureReason.INTERNAL, exc.detail).located(job.name, stage) from None
        if message is None:
            child.process.join()
            raise _ended(child, job.spec.memory_limit_mb).located(job.name, stage) from None
        if message[0] == "stage":
            stage = message[1]
        elif message[0] == "phase" and on_progress is not None:
            on_progress(message[1], message[2], message[3])
        elif message[0] == "failed":
            raise TaskFailed(message[1], message[2], message[3])
        elif message[0] == "result":
            result: Measurement = message[1]
            return result


def _ended(child: Child, limit_mb: int | None) -> TaskFailed:
    """The failure of a child that closed its pipe without a result: it did not start, or it died."""
    if not child.started:
        return TaskFailed(FailureReason.INTERNAL, child.ended())
    failure = _exit_failure(child.process.exitcode, limit_mb)
    site = child.crash_site() if failure.reason == FailureReason.CRASHED else ""
    return TaskFailed(failure.reason, f"{failure.detail} {site}") if site else failure


def _exit_failure(code: int | None, limit_mb: int | None) -> TaskFailed:
    """The failure of a child that ended without a result."""
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        if name == "SIGKILL":
            return TaskFailed(
                FailureReason.OUT_OF_MEMORY, "child killed by SIGKILL (the kernel's OOM killer)"
            )
        if limit_mb is not None and name in ("SIGABRT", "SIGSEGV", "SIGBUS"):
            return TaskFailed(
                FailureReason.OUT_OF_MEMORY, f"child died of {name} under a {limit_mb} MB memory limit"
            )
        return TaskFailed(FailureReason.CRASHED, f"child died of {name}")
    return TaskFailed(FailureReason.CRASHED, f"child exited with code {code} and no result")


def _revised(record: RequestRecord, model_sha256: str) -> RequestRecord:
    """A white-box record's token source with its revision: the model file's digest (its tokenizer's)."""
    source = record.token_source
    if not source.startswith("tokenizer:") or "@" in source:
        return record
    return record.with_(token_source=f"{source}@{model_sha256[:12]}")


def aggregate(parts: list[Measurement], spec: TaskSpec, model_sha256: str) -> Measurement:
    """One measurement from the processes' own (each process's raw parts, as its child returned them):
    the raw parts pooled, process after process, and the figures `derive` makes of them (median of
    medians, spread, stability verdict), as the submitter will recompute them. Facts of the runtime
    (providers, settings, versions, inputs) are the first process's."""
    first = parts[0]
    gpu_util = [p.gpu_util_pct for p in parts if p.gpu_util_pct is not None]
    gpu_mem = [p.gpu_mem_mb for p in parts if p.gpu_mem_mb is not None]
    telemetry, mark_runs, mark_ms = merged(
        [(p.telemetry, p.mark_runs, p.mark_ms, len(p.samples_ms)) for p in parts]
    )
    raw = first.with_(
        warmups_used=max(p.warmups_used for p in parts),
        samples_ms=tuple(s for p in parts for s in p.samples_ms),
        process_runs=tuple(n for p in parts for n in p.process_runs),
        load_samples_ms=tuple(t for p in parts for t in p.load_samples_ms),
        first_inferences_ms=tuple(t for p in parts for t in p.first_inferences_ms),
        output_fingerprints=tuple(f for p in parts for f in p.output_fingerprints),
        peak_load_ram_mb=max(p.peak_load_ram_mb for p in parts),
        peak_inference_ram_mb=max(p.peak_inference_ram_mb for p in parts),
        cpu_cores_used=median([p.cpu_cores_used for p in parts]),
        cpu_time_s=sum(p.cpu_time_s for p in parts),
        gpu_util_pct=max(gpu_util) if gpu_util else None,
        gpu_mem_mb=max(gpu_mem) if gpu_mem else None,
        fallback=any(p.fallback for p in parts),
        conditions=first.conditions.with_(
            background_cores=max(p.conditions.background_cores for p in parts), model_sha256=model_sha256
        ),
        generation=_pooled_generation(parts, spec, model_sha256),
        energy_readings=tuple(e for p in parts for e in p.energy_readings),
        async_runs=tuple(a for p in parts for a in p.async_runs),
        telemetry=telemetry,
        mark_runs=mark_runs,
        mark_ms=mark_ms,
    )
    return derive(raw, spec)


def _pooled_generation(parts: list[Measurement], spec: TaskSpec, model_sha256: str) -> GenerationStats | None:
    """Every process's requests pooled, their rates over the summed wall time (None: not a generate task)."""
    if spec.generate is None:
        return None
    runs = [p.generation for p in parts if p.generation is not None]
    records = [_revised(record, model_sha256) for run in runs for record in run.records]
    timers = [run.runtime_rates for run in runs if run.runtime_rates is not None]
    rates = functools.reduce(RuntimeRates.plus, timers) if timers else None
    return summarize_generation(records, sum(run.wall_s for run in runs), spec.generate).with_(
        runtime_rates=rates
    )
