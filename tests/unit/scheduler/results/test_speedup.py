"""Speed-up over the device's own CPU (scheduler.results.speedup): each non-CPU row of a device against
its CPU row of the same model, with the spread, and the cell in every medium that shows the matrix."""

from __future__ import annotations

import pytest

from node.report.matrix import cell_html, cell_markdown, cell_rich
from scheduler.results import MatrixCell, Timed, speedup_cell, speedups


def _row(
    task: str, unit: str, median: float, iqr: float = 0.0, device: str = "p1", model: str = "m1"
) -> Timed:
    return Timed(task, device, model, unit, median, iqr)


def test_the_ratio_is_the_cpu_median_over_the_units_with_the_range_over_both_iqrs() -> None:
    cpu, gpu = _row("a", "CPU (ONNX)", 10.0, 2.0), _row("b", "GPU (ONNX)", 2.0, 0.4)
    # 10 / 2 = 5; (10 - 1) / (2 + 0.2) = 4.09; (10 + 1) / (2 - 0.2) = 6.11
    assert speedup_cell(cpu, gpu) == "5.00x (4.09-6.11) vs CPU (ONNX)"
    assert speedup_cell(cpu, _row("c", "GPU (ONNX)", 2.0, 4.0)) == "5.00x (2.25-∞) vs CPU (ONNX)"


@pytest.mark.parametrize(
    ("rows", "cells"),
    [
        (  # the same runtime's CPU row, on the same device and model; the CPU row gets no cell
            [_row("a", "CPU (ONNX)", 8.0), _row("b", "GPU (ONNX)", 2.0), _row("c", "CPU (OpenVINO)", 6.0)],
            {"b": "4.00x (4.00-4.00) vs CPU (ONNX)"},
        ),
        (  # no same-runtime CPU row: the device's only CPU row
            [
                _row("a", "CPU (OpenVINO)", 6.0),
                _row("b", "NPU (OpenVINO)", 3.0),
                _row("c", "GPU (ONNX)", 2.0),
            ],
            {"b": "2.00x (2.00-2.00) vs CPU (OpenVINO)", "c": "3.00x (3.00-3.00) vs CPU (OpenVINO)"},
        ),
        (  # several CPU rows and none of its runtime: named, not chosen
            [_row("a", "CPU (ONNX)", 6.0), _row("b", "CPU (LiteRT)", 5.0), _row("c", "NPU (OpenVINO)", 3.0)],
            {"c": "several CPU rows: CPU (LiteRT), CPU (ONNX)"},
        ),
        (  # another device's CPU, another model's CPU: not this row's
            [
                _row("a", "CPU (ONNX)", 8.0, device="p2"),
                _row("b", "CPU (ONNX)", 8.0, model="m2"),
                _row("c", "GPU (ONNX)", 2.0),
            ],
            {},
        ),
    ],
    ids=["same-runtime", "only-cpu", "ambiguous", "other-device-or-model"],
)
def test_each_unit_row_is_compared_with_its_devices_cpu_row(rows: list[Timed], cells: dict[str, str]) -> None:
    assert speedups(rows) == cells


def test_the_matrix_cell_shows_it_on_the_terminal_in_markdown_and_in_report_html() -> None:
    cell = MatrixCell(
        median_ms=2.0, status="Complete", task_id="b", speedup="4.00x (3.50-4.60) vs CPU (ONNX)"
    )
    said = "speed-up 4.00x (3.50-4.60) vs CPU (ONNX)"
    assert said in cell_rich(cell)
    assert said in cell_markdown(cell)
    assert f'<small class="speedup">{said}</small>' in cell_html(cell)
    assert "speed-up" not in cell_rich(MatrixCell(median_ms=2.0, status="Complete", task_id="a"))


def test_the_rows_get_the_cell_from_their_typed_measurements() -> None:
    """results.csv's and results.json's SpeedupVsCpu: from each row's derived latencies, rows of one
    worker and model; a fallback row (not the unit's figure) and a row without a worker get none."""
    from types import SimpleNamespace
    from typing import Any, cast

    from protocol import ComputeUnit, Measurement
    from protocol.stats import summarize
    from scheduler.results import with_speedups

    def measured(unit: ComputeUnit, samples: list[float], fallback: bool = False) -> Any:
        m = Measurement.nothing_timed(unit).with_(inference_ms=summarize(samples), fallback=fallback)
        return SimpleNamespace(measurement=m)

    def row(job: str, unit: str, peer: str = "p1") -> dict[str, str]:
        return {"JobId": job, "ComputeUnits": unit, "WorkerPeerId": peer, "ModelSha256": "ab" * 32}

    rows = [
        (row("a", "CPU (ONNX)"), measured(ComputeUnit.CPU_ONNX, [7.0, 8.0, 9.0])),
        (row("b", "GPU (ONNX)"), measured(ComputeUnit.GPU_ONNX, [1.9, 2.0, 2.1])),
        (row("c", "GPU (ONNX)", peer=""), measured(ComputeUnit.GPU_ONNX, [2.0, 2.0, 2.0])),
        (row("d", "GPU (ONNX)", peer="p1"), measured(ComputeUnit.GPU_ONNX, [2.0], fallback=True)),
    ]
    out = {r["JobId"]: r.get("SpeedupVsCpu", "") for r, _ in with_speedups(cast(Any, rows))}
    assert out["b"].startswith("4.00x (")
    assert out["b"].endswith(") vs CPU (ONNX)")
    assert out["a"] == out["c"] == out["d"] == ""
