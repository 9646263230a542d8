"""Issue 38, scope 8: a campaign that asked `verify:` says beside every figure how it was verified.

Entries as the report reads them from rows (their `Verified`), into the matrices every view draws:
a replicated figure carries its mark, a figure no replica checked says `(single)`, a refused one
shows its verdict in place of a figure; a campaign that asked nothing shows no mark at all."""

from __future__ import annotations

from rich.console import Console

from node.report.matrix import matrix_html
from node.report.tables import VERIFY_LEGEND, matrix_tables
from scheduler.results import latency_matrices
from scheduler.results.report import ReportEntry


def entry(device: str, verified: str, median: float = 1.5, status: str = "Complete") -> ReportEntry:
    return ReportEntry(
        task_id=f"c-job-0-{device}",
        job_index=0,
        status=status,
        model="m.onnx",
        unit="CPU (ONNX)",
        device=device,
        median_ms=median if status == "Complete" else None,
        verified=verified,
    )


VERIFIED = [
    entry("a", "replicated 2/2 (same host)"),
    entry("b", "replicated 2/3"),
    entry("c", "outlier: c: 1.05 ms against the agreed 1.5 ms (band 26.0%)", median=1.05),
    entry("d", "single"),
    entry("e", "unverifiable", status="Unverifiable"),
]


def test_each_cell_says_how_its_figure_was_verified() -> None:
    (matrix,) = latency_matrices(VERIFIED)
    cells = {d: row[0] for d, row in zip(matrix.devices, matrix.cells, strict=True)}
    assert {d: (c.median_ms, c.mark, c.ending) for d, c in cells.items() if c} == {
        "a": (1.5, " ✓2/2", "replicated 2/2"),
        "b": (1.5, " ✓2/3", "replicated 2/3"),
        "c": (None, "", "outlier"),  # refused: its verdict where its figure would be
        "d": (1.5, " (single)", "Complete"),
        "e": (None, "", "unverifiable"),
    }
    console = Console(width=200, record=True)
    for table in matrix_tables(VERIFIED):
        console.print(table)
    text = console.export_text()
    assert "1.500 ✓2/2" in text
    assert "1.500 (single)" in text
    assert "outlier" in text
    assert "unverifiable" in text
    assert VERIFY_LEGEND[:20] in text
    page = matrix_html(matrix)  # report.html's table of the same cells
    assert "1.500" in page
    assert "✓2/2" in page
    assert "(single)" in page
    assert ">outlier<" in page


def test_a_campaign_that_asked_nothing_shows_no_mark() -> None:
    plain = [entry("a", "single"), entry("b", "single")]
    (matrix,) = latency_matrices(plain)
    assert all(c is not None and (c.verified, c.mark) == ("", "") for row in matrix.cells for c in row)
    console = Console(width=200, record=True)
    for table in matrix_tables(plain):
        console.print(table)
    assert "single" not in console.export_text()
