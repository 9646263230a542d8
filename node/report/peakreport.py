"""A peaks campaign's figures in every medium: report.html's section, Markdown, the terminal.

One table per campaign, a line per device x figure (`scheduler.results.peak_lines`): the figure, the
device and its unit, the figure's value as the submitter derived it from the worker's timings, its
spread, the size and threads it is from, and the library and call timed; a task that ended without a
figure says its status and why in place of the value. Lines come grouped by figure, so the devices
of one figure read down one column. Presentation only; every string a peer or a campaign wrote passes
its medium's seam.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from protocol import for_html, for_markdown, for_rich
from scheduler.results import CampaignReport, PeakLine, peak_lines

if TYPE_CHECKING:
    from rich.table import Table

TITLE: Final = "Peaks per unit and precision"
CAPTION: Final = (
    "each figure derived by the submitter from the worker's timed calls (work at the size / fastest call); "
    "matmuls in GFLOPS (int8: GOPS), memory in GB/s (a copy counts bytes read plus written)"
)
HEAD: Final = ("figure", "device", "unit", "value", "cv", "size", "library · kernel")


def _value(line: PeakLine) -> str:
    """The figure with its unit, or the task's ending and why."""
    if line.per_s is None:
        return f"{line.status}: {line.detail}" if line.detail else line.status
    return f"{line.per_s:.4g} {line.figure}"


def _cells(line: PeakLine) -> tuple[str, ...]:
    cv = "" if line.cv is None else f"{line.cv:.3f}"
    made = " · ".join(x for x in (line.library, line.kernel) if x)
    return (line.precision, line.device, line.unit, _value(line), cv, line.size, made)


def peaks_html(report: CampaignReport) -> list[str]:
    """report.html's section (none when the campaign has no peaks job)."""
    lines = peak_lines(report)
    if not lines:
        return []
    th = "".join(f"<th>{for_html(h)}</th>" for h in HEAD)
    rows = []
    for line in lines:
        cells = [for_html(c) for c in _cells(line)]
        cls = ' class="num"' if line.per_s is not None else ""
        tds = "".join(f"<td{cls if i in (3, 4) else ''}>{c}</td>" for i, c in enumerate(cells))
        rows.append(f"<tr>{tds}</tr>")
    return [
        f"<h2>{TITLE}</h2>",
        f'<p class="muted">{for_html(CAPTION)}</p>',
        f'<div id="peaks"><table><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>',
    ]


def peaks_markdown(report: CampaignReport) -> list[str]:
    """The same table for `report --format md`."""
    lines = peak_lines(report)
    if not lines:
        return []
    md = for_markdown
    out = [f"## {TITLE}", "", f"_{md(CAPTION)}_", "", "| " + " | ".join(HEAD) + " |"]
    out.append("|---|---|---|---:|---:|---|---|")
    out += ["| " + " | ".join(md(c) for c in _cells(line)) + " |" for line in lines]
    return [*out, ""]


def peaks_table(report: CampaignReport) -> Table | None:
    """The terminal's table (None when the campaign has no peaks job)."""
    lines = peak_lines(report)
    if not lines:
        return None
    from rich.table import Table

    table = Table(title=TITLE.lower(), caption=CAPTION, caption_justify="left")
    for name in HEAD:
        table.add_column(name, overflow="fold", justify="right" if name in ("value", "cv") else "left")
    for line in lines:
        table.add_row(*(for_rich(c) for c in _cells(line)))
    return table


__all__ = ["peaks_html", "peaks_markdown", "peaks_table"]
