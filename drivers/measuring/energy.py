"""Energy around a measured phase, from a declared source only: never an estimate.

Sources, chosen by the compute unit that measures:

- GPU units: NVML's total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`, millijoules since
  the driver loaded, Volta and later) read before and after (`nvml-energy-counter`); where the board
  lacks it, `nvmlDeviceGetPowerUsage` (milliwatts) sampled every 100 ms on a thread and integrated
  by the trapezoid rule (`nvml-power-sampled@100ms`). Either covers the GPU board only, and only a
  phase of at least `protocol.energy.NVML_LEAST_WINDOW_S` (1 s): a shorter one gets no joules and
  says why. On an H100 and an H200 (benchmarks/gpu_energy.py), over 5 s windows, the counter read
  what zeus's `ZeusMonitor` read (its own source) and the sampled integral 0.97 of it.
- CPU units on Linux: RAPL through the powercap tree (`energy_uj` of each `package-N` zone and its
  `dram` subzone; core and uncore are inside the package and not added again; `psys` is not a
  package), Intel and AMD alike. Each counter wraps at its `max_energy_range_uj`, so a thread reads
  them every `RAPL_POLL_S` and adds the steps, one wrap at most between two reads. Since Linux 5.10
  `energy_uj` is readable by root only: the note says so. The tree's root is `/sys/class/powercap`,
  or `SARK_POWERCAP_ROOT` (tests point it at a tree a writer process advances).
- macOS: unavailable with the reason (powermetrics needs root, IOReport is a private interface).

Each counter reading is paired with the clock by `timed_read`: the clock read on both sides of the
counter, the reading taken again (up to `TIMED_READ_TRIES` times) while the two are more than
`TIMED_READ_S` apart, and timed at their middle. A reader descheduled between its counter and its clock
(a busy machine, another thread holding the GIL) would otherwise shift the window against the joules:
43 ms of 4 s read 1.07 % over on a loaded run.

`EnergyMeter` reads the source over `IDLE_S` idle seconds before the phase, then over the phase,
and returns an `EnergyReading`; the per-inference and per-token figures are derived from it
(`protocol.energy`). A source that fails mid-way gives no joules and a note, never an exception.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Protocol, TypeVar

from protocol import ComputeUnit, EnergyReading, Measurement
from protocol.energy import NVML_LEAST_WINDOW_S
from protocol.units import GPU_UNITS

IDLE_S: Final = 3.0  # idle seconds read before the measured phase
RAPL_POLL_S: Final = 0.5  # RAPL read period: well under a wrap (at 400 W, a 2^32 uJ counter wraps in 10 s)
NVML_SAMPLE_S: Final = 0.1
TIMED_READ_S: Final = 0.001  # a counter reading whose clock brackets it tighter than this is kept
TIMED_READ_TRIES: Final = 8  # else the tightest of this many
DEFAULT_POWERCAP: Final = "/sys/class/powercap"
NO_TDP: Final = "no estimate is made from TDP or a model of the chip"

T = TypeVar("T")


def timed_read(
    read: Callable[[], T], clock: Callable[[], float] = time.perf_counter, tries: int = TIMED_READ_TRIES
) -> tuple[T, float]:
    """`read()` and the clock's time it was taken at: the middle of the tightest bracket of up to `tries`
    (the first whose bracket is under `TIMED_READ_S` ends the tries)."""
    best: tuple[T, float] | None = None
    tightest = float("inf")
    for _ in range(tries):
        before = clock()
        value = read()
        after = clock()
        if after - before < tightest:
            best, tightest = (value, (before + after) / 2), after - before
        if tightest < TIMED_READ_S:
            break
    assert best is not None, "tries must be at least 1"
    return best


class EnergySource(Protocol):
    """Energy from `start` to `stop`: `stop` returns the joules and the seconds between the source's own
    first and last readings (the window the joules cover)."""

    method: str
    covers: str
    least_window_s: float
    """The shortest window the source reads truly (`protocol.energy.NVML_LEAST_WINDOW_S` for NVML)."""

    def start(self) -> None: ...

    def stop(self) -> tuple[float, float]: ...


@dataclass(frozen=True)
class Offer:
    """What this device offers one unit: a source, or why none (`source` None)."""

    method: str
    note: str
    source: EnergySource | None = None


def powercap_root() -> Path:
    """The powercap tree RAPL is read from: `SARK_POWERCAP_ROOT`, else /sys/class/powercap."""
    return Path(os.environ.get("SARK_POWERCAP_ROOT") or DEFAULT_POWERCAP)


@dataclass(frozen=True)
class Zone:
    """One RAPL counter: its file, its name and where it wraps."""

    energy: Path
    name: str
    range_uj: int


def rapl_zones(root: Path) -> list[Zone]:
    """The package zones and their DRAM subzones under a powercap tree (intel-rapl is also AMD's)."""
    zones = []
    for package in sorted(root.glob("intel-rapl:*")):
        name = _text(package / "name")
        if package.name.count(":") != 1 or not name.startswith("package"):
            continue
        zones.append(_zone(package, name))
        for sub in sorted(package.glob(f"{package.name}:*")):
            if _text(sub / "name") == "dram":
                zones.append(_zone(sub, f"{name}/dram"))
    return zones


def _zone(folder: Path, name: str) -> Zone:
    return Zone(folder / "energy_uj", name, int(_text(folder / "max_energy_range_uj") or 0))


def _text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


class RaplSource:
    """RAPL counters summed, read on a thread every `RAPL_POLL_S` so that no wrap is missed."""

    covers = "CPU packages (RAPL), not the GPU or the rest of the machine"
    least_window_s = 0.0  # polled and summed: any window (the check of a short one is the submitter's)

    def __init__(self, zones: list[Zone], poll_s: float = RAPL_POLL_S) -> None:
        self.zones, self._poll = zones, poll_s
        has_dram = any(z.name.endswith("/dram") for z in zones)
        self.method = "rapl-package+dram" if has_dram else "rapl-package"
        if has_dram:
            self.covers = "CPU packages and DRAM (RAPL), not the GPU or the rest of the machine"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: list[int] = []
        self._uj = 0

    def read(self) -> list[int]:
        """Every zone's counter now, in microjoules (OSError where one cannot be read)."""
        return [int(z.energy.read_text()) for z in self.zones]

    def _step(self) -> float:
        with self._lock:
            now, at = timed_read(self.read)
            for zone, before, after in zip(self.zones, self._last, now, strict=True):
                self._uj += after - before if after >= before else after + zone.range_uj - before
            self._last = now
        return at

    def start(self) -> None:
        (self._last, self._t0), self._uj = timed_read(self.read), 0
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="rapl-reader", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._poll):
            self._step()

    def stop(self) -> tuple[float, float]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        at = self._step()
        return self._uj / 1e6, at - self._t0


class NvmlCounter:
    """NVML's total-energy counter (millijoules, Volta and later) of one GPU."""

    method = "nvml-energy-counter"
    covers = "the GPU board (NVML), not the CPU or the rest of the machine"
    least_window_s = NVML_LEAST_WINDOW_S

    def __init__(self, nvml: Any, handle: Any) -> None:
        self._nvml, self._handle, self._mj0, self._t0 = nvml, handle, 0, 0.0

    def _read(self) -> int:
        return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))

    def start(self) -> None:
        self._mj0, self._t0 = timed_read(self._read)

    def stop(self) -> tuple[float, float]:
        mj, at = timed_read(self._read)
        return (mj - self._mj0) / 1e3, at - self._t0


class NvmlPowerSampled:
    """NVML power draw (milliwatts) sampled every `period_s` on a thread, integrated (trapezoids)."""

    covers = "the GPU board (NVML power samples), not the CPU or the rest of the machine"
    least_window_s = NVML_LEAST_WINDOW_S

    def __init__(self, nvml: Any, handle: Any, period_s: float = NVML_SAMPLE_S) -> None:
        self._nvml, self._handle, self._period = nvml, handle, period_s
        self.method = f"nvml-power-sampled@{round(period_s * 1000)}ms"
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._j = 0.0
        self._last = (0.0, 0.0)

    def _watts(self) -> tuple[float, float]:
        return timed_read(lambda: self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1e3)

    def _sample(self) -> None:
        with self._lock:
            watts, now = self._watts()
            then, before = self._last
            self._j += (now - then) * (watts + before) / 2
            self._last = (now, watts)

    def start(self) -> None:
        self._j = 0.0
        watts, self._t0 = self._watts()
        self._last = (self._t0, watts)
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="nvml-power", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._period):
            self._sample()

    def stop(self) -> tuple[float, float]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        return self._j, self._last[0] - self._t0


def rapl_offer(root: Path | None = None) -> Offer:
    """RAPL under the powercap tree, or why not (no zones, or counters only root may read)."""
    root = root or powercap_root()
    zones = rapl_zones(root)
    if not zones:
        return Offer("", f"no RAPL package zone under {root} (a VM or a CPU without RAPL); {NO_TDP}")
    source = RaplSource(zones)
    try:
        source.read()
    except PermissionError:
        return Offer(
            source.method,
            f"RAPL energy_uj under {root} is readable by root only (Linux 5.10 and later): run as root "
            f"or grant read access (udev rule); {NO_TDP}",
        )
    except (OSError, ValueError) as exc:
        return Offer(source.method, f"RAPL counters under {root} cannot be read ({exc}); {NO_TDP}")
    return Offer(source.method, source.covers, source)


def nvml_offer(nvml: Any = None, index: int = 0) -> Offer:
    """NVML's energy counter of GPU `index`, else its power samples, or why neither (no driver, ...).

    `nvml` is the `pynvml` module (nvidia-ml-py) or one with its documented calls; imported when None.
    """
    try:
        if nvml is None:
            nvml = importlib.import_module("pynvml")
        nvml.nvmlInit()
    except Exception as exc:  # ImportError or NVMLError: no NVML here, which a CPU job must survive
        return Offer("", f"no NVML ({type(exc).__name__}: {exc}); {NO_TDP}")
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
    except nvml.NVMLError as exc:
        return Offer("", f"NVML has no GPU {index} ({exc}); {NO_TDP}")
    try:
        nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        return Offer(NvmlCounter.method, NvmlCounter.covers, NvmlCounter(nvml, handle))
    except nvml.NVMLError as exc:
        counter_missing = f"no energy counter ({exc})"
    try:
        nvml.nvmlDeviceGetPowerUsage(handle)
    except nvml.NVMLError as exc:
        return Offer("", f"NVML: {counter_missing}, no power reading ({exc}); {NO_TDP}")
    sampled = NvmlPowerSampled(nvml, handle)
    return Offer(sampled.method, f"{sampled.covers}; {counter_missing}", sampled)


def offer_for(unit: ComputeUnit, platform: str = sys.platform) -> Offer:
    """The energy source this device offers `unit` here, or why there is none."""
    if platform == "darwin" or unit in (ComputeUnit.GPU_COREML, ComputeUnit.NE_COREML):
        return Offer(
            "",
            "macOS (Core ML runs there only): powermetrics needs root and IOReport is a private "
            f"interface, so no energy is read; {NO_TDP}",
        )
    if unit in GPU_UNITS:
        return nvml_offer()
    if platform.startswith("linux"):
        return rapl_offer()
    return Offer("", f"no energy counter is read on {platform}; {NO_TDP}")


class EnergyMeter:
    """Idle energy, then the measured phase's energy, from one offer; a failing source is a note.

    As a meter of `drivers.measuring.frame` it measures the `with` block (the timed loop), and `IdleEnergy`
    takes its idle reading before the first inference.
    """

    def __init__(self, offer: Offer, idle_s: float = IDLE_S) -> None:
        self.offer, self._idle_s = offer, idle_s
        self._idle: tuple[float, float] | None = None
        self._window: tuple[float, float] | None = None
        self._failure = ""
        self._phase: AbstractContextManager[None] | None = None

    def __enter__(self) -> EnergyMeter:
        self._phase = self.measuring()
        self._phase.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._phase is not None:
            self._phase.__exit__(exc_type, exc, tb)

    def taken(self, part: Measurement) -> Measurement:
        """The process's energy reading (joules, or the reason there are none)."""
        return part.with_(energy_readings=(self.reading(),))

    def idle(self) -> None:
        """Read the source over `idle_s` quiet seconds (the process waits; nothing else runs)."""
        if self.offer.source is None:
            return
        with self._read() as cell:
            time.sleep(self._idle_s)
        self._idle = cell.value

    @contextmanager
    def measuring(self) -> Iterator[None]:
        """Read the source over the `with` block: the measured phase."""
        with self._read() as cell:
            yield
        self._window = cell.value

    @contextmanager
    def _read(self) -> Iterator[_Cell]:
        cell = _Cell()
        source = self.offer.source
        if source is None or self._failure:
            yield cell
            return
        try:
            source.start()
        except Exception as exc:  # a counter that vanished or an NVML error: a note, not a failure
            self._failure = f"{type(exc).__name__}: {exc}"
            yield cell
            return
        try:
            yield cell
        finally:  # the block may fail or be cancelled: the source's thread stops either way
            try:
                cell.value = source.stop()
            except Exception as exc:
                self._failure = f"{type(exc).__name__}: {exc}"

    def reading(self) -> EnergyReading:
        """What was read: joules and seconds of the window and of the idle seconds, or the reason."""
        offer = self.offer
        if self._failure or self._window is None:
            why = f"the source failed ({self._failure}); {NO_TDP}" if self._failure else offer.note
            return EnergyReading(method=offer.method, note=why[:500])
        joules, window_s = self._window
        least = offer.source.least_window_s if offer.source is not None else 0.0
        if window_s < least:
            why = (
                f"the measured phase lasted {window_s:.3g} s, under the {least:g} s {offer.method} needs "
                "(NVML's counter moves about every 100 ms; over a shorter phase it reads a fraction of the "
                "energy): no joules; more runs make the phase longer"
            )
            return EnergyReading(method=offer.method, note=why[:500])
        idle_j, idle_s = self._idle if self._idle is not None else (None, 0.0)
        return EnergyReading(
            method=offer.method,
            note=offer.note[:500],
            joules=max(joules, 0.0),
            window_s=window_s,
            idle_joules=None if idle_j is None else max(idle_j, 0.0),
            idle_s=idle_s,
        )


class _Cell:
    value: tuple[float, float] | None = None


class IdleEnergy:
    """The idle reading of an `EnergyMeter` as a meter: taken on entry (the model loaded, nothing
    running, before the first inference); the reading itself is the energy meter's to give."""

    def __init__(self, meter: EnergyMeter) -> None:
        self.meter = meter

    def __enter__(self) -> IdleEnergy:
        self.meter.idle()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def taken(self, part: Measurement) -> Measurement:
        """`part` as it is: the idle joules travel in the energy meter's reading."""
        return part


__all__ = [
    "IDLE_S",
    "EnergyMeter",
    "EnergySource",
    "IdleEnergy",
    "NvmlCounter",
    "NvmlPowerSampled",
    "Offer",
    "RaplSource",
    "nvml_offer",
    "offer_for",
    "powercap_root",
    "rapl_offer",
    "rapl_zones",
]
