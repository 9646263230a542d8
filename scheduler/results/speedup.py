"""Speed-up over the device's own CPU: where a campaign measured one model on a device's CPU unit and
on another unit of the same device, the other row's `SpeedupVsCpu` is the CPU row's median latency over
its own, with its spread, as NPU benchmarks report an "acceleration ratio".

The CPU row is the same runtime's (`GPU (ONNX)` against `CPU (ONNX)`), else the device's only CPU
row for that model; with several CPU rows and none of the same runtime the cell says which to pick
from rather than choose one. The spread is the ratio's range over the two rows' interquartile ranges:
(CPU median - IQR / 2) / (unit median + IQR / 2) to (CPU median + IQR / 2) / (unit median - IQR / 2),
so a ratio from two wide distributions reads wide. Rows are of one device when one worker measured
both (its peer id): a device's CPU elsewhere in the fleet is another device. Tensor rows only (a
generate row's figures are per token, its rows are compared on TPOT by their own views). Pure: rows
in, cells out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.results.typed import TaskResult


@dataclass(frozen=True)
class Timed:
    """One completed tensor row as the comparison needs it.

    Attributes:
        task_id: the row's task.
        device: who measured it (its worker's peer id): rows of one device are compared.
        model: the model's sha256.
        unit: the row's compute unit ("CPU (ONNX)", "GPU (ONNX)"...).
        median_ms: its median latency.
        iqr_ms: the interquartile range of its latencies.
    """

    task_id: str
    device: str
    model: str
    unit: str
    median_ms: float
    iqr_ms: float


def _runtime(unit: str) -> str:
    """ "ONNX" of "GPU (ONNX)"."""
    return unit.partition("(")[2].rstrip(")")


def speedup_cell(cpu: Timed, other: Timed) -> str:
    """ "3.21x (2.90-3.55) vs CPU (ONNX)": the CPU row's median over the other's, with its range."""
    ratio = cpu.median_ms / other.median_ms
    low = (cpu.median_ms - cpu.iqr_ms / 2) / (other.median_ms + other.iqr_ms / 2)
    fast = other.median_ms - other.iqr_ms / 2
    high = f"{(cpu.median_ms + cpu.iqr_ms / 2) / fast:.2f}" if fast > 0 else "∞"
    return f"{ratio:.2f}x ({max(low, 0.0):.2f}-{high}) vs {cpu.unit}"


def speedups(rows: Sequence[Timed]) -> dict[str, str]:
    """task id -> the SpeedupVsCpu cell of every non-CPU row that has a CPU row of its device and model."""
    cpus: dict[tuple[str, str], list[Timed]] = {}
    for row in rows:
        if row.unit.startswith("CPU ") and row.median_ms > 0:
            cpus.setdefault((row.device, row.model), []).append(row)
    cells: dict[str, str] = {}
    for row in rows:
        mine = cpus.get((row.device, row.model), [])
        if row.unit.startswith("CPU ") or not mine or row.median_ms <= 0:
            continue
        same = [c for c in mine if _runtime(c.unit) == _runtime(row.unit)]
        picked = same or (mine if len(mine) == 1 else [])
        cells[row.task_id] = (
            speedup_cell(picked[0], row)
            if picked
            else f"several CPU rows: {', '.join(sorted({c.unit for c in mine}))}"
        )
    return cells


def with_speedups(
    rows: list[tuple[dict[str, str], TaskResult | None]],
) -> list[tuple[dict[str, str], TaskResult | None]]:
    """The campaign's rows (in task order, each with its typed value) with their SpeedupVsCpu cells."""
    timed = [
        Timed(
            row["JobId"],
            row.get("WorkerPeerId", ""),
            row.get("ModelSha256", ""),
            row["ComputeUnits"],
            m.inference_ms.median,
            m.inference_ms.iqr,
        )
        for row, result in rows
        if result is not None
        and (m := result.measurement) is not None
        and m.generation is None
        and m.inference_ms.n > 0
        and not m.fallback
        and row.get("WorkerPeerId")
        and row.get("ModelSha256")
    ]
    cells = speedups(timed)
    return [
        ({**row, "SpeedupVsCpu": cells[row["JobId"]]} if row.get("JobId") in cells else row, result)
        for row, result in rows
    ]


__all__ = ["Timed", "speedup_cell", "speedups", "with_speedups"]
