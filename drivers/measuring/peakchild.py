"""Each unit's peaks, measured: a size sweep of one kernel per precision and memory access, in a child.

One `Kernel` per figure names its library, its call and its work per call at a size; `sweep` times it
at each size of its sweep under the harness's rules and keeps where it plateaus:

- **Warm-up.** Calls are made until `drivers.measuring.stats.warmed_up` says the rolling median settled
  (at most `WARMUP_S`, at least `MIN_WARMUP` calls): threads started, pages touched, clocks up.
- **Repeats.** Then timed calls for `REPEAT_S` (at least `MIN_REPEATS`); the figure at a size is the
  fastest call's rate (a peak: the run least disturbed by other tenants, as the calibration's), and the
  repeats' coefficient of variation is kept beside it (`Peak.cv`), the stability it was taken with.
- **Plateau.** A matmul's sizes double from `MATMUL_SIZES[0]` until its rate stops growing by
  `PLATEAU_GAIN` (the figure is the best size's) or a call would take over `MAX_CALL_S`. Memory's
  sizes start at twice the last-level cache (`llc_bytes`, from sysfs) and double until two sizes agree
  within `PLATEAU_GAIN` (the figure is the larger's: DRAM, not cache) or the next would pass
  `memory_cap`. `Peak.sizes` lists the sizes swept and the one the figure is from.
- **Threads.** A matmul's size is timed at the library's own thread count and at one thread, and the
  faster counts (`Kernel.threads`; `Peak.sizes` says which).
- **Load and telemetry.** The machine's background load is read over each figure (`CpuMeter`), and
  the harness's telemetry sampler runs beside it (`drivers.measuring.telemetry.Sampler`): the mean CPU
  clock, the hottest sensor and the child's CPU share are kept with the figure (`watched`).

The kernels: `drivers.measuring.peakkernels` (CPU), `drivers.measuring.gpupeaks` (CUDA through torch).

A peaks task (`figure`, its child `job_main`): one figure's kernel swept the same way (capped by the
task's `largest`), sent with its raw parts (`protocol.PeakRun`: the size, every timed call at it).

The child (`main`): sends ("peak", Peak JSON) as each figure is taken and ("done",) at the end; a
figure whose kernel fails is that figure unavailable with the reason, never the end of the others.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Final

from drivers.measuring.meters import CpuMeter
from drivers.measuring.peakkernels import MIB, Call, Kernel, unavailable
from drivers.measuring.stats import warmed_up
from drivers.measuring.telemetry import Sampler
from protocol import GPU_PEAK_BATCH, PEAK_MIN_REPEATS, Peak, PeakRun, PeakSpec, Telemetry
from protocol.aggregate import derive_peak

PLATEAU_GAIN: Final = 0.05
"""A size that does not beat the best so far by this (matmul), or agrees with the last within it
(memory), is the plateau."""
REPEAT_S: Final = 0.3
MIN_REPEATS: Final = PEAK_MIN_REPEATS
WARMUP_S: Final = 0.6
MIN_WARMUP: Final = 2
MAX_CALL_S: Final = 0.25
"""A size whose one call would take longer (estimated from the last size) is not swept."""


@dataclass(frozen=True)
class Timed:
    """One size's timed repeats: the rate of the fastest and the repeats' spread."""

    size: int
    rate: float  # work per second of the fastest call
    cv: float
    call_s: float  # the fastest call's seconds
    threads: int | None = None  # the thread count it was timed at (None: the library's own)
    times: tuple[float, ...] = ()  # every timed call's seconds, in order (a peaks task's raw parts)
    warmups: int = 0  # the calls made before timing


def time_size(kernel: Kernel, size: int) -> Timed:
    """The size timed at each of the kernel's thread counts (`time_threads`); the fastest counts."""
    return max((time_threads(kernel, size, threads) for threads in kernel.threads), key=lambda t: t.rate)


def time_threads(kernel: Kernel, size: int, threads: int | None) -> Timed:
    """Warm the size's call up by the harness's rule, then time it for `REPEAT_S`, at `threads`."""
    call = kernel.make(size, threads)
    with kernel.limit(threads):
        warm: list[float] = []
        end = time.perf_counter() + WARMUP_S
        while len(warm) < MIN_WARMUP or (not warmed_up(warm) and time.perf_counter() < end):
            warm.append(_timed(call))
        times: list[float] = []
        end = time.perf_counter() + REPEAT_S
        while len(times) < MIN_REPEATS or time.perf_counter() < end:
            times.append(_timed(call))
    fastest = max(min(times), 1e-9)
    mean = statistics.fmean(times)
    cv = statistics.pstdev(times) / mean if mean > 0 else 0.0
    return Timed(size, kernel.work(size) / fastest, cv, fastest, threads, tuple(times), len(warm))


def _timed(call: Call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def sweep(kernel: Kernel) -> Peak:
    """The kernel's peak: its sizes swept to the plateau (module docstring), with its load."""
    return swept(kernel)[0]


def swept(kernel: Kernel) -> tuple[Peak, Timed]:
    """The kernel's peak and the size and thread count its figure is from (a bare loop's setting)."""
    with CpuMeter() as meter, Sampler() as sampler:
        taken = list(_swept(kernel))
    read = watched(sampler.telemetry())
    best = taken[-1] if kernel.memory else max(taken, key=lambda t: t.rate)
    plateau = "plateau" if plateaued(kernel, taken) else "no plateau within the sweep's bounds"
    threads = (
        f", {best.threads or 'all'} thread{'' if best.threads == 1 else 's'}"
        if len(kernel.threads) > 1
        else ""
    )
    swept = [kernel.label(t.size) for t in taken]
    peak = Peak.model_validate(
        {
            "unit": kernel.unit,
            "precision": kernel.precision,
            "per_s": best.rate / 1e9,
            "method": f"size sweep, warm-up to a settled median, fastest of >= {MIN_REPEATS} repeats in "
            f"{REPEAT_S:g} s per size; {plateau}",
            "library": kernel.library,
            "kernel": kernel.kernel,
            "sizes": f"{', '.join(swept)}; figure at {kernel.label(best.size)}{threads}",
            "cv": round(best.cv, 4),
            "background_cores": round(meter.background_cores, 2),
            **read,
        }
    )
    return peak, best


def watched(telemetry: Telemetry) -> dict[str, float | None]:
    """A sweep's telemetry as a figure keeps it: the mean CPU clock, the hottest reading, the mean
    CPU share (each left at its default where nothing was read)."""
    points = telemetry.points
    clocks = [mhz for p in points for mhz in p.cpu_mhz if mhz > 0]
    temps = [p.temp_c for p in points if p.temp_c is not None]
    shares = [p.cpu_share for p in points if p.cpu_share is not None]
    return {
        "cpu_mhz": round(statistics.fmean(clocks), 1) if clocks else 0.0,
        "temp_c": max(temps) if temps else None,
        "cpu_share": round(statistics.fmean(shares), 3) if shares else None,
    }


def _swept(kernel: Kernel) -> Iterator[Timed]:
    taken: list[Timed] = []
    for size in kernel.sizes:
        if taken and _too_long(kernel, taken[-1], size):
            return
        timed = time_size(kernel, size)
        taken.append(timed)
        yield timed
        if plateaued(kernel, taken):
            return


def _too_long(kernel: Kernel, last: Timed, size: int) -> bool:
    return last.call_s * kernel.work(size) / kernel.work(last.size) > MAX_CALL_S


def plateaued(kernel: Kernel, taken: Sequence[Timed]) -> bool:
    if len(taken) < 2:
        return False
    last, before = taken[-1].rate, [t.rate for t in taken[:-1]]
    if kernel.memory:
        return abs(last - before[-1]) <= PLATEAU_GAIN * before[-1]
    return last < (1.0 + PLATEAU_GAIN) * max(before)


def taken(kernel: Kernel | Peak) -> Peak:
    """The kernel's peak, or the kernel's failure as the figure unavailable (a Peak stays as it is)."""
    if isinstance(kernel, Peak):
        return kernel
    try:
        return sweep(kernel)
    except Exception as exc:  # one figure's boundary: the others are still taken
        reason = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
        return unavailable(kernel.unit, kernel.precision, reason, kernel.library[:256])


def peaks(gpu: bool = True, only: tuple[str, ...] = ()) -> Iterator[Peak]:
    """Every figure of this device, CPU first, then each CUDA device's (`gpu`), as each is taken;
    `only`: just these precisions and accesses (none: all)."""
    from drivers.measuring.peakkernels import cpu_kernels

    kernels = list(cpu_kernels())
    if gpu:
        from drivers.measuring.gpupeaks import gpu_kernels

        kernels.extend(gpu_kernels())
    for kernel in kernels:
        if not only or kernel.precision in only:
            yield taken(kernel)


def capped(kernel: Kernel, largest: int | None) -> Kernel:
    """The kernel swept no further than `largest` (a matmul's n, memory's MiB): its sizes up to it, or
    that size alone where its first is larger."""
    if largest is None:
        return kernel
    cap = largest * MIB if kernel.memory else largest
    return replace(kernel, sizes=tuple(s for s in kernel.sizes if s <= cap) or (cap,))


def figure(kind: str, spec: PeakSpec) -> PeakRun:
    """A peaks task's figure (`kind` "cpu" or "gpu"): its kernel swept as `info --bench` sweeps it,
    with the raw parts the submitter derives it from again (`protocol.aggregate.derive_peak`); a
    figure the unit cannot take, or whose kernel fails, is unavailable with the reason."""
    if kind == "gpu":
        from drivers.measuring.gpupeaks import gpu_kernel

        kernel = gpu_kernel(spec.precision)
    else:
        from drivers.measuring.peakkernels import cpu_kernel

        kernel = cpu_kernel(spec.precision)
    if isinstance(kernel, Peak):
        return PeakRun(peak=kernel, size=1)
    try:
        peak, best = swept(capped(kernel, spec.largest))
    except Exception as exc:  # the kernel's boundary: the figure unavailable with why
        reason = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
        return PeakRun(peak=unavailable(kernel.unit, kernel.precision, reason, kernel.library[:256]), size=1)
    run = PeakRun(
        peak=peak,
        size=best.size,
        batch=GPU_PEAK_BATCH if kind == "gpu" else 1,
        threads=best.threads,
        times_s=best.times,
        warmups=best.warmups,
    )
    return derive_peak(run)


def job_main(conn: Connection, kind: str, spec: str) -> None:
    """A peaks task's child: ("run", PeakRun JSON) once its figure is taken; never raises."""
    try:
        conn.send(("run", figure(kind, PeakSpec.model_validate_json(spec)).model_dump_json()))
    except Exception as exc:  # process boundary: a value for the parent, never a traceback
        conn.send(("failed", f"{type(exc).__name__}: {str(exc).strip()[:200]}"))
    finally:
        conn.close()


def main(conn: Connection, gpu: bool, only: tuple[str, ...] = ()) -> None:
    """The child's entry: each figure sent as it is taken, then ("done",); never raises."""
    try:
        for peak in peaks(gpu, only):
            conn.send(("peak", peak.model_dump_json()))
        conn.send(("done",))
    except Exception as exc:  # process boundary: a value for the parent, never a traceback
        conn.send(("failed", f"{type(exc).__name__}: {str(exc).strip()[:200]}"))
    finally:
        conn.close()


__all__ = [
    "Timed",
    "capped",
    "figure",
    "job_main",
    "main",
    "peaks",
    "plateaued",
    "sweep",
    "swept",
    "taken",
    "time_size",
    "time_threads",
    "watched",
]
