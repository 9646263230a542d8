"""The throughput-latency fronts (`scheduler.results.front`) in every medium. report.html: one picture
with each device's or server's load levels at each swept length (every point drawn, the front joined
by a line, each point named by its load), then the points listed with their verification, error share
and cost. The terminal and Markdown: a compact table of the points on the front per device or server
(load, throughput, latency, verification, error share), the points off it counted in the caption."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Final

from node.report.pictures import LEGIBLE, Picture, drawn, fits, svg_of
from protocol import for_html, for_markdown, for_rich
from scheduler.results import CampaignReport, Front, FrontPoint
from scheduler.results.front import LATENCY_FORMULA, THROUGHPUT_FORMULA

if TYPE_CHECKING:
    from rich.table import Table


def _svg(fronts: tuple[Front, ...]) -> Picture:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 4.8), layout="constrained")
    ax = fig.subplots()
    left = 0
    for k, front in enumerate(fronts):
        shown = [p for p in front.points if fits(p.throughput) and fits(p.latency_ms)]
        left += len(front.points) - len(shown)
        colour = f"C{k % 10}"
        ax.scatter([p.latency_ms for p in shown], [p.throughput for p in shown], color=colour, s=18)
        on = [p for p in shown if p.on_front]
        ax.plot([p.latency_ms for p in on], [p.throughput for p in on], color=colour, label=front.name())
        for p in shown:
            ax.annotate(
                p.load,
                (p.latency_ms, p.throughput),
                fontsize=LEGIBLE,
                xytext=(3, 3),
                textcoords="offset points",
            )
    ax.set_xlabel(f"E2E ms ({LATENCY_FORMULA})")
    ax.set_ylabel(f"output tok/s\n({THROUGHPUT_FORMULA})")
    ax.set_title(
        "throughput against latency; the line joins the front (no point beats it on both)", fontsize=10
    )
    ax.legend(fontsize=LEGIBLE, loc="best")
    return Picture(svg_of(fig, "front"), f"{left} points left out (not finite)" if left else "")


def _table(fronts: tuple[Front, ...]) -> str:
    head = ("device · unit · target · lengths", "load", "output tok/s", "E2E ms", "on the front",
            "verified", "error share", "$ / M output tokens")  # fmt: skip
    rows = []
    for front in fronts:
        for p in front.points:
            rows.append(
                [
                    for_html(front.name()),
                    for_html(p.load),
                    f"{p.throughput:.1f}",
                    f"{p.latency_ms:.1f}",
                    "yes" if p.on_front else "",
                    for_html(p.verified),
                    "" if p.error_share is None else f"{p.error_share:.1%}",
                    "" if p.cost_per_m_tokens is None else f"{p.cost_per_m_tokens:.4g}",
                ]
            )
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table id="front-points"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def front_parts(report: CampaignReport) -> list[str]:
    """The fronts' section (none when no device or server has two load levels at one length)."""
    fronts = report.fronts
    if not fronts:
        return []
    return [
        f"<h2>{TITLE}</h2>",
        drawn("throughput-latency front", partial(_svg, fronts), element_id="front", css_class="front"),
        _table(fronts),
    ]


TITLE: Final = "Throughput-latency front per device or server"
COMPACT: Final = (
    "device · unit · target · lengths", "load", "output tok/s", "E2E ms", "verified", "error share"
)  # fmt: skip


def _compact(front: Front, p: FrontPoint) -> tuple[str, ...]:
    share = "" if p.error_share is None else f"{p.error_share:.1%}"
    return (front.name(), p.load, f"{p.throughput:.1f}", f"{p.latency_ms:.1f}", p.verified, share)


def _on_front(fronts: tuple[Front, ...]) -> tuple[list[tuple[str, ...]], str]:
    """The points on each front, and the caption: the axes' formulas and the points off the fronts."""
    cells = [_compact(f, p) for f in fronts for p in f.points if p.on_front]
    off = sum(1 for f in fronts for p in f.points if not p.on_front)
    caption = f"output tok/s: {THROUGHPUT_FORMULA}; E2E ms: {LATENCY_FORMULA}"
    caption += "; the points no other beats on both"
    if off:
        caption += f" ({off} point{'s' if off > 1 else ''} off the front: report.html lists every point)"
    return cells, caption


def front_markdown(report: CampaignReport) -> list[str]:
    """`report --format md`'s table of the points on the fronts (none without a front)."""
    if not report.fronts:
        return []
    cells, caption = _on_front(report.fronts)
    md = for_markdown
    out = [f"## {TITLE}", "", f"_{md(caption)}_", "", "| " + " | ".join(COMPACT) + " |"]
    out.append("|---|---|---:|---:|---|---:|")
    out += ["| " + " | ".join(md(c) for c in row) + " |" for row in cells]
    return [*out, ""]


def front_table(report: CampaignReport) -> Table | None:
    """The terminal's table of the points on the fronts (None without a front)."""
    if not report.fronts:
        return None
    from rich.table import Table

    cells, caption = _on_front(report.fronts)
    table = Table(title=TITLE.lower(), caption=caption, caption_justify="left")
    for k, name in enumerate(COMPACT):
        table.add_column(name, overflow="fold", justify="right" if k in (2, 3, 5) else "left")
    for row in cells:
        table.add_row(*(for_rich(c) for c in row))
    return table


__all__ = ["front_markdown", "front_parts", "front_table"]
