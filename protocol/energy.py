"""Energy around a measured phase: each process's raw reading, and the figures derived from them.

A measuring process reads a declared energy source (`drivers.measuring.energy`: the NVML energy counter, NVML
power samples integrated at a stated period, RAPL package and DRAM counters) twice: over a few idle
seconds just before the phase, and over the measured phase itself (the timed loop, or the timed
requests). It sends the joules and seconds of both as an `EnergyReading`; `energy_figures` divides
them by the counts the same measurement already carries (timed runs, output tokens), so the energy
and the count cover the same window and the submitter derives the same figures again. Where no
source exists the reading has no joules and its note says why: a figure is never an estimate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from pydantic import Field

from protocol.base import Value
from protocol.generation import RequestRecord


class EnergyReading(Value):
    """One process's energy over its measured window and over the idle seconds before it.

    Attributes:
        method: the source, e.g. `nvml-energy-counter`, `nvml-power-sampled@100ms`,
            `rapl-package+dram`; "" when none was read.
        note: what the figure covers (the GPU board, the CPU packages) or why there is none.
        joules: energy over the measured window; None when no source was read.
        window_s: seconds of the measured window, between the two readings.
        idle_joules: energy over the idle seconds before the phase; None when not measured.
        idle_s: seconds of the idle reading.
    """

    method: str = Field(default="", max_length=64)
    note: str = Field(default="", max_length=500)
    joules: float | None = Field(default=None, ge=0)
    window_s: float = Field(default=0.0, ge=0)
    idle_joules: float | None = Field(default=None, ge=0)
    idle_s: float = Field(default=0.0, ge=0)


NVML_LEAST_WINDOW_S: Final = 1.0
"""The shortest window an NVML reading covers: its energy counter moves about every 100 ms and its
power reading averages over up to a second, so over a shorter phase the counter reads a fraction of
the board's energy (an H200 running a 0.22 s GPU (ONNX) phase: 57.7 W from the counter against
120 W of power points, issue 54). A worker reports no joules for a shorter window; a submitter
refuses NVML joules over one (`scheduler.verification.bounds`)."""


class EnergyFigures(Value):
    """A task's energy figures, derived from its processes' readings and counts.

    Attributes:
        joules_per_inference: (window energy - idle power x window) / timed runs (tensor tasks).
        joules_per_token: the same net energy / output tokens of the timed requests (generate tasks).
        avg_power_w: window energy / window seconds, idle included.
        idle_power_w: idle energy / idle seconds, before the phase.
        method: the readings' method ("" when none).
        note: what the figures cover, or why they are empty.
    """

    joules_per_inference: float | None = None
    joules_per_token: float | None = None
    avg_power_w: float | None = None
    idle_power_w: float | None = None
    method: str = ""
    note: str = ""


def energy_figures(
    readings: Sequence[EnergyReading],
    process_runs: Sequence[int],
    records: Sequence[RequestRecord] | None,
) -> EnergyFigures | None:
    """The figures of a task's readings (one per process), or None when it has none.

    Args:
        readings: each process's reading, in process order.
        process_runs: each process's timed runs (a generate task: its timed requests).
        records: a generate task's timed requests (their output tokens are the count); None for a
            tensor task (the timed runs are the count).
    """
    if not readings:
        return None
    first = readings[0]
    if any(r.joules is None or r.method != first.method for r in readings):
        missing = next((r for r in readings if r.joules is None), first)
        return EnergyFigures(method=missing.method, note=missing.note or "no energy reading")
    window = math.fsum(r.window_s for r in readings)
    total = math.fsum(r.joules or 0.0 for r in readings)
    idle_s = math.fsum(r.idle_s for r in readings)
    idle_known = all(r.idle_joules is not None for r in readings) and idle_s > 0
    idle_w = math.fsum(r.idle_joules or 0.0 for r in readings) / idle_s if idle_known else None
    net = total - (idle_w or 0.0) * window
    per_inference = per_token = None
    if records is None:
        runs = sum(process_runs)
        per_inference = net / runs if runs else None
    else:
        tokens = sum(r.output_tokens for r in records if r.error is None)
        per_token = net / tokens if tokens else None
    return EnergyFigures(
        joules_per_inference=per_inference,
        joules_per_token=per_token,
        avg_power_w=total / window if window > 0 else None,
        idle_power_w=idle_w,
        method=first.method,
        note=first.note if idle_known else f"{first.note}; idle power not measured, not subtracted",
    )


__all__ = ["NVML_LEAST_WINDOW_S", "EnergyFigures", "EnergyReading", "energy_figures"]
