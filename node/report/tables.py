"""Campaign reports for the terminal and Markdown: the latency matrices and diffs as rich tables, the
matrix and per-task stability as Markdown tables (`report --format md`).

Every string a peer or a campaign wrote passes its medium's seam (`protocol.for_rich`,
`protocol.for_markdown`): markup is shown, never applied; no control character reaches the output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from rich.console import Group
from rich.table import Table

from node.report.costreport import cost_markdown
from node.report.frontreport import front_markdown
from node.report.genreport import lead_markdown
from node.report.matrix import cell_markdown, cell_rich
from node.report.peakreport import peaks_markdown
from node.report.rankreport import ranking_markdown
from node.report.verifyreport import verification_markdown
from protocol import for_markdown, for_rich
from scheduler.results import (
    CampaignReport,
    DiffRow,
    LatencyMatrix,
    ReportEntry,
    device_label,
    entries_of,
    latency_matrices,
)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _label(entry: ReportEntry, entries: Sequence[ReportEntry]) -> str:
    return f"{device_label(entry, entries)} · {entry.unit}"


def _what(matrix: LatencyMatrix, entries: Sequence[ReportEntry]) -> str:
    """What a matrix's cells are: a generate task's are whole requests, not one inference."""
    generative = any(e.generation is not None for e in entries if e.model == matrix.model)
    return "median end-to-end time per request (ms)" if generative else "median inference latency (ms)"


VERIFY_LEGEND: Final = (
    "✓k/n: replicated, k of n peers of one class agreed; (single): no replica checked it; "
    "outlier, disagreed, unverifiable: no figure stands (results.csv's Verified says why)"
)
"""The line under a matrix of a campaign that asked `verify:`."""


def render_markdown(report: CampaignReport, rank: str = "") -> str:
    """An LLM campaign's lead table (TTFT, TPOT, ITL, decode tok/s, ROUGE-L), the matrix, performance
    per dollar and per watt (ranked by `rank`, "" the first figure shown), and the per-task stability
    as Markdown tables."""
    entries = entries_of(report)
    md = for_markdown  # every peer- or campaign-written string passes the Markdown seam
    lines = [f"# {md(report.campaign_id)}", "", *lead_markdown(report)]
    for matrix in latency_matrices(entries):
        lines += [f"## {md(matrix.model)}: {_what(matrix, entries)}", ""]
        lines.append("| device | " + " | ".join(md(c) for c in matrix.columns) + " |")
        lines.append("|---|" + "---:|" * len(matrix.columns))
        for device, cells in zip(matrix.devices, matrix.cells, strict=True):
            lines.append(f"| {md(device)} | " + " | ".join(cell_markdown(c) for c in cells) + " |")
        if any(c is not None and c.verified for row in matrix.cells for c in row):
            lines += ["", VERIFY_LEGEND]
        lines.append("")
    lines += front_markdown(report) + ranking_markdown(report)
    lines += peaks_markdown(report)
    lines += verification_markdown(report)
    lines += cost_markdown(report, rank)
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
    """The latency matrices as rich tables (the terminal view at the end of `submit`), each unstable
    cell's reasons under its table."""
    tables = []
    for matrix in latency_matrices(entries):
        why = [
            f"* {for_rich(_label(e, entries))}: {for_rich('; '.join(e.unstable_reasons))}"
            for e in entries
            if e.model == matrix.model and e.complete and e.unstable
        ]
        asked = any(c is not None and c.verified for row in matrix.cells for c in row)
        why += [
            f"† {for_rich(_label(e, entries))}: {for_rich(e.status)}: {for_rich(e.detail)}"
            for e in entries
            if e.model == matrix.model and not e.complete and e.detail
        ]
        table = Table(
            title=f"{for_rich(matrix.model)}: {_what(matrix, entries)[:-5]} (ms; * unstable, † why below)",
            caption="\n".join([*why, *([VERIFY_LEGEND] if asked else [])]) or None,
            caption_justify="left",
        )
        table.add_column("device")
        for column in matrix.columns:
            table.add_column(for_rich(column), justify="right")
        for device, cells in zip(matrix.devices, matrix.cells, strict=True):
            table.add_row(for_rich(device), *(cell_rich(c) for c in cells))
        tables.append(table)
    return tables


HARNESS: Final = ("python=", "numpy=")
"""Versions every row records beside its runtime's (the harness's own), left out of "what ran"."""


def runtime_table(report: CampaignReport) -> Table | None:
    """Where each model ran, for a campaign that ran one on several runtimes (None else): per row
    the runtime that ran it (its version), the placement (`Providers`: where the nodes or layers ran,
    with their shares) and the output difference against the model's first row on another runtime
    (`OutputMaxDiff`), the figures a runtime comparison is for, which the matrix does not show; where
    the runtime ran a throughput run (OpenVINO), its hint and inferences per second beside its version."""
    rows = [r.row for r in report.results if r.row.get("Status") == "Complete" and r.row.get("Providers")]
    by_model: dict[str, set[str]] = {}
    for row in rows:
        by_model.setdefault(row.get("FileName", ""), set()).add(row.get("ComputeUnits", ""))
    if not any(len(units) > 1 for units in by_model.values()):
        return None
    table = Table(
        title="where each model ran: runtime, placement, output difference",
        caption="placement: the nodes' (or layers') shares per provider; output max diff: the largest "
        "absolute difference from the model's first row on another runtime",
        caption_justify="left",
    )
    for name in ("model", "device · unit", "runtime", "placement", "output max diff"):
        table.add_column(name)
    for row in sorted(rows, key=lambda r: (r.get("FileName", ""), r.get("JobId", ""))):
        ran = [v for v in row.get("RuntimeVersions", "").split(";") if v and not v.startswith(HARNESS)]
        table.add_row(
            for_rich(row.get("FileName", "")),
            for_rich(f"{row.get('DeviceName', '')} · {row.get('ComputeUnits', '')}"),
            for_rich(" ".join([*ran, *_throughput(row)])),
            for_rich(row.get("Providers", "")),
            for_rich(row.get("OutputMaxDiff", "")),
        )
    return table


def _throughput(row: Mapping[str, str]) -> list[str]:
    """A row's throughput run in words, where it has one (OpenVINO): `· LATENCY: 2356.8/s, 1 request`."""
    if not row.get("ThroughputPerS"):
        return []
    settings = dict(kv.partition("=")[::2] for kv in row.get("RuntimeSettings", "").split(";") if kv)
    hint = settings.get("hint", "")
    requests = row.get("AsyncRequests", "")
    said = f"{requests} request{'s' if requests != '1' else ''}"
    return [f"· {hint + ': ' if hint else ''}{row['ThroughputPerS']}/s, {said}"]


def diff_table(rows: Sequence[DiffRow], title: str) -> Group:
    """A diff for the terminal: one small table per device and unit, a figure a line (a generate task:
    TTFT, TPOT, ITL, decode tok/s, ROUGE-L, then E2E), regressions in red, improvements in green, and
    why a change did not count under each table. It reads at 80 columns."""
    from rich import box
    from rich.console import Group
    from rich.text import Text

    parts: list[Table | Text] = [Text(title, style="bold")]  # a Text: markup in a campaign id stays text
    groups: dict[tuple[str, str], list[DiffRow]] = {}
    for r in rows:
        groups.setdefault((r.device, r.column), []).append(r)
    for (device, column), mine in groups.items():
        notes = [f"{for_rich(r.metric)}: {for_rich(r.note)}" for r in mine if r.note]
        table = Table(
            title=f"{for_rich(device)} · {for_rich(column)}",
            title_justify="left",
            caption="\n".join(notes) or None,
            caption_justify="left",
            box=box.SIMPLE_HEAD,
        )
        table.add_column("figure", no_wrap=True)
        for name in ("A", "B", "change", "p"):
            table.add_column(name, justify="right", no_wrap=True)
        table.add_column("verdict")
        for r in mine:
            colour = "red" if r.regression else "green" if r.improvement else "white"
            table.add_row(
                for_rich(r.metric),
                _fmt(r.before_ms),
                _fmt(r.after_ms),
                "" if r.change_pct is None else f"{r.change_pct:+.1f}%",
                "" if r.p_value is None else f"{r.p_value:.2g}",
                f"[{colour}]{for_rich(r.verdict)}[/]",
            )
        parts.append(table)
    return Group(*parts)
