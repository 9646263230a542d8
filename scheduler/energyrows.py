"""The energy columns of a result row, after every other: figures derived from a declared source.

`protocol.energy` derives them from each process's raw reading; an empty figure means no source was
read, and `EnergyNote` says why (or what the figures cover: the CPU packages, the GPU board).
"""

from __future__ import annotations

from typing import Final

from protocol import EnergyFigures

ENERGY_COLUMNS: Final = (
    "EnergyJoulesPerInference",
    "EnergyJoulesPerToken",
    "AvgPowerW",
    "IdlePowerW",
    "EnergyMethod",
    "EnergyNote",
)


def _figure(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def energy_columns(figures: EnergyFigures | None) -> dict[str, str]:
    """The energy columns of a measurement ({} when it carries no reading: they stay empty)."""
    if figures is None:
        return {}
    return {
        "EnergyJoulesPerInference": _figure(figures.joules_per_inference, 6),
        "EnergyJoulesPerToken": _figure(figures.joules_per_token, 6),
        "AvgPowerW": _figure(figures.avg_power_w, 5),
        "IdlePowerW": _figure(figures.idle_power_w, 5),
        "EnergyMethod": figures.method,
        "EnergyNote": figures.note,
    }
