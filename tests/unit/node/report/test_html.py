"""report.html, Markdown and the rich tables from campaign reports of every shape (no processes)."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from kit.data import report_of, signed_part
from rich.console import Console

from node.cli.report import read_report
from node.report.render import render_html, write_html_report
from node.report.tables import diff_table, matrix_tables, render_markdown
from scheduler.results import CampaignReport, DiffRow, entries_of


def _result(
    device: str, unit: str, median: float | None, *, job: int = 0, model: str = "a.onnx"
) -> dict[str, Any]:
    samples = [] if median is None else [median * (1 + 0.01 * (i % 5)) for i in range(40)]
    row = {
        "Status": "Complete" if median is not None else "Failed",
        "JobId": f"campaign-9-job-{job}-0",
        "FileName": model,
        "ComputeUnits": unit,
        "DeviceName": device,
        "InferenceMsMedian": "" if median is None else f"{median:.3f}",
        "ProcessMedians": "" if median is None else f"{median:.3f};{median * 1.02:.3f}",
        "ProcessSpreadPct": "" if median is None else "2.00",
        "Unstable": "True" if device == "noisy" else "False",
        "UnstableReasons": "background load of 1.50 cores (> 0.2)" if device == "noisy" else "",
        "LoadMsMedian": "" if median is None else "12.5",
        "LoadMsFirst": "" if median is None else "20.0",
        "PeakLoadRamUsage": "" if median is None else "100.0",
        "PeakInferenceRamUsage": "" if median is None else "120.0",
        "WorkerPeerId": f"peer-{device}",
        "FailureReason": "" if median is not None else "timeout",
    }
    reasons = ("background load of 1.50 cores (> 0.2)",) if device == "noisy" else ()
    signed = None if median is None else signed_part(device, median, reasons=reasons)
    return {"row": row, "samples_ms": samples, "signed": signed}


def _document(*results: dict[str, Any]) -> CampaignReport:
    return report_of(list(results))


def _svgs(page: str) -> int:
    return page.count("<svg")


def test_two_models_two_jobs_on_one_unit_a_failure_and_a_wide_range() -> None:
    document = _document(
        _result("fast", "CPU (ONNX)", 0.2),
        _result("noisy", "CPU (ONNX)", 40.0),  # 200x apart: the heatmap goes logarithmic
        _result("fast", "CPU (ONNX)", 0.3, job=1),
        _result("slow", "GPU (ONNX)", None, job=2),
        _result("fast", "CPU (ONNX)", 1.0, model="b.onnx", job=3),
    )
    page = render_html(document)
    # model b has one measured cell: nothing for colour to compare, so a line says why in its place
    assert re.findall(r'id="(heatmap-\d)"', page) == ["heatmap-0", "heatmap-1"]
    assert '<p class="muted" id="heatmap-1">No heatmap: fewer than two medians to compare.</p>' in page
    assert _svgs(page) == 7  # model a: heatmap, distributions, resources, processes; model b: the last three
    assert "CPU (ONNX) · job 0" in page
    assert "CPU (ONNX) · job 1" in page
    assert "timeout" in page
    assert 'class="unstable"' in page
    assert "<script" not in page


def test_a_campaign_with_no_measurement_still_renders_its_matrix() -> None:
    page = render_html(_document(_result("slow", "GPU (ONNX)", None)))
    assert 'id="matrix-0"' in page
    assert '<p class="muted" id="heatmap-0">' in page  # a 1x1 heatmap of a failure says nothing: a line
    assert 'id="distributions-0"' not in page
    assert _svgs(page) == 0
    assert "Failed" in page


def test_an_empty_campaign_renders_a_page() -> None:
    page = render_html(_document())
    assert "0 of 0 task(s) measured" in page
    assert _svgs(page) == 0


def test_write_and_load_round_trip(tmp_path: Path) -> None:
    document = _document(_result("fast", "CPU (ONNX)", 0.2))
    path = write_html_report(tmp_path / "deep" / "report.html", document)
    assert path.read_text().startswith("<!DOCTYPE html>")
    (tmp_path / "results.json").write_text(document.to_json())
    assert read_report(tmp_path) == read_report(tmp_path / "results.json") == document


def test_markdown_and_terminal_tables_show_the_same_matrix() -> None:
    document = _document(_result("fast", "CPU (ONNX)", 0.2), _result("noisy", "CPU (ONNX)", 0.25))
    markdown = render_markdown(document)
    assert "| fast | 0.200 (p90 " in markdown  # the median, then its tail and count (issue 42)
    assert "| noisy | 0.250 * (p90 " in markdown
    console = Console(file=io.StringIO(), width=120)
    for table in matrix_tables(entries_of(document)):
        console.print(table)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert re.search(r"fast\s*│\s*0\.200", text)
    assert re.search(r"noisy\s*│\s*0\.250 \*", text)


def test_the_diff_table_marks_regressions() -> None:
    rows = [
        DiffRow(device="x", column="CPU (ONNX)", before_ms=1.0, after_ms=2.0, change_pct=100.0, p_value=1e-9,
                significant=True, regression=True, verdict="regression"),
        DiffRow(device="y", column="CPU (ONNX)", verdict="only in A"),
    ]  # fmt: skip
    console = Console(file=io.StringIO(), width=160)
    console.print(diff_table(rows, "A -> B"))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "+100.0%" in text
    assert "regression" in text
    assert "only in A" in text


def test_markdown_keeps_the_reason_a_task_did_not_run() -> None:
    unplaced = _result("", "GPU (ONNX)", None)
    unplaced["row"] |= {
        "Status": "Unschedulable",
        "FailureReason": "no_feasible_peer",
        "Detail": "vm (12D3): unit unavailable | CUDA not found",
    }
    markdown = render_markdown(_document(_result("fast", "CPU (ONNX)", 0.2), unplaced))
    assert "| Unschedulable: no_feasible_peer; vm (12D3): unit unavailable \\| CUDA not found |" in markdown


def _cell_colours(page: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The colours of the heatmap's two cells side by side: its image (inline PNG) at 1/4 and 3/4 across."""
    import base64

    from PIL import Image

    figure = page[page.index('id="heatmap-0"') :]
    data = re.search(r'xlink:href="data:image/png;base64,([^"]+)"', figure)
    assert data is not None
    image = Image.open(io.BytesIO(base64.b64decode(data.group(1)))).convert("RGB")
    width, height = image.size
    left, right = image.getpixel((width // 4, height // 2)), image.getpixel((3 * width // 4, height // 2))
    assert isinstance(left, tuple)
    assert isinstance(right, tuple)
    return left, right


def test_a_two_cell_heatmap_tells_its_cells_apart_and_writes_the_matrix_numbers() -> None:
    """Two medians 5 % apart were coloured alike (a scale from 0), and 12500 was written 1.25e+04*:
    the colours run from the lowest median to the highest, each cell's number is the matrix's."""
    page = render_html(
        _document(_result("box", "CPU (ONNX)", 12500.0), _result("box", "GPU (ONNX)", 13125.0, job=1))
    )
    figure = page[page.index('id="heatmap-0"') : page.index("</figure>", page.index('id="heatmap-0"'))]
    assert "e+0" not in figure
    matrix = page[page.index('id="matrix-0"') : page.index('id="heatmap-0"')]
    shown = re.findall(r'<span class="median">([^<]+)</span>', matrix)
    assert len(shown) == 2
    assert all(f">{number}</text>" in figure for number in shown), (
        shown,
        re.findall(r">([^<]*)</text>", figure),
    )
    left, right = _cell_colours(page)
    assert sum(abs(a - b) for a, b in zip(left, right, strict=True)) > 60, (left, right)
