"""Speed-up over the device's own CPU (scheduler.results.speedup): each row of a device against its
baseline CPU row (its runtime's CPU, else CPU (ONNX), else the first CPU row) of the same model and
inputs, with the spread from both rows' quartiles, and the cell in every medium that shows the matrix."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from node.report.matrix import cell_html, cell_markdown, cell_rich
from protocol import ComputeUnit, InputFed, Measurement
from protocol.stats import summarize
from scheduler.results import MatrixCell, Timed, speedup_cell, speedups, timed_of, with_speedups


def _row(
    task: str,
    unit: str,
    median: float,
    spread: float = 0.0,
    device: str = "p1",
    model: str = "m1",
    inputs: str = "x:float32[1,8]",
) -> Timed:
    return Timed(task, device, model, unit, median, median - spread, median + spread, inputs)


def test_the_ratio_is_the_baselines_median_over_the_rows_with_the_spread_from_both_quartiles() -> None:
    cpu, gpu = _row("a", "CPU (ONNX)", 10.0, 1.0), _row("b", "GPU (ONNX)", 2.0, 0.2)
    # 10 / 2 = 5; CPU's q1 over GPU's q3: 9 / 2.2 = 4.09; CPU's q3 over GPU's q1: 11 / 1.8 = 6.11
    assert speedup_cell(cpu, gpu) == "5.00x (4.09-6.11) vs CPU (ONNX)"
    assert speedup_cell(cpu, _row("c", "GPU (ONNX)", 2.0, 2.0)) == "5.00x (2.25-∞) vs CPU (ONNX)"


@pytest.mark.parametrize(
    ("rows", "cells"),
    [
        (  # a non-CPU unit against its runtime's CPU; another runtime's CPU against ONNX Runtime's
            [_row("a", "CPU (ONNX)", 8.0), _row("b", "GPU (ONNX)", 2.0), _row("c", "CPU (OpenVINO)", 6.0)],
            {"b": "4.00x (4.00-4.00) vs CPU (ONNX)", "c": "1.33x (1.33-1.33) vs CPU (ONNX)"},
        ),
        (  # no CPU row of its runtime: CPU (ONNX), named, whatever the task order
            [
                _row("a", "CPU (LiteRT)", 5.0),
                _row("b", "CPU (ONNX)", 6.0),
                _row("c", "NPU (OpenVINO)", 3.0),
            ],
            {"a": "1.20x (1.20-1.20) vs CPU (ONNX)", "c": "2.00x (2.00-2.00) vs CPU (ONNX)"},
        ),
        (  # no CPU (ONNX) either: the first CPU row in task order is the baseline
            [
                _row("a", "CPU (OpenVINO)", 6.0),
                _row("b", "CPU (LiteRT)", 4.0),
                _row("c", "GPU (ONNX)", 2.0),
            ],
            {"b": "1.50x (1.50-1.50) vs CPU (OpenVINO)", "c": "3.00x (3.00-3.00) vs CPU (OpenVINO)"},
        ),
        (  # two rows of the baseline's unit (two jobs, replicas): the first; none against its own unit
            [
                _row("a", "CPU (ONNX)", 8.0),
                _row("b", "CPU (ONNX)", 4.0),
                _row("c", "GPU (ONNX)", 2.0),
                _row("d", "GPU (ONNX)", 1.0),
            ],
            {"c": "4.00x (4.00-4.00) vs CPU (ONNX)", "d": "8.00x (8.00-8.00) vs CPU (ONNX)"},
        ),
        (  # another device's CPU, another model's, other inputs: not this row's
            [
                _row("a", "CPU (ONNX)", 8.0, device="p2"),
                _row("b", "CPU (ONNX)", 8.0, model="m2"),
                _row("c", "CPU (ONNX)", 8.0, inputs="x:float32[4,8]"),
                _row("d", "GPU (ONNX)", 2.0),
            ],
            {},
        ),
    ],
    ids=["own-runtime-then-onnx", "onnx-reference", "first-cpu", "first-of-a-unit", "not-comparable"],
)
def test_each_row_is_compared_with_its_devices_baseline_cpu_row(
    rows: list[Timed], cells: dict[str, str]
) -> None:
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


def _measured(unit: ComputeUnit, samples: list[float], fallback: bool = False, batch: int = 1) -> Measurement:
    fed = InputFed(name="x", dtype="float32", shape=(batch, 8), fill="seeded_normal")
    return Measurement.nothing_timed(unit).with_(
        inference_ms=summarize(samples), samples_ms=tuple(samples), fallback=fallback, inputs=(fed,)
    )


def test_the_quartiles_come_from_the_rows_samples() -> None:
    cpu = _measured(ComputeUnit.CPU_ONNX, [1.0, 2.0, 3.0, 4.0, 5.0])
    assert timed_of("a", "p1", "m1", "CPU (ONNX)", cpu) == Timed(
        "a", "p1", "m1", "CPU (ONNX)", 3.0, 2.0, 4.0, "x:float32[1,8]"
    )
    fell_back = _measured(ComputeUnit.GPU_ONNX, [1.0], fallback=True)
    assert timed_of("a", "p1", "m1", "GPU (ONNX)", fell_back) is None


def test_the_rows_get_the_cell_from_their_typed_measurements() -> None:
    """results.csv's and results.json's SpeedupVsCpu: from each row's derived latencies, rows of one
    worker, model and inputs; a fallback row (not the unit's figure), a row without a worker, a
    refused figure and a row fed other shapes get none, and a refused CPU row is no baseline."""

    def row(job: str, unit: str, peer: str = "p1", verified: str = "") -> dict[str, str]:
        return {
            "JobId": job,
            "ComputeUnits": unit,
            "WorkerPeerId": peer,
            "ModelSha256": "ab" * 32,
            "Verified": verified,
        }

    def result(m: Measurement) -> Any:
        return SimpleNamespace(measurement=m)

    rows = [
        (row("a", "CPU (ONNX)"), result(_measured(ComputeUnit.CPU_ONNX, [7.0, 8.0, 9.0]))),
        (row("b", "GPU (ONNX)"), result(_measured(ComputeUnit.GPU_ONNX, [1.9, 2.0, 2.1]))),
        (row("c", "GPU (ONNX)", peer=""), result(_measured(ComputeUnit.GPU_ONNX, [2.0, 2.0, 2.0]))),
        (row("d", "GPU (ONNX)"), result(_measured(ComputeUnit.GPU_ONNX, [2.0], fallback=True))),
        (row("e", "CPU (OpenVINO)"), result(_measured(ComputeUnit.CPU_OPENVINO, [3.9, 4.0, 4.1]))),
        (row("f", "CPU (OpenVINO)"), result(_measured(ComputeUnit.CPU_OPENVINO, [4.0], batch=4))),
        (
            row("g", "CPU (ONNX)", peer="p2", verified="outlier: 3x"),
            result(_measured(ComputeUnit.CPU_ONNX, [9.0])),
        ),
        (row("h", "GPU (ONNX)", peer="p2"), result(_measured(ComputeUnit.GPU_ONNX, [3.0]))),
    ]
    out = {r["JobId"]: r.get("SpeedupVsCpu", "") for r, _ in with_speedups(cast(Any, rows))}
    # 8 / 2 = 4; CPU's quartiles 7.5 and 8.5 over the GPU's 2.05 and 1.95
    assert out["b"] == "4.00x (3.66-4.36) vs CPU (ONNX)"
    assert out["e"] == "2.00x (1.85-2.15) vs CPU (ONNX)"  # 7.5 / 4.05, 8.5 / 3.95
    assert out["a"] == out["c"] == out["d"] == out["f"] == out["g"] == out["h"] == ""
