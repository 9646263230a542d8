"""The spawned child's side of a generate task: load the LLM (timed), warm up, answer every prompt.

Runs in a fresh `spawn` process like `drivers.measuring.child`, in the same frame (`drivers.measuring.frame`:
boundary, messages, load phase, meters), and returns one process's `Measurement`, whose `samples_ms` are the
requests' end-to-end times and whose `generation` holds the raw per-request records.
"""

from __future__ import annotations

import functools
import os
import tempfile
import time
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Final

from drivers.errors import TaskFailed
from drivers.files.formats import check_model_file
from drivers.measuring import device, frame, meters, telemetry
from drivers.measuring.jobs import ChildJob
from drivers.runtimes import llm
from drivers.runtimes.genruntime import LoadedGenerator, runtime_for
from protocol import (
    FailureReason,
    GenerateSpec,
    Measurement,
    Phase,
    RequestRecord,
    RunConditions,
    Stage,
    TaskSpec,
)
from protocol.genstats import summarize_generation

QUIET_ENV: Final = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
"""Turns off third-party progress bars: transformers' GGUF loader calls tqdm itself, which
`transformers.utils.logging.disable_progress_bar()` does not reach (tqdm >= 4.66 reads TQDM_DISABLE)."""


def main(conn: Connection, job: ChildJob) -> None:
    """Entry point of the spawned child of a generate task; never raises."""
    silence_output()
    frame.run_boundary(conn, job, measure_generation)


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


def measure_generation(conn: Connection, job: ChildJob, at: frame.Stages) -> Measurement:
    """Load the model `load_runs` times (timed), warm up, then time one request per prompt.

    Raises:
        TaskFailed: with the reason (unit unavailable, format, load, input).
    """
    with tempfile.TemporaryDirectory(prefix="sark-llm-") as folder:
        path = llm.gguf_named(Path(job.model_path), job.fmt, Path(folder))
        return _measure(conn, replace(job, model_path=str(path)), at)


def _measure(conn: Connection, job: ChildJob, at: frame.Stages) -> Measurement:
    path, spec = Path(job.model_path), job.spec
    gen = _generate_spec(spec)
    runtime = runtime_for(spec.compute_unit)
    if job.fmt not in runtime.FORMATS:
        names = " or ".join(sorted(f.value for f in runtime.FORMATS))
        raise TaskFailed(
            FailureReason.FORMAT, f"{path.name}: {spec.compute_unit.value} generates from {names}"
        )
    if path.is_file():
        check_model_file(path, job.fmt, allow_code_models=False)
    runtime.check_layout(path, job.fmt)  # a folder without a tokenizer is refused before torch is imported
    unit_device, reason = runtime.device_for(spec.compute_unit)
    if unit_device is None:
        raise TaskFailed(FailureReason.UNIT_UNAVAILABLE, f"unit unavailable: {reason}")
    runtime.prepare()
    if spec.memory_limit_mb is not None:
        frame.limit_memory(spec.memory_limit_mb)
    runtime.check_context(path, job.fmt, gen)
    at.enter(Stage.LOAD)
    load = functools.partial(runtime.load, path, job.fmt, spec.compute_unit, spec.threads)
    loaded, load_ms, peak_load = frame.timed_loads(conn, load, spec.load_runs, lambda m: m.close())
    loaded.name = job.name or loaded.name  # the campaign's name, not a cache digest (token_source)
    at.enter(Stage.RUN)
    part = Measurement.nothing_timed(spec.compute_unit).with_(
        warmups_used=max(spec.warmups, 1),
        load_samples_ms=tuple(load_ms),
        peak_load_ram_mb=peak_load,
        conditions=RunConditions(
            intra_op_threads=loaded.threads(), runtime_versions=device.harness_versions() | runtime.versions()
        ),
    )
    return _requests(conn, loaded, spec, gen, part)


def _requests(
    conn: Connection, loaded: LoadedGenerator, spec: TaskSpec, gen: GenerateSpec, part: Measurement
) -> Measurement:
    """The first request, the warm-ups and the timed requests inside the frame's meters; the
    runtime's own timers (llama.cpp's) over the timed requests beside the harness's clock."""
    placed = meters.Placed(loaded.placement, spec.compute_unit, spec.strict_placement, spec.placement_share)
    cpu = meters.CpuMeter()
    measured = frame.standard(spec.compute_unit, placed, telemetry.Sampler(), cpu)
    with measured.around_runs():
        conn.send(("phase", Phase.WARMUP, 0, max(spec.warmups, 1)))
        first = loaded.generate(gen.prompts[0], gen)
        for i in range(1, spec.warmups):
            loaded.generate(gen.prompts[i % len(gen.prompts)], gen)
        loaded.reset_rates()
        with measured.around_timed():  # the tokens counted: these requests'
            records = _timed(conn, loaded, gen)
        rates = loaded.rates()
    return measured.taken(
        part.with_(
            first_inference_ms=first.e2e_ms,
            samples_ms=tuple(r.e2e_ms for r in records),
            process_runs=(len(records),),
            first_inferences_ms=(first.e2e_ms,),
            generation=summarize_generation(records, cpu.wall_s, gen).with_(runtime_rates=rates),
        )
    )


def _generate_spec(spec: TaskSpec) -> GenerateSpec:
    if spec.generate is None:
        raise TaskFailed(FailureReason.INTERNAL, "a generate child got a task without `generate`")
    return spec.generate


def _timed(conn: Connection, loaded: LoadedGenerator, gen: GenerateSpec) -> list[RequestRecord]:
    """One request per prompt, in order, one after another (concurrency 1 in-process); a session's
    turns one after another, each carrying the earlier turns with the model's own answers, the
    campaign's think time between them."""
    records = []
    run_start = time.perf_counter()
    total = len(gen.prompts)
    for i, prompt in enumerate(gen.prompts):
        conn.send(("phase", Phase.MEASURING, i, total))
        answers: tuple[str, ...] = ()
        for k in range(1, prompt.turns() + 1):
            if k > 1 and gen.think_time_s:
                time.sleep(gen.think_time_s)
            started = time.perf_counter() - run_start
            record = loaded.generate(prompt.turn(k, answers), gen).with_(started_s=started)
            records.append(record.with_(session=i, turn=k) if gen.sessions() else record)
            answers = (*answers, record.output_text)
    return records
