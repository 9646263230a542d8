"""Peaks jobs: a job's ``peaks:`` block, one job per figure, and the pseudo-model each measures.

    - compute_unit: CPU (ONNX)
      peaks: {precisions: [fp32, bf16, int8], memory: [copy]}

A peaks job measures its unit's peaks as `sark-node info --bench` does (`drivers.measuring.peakchild`:
a size sweep to the plateau, warm-up, stability, telemetry, one measuring child) and expands into one
job per figure, in the order written: each matmul precision of `precisions` (default: every precision
the unit has a kernel for, `UNIT_PRECISIONS`), then each memory access of `memory` (read, write, copy;
`true`: all three, the default; `false`: none). A CPU compute unit measures the CPU's kernels, `GPU
(PyTorch)` the first CUDA device's; no other unit has a peaks kernel. `largest_n` and `largest_mib`
cap the sweep (a quick look; without them the sweep runs to the plateau). A peaks task runs one
process, so the job takes no `processes` but 1, and no model, generate, endpoint, fleet or sustain.

Like an endpoint job, a peaks job moves no model bytes: its `ModelRef` is a name and a digest of the
figure (`peaks:<cpu|gpu>:<precision>[:<largest>]`), size 0, so placement, results and reports treat it
like any model. How its figure is checked: `scheduler.verification.peakcheck`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Final, cast

from protocol import BANDWIDTHS, MATMUL_PRECISIONS, ComputeUnit, ModelFormat, ModelRef, PeakSpec
from protocol.values import PeakPrecision
from scheduler.language.problems import Problems, check_keys, describe

PEAK_FIELDS: Final = ("precisions", "memory", "largest_n", "largest_mib")
UNIT_PRECISIONS: Final = {
    "cpu": ("fp32", "bf16", "int8", "fp16"),
    "gpu": ("fp32", "tf32", "fp16", "bf16", "int8", "fp8"),
}
"""The matmul precisions each kind of unit has a kernel for (`drivers.measuring.peakkernels`,
`drivers.measuring.gpupeaks`)."""
MAX_LARGEST: Final = 1 << 20
_PREFIX: Final = "peaks:"
_SOURCE: Final = "peaks:"  # the pseudo-model's one source: never fetched, it names the kind


def peak_unit_kind(unit: ComputeUnit) -> str:
    """Which peaks a compute unit's task measures: "gpu" for GPU (PyTorch), "cpu" for a CPU unit, ""
    for a unit that has no peaks kernel."""
    if unit == ComputeUnit.GPU_TORCH:
        return "gpu"
    return "cpu" if unit.value.startswith("CPU ") else ""


def parse_peaks(raw: object, where: str, unit: ComputeUnit | None, problems: Problems) -> list[PeakSpec]:
    """The figures a ``peaks:`` block asks for, one `PeakSpec` each, or [] with its problems recorded."""
    if not isinstance(raw, dict):
        problems.add(where, f"expected a mapping ({', '.join(PEAK_FIELDS)}), got {describe(raw)}")
        return []
    before = len(problems.items)
    check_keys(raw, where, PEAK_FIELDS, problems)
    kind = peak_unit_kind(unit) if unit is not None else ""
    if unit is not None and not kind:
        problems.add(where, f"{unit.value} has no peaks kernel: a CPU unit or GPU (PyTorch)")
    known = UNIT_PRECISIONS.get(kind, MATMUL_PRECISIONS)
    matmuls = _names(raw.get("precisions", list(known)), f"{where}.precisions", known, problems, empty=True)
    memory_raw = raw.get("memory", True)
    if isinstance(memory_raw, bool):
        memory_raw = list(BANDWIDTHS) if memory_raw else []
    accesses = _names(memory_raw, f"{where}.memory", BANDWIDTHS, problems, empty=True)
    largest = {name: _largest(raw, name, where, problems) for name in ("largest_n", "largest_mib")}
    if not matmuls and not accesses:
        problems.add(where, "no figure asked: give precisions, memory, or both")
    if len(problems.items) > before:
        return []
    figures = [PeakSpec(precision=p, largest=largest["largest_n"]) for p in matmuls]
    return figures + [PeakSpec(precision=a, largest=largest["largest_mib"]) for a in accesses]


def _names(
    raw: object, where: str, known: Sequence[str], problems: Problems, empty: bool = False
) -> list[PeakPrecision]:
    values = [raw] if isinstance(raw, str) else raw
    if not isinstance(values, list) or (not values and not empty):
        problems.add(where, f"expected a list of {', '.join(known)}, got {describe(raw)}")
        return []
    wrong = [v for v in values if v not in known]
    if wrong:
        problems.add(where, f"unknown {describe(wrong[0])}; valid: {', '.join(known)}")
        return []
    return [cast(PeakPrecision, v) for v in dict.fromkeys(values)]


def _largest(raw: Mapping[str, object], name: str, where: str, problems: Problems) -> int | None:
    value = raw.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LARGEST:
        problems.add(
            f"{where}.{name}", f"expected a whole number from 1 to {MAX_LARGEST}, got {describe(value)}"
        )
        return None
    return value


def peak_key(unit: ComputeUnit, spec: PeakSpec) -> str:
    """The model key of a peaks job: its unit's kind, its figure and its sweep's cap."""
    cap = f":{spec.largest}" if spec.largest is not None else ""
    return f"{_PREFIX}{peak_unit_kind(unit)}:{spec.precision}{cap}"


def is_peak_key(key: str) -> bool:
    """Whether a job's model key names a peaks figure rather than a campaign model."""
    return key.startswith(_PREFIX)


def peak_ref(key: str) -> ModelRef:
    """The pseudo-model of a peaks job: the figure's name, size 0, a digest of its key."""
    digest = hashlib.sha256(b"sark/peaks/v1\n" + key.encode()).hexdigest()
    parts = key.removeprefix(_PREFIX).split(":")
    name = f"peaks {parts[1]} ({parts[0].upper()})" if len(parts) >= 2 else key
    return ModelRef(name=name[:255], size=0, sha256=digest, format=ModelFormat.ONNX, sources=(_SOURCE,))


def is_peak_model(model: ModelRef) -> bool:
    """Whether a task's model is a peaks job's pseudo-model."""
    return model.size == 0 and model.sources == (_SOURCE,)


__all__ = [
    "MAX_LARGEST",
    "PEAK_FIELDS",
    "UNIT_PRECISIONS",
    "is_peak_key",
    "is_peak_model",
    "parse_peaks",
    "peak_key",
    "peak_ref",
    "peak_unit_kind",
]
