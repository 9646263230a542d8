"""The energy counters a meter reads, each reading paired with the clock: RAPL and NVML.

- RAPL through the powercap tree (`RaplSource`): `energy_uj` of each `package-N` zone and its `dram`
  subzone; core and uncore are inside the package and not added again; `psys` is not a package. Intel
  and AMD alike. Each counter wraps at its `max_energy_range_uj`, so a thread reads them every
  `RAPL_POLL_S` and adds the steps, one wrap at most between two reads. The tree's root is
  `/sys/class/powercap`, or `SARK_POWERCAP_ROOT` (tests point it at a tree a writer process advances).
- NVML's total-energy counter (`NvmlCounter`: `nvmlDeviceGetTotalEnergyConsumption`, millijoules since
  the driver loaded, Volta and later) read before and after; where the board lacks it
  (`NvmlPowerSampled`), `nvmlDeviceGetPowerUsage` (milliwatts) sampled every `NVML_SAMPLE_S` on a
  thread and integrated by the trapezoid rule.

Each counter reading is paired with the clock by `timed_read`: the clock read on both sides of the
counter, the reading taken again (up to `TIMED_READ_TRIES` times) while the two are more than
`TIMED_READ_S` apart, and timed at their middle. A reader descheduled between its counter and its clock
(a busy machine, another thread holding the GIL) would otherwise shift the window against the joules:
43 ms of 4 s read 1.07 % over on a loaded run.

Which source a unit gets, and the meter around a measured phase: `drivers.measuring.energy`.
"""

from __future__ import annotations

import abc
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

from protocol.energy import NVML_LEAST_WINDOW_S

RAPL_POLL_S: Final = 0.5  # RAPL read period: well under a wrap (at 400 W, a 2^32 uJ counter wraps in 10 s)
NVML_SAMPLE_S: Final = 0.1
TIMED_READ_S: Final = 0.001  # a counter reading whose clock brackets it tighter than this is kept
TIMED_READ_TRIES: Final = 8  # else the tightest of this many
DEFAULT_POWERCAP: Final = "/sys/class/powercap"

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


class _Polled(abc.ABC):
    """A source read by `_step` on a daemon thread every `period_s` from `_poll` to `_unpoll` (the caller
    steps once more at each end), under one lock, so that the thread and the caller never read at once."""

    def __init__(self, period_s: float, name: str) -> None:
        self._period, self._name = period_s, name
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @abc.abstractmethod
    def _step(self) -> float:
        """One reading (under the lock): what the subclass's counter gives now."""

    def _poll(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._period):
            self._step()

    def _unpoll(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


class RaplSource(_Polled):
    """RAPL counters summed, read on a thread every `RAPL_POLL_S` so that no wrap is missed."""

    covers = "CPU packages (RAPL), not the GPU or the rest of the machine"
    least_window_s = 0.0  # polled and summed: any window (the check of a short one is the submitter's)

    def __init__(self, zones: list[Zone], poll_s: float = RAPL_POLL_S) -> None:
        super().__init__(poll_s, "rapl-reader")
        self.zones = zones
        has_dram = any(z.name.endswith("/dram") for z in zones)
        self.method = "rapl-package+dram" if has_dram else "rapl-package"
        if has_dram:
            self.covers = "CPU packages and DRAM (RAPL), not the GPU or the rest of the machine"
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
        self._poll()

    def stop(self) -> tuple[float, float]:
        self._unpoll()
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


class NvmlPowerSampled(_Polled):
    """NVML power draw (milliwatts) sampled every `period_s` on a thread, integrated (trapezoids)."""

    covers = "the GPU board (NVML power samples), not the CPU or the rest of the machine"
    least_window_s = NVML_LEAST_WINDOW_S

    def __init__(self, nvml: Any, handle: Any, period_s: float = NVML_SAMPLE_S) -> None:
        super().__init__(period_s, "nvml-power")
        self._nvml, self._handle = nvml, handle
        self.method = f"nvml-power-sampled@{round(period_s * 1000)}ms"
        self._j = 0.0
        self._last = (0.0, 0.0)

    def _watts(self) -> tuple[float, float]:
        return timed_read(lambda: self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1e3)

    def _step(self) -> float:
        with self._lock:
            watts, now = self._watts()
            then, before = self._last
            self._j += (now - then) * (watts + before) / 2
            self._last = (now, watts)
        return now

    def start(self) -> None:
        self._j = 0.0
        watts, self._t0 = self._watts()
        self._last = (self._t0, watts)
        self._poll()

    def stop(self) -> tuple[float, float]:
        self._unpoll()
        at = self._step()
        return self._j, at - self._t0


__all__ = [
    "EnergySource",
    "NvmlCounter",
    "NvmlPowerSampled",
    "RaplSource",
    "Zone",
    "powercap_root",
    "rapl_zones",
    "timed_read",
]
