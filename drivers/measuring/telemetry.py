"""Live telemetry in the measuring child: a sampler thread that reads the device at a declared period.

Each reading (`protocol.TelemetryPoint`) covers the period since the previous one: the mean current
clock of each core group (psutil `cpu_freq(percpu=True)`, which reads /sys cpufreq where the kernel
has it and /proc/cpuinfo otherwise), the hottest temperature sensor (psutil: hwmon, else the
/sys/class/thermal zones) and whether one sits at its own "high" mark, the machine's busy cores
(psutil `cpu_times`) and this process's (`time.process_time`, microseconds), the share of its
runnable time this process's threads ran (/proc/self/task/*/schedstat: on-CPU and run-queue wait,
Linux), and through NVML where
a driver answers the GPU's temperature, SM clock, board power and clock-event (throttle) reasons.
One reading costs about 0.6 ms of one core on a 2-vCPU VM; at the default 250 ms that is 0.25 %,
and the timed runs' own thread does not wait on it (benchmarks/harness_overhead.py measures it).
Points past `MAX_POINTS` are thinned to 1 in 2 (then 1 in 4, ...), so memory stays bounded on a
run of any length. What could not be read is named in `Telemetry.sources`, with the reason.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import psutil

from protocol import Measurement
from protocol.telemetry import MAX_POINTS, MAX_TEMP_C, MIN_TEMP_C, Telemetry, TelemetryPoint

PERIOD_S: Final = 0.25
_TASKS: Final = Path("/proc/self/task")
NS_PER_MS: Final = 1e6


def _busy(times: Any) -> float:
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


MAX_BRACKET: Final = 0.25
"""A reading whose counters took longer than this share of its interval to read is not kept."""
IMPOSSIBLE: Final = 1.1
"""A reading of more busy cores than this many times the machine's is not kept: the counters of
/proc/stat moved by more than the CPUs could run in the interval (tick accounting catching up under
heavy load read 5 cores on 2 with the reads bracketed), so the interval is passed over, not sent."""


def counters() -> tuple[int, int, float, float, tuple[int, int]]:
    """The machine's busy CPU seconds, this process's CPU seconds and its schedstat, with the instant
    they were read at: the midpoint of a clock read before and after them, and that bracket's width
    (ns). On a loaded machine the sampling thread can be descheduled between a clock read and a
    counter read for longer than its period: a busy-cores figure over a wall time that does not
    cover the counters' own interval once read 7.9 cores on 2."""
    before = time.perf_counter_ns()
    busy, own = _busy(psutil.cpu_times()), time.process_time()
    after = time.perf_counter_ns()
    return after - before, (before + after) // 2, busy, own, schedstat_ns()  # a ratio: no instant


def schedstat_ns() -> tuple[int, int]:
    """Nanoseconds this process's threads have run, and waited on a run queue ((0, 0) without schedstat)."""
    ran = waited = 0
    for stat in _TASKS.glob("*/schedstat"):
        try:
            fields = stat.read_text().split()
            ran, waited = ran + int(fields[0]), waited + int(fields[1])
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile
            continue
    return ran, waited


def core_groups() -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]:
    """The core groups (CPUs that share a maximum clock: big and little cores apart), named and listed."""
    try:
        freqs = psutil.cpu_freq(percpu=True) or []
    except (AttributeError, NotImplementedError, OSError):  # a platform where psutil has no clock
        freqs = []
    by_max: dict[float, list[int]] = {}
    for cpu, freq in enumerate(freqs):
        by_max.setdefault(round(freq.max), []).append(cpu)
    names, members = [], []
    for top, cpus in sorted(by_max.items()):
        span = f"cpu{cpus[0]}" if len(cpus) == 1 else f"cpu{cpus[0]}-{cpus[-1]}"
        names.append(f"{span} (max {top} MHz)" if top else f"{span} (max clock not exposed)")
        members.append(tuple(cpus))
    return tuple(names), tuple(members)


class _Nvml:
    """The GPU readings of one device through NVML's documented calls; absent without a driver."""

    def __init__(self, index: int) -> None:
        self.note = ""
        self._lib: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:  # no binding, no driver: a CPU job must never fail on it
            self.note = f"gpu: NVML unavailable ({type(exc).__name__})"
            return
        try:
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError as exc:  # a driver but no such device
            pynvml.nvmlShutdown()
            self.note = f"gpu: NVML has no device {index} ({type(exc).__name__})"
            return
        self._lib = pynvml
        # nvmlDeviceGetCurrentClocksEventReasons (driver 535+) replaced ...ThrottleReasons; same bits.
        self._reasons: Any = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        self._reasons = self._reasons or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        self.note = "gpu: NVML temperature, SM clock, power, clock-event reasons"

    @property
    def present(self) -> bool:
        return self._lib is not None

    def read(self) -> dict[str, Any]:
        lib, handle = self._lib, self._handle
        calls: dict[str, Callable[[], Any]] = {
            "gpu_temp_c": lambda: float(lib.nvmlDeviceGetTemperature(handle, lib.NVML_TEMPERATURE_GPU)),
            "gpu_sm_mhz": lambda: float(lib.nvmlDeviceGetClockInfo(handle, lib.NVML_CLOCK_SM)),
            "gpu_power_w": lambda: lib.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "gpu_reasons": lambda: int(self._reasons(handle)),
        }
        values: dict[str, Any] = {}
        for name, call in calls.items():
            try:
                values[name] = call()
            except lib.NVMLError:  # a call this GPU does not support: that reading stays empty
                continue
        return values

    def close(self) -> None:
        if self._lib is not None:
            self._lib.nvmlShutdown()


class Sampler:
    """Telemetry over a `with` block, read every `period_s` on a daemon thread.

    `origin_ns` (a `time.perf_counter_ns` value) is the block's time zero: the child's marks use it
    too, so runs and readings share one time axis.
    """

    def __init__(self, period_s: float = PERIOD_S, gpu_index: int = 0) -> None:
        self.period_s, self._gpu_index = period_s, gpu_index
        self._stop = threading.Event()
        self._points: list[TelemetryPoint] = []
        self._stride, self._seen = 1, 0
        self._thread: threading.Thread | None = None
        self._failure = ""
        self.origin_ns = 0

    def __enter__(self) -> Sampler:
        self._names, self._groups = core_groups()
        self._nvml = _Nvml(self._gpu_index)
        self._sensors = hasattr(psutil, "sensors_temperatures")
        self.origin_ns = time.perf_counter_ns()
        self._cores = psutil.cpu_count() or 1
        self._last = counters()[1:]
        self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if not self._failure:
            self._guarded(final=True)  # the last, partial period: a short run still has a reading
        self._nvml.close()

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s) and self._guarded():
            pass

    def taken(self, part: Measurement) -> Measurement:
        """The device's telemetry over the block (a meter of `drivers.measuring.frame`)."""
        return part.with_(telemetry=self.telemetry())

    def _guarded(self, final: bool = False) -> bool:
        """Take one reading; on an error (an odd sensor driver), stop reading and say why: telemetry
        never fails the measurement it watches."""
        try:
            self._keep(self._read(final and not self._points))
        except Exception as exc:  # the thread's boundary: psutil's and the kernel's errors alike
            self._failure = f"telemetry stopped at {len(self._points)} points: {type(exc).__name__}: {exc}"
            return False
        return True

    def _keep(self, point: TelemetryPoint | None) -> None:
        if point is None:
            return
        self._seen += 1
        if (self._seen - 1) % self._stride:
            return
        self._points.append(point)
        if len(self._points) >= MAX_POINTS:
            self._points = self._points[::2]
            self._stride *= 2

    def _read(self, only: bool = False) -> TelemetryPoint | None:
        """One reading over the interval since the last one kept; None when its counters' instant is
        too uncertain or they moved more than the CPUs could, unless it is the run's `only` reading
        (a run shorter than one period): that one is kept, its busy cores held to the machine's."""
        width, now, busy, own, sched = counters()
        then, busy0, own0, sched0 = self._last
        wall = (now - then) / 1e9
        if wall <= 0 or (width > MAX_BRACKET * (now - then) and not only):
            return None  # the counters' instant is not known well enough: the next reading spans both
        self._last = (now, busy, own, sched)
        busy_cores, own_cores = max(0.0, (busy - busy0) / wall), max(0.0, (own - own0) / wall)
        if max(busy_cores, own_cores) > self._cores * IMPOSSIBLE and not only:
            return None  # the kernel's counters jumped (seen under heavy load): no reading, not a false one
        # Held to what the machine has: 10 ms ticks over a run of a few ms say nothing (a 4.6 ms run
        # read 2.19 cores on 2), and within IMPOSSIBLE the excess is the counters' and the clock's
        # instants differing, not work done.
        busy_cores, own_cores = min(busy_cores, self._cores), min(own_cores, self._cores)
        temp, high = self._temperature()
        return TelemetryPoint(
            t_ms=(now - self.origin_ns) / NS_PER_MS,
            cpu_mhz=self._clocks(),
            temp_c=temp,
            temp_high=high,
            busy_cores=busy_cores,
            own_cores=own_cores,
            cpu_share=_share(sched0, sched),
            **(self._nvml.read() if self._nvml.present else {}),
        )

    def _clocks(self) -> tuple[float, ...]:
        freqs = psutil.cpu_freq(percpu=True) or []
        out = []
        for cpus in self._groups:
            current = [freqs[c].current for c in cpus if c < len(freqs)]
            if current:
                out.append(sum(current) / len(current))
        return tuple(out)

    def _temperature(self) -> tuple[float | None, bool]:
        if not self._sensors:
            return None, False
        readings = [  # a sensor outside what silicon can be (a missing one reads -273 or 255 C) is skipped
            t
            for group in psutil.sensors_temperatures().values()
            for t in group
            if MIN_TEMP_C <= t.current <= MAX_TEMP_C
        ]
        if not readings:
            return None, False
        hottest = max(t.current for t in readings)
        return float(hottest), any(t.high and t.current >= t.high for t in readings)

    def telemetry(self) -> Telemetry:
        """What the block read, with the sources named (call after the block)."""
        return Telemetry(
            period_ms=self.period_s * 1000.0,
            groups=self._names,
            sources=self._sources(),
            stride=self._stride,
            points=tuple(self._points),
        )

    def _sources(self) -> tuple[str, ...]:
        have_temp = any(p.temp_c is not None for p in self._points)
        cpufreq = "/sys cpufreq" if _has_cpufreq() else "/proc/cpuinfo (no cpufreq in /sys: may be static)"
        return (
            f"cpu clock: psutil.cpu_freq per core group, from {cpufreq}",
            "temperature: psutil sensors (hwmon, thermal zones)"
            if have_temp
            else "temperature: none (psutil finds no sensor and no thermal zone)",
            "cpu use: psutil.cpu_times (machine), time.process_time (this process)",
            "cpu share: /proc/self/task/*/schedstat (on-CPU / on-CPU + run-queue wait)"
            if _TASKS.is_dir()
            else "cpu share: none (no /proc/self/task/*/schedstat here)",
            self._nvml.note,
            *([self._failure] if self._failure else []),
        )


def _share(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    ran, waited = after[0] - before[0], after[1] - before[1]
    return ran / (ran + waited) if ran >= 0 and waited >= 0 and ran + waited > 0 else None


def _has_cpufreq() -> bool:
    return any(Path("/sys/devices/system/cpu/cpufreq").glob("policy*"))


def merged(
    parts: Sequence[tuple[Telemetry | None, Sequence[int], Sequence[float], int]],
) -> tuple[Telemetry | None, tuple[int, ...], tuple[float, ...]]:
    """The processes' telemetry and marks on one task time axis: each process's timed phase after the
    previous one's end (its last mark, else its last reading), its run indexes after the previous
    ones' samples; the points thinned evenly to at most `MAX_POINTS`.

    Args:
        parts: per process, its telemetry, mark runs, mark times (ms) and how many samples it kept.
    """
    points: list[TelemetryPoint] = []
    runs: list[int] = []
    times: list[float] = []
    shift_ms, shift_runs, stride = 0.0, 0, 1
    first: Telemetry | None = None
    for telemetry, mark_runs, mark_ms, kept in parts:
        runs.extend(r + shift_runs for r in mark_runs)
        times.extend(t + shift_ms for t in mark_ms)
        if telemetry is not None:
            first = first or telemetry
            stride = max(stride, telemetry.stride)
            points.extend(p.with_(t_ms=p.t_ms + shift_ms) for p in telemetry.points)
        if mark_ms:
            shift_ms += mark_ms[-1]
        elif telemetry is not None and telemetry.points:  # a generate task marks nothing
            shift_ms += telemetry.points[-1].t_ms
        shift_runs += kept
    if first is None:
        return None, tuple(runs), tuple(times)
    step = max(1, -(-len(points) // MAX_POINTS))  # a run whose readings were all passed over has none
    return first.with_(stride=stride * step, points=tuple(points[::step])), tuple(runs), tuple(times)


def offered() -> tuple[str, ...]:
    """What telemetry this device offers and what it does not, with why (for `info`): one reading taken."""
    with Sampler(period_s=3600.0) as sampler:
        pass
    return sampler.telemetry().sources
