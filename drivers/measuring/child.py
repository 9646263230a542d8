"""The spawned child's side of a measurement: check, load N times, warm up, time, return one process's
`Measurement`.

Runs in a fresh `spawn` process (`drivers.measuring.spawning`), so a crash, an allocation past the memory
limit or a hard kill stays here. This is the only place that reads the model's bytes: inspection (headers,
protobuf, pickle sniffing) runs here under an address-space cap, then the runtime loads and runs it.
The boundary, the messages, the load phase and the meters around the runs are `drivers.measuring.frame`'s.
"""

from __future__ import annotations

import gc
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Final, TypeGuard, TypeVar

from drivers.errors import TaskFailed
from drivers.files.formats import check_model_file
from drivers.files.inputs import fed, synthesize
from drivers.measuring import device, frame, meters, telemetry
from drivers.measuring.jobs import ChildJob
from drivers.measuring.outputs import output_fingerprint, output_sample, output_values
from drivers.measuring.spawning import MIB, address_space_capped
from drivers.measuring.stats import ci_within, warmed_up
from drivers.measuring.sustain import Marks, sustained_runs
from drivers.runtimes.driver import AsyncRunner, Converter, Driver, Feeds, Loaded, LoadOptions
from drivers.runtimes.registry import driver_for
from protocol import AsyncRun, FailureReason, Measurement, Phase, RunConditions, Stage, TaskSpec

WARMUP_CAP: Final = 200
WARMUP_BUDGET: Final = 0.2  # share of the task's timeout that warm-up may take
PROGRESS_CHUNKS: Final = 10
STOP_BUDGET: Final = 0.2  # the stopping rule's default duration: this share of the task's timeout
NS_PER_MS: Final = 1e6
THROUGHPUT_S: Final = 10.0  # the most a throughput run is sized for, at the timed runs' median
INSPECT_MB: Final = 512  # address space inspection may take beyond the process and the mapped file

T = TypeVar("T")


def main(conn: Connection, job: ChildJob) -> None:
    """Entry point of the spawned child: measure and send the outcome; never raises."""
    frame.run_boundary(conn, job, _measure)


def _measure(conn: Connection, job: ChildJob, at: frame.Stages) -> Measurement:
    path, spec = Path(job.model_path), job.spec
    at.enter(Stage.INSPECT)
    _inspect(path, job)
    at.enter(Stage.LOAD)
    driver = driver_for(spec.compute_unit)
    status = driver.probe()
    if not status.usable:
        raise TaskFailed(FailureReason.UNIT_UNAVAILABLE, f"unit unavailable: {status.reason}")
    if job.fmt not in driver.formats:
        raise TaskFailed(FailureReason.FORMAT, f"{spec.compute_unit.value} cannot run {job.fmt.value} models")
    driver.prepare()
    if spec.memory_limit_mb is not None:
        frame.limit_memory(spec.memory_limit_mb)
    options = LoadOptions(
        spec.threads,
        job.allow_code_models,
        job.cache_dir,
        job.fmt,
        precision=spec.precision,
        dynamic_shapes=spec.dynamic_shapes,
        performance_hint=spec.performance_hint,
        input_shapes=spec.input_shapes,
        input_data=spec.input_data,
    )
    with tempfile.TemporaryDirectory(prefix="sark-converted-") as scratch:
        path, options, conversion = _guard(lambda: _converted(driver, path, options, Path(scratch)), spec)
        return _load_and_run(conn, driver, path, options, spec, at, conversion)


def _converted(
    driver: Driver, path: Path, options: LoadOptions, scratch: Path
) -> tuple[Path, LoadOptions, dict[str, str]]:
    """The model the driver loads: `path` itself, or what the driver's conversion wrote into
    `scratch` (before the timed loads), with the conversion recorded beside the runtime versions."""
    if not isinstance(driver, Converter) or options.fmt not in driver.converts:
        return path, options, {}
    converted, said = driver.convert(path, scratch, options)
    return converted, replace(options, fmt=None), {"conversion": said}


def _load_and_run(
    conn: Connection,
    driver: Driver,
    path: Path,
    options: LoadOptions,
    spec: TaskSpec,
    at: frame.Stages,
    conversion: dict[str, str],
) -> Measurement:
    """Timed loads, the one that runs, its inputs, then the inference phase."""
    timed = _guard(lambda: frame.timed_loads(conn, lambda: driver.load(path, options), spec.load_runs), spec)
    _, load_ms, peak_load = timed
    del timed, _  # the last timed load is let go before the one that runs
    loaded = _guard(lambda: driver.load(path, options), spec)
    at.enter(Stage.INSPECT)
    feeds = synthesize(loaded.inputs(), spec.input_shapes, spec.input_values, spec.input_data)
    at.enter(Stage.RUN)
    part = Measurement.nothing_timed(spec.compute_unit).with_(
        load_samples_ms=tuple(load_ms),
        peak_load_ram_mb=peak_load,
        conditions=_conditions(loaded, device.harness_versions() | driver.versions() | conversion),
        inputs=fed(loaded.inputs(), feeds, spec.input_shapes, spec.input_values, spec.input_data),
    )
    return _guard(lambda: _inference_phase(conn, loaded, feeds, spec, part), spec)


def _conditions(loaded: Loaded, versions: dict[str, str]) -> RunConditions:
    settings = loaded.settings()
    return RunConditions(
        intra_op_threads=settings.intra_op_threads,
        inter_op_threads=settings.inter_op_threads,
        spinning=settings.spinning,
        runtime_versions=versions,
        runtime_settings=settings.runtime,
    )


def _inspect(path: Path, job: ChildJob) -> None:
    """Check the model file under a soft address-space cap: the process, the mapped file, INSPECT_MB.

    Only the soft limit is set (and restored after), so the later task memory limit is still free to
    be set; a header that makes the check allocate past the cap fails as MemoryError, out of memory.
    """
    size = path.stat().st_size if path.is_file() else 0
    with address_space_capped(size + INSPECT_MB * MIB):
        check_model_file(path, job.fmt, allow_code_models=job.allow_code_models)


def _guard(call: Callable[[], T], spec: TaskSpec) -> T:
    """Run a runtime call, turning an allocation failure under the memory limit into OUT_OF_MEMORY."""
    try:
        return call()
    except TaskFailed as exc:
        if (
            exc.reason == FailureReason.LOAD
            and spec.memory_limit_mb is not None
            and _allocation_failure(exc.detail)
        ):
            raise TaskFailed(FailureReason.OUT_OF_MEMORY, frame.oom_detail(spec.memory_limit_mb)) from exc
        raise
    except MemoryError:
        raise
    except Exception as exc:  # the runtime's own error types: classify at the seam
        if spec.memory_limit_mb is not None and _allocation_failure(str(exc)):
            raise TaskFailed(FailureReason.OUT_OF_MEMORY, frame.oom_detail(spec.memory_limit_mb)) from exc
        reason = FailureReason.INPUT if type(exc).__name__ == "InvalidArgument" else FailureReason.CRASHED
        raise TaskFailed(reason, frame.first_line(exc)) from exc


def _allocation_failure(text: str) -> bool:
    # onnxruntime reports a failed allocation only in its message ("Failed to allocate memory", bad_alloc).
    lowered = text.lower()
    return "allocate" in lowered or "bad_alloc" in lowered


def _inference_phase(
    conn: Connection, loaded: Loaded, feeds: Feeds, spec: TaskSpec, part: Measurement
) -> Measurement:
    """First inference, warm-up and the timed runs inside the frame's meters; `part` completed."""
    run = loaded.runner(feeds)
    placed = meters.Placed(loaded.placement, spec.compute_unit, spec.strict_placement, spec.placement_share)
    sampler, cpu = telemetry.Sampler(), meters.CpuMeter()
    measured = frame.standard(spec.compute_unit, placed, sampler, cpu)
    with measured.around_runs():
        conn.send(("phase", Phase.WARMUP, 0, max(spec.warmups, 1)))
        t0 = time.perf_counter_ns()
        first_outputs = run()
        first_ms = (time.perf_counter_ns() - t0) / NS_PER_MS
        warmups = _warm_up(run, spec)
        with measured.around_timed():
            marks = Marks(sampler.origin_ns)
            if spec.sustain is not None:
                samples = sustained_runs(conn, run, spec.sustain, marks)
            else:
                samples = _timed_until(conn, run, spec, marks)
                marks.add(len(samples))
    fingerprint = output_fingerprint(first_outputs)  # untimed: after the timed phase
    async_runs: tuple[AsyncRun, ...] = ()
    if _throughput_run(loaded, spec):
        async_runs = (loaded.throughput(feeds, throughput_count(samples)),)
    return measured.taken(
        part.with_(
            first_inference_ms=first_ms,
            warmups_used=warmups,
            samples_ms=tuple(samples),
            process_runs=(len(samples),),
            first_inferences_ms=(first_ms,),
            output_fingerprints=(fingerprint,) if fingerprint else (),
            output_sample=output_sample(first_outputs),
            output_values=output_values(first_outputs),
            mark_runs=tuple(marks.runs),
            mark_ms=tuple(marks.ms),
            async_runs=async_runs,
        )
    )


def throughput_count(samples: list[float]) -> int:
    """The inferences a throughput run is asked for: as many as the timed runs, at most what
    `THROUGHPUT_S` holds at their median (a long job's run stays within its timeout)."""
    ordered = sorted(samples)
    middle = ordered[len(ordered) // 2] if ordered else 0.0
    fits = int(THROUGHPUT_S * 1000.0 / middle) if middle > 0 else len(samples)
    return max(1, min(len(samples), fits))


def _throughput_run(loaded: Loaded, spec: TaskSpec) -> TypeGuard[AsyncRunner]:
    """Whether the child runs the runtime's throughput run after the timed runs (outside the meters,
    so the timed figures are the sync loop's alone): a runtime with one, not a sustained run."""
    return isinstance(loaded, AsyncRunner) and spec.sustain is None


def _warm_up(run: Callable[[], object], spec: TaskSpec) -> int:
    """Fixed warm-ups, or (warmup_until_stable) at least that many until the rolling median settles."""
    if not spec.warmup_until_stable:
        for _ in range(spec.warmups):
            run()
        return spec.warmups
    budget_ns = spec.timeout_s * WARMUP_BUDGET * 1e9
    start = time.perf_counter_ns()
    times: list[float] = []
    while len(times) < max(spec.warmups, WARMUP_CAP):
        t0 = time.perf_counter_ns()
        run()
        t1 = time.perf_counter_ns()
        times.append(float(t1 - t0))
        if len(times) >= spec.warmups and (warmed_up(times) or t1 - start > budget_ns):
            break
    return len(times)


def _timed_until(conn: Connection, run: Callable[[], object], spec: TaskSpec, marks: Marks) -> list[float]:
    """`spec.runs` timed runs; with the stopping rule, more until the median's CI is tight enough.

    The rule is checked between chunks of at most a quarter of the runs so far, each chunk sized to
    fit the time left at the pace so far, so the cap and the duration are not overshot by much.
    """
    start = time.perf_counter()
    samples = _timed(conn, run, spec.runs, marks)
    if spec.ci_target_pct is None:
        return samples
    cap = spec.run_cap()
    budget = spec.max_duration_s or spec.timeout_s * STOP_BUDGET / spec.processes
    while len(samples) < cap and not ci_within(samples, spec.ci_target_pct):
        elapsed = time.perf_counter() - start
        if elapsed >= budget:
            break
        pace = elapsed / len(samples)
        fits = int((budget - elapsed) / pace) if pace > 0 else cap
        more = max(1, min(cap - len(samples), len(samples) // 4, fits))
        samples += _timed(conn, run, more, marks, done=len(samples))
    return samples


def _timed(
    conn: Connection, run: Callable[[], object], runs: int, marks: Marks, done: int = 0
) -> list[float]:
    """The timed loop: one clock read either side of each call, pre-sized storage, no GC; a mark at
    each progress chunk, outside the inner loop (`done`: runs timed before this call)."""
    ts = [0] * runs
    pc = time.perf_counter_ns
    step = max(1, -(-runs // PROGRESS_CHUNKS))
    gc.disable()
    try:
        for start in range(0, runs, step):
            conn.send(("phase", Phase.MEASURING, start, runs))
            marks.add(done + start)
            for i in range(start, min(start + step, runs)):
                t0 = pc()
                run()
                ts[i] = pc() - t0
    finally:
        gc.enable()
    return [t / NS_PER_MS for t in ts]
