"""What this device offers to meter each compute unit: an energy method and telemetry, or why not.

`sark-node info` shows it. Energy comes from `drivers.measuring.energy` (the same choice the measuring child
makes); telemetry from the sampler itself (`drivers.measuring.telemetry`), so `info` says what a run records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from drivers.measuring.energy import offer_for
from drivers.measuring.telemetry import offered
from protocol import ComputeUnit
from protocol.units import GPU_UNITS


@dataclass(frozen=True)
class UnitOffer:
    """One unit's energy method and telemetry, each a method or "none: why"."""

    unit: ComputeUnit
    energy: str
    telemetry: str


MACHINE: Final = "the machine's readings (below)"


def machine_telemetry() -> tuple[str, str]:
    """What the telemetry sampler reads here and what it cannot, with why: its own account
    (`drivers.measuring.telemetry.offered`, one reading taken), as the machine's part (CPU clock,
    temperatures, CPU use and share: every run records it) and the GPU's (NVML)."""
    sources = offered()
    machine = "; ".join(s for s in sources if not s.startswith("gpu"))
    return machine, "; ".join(s for s in sources if s.startswith("gpu"))


def unit_offers(gpu_telemetry: str) -> tuple[UnitOffer, ...]:
    """Every unit's energy method (with what it covers) and telemetry (`MACHINE`, and for GPU units
    `gpu_telemetry` too), or why not."""
    offers = []
    for unit in ComputeUnit:
        offer = offer_for(unit)
        energy = f"{offer.method}: {offer.note}" if offer.source is not None else f"none: {offer.note}"
        telemetry = f"{MACHINE}; {gpu_telemetry}" if unit in GPU_UNITS else MACHINE
        offers.append(UnitOffer(unit, energy, telemetry))
    return tuple(offers)


__all__ = ["MACHINE", "UnitOffer", "machine_telemetry", "unit_offers"]
