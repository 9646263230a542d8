"""The shape both white-box generation runtimes offer the generate child (`drivers.measuring.genchild`):
transformers (`drivers.runtimes.llm`: `CPU (PyTorch)`, `GPU (PyTorch)`) and llama.cpp
(`drivers.runtimes.gguflm`:
`CPU (llama.cpp)`, `GPU (llama.cpp)`). One frame, one request loop, one summary; the runtime is
picked by the unit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from drivers.runtimes.driver import Placement
from protocol import ComputeUnit, GenerateSpec, ModelFormat, Prompt, RequestRecord, RuntimeRates


class LoadedGenerator(Protocol):
    """A loaded generative model answering prompts one at a time."""

    name: str

    def generate(self, prompt: Prompt, spec: GenerateSpec) -> RequestRecord:
        """One greedy request, every output token timed."""
        ...

    def placement(self) -> Placement:
        """Where the model really runs."""
        ...

    def threads(self) -> int:
        """The CPU threads the runtime runs with."""
        ...

    def reset_rates(self) -> None:
        """Start the runtime's own timers again (before the timed requests)."""
        ...

    def rates(self) -> RuntimeRates | None:
        """The runtime's own timers since the reset, None where it keeps none."""
        ...

    def close(self) -> None:
        """Let the model go (`frame.timed_loads` closes each load before the next)."""
        ...


class GenerationRuntime(Protocol):
    """A generation runtime's module, as the generate child calls it (in this order)."""

    FORMATS: frozenset[ModelFormat]

    def check_layout(self, path: Path, fmt: ModelFormat) -> None:
        """Refuse a model this runtime does not read, before any import."""
        ...

    def device_for(self, unit: ComputeUnit) -> tuple[str | None, str]:
        """The device a unit runs on, or None and why."""
        ...

    def prepare(self) -> None:
        """Import the runtime (kept out of load time)."""
        ...

    def check_context(self, path: Path, fmt: ModelFormat, spec: GenerateSpec) -> None:
        """Refuse `max_new_tokens` at or beyond the model's context, before the load."""
        ...

    def load(self, path: Path, fmt: ModelFormat, unit: ComputeUnit, threads: int | None) -> LoadedGenerator:
        """Load the model on the unit's device."""
        ...

    def versions(self) -> dict[str, str]:
        """The runtime's packages and versions."""
        ...


def runtime_for(unit: ComputeUnit) -> GenerationRuntime:
    """The generation runtime of a unit: llama.cpp for its units, transformers for the others."""
    from drivers.runtimes import gguflm, llamacpp, llm

    return gguflm if unit in llamacpp.UNITS else llm


__all__ = ["GenerationRuntime", "LoadedGenerator", "runtime_for"]
