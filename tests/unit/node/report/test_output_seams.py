"""Each output medium with hostile peer text: results CSV, report.html, Markdown and the rich tables.

The strings are what a patched worker could put in its profile or a failure detail: a spreadsheet
formula, terminal escapes (clear screen, an OSC 8 link, BEL, a C1 CSI), rich markup, Markdown and
HTML, and matplotlib mathtext that does not parse.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest
from kit.data import report_of, signed_part
from rich.console import Console

from node.report.render import render_html
from node.report.tables import diff_table, matrix_tables, render_markdown
from scheduler import CSV_COLUMNS, to_csv
from scheduler.results import CampaignReport, diff_entries, entries_of

FORMULA = '=HYPERLINK("http://evil","x")'
ESCAPES = "\x1b[2J\x1b]8;;http://evil\x07click\x1b]8;;\x07\x9b31m\x7f"
MARKUP = "[bold red]pwn[/bold red]"
DEVICE = f"{FORMULA} {ESCAPES} {MARKUP} | `x` <script>alert(1)</script> $\\foo{{$"
CONTROLS = frozenset(chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]) - {"\n"}


def _result(device: str, median: float | None, *, detail: str = "") -> dict[str, Any]:
    row = {
        "Status": "Complete" if median is not None else "Failed",
        "JobId": "campaign-9-job-0-0",
        "FileName": "a.onnx",
        "ComputeUnits": "CPU (ONNX)",
        "DeviceName": device,
        "Soc": "@SUM(1+1)",
        "DeviceOs": "+cmd|' /C calc'!A0",
        "InferenceMsMedian": "" if median is None else f"{median:.3f}",
        "ProcessMedians": "" if median is None else f"{median:.3f};{median * 1.02:.3f}",
        "ProcessSpreadPct": "" if median is None else "2.00",
        "Unstable": "False",
        "LoadMsMedian": "" if median is None else "-1.5",
        "WorkerPeerId": f"peer-{len(device)}",
        "FailureReason": "" if median is not None else "runtime",
        "Detail": detail,
    }
    samples = [] if median is None else [median * (1 + 0.01 * (i % 5)) for i in range(40)]
    signed = None if median is None else signed_part(device, median, load_ms=-1.5)
    return {"row": row, "samples_ms": samples, "signed": signed}


def _document(*results: dict[str, Any]) -> CampaignReport:
    results = results or (
        _result(DEVICE, 1.0),
        _result("honest", 2.0),
        _result("other", None, detail=f"a.onnx: {DEVICE}\nnext"),
    )
    return report_of(list(results), name="seams")


def _printed(*renderables: Any) -> str:
    console = Console(file=io.StringIO(), width=300, color_system=None)
    for r in renderables:
        console.print(r)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


def test_results_csv_has_no_formula_and_no_control_character() -> None:
    text = to_csv(task.row for task in _document().results)
    assert not set(text) & CONTROLS
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 3  # the newline in a detail did not split a row
    for row in rows:
        for cell in row.values():
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            assert not cell.startswith("-") or float(cell) < 0, cell
    first = rows[0]
    assert first["DeviceName"].startswith("'=HYPERLINK(")
    assert (first["Soc"], first["DeviceOs"], first["LoadMsMedian"]) == (
        "'@SUM(1+1)",
        "'+cmd|' /C calc'!A0",
        "-1.5",
    )
    assert "\\x1b[2J" in first["DeviceName"]
    assert rows[2]["Detail"].endswith("\\x0anext")
    assert list(rows[0]) == list(CSV_COLUMNS)


def test_terminal_tables_show_markup_and_print_no_escape() -> None:
    document = _document()
    entries = entries_of(document)
    out = _printed(
        *matrix_tables(entries), diff_table(diff_entries(entries, entries, 5.0, 0.05), f"A {MARKUP}")
    )
    assert not set(out) & CONTROLS
    assert out.count(MARKUP) >= 2  # shown literally in the matrix, the diff and the title
    assert "\\x1b[2J" in out


def test_markdown_keeps_each_row_on_one_line_with_nothing_active() -> None:
    markdown = render_markdown(_document())
    assert not set(markdown) & CONTROLS
    for table in markdown.split("\n\n"):
        rows = [line for line in table.splitlines() if line.startswith("|")]
        assert len({len(re.findall(r"(?<!\\)\|", line)) for line in rows}) <= 1, table  # one cell stays one
    assert "<script>" not in markdown
    for escaped in ("\\<script\\>", "\\`x\\`", "\\[bold red\\]", "\\$"):
        assert escaped in markdown
    assert "\\x0anext |" in markdown  # the detail's newline did not end the row


# a 30-character device name already squeezes the figures' axes (a layout matter, not this test's)
@pytest.mark.filterwarnings("ignore:constrained_layout not applied:UserWarning")
def test_report_html_escapes_and_draws_mathtext_as_text() -> None:
    device = "<script>alert(1)</script> \x1b[2J\x07 $\\foo{$"  # "$\foo{$" crashed matplotlib's mathtext
    page = render_html(_document(_result(device, 1.0), _result("honest", 2.0)))
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert not set(page) & CONTROLS
    assert "\\x1b[2J\\x07 $\\foo{$" in page  # in the tables and as SVG text, drawn as written


def test_the_live_view_shows_a_device_name_literally() -> None:
    from node.cli.live import task_table
    from protocol import ComputeUnit, ModelRef
    from scheduler import TaskView

    model = ModelRef(name="a.onnx", size=1, sha256="0" * 64)
    task = TaskView(
        task_id="c-job-0-0", job_index=0, unit=ComputeUnit.CPU_ONNX, model=model, device_name=DEVICE
    )
    out = _printed(task_table([task]))
    assert not set(out) & CONTROLS
    assert MARKUP in out
    assert "\\x1b[2J" in out
