"""Rows of one model on several runtimes compared on their outputs (scheduler.results.outputdiff)."""

from __future__ import annotations

import pytest

from protocol import InputFed
from scheduler.results import Outputs, fed_alike, output_diffs

IN = "x:float32[1,4]"


def _row(task: str, unit: str, sample: tuple[float, ...], model: str = "m1", inputs: str = IN) -> Outputs:
    return Outputs(task, model, unit, inputs, sample)


@pytest.mark.parametrize(
    ("rows", "cells"),
    [
        (
            [_row("a", "CPU (ONNX)", (1.0, 2.0)), _row("b", "CPU (OpenVINO)", (1.0, 2.5))],
            {"a": "0 (reference)", "b": "0.5 vs CPU (ONNX)"},
        ),
        (  # the first row with a sample is the reference; a row without one gets no cell
            [
                _row("a", "CPU (ONNX)", ()),
                _row("b", "CPU (OpenVINO)", (3.0,)),
                _row("c", "CPU (ONNX)", (2.0,)),
            ],
            {"b": "0 (reference)", "c": "1 vs CPU (OpenVINO)"},
        ),
        (  # each model has its own reference
            [_row("a", "CPU (ONNX)", (1.0,)), _row("b", "CPU (LiteRT)", (9.0,), model="m2")],
            {"a": "0 (reference)", "b": "0 (reference)"},
        ),
        (
            [_row("a", "CPU (ONNX)", (1.0,)), _row("b", "CPU (OpenVINO)", (1.0,), inputs="x:float32[2,4]")],
            {"a": "0 (reference)", "b": "inputs differ from CPU (ONNX)'s"},
        ),
        (
            [_row("a", "CPU (ONNX)", (1.0,)), _row("b", "CPU (OpenVINO)", (1.0, 2.0))],
            {"a": "0 (reference)", "b": "outputs differ in size from CPU (ONNX)'s"},
        ),
    ],
)
def test_each_row_is_compared_with_its_models_first_row(rows: list[Outputs], cells: dict[str, str]) -> None:
    assert output_diffs(rows) == cells


def test_rows_fed_alike_are_compared_whatever_each_runtime_calls_its_inputs() -> None:
    def fed(name: str, shape: tuple[int, ...] = (1, 64), sha: str = "") -> str:
        fill = "file" if sha else "seeded_normal"
        return fed_alike((InputFed(name=name, dtype="float32", shape=shape, fill=fill, file_sha256=sha),))

    assert fed("x") == fed("input_0")  # OpenVINO keeps a .pt2's name, a .pte keeps none
    assert fed("x") != fed("x", (2, 64))
    assert fed("x", sha="ab") != fed("x", sha="cd")
    assert fed("x", sha="ab") != fed("x")


def test_outputs_larger_than_the_bound_say_how_many_values_were_compared() -> None:
    whole = [
        Outputs("a", "m1", "CPU (ONNX)", IN, (1.0, 2.0), 2),
        Outputs("b", "m1", "CPU (OpenVINO)", IN, (1.0, 2.5), 2),
    ]
    assert output_diffs(whole)["b"] == "0.5 vs CPU (ONNX)"  # every value compared: nothing to add
    sampled = [
        Outputs("a", "m1", "CPU (ONNX)", IN, (1.0, 2.0), 70_000),
        Outputs("b", "m1", "CPU (OpenVINO)", IN, (1.0, 2.5), 70_000),
    ]
    assert output_diffs(sampled)["b"] == "0.5 vs CPU (ONNX) (2 of 70,000 values)"
