"""Meters the child reads around its measured phase: peak memory, CPU time, background load, GPU,
placement, thermal and power state.

Every meter has one shape, `Meter` (pyperf's hook): a context manager around the phase, and `taken`,
which sets what it read on the process's `Measurement`; `drivers.measuring.frame` stacks them.

Peak memory is the kernel high-water mark on Linux (reset by writing 5 to /proc/self/clear_refs, read
from getrusage), exact and free; elsewhere `ru_maxrss` cannot be reset, so the peak is the process
peak so far. CPU time is `time.process_time()` (microseconds), not psutil's 10 ms ticks.
"""

from __future__ import annotations

import contextlib
import gc
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Protocol

import psutil

from drivers.errors import TaskFailed
from protocol import ComputeUnit, FailureReason, Measurement

if TYPE_CHECKING:
    from drivers.runtimes.driver import Placement

MIB: Final = 1 << 20
_CLEAR_REFS: Final = Path("/proc/self/clear_refs")


class Meter(Protocol):
    """One reading around a measured phase (`drivers.measuring.frame`): entered before it, left after it (also
    when it fails: a meter's thread stops either way), then `taken` onto the process's measurement."""

    def __enter__(self) -> object: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    def taken(self, part: Measurement) -> Measurement:
        """`part` with this meter's readings set on it."""
        ...


def reset_peak() -> bool:
    """Reset the kernel's resident high-water mark for this process; False where that is impossible."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def peak_mb() -> float:
    """This process's resident high-water mark in MiB (since the last reset on Linux)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / MIB if sys.platform == "darwin" else rss / 1024.0


def rss_mb() -> float:
    """This process's current resident set in MiB."""
    return psutil.Process().memory_info().rss / MIB


def _busy(times: Any) -> float:
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


TICKS_S = 0.5
"""A phase shorter than this is read in too few 10 ms ticks for its own CPU share to be exact."""


class CpuMeter:
    """Process CPU and the machine's background load over a `with` block.

    Attributes:
        wall_s: seconds the block took.
        cpu_s: CPU seconds this process used.
        cores_used: cpu_s / wall_s (above 1 with several threads).
        background_cores: cores other processes kept busy meanwhile.
    """

    wall_s: float = 0.0
    cpu_s: float = 0.0
    cores_used: float = 0.0
    background_cores: float = 0.0

    def __enter__(self) -> CpuMeter:
        self._w0, self._p0, self._s0 = time.perf_counter(), time.process_time(), psutil.cpu_times()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.wall_s = max(time.perf_counter() - self._w0, 1e-9)
        self.cpu_s = time.process_time() - self._p0
        cores = float(psutil.cpu_count() or 1)
        # /proc/stat counts in 10 ms ticks: over a phase of a few ms its share says nothing, so both
        # readings are held to what the machine has (a phase that returned at once read 33 cores on 2)
        self.cores_used = (
            min(self.cpu_s / self.wall_s, cores) if self.wall_s < TICKS_S else self.cpu_s / self.wall_s
        )
        machine = min((_busy(psutil.cpu_times()) - _busy(self._s0)) / self.wall_s, cores)
        self.background_cores = max(0.0, machine - self.cores_used)

    def taken(self, part: Measurement) -> Measurement:
        """The process's CPU seconds and cores, and the machine's background load meanwhile."""
        conditions = part.conditions.with_(background_cores=self.background_cores)
        return part.with_(cpu_time_s=self.cpu_s, cpu_cores_used=self.cores_used, conditions=conditions)


class GpuSampler:
    """NVML utilisation and memory sampled every `interval_s` on a thread; silent when NVML is absent.

    Attributes:
        util_pct: mean GPU utilisation over the block, None without NVML.
        mem_mb: peak device memory used minus the baseline at entry, None without NVML.
    """

    util_pct: float | None = None
    mem_mb: float | None = None

    def __init__(self, device_index: int = 0, interval_s: float = 0.1) -> None:
        self._index, self._interval = device_index, interval_s
        self._stop = threading.Event()
        self._utils: list[float] = []
        self._peak = 0.0
        self._thread: threading.Thread | None = None

    def __enter__(self) -> GpuSampler:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml: Any = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self._index)
            self._base = float(pynvml.nvmlDeviceGetMemoryInfo(self._handle).used)
        except Exception:  # NVML missing or broken: a CPU job must never fail on it
            return self
        self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while True:
            self._utils.append(float(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu))
            self._peak = max(self._peak, float(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used))
            if self._stop.wait(self._interval):
                return

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._nvml.nvmlShutdown()
        if self._utils:
            self.util_pct = sum(self._utils) / len(self._utils)
        self.mem_mb = max(0.0, self._peak - self._base) / MIB

    def taken(self, part: Measurement) -> Measurement:
        """The GPU's mean utilisation and peak memory above the baseline (None without NVML)."""
        return part.with_(gpu_util_pct=self.util_pct, gpu_mem_mb=self.mem_mb)


class PeakMemory:
    """The resident high-water mark over the phase: collected and reset at entry, read at exit."""

    mb: float = 0.0

    def __enter__(self) -> PeakMemory:
        gc.collect()
        reset_peak()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.mb = peak_mb()

    def taken(self, part: Measurement) -> Measurement:
        """The phase's peak resident memory (MiB)."""
        return part.with_(peak_inference_ram_mb=self.mb)


class Placed:
    """Where the model really runs, read from the runtime: checked at entry (a strict task that fell
    back fails there, before any inference) and recorded at exit.

    A run falls back when the runtime put it elsewhere, or when less than `least_share` of its nodes
    ran on the asked provider or device (the campaign's `placement_share`, default all of them).
    """

    def __init__(
        self, read: Callable[[], Placement], unit: ComputeUnit, strict: bool, least_share: float = 1.0
    ) -> None:
        self._read, self._unit, self._strict, self._least = read, unit, strict, least_share
        self.placement: Placement | None = None

    def __enter__(self) -> Placed:
        placement = self._read()
        if placement.fell_back(self._least) and self._strict:
            raise TaskFailed(FailureReason.FALLBACK, fallback_detail(placement, self._unit, self._least))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:  # a runtime that failed mid-phase is not asked again
            self.placement = self._read()

    def taken(self, part: Measurement) -> Measurement:
        """The providers (or device) that held the model, their node shares and whether it fell back."""
        if self.placement is None:
            return part
        p = self.placement
        return part.with_(providers=p.providers, node_share=p.node_share, fallback=p.fell_back(self._least))


def fallback_detail(placement: Placement, unit: ComputeUnit, least_share: float) -> str:
    """A fallback in words: the share on the asked provider or device against the least share, and
    every provider's share."""
    shares = ", ".join(f"{p} {s:.0%}" for p, s in placement.node_share.items()) or "no node shares"
    on = placement.on_asked()
    asked = f"{on:.0%} of nodes on {placement.asked} (least {least_share:.0%}); " if on is not None else ""
    return f"fallback from {unit.value}: {asked}providers {', '.join(placement.providers)} ({shares})"


class DeviceState:
    """The thermal and power state as the phase ended."""

    thermal: str = ""
    power: str = ""

    def __enter__(self) -> DeviceState:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.thermal, self.power = thermal_state(), power_state()

    def taken(self, part: Measurement) -> Measurement:
        """The hottest zone and throttling, the power source and governor, in the run conditions."""
        return part.with_(conditions=part.conditions.with_(thermal=self.thermal, power=self.power))


def thermal_state() -> str:
    """The hottest thermal zone and any CPU throttling the kernel exposes, or "" when /sys has none."""
    temps: list[float] = []
    for zone in Path("/sys/class/thermal").glob("thermal_zone*/temp"):
        try:
            temps.append(int(zone.read_text().strip()) / 1000.0)
        except (OSError, ValueError):
            continue
    return f"max zone {max(temps):.1f} C" if temps else ""


def power_state() -> str:
    """Battery or mains, and the CPU frequency governor, as far as /sys and psutil expose them."""
    parts: list[str] = []
    battery = psutil.sensors_battery() if hasattr(psutil, "sensors_battery") else None
    if battery is not None:
        parts.append(f"{'mains' if battery.power_plugged else 'battery'} {battery.percent:.0f}%")
    governor = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    with contextlib.suppress(OSError):
        parts.append(f"governor {governor.read_text().strip()}")
    return ", ".join(parts)
