"""The spawned child's side of a generate task: load the LLM (timed), warm up, answer every prompt.

Runs in a fresh `spawn` process like `drivers.child`, and reports through the same pipe messages and
the same `ProcessResult`, whose `samples_ms` are the requests' end-to-end times and whose `records`
are the raw per-request records.
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Final

from drivers import device, energy, llm, meters, telemetry
from drivers.child import Stages, limit_memory, run_boundary
from drivers.errors import TaskFailed
from drivers.formats import check_model_file
from drivers.jobs import ChildJob, ProcessResult
from protocol import FailureReason, GenerateSpec, Phase, RequestRecord, Stage, TaskSpec

NS_PER_MS = 1e6


QUIET_ENV: Final = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
"""Turns off third-party progress bars: transformers' GGUF loader calls tqdm itself, which
`transformers.utils.logging.disable_progress_bar()` does not reach (tqdm >= 4.66 reads TQDM_DISABLE)."""


def main(conn: Connection, job: ChildJob) -> None:
    """Entry point of the spawned child of a generate task; never raises."""
    silence_output()
    run_boundary(conn, job, measure_generation)


def silence_output() -> None:
    """Keep the runtimes' own output (progress bars, warnings) off the terminal the child inherited.

    The child reports only through its pipe: its outcome, stage and progress are messages, and a
    crash is read from its exit code. Its stdout and stderr would otherwise be the worker's, which on
    the embedded swarm is `submit`'s terminal, where a tqdm bar breaks the live view.
    """
    os.environ.update(QUIET_ENV)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in (1, 2):
            os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def measure_generation(conn: Connection, job: ChildJob, at: Stages) -> ProcessResult:
    """Load the model `load_runs` times (timed), warm up, then time one request per prompt.

    Raises:
        TaskFailed: with the reason (unit unavailable, format, load, input).
    """
    with tempfile.TemporaryDirectory(prefix="sark-llm-") as folder:
        path = llm.gguf_named(Path(job.model_path), job.fmt, Path(folder))
        return _measure(conn, replace(job, model_path=str(path)), at)


def _measure(conn: Connection, job: ChildJob, at: Stages) -> ProcessResult:
    path, spec = Path(job.model_path), job.spec
    gen = _generate_spec(spec)
    if job.fmt not in llm.GENERATIVE_FORMATS:
        raise TaskFailed(FailureReason.FORMAT, f"{path.name}: generation reads GGUF or safetensors models")
    if path.is_file():
        check_model_file(path, job.fmt, allow_code_models=False)
    unit_device, reason = llm.device_for(spec.compute_unit)
    if unit_device is None:
        raise TaskFailed(FailureReason.UNIT_UNAVAILABLE, f"unit unavailable: {reason}")
    llm.prepare()
    if spec.memory_limit_mb is not None:
        limit_memory(spec.memory_limit_mb)
    llm.check_context(path, job.fmt, gen)
    at.enter(Stage.LOAD)
    loaded, load_ms, peak_load = _load_phase(conn, path, job)
    loaded.name = job.name or loaded.name  # the campaign's name, not a cache digest (token_source)
    at.enter(Stage.RUN)
    gc.collect()
    meters.reset_peak()
    meter = energy.EnergyMeter(energy.offer_for(spec.compute_unit))
    meter.idle()  # idle power with the model loaded, before the first request
    conn.send(("phase", Phase.WARMUP, 0, max(spec.warmups, 1)))
    with meters.GpuSampler() as gpu:
        first = loaded.generate(gen.prompts[0], gen)
        for i in range(1, spec.warmups):
            loaded.generate(gen.prompts[i % len(gen.prompts)], gen)
        with (
            telemetry.Sampler() as sampler,
            meters.CpuMeter() as cpu,
            meter.measuring(),
        ):  # the tokens counted: these requests'
            records = _timed(conn, loaded, gen)
    return ProcessResult(
        load_ms=load_ms,
        first_inference_ms=first.e2e_ms,
        warmups_used=max(spec.warmups, 1),
        samples_ms=[r.e2e_ms for r in records],
        peak_load_ram_mb=peak_load,
        peak_inference_ram_mb=meters.peak_mb(),
        cpu_time_s=cpu.cpu_s,
        cores_used=cpu.cores_used,
        background_cores=cpu.background_cores,
        gpu_util_pct=gpu.util_pct,
        gpu_mem_mb=gpu.mem_mb,
        providers=(loaded.device,),
        node_share={},
        fallback=False,
        intra_op_threads=_threads(),
        inter_op_threads=None,
        spinning=None,
        versions=device.runtime_versions() | llm.versions(),
        thermal=meters.thermal_state(),
        power=meters.power_state(),
        records=tuple(records),
        wall_s=cpu.wall_s,
        energy=meter.reading(),
        telemetry=sampler.telemetry(),
    )


def _generate_spec(spec: TaskSpec) -> GenerateSpec:
    if spec.generate is None:
        raise TaskFailed(FailureReason.INTERNAL, "a generate child got a task without `generate`")
    return spec.generate


def _load_phase(conn: Connection, path: Path, job: ChildJob) -> tuple[llm.LoadedLlm, list[float], float]:
    """`load_runs` fresh loads, each timed; the last one is kept for the requests."""
    runs = job.spec.load_runs
    times: list[float] = []
    peak = 0.0
    loaded: llm.LoadedLlm | None = None
    for i in range(runs):
        conn.send(("phase", Phase.LOADING, i, runs))
        loaded = None
        gc.collect()
        meters.reset_peak()
        t0 = time.perf_counter_ns()
        loaded = llm.load(path, job.fmt, job.spec.compute_unit, job.spec.threads)
        times.append((time.perf_counter_ns() - t0) / NS_PER_MS)
        peak = max(peak, meters.peak_mb())
    assert loaded is not None  # load_runs >= 1 (TaskSpec)
    return loaded, times, peak


def _timed(conn: Connection, loaded: llm.LoadedLlm, gen: GenerateSpec) -> list[RequestRecord]:
    """One request per prompt, in order, one after another (concurrency 1 in-process)."""
    records = []
    run_start = time.perf_counter()
    total = len(gen.prompts)
    for i, prompt in enumerate(gen.prompts):
        conn.send(("phase", Phase.MEASURING, i, total))
        started = time.perf_counter() - run_start
        record = loaded.generate(prompt, gen)
        records.append(record.with_(started_s=started))
    return records


def _threads() -> int:
    import torch

    return int(torch.get_num_threads())
