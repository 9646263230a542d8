"""The device x unit matrix's cells in every medium: the median with its tail (p90, p99, max) and count,
rounded to what its spread supports (`scheduler.results.decimals_for`), or the task's ending with its
reason, where the cell is shown (report.html, Markdown, the terminal).

Presentation only; the reason a peer or the scheduler wrote passes each medium's seam.
"""

from __future__ import annotations

from typing import Final

from protocol import for_html, for_markdown, for_rich
from scheduler.results import LatencyMatrix, MatrixCell, shown

REASON_CHARS: Final = 160
"""How much of an ending's reason a Markdown cell shows (the whole of it under the matrix in the
stability table). report.html's cell shows the whole reason, wrapped: cut at 160 characters a reason
ended mid-word ("Tensorrt: not …")."""


def tail_text(cell: MatrixCell) -> str:
    """ "p90 13.1 · p99 14.4 · max 15.0 · n 300" ("" without a sample)."""
    stats = cell.stats
    if stats is None:
        return ""
    d = cell.decimals
    if stats.n == 1:  # one sample: its percentiles are itself
        return "n 1"
    return f"p90 {shown(stats.p90, d)} · p99 {shown(stats.p99, d)} · max {shown(stats.max, d)} · n {stats.n}"


def also_text(cell: MatrixCell) -> str:
    """ "+1 more task here: job-0-4" for a device that ran several tasks in one column ("" else)."""
    if not cell.also:
        return ""
    tails = ", ".join(task.rpartition("-job-")[2] or task for task in cell.also)
    return f"+{len(cell.also)} more {'task' if len(cell.also) == 1 else 'tasks'} here: {tails}"


def speedup_text(cell: MatrixCell) -> str:
    """ "3.21x (2.90-3.55) vs CPU (ONNX)": the device's CPU over this cell, where it has one ("" else)."""
    return f"speed-up {cell.speedup}" if cell.speedup else ""


def _short(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def cell_html(cell: MatrixCell | None) -> str:
    """A cell of report.html's matrix: the median large, its tail and count small under it; or the
    ending and its whole reason, wrapped (`reason` in the page's CSS breaks a peer id anywhere)."""
    if cell is None:
        return ""
    also = f'<br><small class="muted also">{for_html(also_text(cell))}</small>' if cell.also else ""
    if cell.median_ms is None:
        why = f'<br><small class="reason">{for_html(cell.detail)}</small>'
        return f'<span class="muted">{for_html(cell.ending)}</span>' + (why if cell.detail else "") + also
    flag = ' <span class="unstable" title="unstable">*</span>' if cell.unstable else ""
    # each figure of the tail whole, the line broken between them: five runtimes' tails fit 1280 px
    parts = " · ".join(f'<span class="nb">{part}</span>' for part in tail_text(cell).split(" · "))
    tail = f'<br><small class="muted tail">{parts}</small>' if cell.stats is not None else ""
    mark = f' <span class="muted" title="verification">{for_html(cell.mark)}</span>' if cell.mark else ""
    speed = f'<br><small class="speedup">{for_html(speedup_text(cell))}</small>' if cell.speedup else ""
    median = f'<span class="median">{shown(cell.median_ms, cell.decimals)}</span>'
    return f"{median}{flag}{mark}{speed}{tail}{also}"


def cell_markdown(cell: MatrixCell | None) -> str:
    """A cell of the Markdown matrix: "12.5 * (p90 … · n 300)", or "Failed: reason"."""
    if cell is None:
        return ""
    also = f" ({for_markdown(also_text(cell))})" if cell.also else ""
    if cell.median_ms is None:
        return for_markdown(f"{cell.ending}: {_short(cell.detail)}" if cell.detail else cell.ending) + also
    flag = " *" if cell.unstable else ""
    tail = f" ({tail_text(cell)})" if cell.stats is not None else ""
    speed = f" ({for_markdown(speedup_text(cell))})" if cell.speedup else ""
    return f"{shown(cell.median_ms, cell.decimals)}{flag}{for_markdown(cell.mark)}{speed}{tail}{also}"


def cell_rich(cell: MatrixCell | None) -> str:
    """A cell of the terminal's matrix: the median, its tail dim on a second line; or the ending dim,
    marked † when the caption under the table gives its reason (a cell stays narrow at 80 columns)."""
    if cell is None:
        return ""
    also = f"\n[dim]{for_rich(also_text(cell))}[/]" if cell.also else ""
    if cell.median_ms is None:
        return f"[dim]{for_rich(cell.ending)}{' †' if cell.detail else ''}[/]{also}"
    flag = " *" if cell.unstable else ""
    tail = f"\n[dim]{tail_text(cell)}[/]" if cell.stats is not None else ""
    speed = f"\n{for_rich(speedup_text(cell))}" if cell.speedup else ""
    return f"{shown(cell.median_ms, cell.decimals)}{flag}{for_rich(cell.mark)}{speed}{tail}{also}"


def matrix_html(matrix: LatencyMatrix) -> str:
    """report.html's matrix: devices down, units across, a cell per task."""
    head = "".join(f"<th>{for_html(c)}</th>" for c in ("device", *matrix.columns))
    body = "".join(
        f"<tr><td>{for_html(device)}</td>"
        + "".join(f'<td class="num">{cell_html(c)}</td>' for c in cells)
        + "</tr>"
        for device, cells in zip(matrix.devices, matrix.cells, strict=True)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
