"""Speed-up over the device's own CPU: where a campaign measured one model on a device's CPU unit and
on another unit (another runtime's CPU unit included), the other row's `SpeedupVsCpu` is its baseline
CPU row's median latency over its own, with its spread, as NPU benchmarks report an "acceleration ratio".

Eligible rows are completed tensor rows whose figure stands (not a fallback, not refused by
verification). Rows are comparable when one device measured them (its worker's peer id: a CPU
elsewhere in the fleet is another device), on the same model (its sha256) with the same inputs (the
shapes, types and files fed, `InputFed.label`). The baseline of a row, among the comparable CPU rows:

1. for a non-CPU unit, the CPU unit of its own runtime (`GPU (ONNX)` against `CPU (ONNX)`): the
   accelerator's gain alone;
2. else ONNX Runtime's `CPU (ONNX)`, the runtime every device runs (`CPU (OpenVINO)` against it);
3. else the first CPU row in task order.

With several rows of the baseline's unit (two jobs, a replica, a retry) the first in task order is
it. A row is never compared with a row of its own unit (that would be two settings or two replicas,
not a unit's gain): the baseline's unit gets no cell, every other comparable row gets one, and the
cell names the baseline's unit: `3.21x (2.90-3.55) vs CPU (ONNX)`. The spread is from the two rows' sample
quartiles: the baseline's first quartile over the row's third to the baseline's third over the row's
first (the median's ratio between them), so a ratio of two wide distributions reads wide; a row whose
samples were left out (trimmed) uses its median -/+ half its interquartile range instead. Pure: rows
in, cells out; the files' column and every view's matrix read the one function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from protocol import ComputeUnit, Measurement
from protocol.stats import percentile
from scheduler.results.typed import TaskResult
from scheduler.state.settling import flagged

REFERENCE_CPU: Final = ComputeUnit.CPU_ONNX.value
"""The CPU unit a row without its own runtime's CPU row is compared with, where the device ran it."""


@dataclass(frozen=True)
class Timed:
    """One completed tensor row as the comparison needs it.

    Attributes:
        task_id: the row's task.
        device: who measured it (its worker's peer id): rows of one device are compared.
        model: the model's sha256.
        unit: the row's compute unit ("CPU (ONNX)", "GPU (ONNX)"...).
        median_ms: its median latency.
        q1_ms: its latencies' first quartile.
        q3_ms: their third quartile.
        inputs: what it was fed (`InputFed.label`s joined): rows fed otherwise are not compared.
    """

    task_id: str
    device: str
    model: str
    unit: str
    median_ms: float
    q1_ms: float
    q3_ms: float
    inputs: str = ""


def timed_of(task_id: str, device: str, model: str, unit: str, m: Measurement) -> Timed | None:
    """A row's `Timed` from its derived measurement; None when its figure is no unit's tensor latency
    (a generate task, nothing timed, a fallback) or it names no device or model."""
    stats = m.inference_ms
    if m.generation is not None or stats.n == 0 or m.fallback or not device or not model:
        return None
    if stats.median <= 0:
        return None
    if m.samples_ms:
        ordered = sorted(m.samples_ms)
        q1, q3 = percentile(ordered, 25.0), percentile(ordered, 75.0)
    else:  # the samples were left out to fit one envelope: the quartiles from the median and the IQR
        q1, q3 = stats.median - stats.iqr / 2, stats.median + stats.iqr / 2
    inputs = ";".join(i.label() for i in m.inputs)
    return Timed(task_id, device, model, unit, stats.median, q1, q3, inputs)


def _runtime(unit: str) -> str:
    """ "ONNX" of "GPU (ONNX)"."""
    return unit.partition("(")[2].rstrip(")")


def _cpu(unit: str) -> bool:
    return unit.startswith("CPU ")


def speedup_cell(base: Timed, other: Timed) -> str:
    """ "3.21x (2.90-3.55) vs CPU (ONNX)": the baseline's median over the other's, with its spread."""
    ratio = base.median_ms / other.median_ms
    low = max(base.q1_ms, 0.0) / other.q3_ms
    high = f"{base.q3_ms / other.q1_ms:.2f}" if other.q1_ms > 0 else "∞"
    return f"{ratio:.2f}x ({low:.2f}-{high}) vs {base.unit}"


def baseline(row: Timed, cpus: Sequence[Timed]) -> Timed | None:
    """The row's baseline among its comparable CPU rows (in task order), or None (its unit is the
    baseline's, or there is none)."""
    if not cpus:
        return None
    own = [c for c in cpus if _runtime(c.unit) == _runtime(row.unit)] if not _cpu(row.unit) else []
    reference = [c for c in cpus if c.unit == REFERENCE_CPU]
    picked = (own or reference or list(cpus))[0]
    return None if picked.unit == row.unit else picked


def speedups(rows: Sequence[Timed]) -> dict[str, str]:
    """task id -> the SpeedupVsCpu cell of every row with a baseline (`baseline`), rows in task order."""
    cpus: dict[tuple[str, str, str], list[Timed]] = {}
    for row in rows:
        if _cpu(row.unit):
            cpus.setdefault((row.device, row.model, row.inputs), []).append(row)
    cells: dict[str, str] = {}
    for row in rows:
        base = baseline(row, cpus.get((row.device, row.model, row.inputs), []))
        if base is not None:
            cells[row.task_id] = speedup_cell(base, row)
    return cells


def with_speedups(
    rows: list[tuple[dict[str, str], TaskResult | None]],
) -> list[tuple[dict[str, str], TaskResult | None]]:
    """The campaign's rows (in task order, each with its typed value) with their SpeedupVsCpu cells;
    a row whose figure verification refused is no one's baseline and gets none."""
    timed = [
        t
        for row, result in rows
        if result is not None
        and result.measurement is not None
        and not flagged(row.get("Verified", ""))
        and (
            t := timed_of(
                row["JobId"],
                row.get("WorkerPeerId", ""),
                row.get("ModelSha256", ""),
                row["ComputeUnits"],
                result.measurement,
            )
        )
        is not None
    ]
    cells = speedups(timed)
    return [
        ({**row, "SpeedupVsCpu": cells[row["JobId"]]} if row.get("JobId") in cells else row, result)
        for row, result in rows
    ]


__all__ = ["REFERENCE_CPU", "Timed", "baseline", "speedup_cell", "speedups", "timed_of", "with_speedups"]
