"""What this device offers to meter each compute unit: an energy method and telemetry, or why not.

`sark-node info` shows it. Energy comes from `drivers.energy` (the same choice the measuring child
makes). Telemetry is what a sampler could read here: CPU frequency (cpufreq), temperatures (psutil
sensors, thermal zones) for CPU units; NVML's temperature, SM clock, power and throttle reasons for
GPU units. `telemetry_methods` is the one place that says so; the telemetry sampler, when it reads
more, says it here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from drivers.energy import offer_for
from protocol import ComputeUnit
from protocol.units import GPU_UNITS


@dataclass(frozen=True)
class UnitOffer:
    """One unit's energy method and telemetry, each a method or "none: why"."""

    unit: ComputeUnit
    energy: str
    telemetry: str


def _cpu_telemetry() -> str:
    have, missing = [], []
    if Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq").exists():
        have.append("cpufreq per core")
    else:
        missing.append("no cpufreq (a VM or no frequency driver)")
    sensors: Any = getattr(psutil, "sensors_temperatures", None)
    temps = sensors() if sensors is not None else {}
    zones = list(Path("/sys/class/thermal").glob("thermal_zone*/temp"))
    if temps or zones:
        have.append(f"temperatures ({len(temps)} psutil sensors, {len(zones)} thermal zones)")
    else:
        missing.append("no temperature sensor (no psutil sensor, no thermal zone)")
    return "; ".join(have + missing) if have else f"none: {'; '.join(missing)}"


def _gpu_telemetry() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # ImportError or NVMLError: no NVML here
        return f"none: no NVML ({type(exc).__name__}: {exc})"
    try:
        count = pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()
    if not count:
        return "none: NVML sees no GPU"
    return "NVML: temperature, SM clock, power, clock-event (throttle) reasons"


def telemetry_methods() -> dict[ComputeUnit, str]:
    """Per unit, the telemetry a sampler can read here, or "none: why"."""
    cpu, gpu = _cpu_telemetry(), _gpu_telemetry()
    return {unit: gpu if unit in GPU_UNITS else cpu for unit in ComputeUnit}


def unit_offers() -> tuple[UnitOffer, ...]:
    """Every unit's energy method (with what it covers) and telemetry, or why not."""
    telemetry = telemetry_methods()
    offers = []
    for unit in ComputeUnit:
        offer = offer_for(unit)
        energy = f"{offer.method}: {offer.note}" if offer.source is not None else f"none: {offer.note}"
        offers.append(UnitOffer(unit, energy, telemetry[unit]))
    return tuple(offers)


__all__ = ["UnitOffer", "telemetry_methods", "unit_offers"]
