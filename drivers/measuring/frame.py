"""The frame every measuring child runs in (tensor and generation alike), as pyperf's worker is.

- `run_boundary`: the process boundary. The child's work returns the very value the store keeps, one
  process's raw `Measurement` (`drivers.measuring.harness` pools the processes' and derives the figures);
  a failure is sent as its reason, detail and stage, never a traceback.
- `Stages`: the stage the child is in, told to the parent as it changes (so a crash is placed too).
- `Frame`: the measured phase. Every meter (placement, peak memory, idle and measured energy, GPU,
  device state, telemetry, CPU) has one shape, `drivers.measuring.meters.Meter`: a context manager, and
  `taken`, which sets its readings on the process's measurement. The frame enters them with an
  `ExitStack`: the `runs` meters from before the first inference to after the last timed run, the
  `timed` meters around the timed loop only. Adding a meter is one class and one line in `standard`.
- `timed_loads`: the load phase, each fresh load timed with its peak memory.

It sends plain values: ("stage", Stage), ("phase", Phase, done, total), then ("result",
Measurement) or ("failed", FailureReason, detail, Stage), the detail naming the model and stage.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Final, TypeVar

from drivers.errors import TaskFailed
from drivers.measuring import energy, meters, telemetry
from drivers.measuring.jobs import ChildJob
from drivers.measuring.meters import Meter
from drivers.measuring.spawning import MIB, cap_address_space
from protocol import ComputeUnit, FailureReason, Measurement, Phase, Stage

NS_PER_MS: Final = 1e6
T = TypeVar("T")


class Stages:
    """The stage the child is in, told to the parent as it changes (so a crash is placed too)."""

    def __init__(self, conn: Connection) -> None:
        self.conn, self.stage = conn, Stage.INSPECT

    def enter(self, stage: Stage) -> None:
        self.stage = stage
        self.conn.send(("stage", stage))


Work = Callable[[Connection, ChildJob, Stages], Measurement]


def run_boundary(conn: Connection, job: ChildJob, work: Work) -> None:
    """Run `work` and send its measurement or its failure, placed at its stage, over the pipe; never
    raises (the process boundary)."""
    at = Stages(conn)
    name = job.name or Path(job.model_path).name
    try:
        conn.send(("result", work(conn, job, at)))
    except TaskFailed as exc:
        failure = exc.located(name, at.stage)
    except MemoryError:
        failure = TaskFailed(FailureReason.OUT_OF_MEMORY, oom_detail(job.spec.memory_limit_mb))
        failure = failure.located(name, at.stage)
    except Exception as exc:  # process boundary: report, never a traceback as the outcome
        failure = TaskFailed(FailureReason.CRASHED, first_line(exc)).located(name, at.stage)
    else:
        conn.close()
        return
    conn.send(("failed", failure.reason, failure.detail, failure.stage))
    conn.close()


def first_line(exc: BaseException) -> str:
    """An exception as one line: its type and its message's first line."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def limit_memory(limit_mb: int) -> None:
    """Cap this process's address space at its current size plus the task's `limit_mb`, for good."""
    cap_address_space(limit_mb * MIB, lock=True)


def oom_detail(limit_mb: int | None) -> str:
    """The detail of an allocation that failed, under the task's memory limit or not."""
    return f"out of memory (limit {limit_mb} MB)" if limit_mb else "out of memory"


@dataclass(frozen=True)
class Frame:
    """The meters of one measured process, in the order they are entered.

    Attributes:
        runs: entered before the first inference (request), left after the last timed one.
        timed: entered before the timed loop, left after it.
    """

    runs: tuple[Meter, ...]
    timed: tuple[Meter, ...]

    @contextmanager
    def around_runs(self) -> Iterator[None]:
        """The `runs` meters around a `with` block: first inference, warm-up and the timed loop."""
        with ExitStack() as stack:
            for meter in self.runs:
                stack.enter_context(meter)
            yield

    @contextmanager
    def around_timed(self) -> Iterator[None]:
        """The `timed` meters around a `with` block: the timed loop."""
        with ExitStack() as stack:
            for meter in self.timed:
                stack.enter_context(meter)
            yield

    def taken(self, part: Measurement) -> Measurement:
        """`part` with every meter's readings set on it."""
        for meter in (*self.runs, *self.timed):
            part = meter.taken(part)
        return part


def standard(
    unit: ComputeUnit, placed: meters.Placed, sampler: telemetry.Sampler, cpu: meters.CpuMeter
) -> Frame:
    """The frame both measuring children use (`sampler` and `cpu` are passed in: the child reads the
    sampler's time origin for its marks, and the CPU meter's wall time is a generate run's)."""
    measured = energy.EnergyMeter(energy.offer_for(unit))
    idle = energy.IdleEnergy(measured)
    runs = (placed, meters.PeakMemory(), idle, meters.GpuSampler(), meters.DeviceState())
    return Frame(runs=runs, timed=(sampler, cpu, measured))


def timed_loads(
    conn: Connection, load: Callable[[], T], runs: int, release: Callable[[T], None] | None = None
) -> tuple[T, list[float], float]:
    """`runs` fresh loads (`runs` >= 1, as TaskSpec holds), each timed, each after the previous one
    was let go (`release` first, untimed, where a runtime must stop something of its own: llama.cpp's
    server loop, `LoadedGguf.close`) and the peak reset; returns the last one, the times in ms and the
    highest peak (MiB)."""
    times: list[float] = []
    peak = 0.0
    loaded: T | None = None
    for i in range(runs):
        conn.send(("phase", Phase.LOADING, i, runs))
        if loaded is not None and release is not None:
            release(loaded)
        loaded = None
        gc.collect()
        meters.reset_peak()
        t0 = time.perf_counter_ns()
        loaded = load()
        times.append((time.perf_counter_ns() - t0) / NS_PER_MS)
        peak = max(peak, meters.peak_mb())
    assert loaded is not None
    return loaded, times, peak


__all__ = [
    "Frame",
    "Stages",
    "first_line",
    "limit_memory",
    "oom_detail",
    "run_boundary",
    "standard",
    "timed_loads",
]
