"""Energy around a measured phase, from a declared source only: never an estimate.

Sources, chosen by the compute unit that measures (`offer_for`; the counters themselves, each reading
timed by its clock brackets: `drivers.measuring.counters`):

- GPU units: NVML's total-energy counter read before and after (`nvml-energy-counter`); where the board
  lacks it, NVML's power sampled every 100 ms and integrated (`nvml-power-sampled@100ms`). Either
  covers the GPU board only, and only a phase of at least `protocol.energy.NVML_LEAST_WINDOW_S` (1 s):
  a shorter one gets no joules and says why. On an H100 and an H200 (benchmarks/gpu_energy.py), over
  5 s windows, the counter read what zeus's `ZeusMonitor` read (its own source) and the sampled
  integral 0.97 of it.
- CPU units on Linux: RAPL through the powercap tree (each package and its DRAM, polled so that no
  wrap is missed). Since Linux 5.10 `energy_uj` is readable by root only: the note says so.
- macOS: unavailable with the reason (powermetrics needs root, IOReport is a private interface).

`EnergyMeter` reads the source over `IDLE_S` idle seconds before the phase, then over the phase,
and returns an `EnergyReading`; the per-inference and per-token figures are derived from it
(`protocol.energy`). A source that fails mid-way gives no joules and a note, never an exception.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from drivers.measuring.counters import (
    EnergySource,
    NvmlCounter,
    NvmlPowerSampled,
    RaplSource,
    powercap_root,
    rapl_zones,
)
from protocol import ComputeUnit, EnergyReading, Measurement
from protocol.units import GPU_UNITS

IDLE_S: Final = 3.0  # idle seconds read before the measured phase
NO_TDP: Final = "no estimate is made from TDP or a model of the chip"


@dataclass(frozen=True)
class Offer:
    """What this device offers one unit: a source, or why none (`source` None)."""

    method: str
    note: str
    source: EnergySource | None = None


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
    "IdleEnergy",
    "Offer",
    "nvml_offer",
    "offer_for",
    "rapl_offer",
]
