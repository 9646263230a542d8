"""The cells of the energy columns: figures derived from a declared source.

`protocol.energy` derives them from each process's raw reading; an empty figure means no source was
read, and `EnergyNote` says why (or what the figures cover: the CPU packages, the GPU board).
"""

from __future__ import annotations

from protocol import EnergyFigures
from scheduler.results.columns import cell


def energy_columns(figures: EnergyFigures | None) -> dict[str, str]:
    """The energy columns of a measurement ({} when it carries no reading: they stay empty)."""
    if figures is None:
        return {}
    return {
        "EnergyJoulesPerInference": cell("EnergyJoulesPerInference", figures.joules_per_inference),
        "EnergyJoulesPerToken": cell("EnergyJoulesPerToken", figures.joules_per_token),
        "AvgPowerW": cell("AvgPowerW", figures.avg_power_w),
        "IdlePowerW": cell("IdlePowerW", figures.idle_power_w),
        "EnergyMethod": figures.method,
        "EnergyNote": figures.note,
    }
