"""Performance per dollar and per watt in every medium: report.html's section, Markdown, the terminal.

One table per campaign, a line per priced or metered task (`scheduler.results.cost_lines`): device,
unit, model, the price per hour with its source, and each cost figure some line has, ranked by one
of them (`rank`; by default the first shown: $ / 1k inferences, else $ / M output tokens, else per
joule), the best first. Presentation only; every string a peer or a campaign wrote passes its
medium's seam.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from protocol import for_html, for_markdown, for_rich
from scheduler.results import (
    RANKS,
    CampaignReport,
    CostFigure,
    CostLine,
    cost_lines,
    entries_of,
    figures_of,
    price_text,
)

if TYPE_CHECKING:
    from rich.table import Table


def _ranked(report: CampaignReport, rank: str) -> tuple[tuple[CostLine, ...], tuple[CostFigure, ...], str]:
    """The lines ranked, the figures they show, and the key they are ranked by ("" none to rank by)."""
    entries = entries_of(report)
    lines = cost_lines(entries)
    figures = figures_of(lines)
    chosen = rank or (figures[0].key if figures else "")
    return (cost_lines(entries, chosen) if chosen else lines), figures, chosen


def _cell(figure: CostFigure, line: CostLine) -> str:
    value = figure.of(line.costs)
    return "" if value is None else f"{value:.3g}"


def _unit(line: CostLine) -> str:
    """The unit and the task's job and number ("CPU (ONNX) · job 0-1"): lines of one device tell apart."""
    return f"{line.unit} · job {line.task_id.rpartition('-job-')[2]}"


def _caption(chosen: str) -> str:
    if not chosen:
        return "no cost figure: no price was given and no energy was measured"
    figure = RANKS[chosen]
    return f"ranked by {figure.label}, {'highest' if figure.higher_is_better else 'lowest'} first"


def cost_html(report: CampaignReport, rank: str = "") -> list[str]:
    """report.html's section (none when no task has a price or a cost figure)."""
    lines, figures, chosen = _ranked(report, rank)
    if not lines:
        return []
    th = "".join(
        f'<th>{for_html(f.label)}<br><small class="muted">{for_html(f.formula)}</small></th>' for f in figures
    )
    body = "".join(
        f"<tr><td>{for_html(x.device)}</td><td>{for_html(_unit(x))}</td><td>{for_html(x.model)}</td>"
        f"<td>{for_html(price_text(x.price))}</td>"
        + "".join(f'<td class="num">{_cell(f, x)}</td>' for f in figures)
        + "</tr>"
        for x in lines
    )
    head = f"<tr><th>device</th><th>unit</th><th>model</th><th>price per hour (source)</th>{th}</tr>"
    return [
        "<h2>Performance per dollar and per watt</h2>",
        f'<p class="muted">{for_html(_caption(chosen))}; prices in the campaign\'s currency ($)</p>',
        f'<div id="cost"><table><thead>{head}</thead><tbody>{body}</tbody></table></div>',
    ]


def cost_markdown(report: CampaignReport, rank: str = "") -> list[str]:
    """The same table for `report --format md`, its formulas under it."""
    lines, figures, chosen = _ranked(report, rank)
    if not lines:
        return []
    md = for_markdown
    out = ["## Performance per dollar and per watt", "", f"_{md(_caption(chosen))}_", ""]
    out.append(
        "| device | unit | model | price per hour (source) | " + " | ".join(f.label for f in figures) + " |"
    )
    out.append("|---|---|---|---|" + "---:|" * len(figures))
    for x in lines:
        cells = " | ".join(_cell(f, x) for f in figures)
        out.append(
            f"| {md(x.device)} | {md(_unit(x))} | {md(x.model)} | {md(price_text(x.price))} | {cells} |"
        )
    return [*out, "", *(f"- {f.label} = {f.formula}" for f in figures), ""]


def cost_table(report: CampaignReport, rank: str = "") -> Table | None:
    """The terminal's table (None when no task has a price or a cost figure)."""
    lines, figures, chosen = _ranked(report, rank)
    if not lines:
        return None
    from rich.table import Table

    table = Table(
        title="performance per dollar and per watt", caption=_caption(chosen), caption_justify="left"
    )
    for name in ("device", "unit", "price per hour (source)"):
        table.add_column(name, overflow="fold")
    for f in figures:
        table.add_column(f.label, justify="right", no_wrap=True)
    for x in lines:
        table.add_row(
            for_rich(x.device), for_rich(x.unit), for_rich(price_text(x.price)), *_cells(figures, x)
        )
    return table


def _cells(figures: Sequence[CostFigure], line: CostLine) -> list[str]:
    return [_cell(f, line) for f in figures]
