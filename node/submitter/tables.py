"""Campaign reports for the terminal and Markdown: the latency matrices and diffs as rich tables, the
matrix and per-task stability as Markdown tables (`report --format md`).

Every string a peer or a campaign wrote passes its medium's seam (`protocol.for_rich`,
`protocol.for_markdown`): markup is shown, never applied; no control character reaches the output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from protocol import for_markdown, for_rich
from scheduler.report import DiffRow, ReportEntry, device_label, entries_from_document, latency_matrices


def _fmt(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _label(entry: ReportEntry, entries: Sequence[ReportEntry]) -> str:
    return f"{device_label(entry, entries)} · {entry.unit}"


def render_markdown(document: Mapping[str, Any]) -> str:
    """The matrix and the per-task stability as Markdown tables."""
    entries = entries_from_document(document)
    md = for_markdown  # every peer- or campaign-written string passes the Markdown seam
    lines = [f"# {md(str(document.get('campaign_id', '')))}", ""]
    for matrix in latency_matrices(entries):
        lines += [f"## {md(matrix.model)}: median inference latency (ms)", ""]
        lines.append("| device | " + " | ".join(md(c) for c in matrix.columns) + " |")
        lines.append("|---|" + "---:|" * len(matrix.columns))
        for device, cells in zip(matrix.devices, matrix.cells, strict=True):
            shown = [
                ""
                if c is None
                else (f"{c.median_ms:.3f}{' *' if c.unstable else ''}" if c.median_ms else md(c.status))
                for c in cells
            ]
            lines.append(f"| {md(device)} | " + " | ".join(shown) + " |")
        lines.append("")
    lines += ["| device · unit | process medians (ms) | spread % | stability |", "|---|---|---:|---|"]
    for e in entries:
        stability = ("unstable: " + "; ".join(e.unstable_reasons)) if e.unstable else "stable"
        medians = "; ".join(f"{m:.3f}" for m in e.process_medians_ms)
        verdict = stability if e.complete else f"{e.status}: {e.detail}" if e.detail else e.status
        lines.append(
            f"| {md(_label(e, entries))} | {medians} | {_fmt(e.process_spread_pct, 1)} | {md(verdict)} |"
        )
    return "\n".join(lines) + "\n"


def matrix_tables(entries: Sequence[ReportEntry]) -> list[Table]:
    """The latency matrices as rich tables (the terminal view at the end of `submit`)."""
    tables = []
    for matrix in latency_matrices(entries):
        table = Table(title=f"{for_rich(matrix.model)}: median inference latency (ms; * unstable)")
        table.add_column("device")
        for column in matrix.columns:
            table.add_column(for_rich(column), justify="right")
        for device, cells in zip(matrix.devices, matrix.cells, strict=True):
            shown = [
                ""
                if c is None
                else (
                    f"{c.median_ms:.3f}{' *' if c.unstable else ''}"
                    if c.median_ms
                    else f"[dim]{for_rich(c.status)}[/]"
                )
                for c in cells
            ]
            table.add_row(for_rich(device), *shown)
        tables.append(table)
    return tables


def diff_table(rows: Sequence[DiffRow], title: str) -> Table:
    """A diff as a rich table: regressions in red, improvements in green."""
    table = Table(title=for_rich(title))
    for name in ("device", "unit"):
        table.add_column(name, justify="left")
    for name in ("A ms", "B ms"):
        table.add_column(name, justify="right")
    for name in ("change", "p", "verdict", "note"):
        table.add_column(name, justify="right" if name in ("change", "p") else "left")
    for r in rows:
        colour = "red" if r.regression else "green" if r.improvement else "white"
        table.add_row(
            for_rich(r.device),
            for_rich(r.column),
            _fmt(r.before_ms),
            _fmt(r.after_ms),
            "" if r.change_pct is None else f"{r.change_pct:+.1f}%",
            "" if r.p_value is None else f"{r.p_value:.2g}",
            f"[{colour}]{for_rich(r.verdict)}[/]",
            for_rich(r.note),
        )
    return table
