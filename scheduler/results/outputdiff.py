"""Rows of one model on several runtimes, compared on their outputs: the largest absolute difference
of each row's outputs (`Measurement.output_sample`: every value up to 65,536, else that many at the
same evenly spaced positions, the cell then saying how many of how many) against the first row of
that model that has one, so a runtime that computes something else is seen
beside its timings. Rows are compared when they were fed alike: the same dtypes, shapes and fills in
the same order (`fed_alike`), whatever each runtime calls its inputs (a .pte keeps no names: its
inputs are `input_0`...; OpenVINO keeps a .pt2's `x`). Pure: rows and samples in, cells out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protocol import InputFed
from scheduler.results.typed import TaskResult


@dataclass(frozen=True)
class Outputs:
    """One row's outputs as the comparison needs them.

    Attributes:
        task_id: the row's task.
        model: the model's sha256 (rows of one model are compared).
        unit: the row's compute unit, named in the other rows' cells.
        inputs: how the row was fed (`fed_alike`; rows fed differently are not compared).
        sample: the output sample, empty when the row has none.
        values: how many values the outputs held (0: not recorded, a result before it was): more
            than the sample when the outputs were sampled.
    """

    task_id: str
    model: str
    unit: str
    inputs: str
    sample: tuple[float, ...]
    values: int = 0


def output_diffs(rows: Sequence[Outputs]) -> dict[str, str]:
    """task id -> the OutputMaxDiff cell: "0 (reference)" for a model's first row with a sample,
    "<largest |difference|> vs <its unit>" for the others, or why they cannot be compared."""
    first: dict[str, Outputs] = {}
    cells: dict[str, str] = {}
    for row in rows:
        if not row.sample or not row.model:
            continue
        ref = first.setdefault(row.model, row)
        if ref is row:
            cells[row.task_id] = "0 (reference)"
        elif row.inputs != ref.inputs:
            cells[row.task_id] = f"inputs differ from {ref.unit}'s"
        elif len(row.sample) != len(ref.sample):
            cells[row.task_id] = f"outputs differ in size from {ref.unit}'s"
        else:
            largest = max(abs(a - b) for a, b in zip(row.sample, ref.sample, strict=True))
            whole = max(row.values, ref.values)
            of = f" ({len(row.sample):,} of {whole:,} values)" if whole > len(row.sample) else ""
            cells[row.task_id] = f"{largest:.3g} vs {ref.unit}{of}"
    return cells


def fed_alike(inputs: Sequence[InputFed]) -> str:
    """How a row was fed, names left out: each input's dtype, shape and fill (a campaign file by its
    digest), in order. Synthesised inputs are drawn from one seed in the model's input order, so rows
    fed alike got the same arrays on every runtime."""
    return ";".join(f"{i.dtype}[{','.join(map(str, i.shape))}]:{i.fill}@{i.file_sha256}" for i in inputs)


__all__ = ["Outputs", "fed_alike", "output_diffs", "with_output_diffs"]


def with_output_diffs(
    rows: list[tuple[dict[str, str], TaskResult | None]],
) -> list[tuple[dict[str, str], TaskResult | None]]:
    """The campaign's rows (in task order, each with its typed value) with their OutputMaxDiff cells."""
    compared = [
        Outputs(
            row["JobId"],
            row.get("ModelSha256", ""),
            row["ComputeUnits"],
            fed_alike(m.inputs),
            m.output_sample,
            m.output_values,
        )
        for row, result in rows
        if result is not None and (m := result.measurement) is not None
    ]
    cells = output_diffs(compared)
    return [
        ({**row, "OutputMaxDiff": cells[row["JobId"]]} if row.get("JobId") in cells else row, result)
        for row, result in rows
    ]
