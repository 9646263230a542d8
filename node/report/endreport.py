"""report.html's part for model servers: TTFT and TPOT against concurrency, and the vantage points.

An endpoint task is a generate task whose measurement carries the vantage point's round trip
(`generation.rtt_ms`) or client overhead: white-box tasks have neither. Read from the report's
signed measurements, so a re-rendered report draws the same pictures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from functools import partial

from node.report.pictures import LEGIBLE, Picture, drawn, left_out, plottable, svg_of
from protocol import GenerationStats, for_html, visible
from scheduler.results import CampaignReport

Run = tuple[Mapping[str, str], GenerationStats]


def _endpoint_runs(report: CampaignReport) -> list[Run]:
    """(row, stats) of every measured endpoint task."""
    found: list[Run] = []
    for task in report.results:
        measured = task.measurement
        stats = measured.generation if measured is not None else None
        if stats is None:
            continue
        if stats.rtt_ms is not None or stats.client_overhead_ms is not None:
            found.append((task.row, stats))
    return found


def endpoint_tasks(report: CampaignReport) -> frozenset[str]:
    """The task ids of the measured endpoint tasks: the tensor sections (load, processes) leave them out."""
    return frozenset(row.get("JobId", "") for row, _ in _endpoint_runs(report))


def _vantage(row: Mapping[str, str]) -> str:
    return visible(f"{row.get('DeviceName', '?')} · {row.get('FileName', '?')}")  # also a figure's label


def _levels_svg(runs: list[Run]) -> Picture:
    from matplotlib.figure import Figure

    lines: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    for row, s in runs:
        if s.request_rate is None:
            lines[_vantage(row)].append((s.concurrency, s.ttft_ms.median, s.tpot_ms.median))
    fig = Figure(figsize=(11.0, 3.6), layout="constrained")
    ttft_ax, tpot_ax = fig.subplots(1, 2)
    levels_seen = sorted({p[0] for points in lines.values() for p in points})
    dropped = 0
    for label, points in sorted(lines.items()):
        points.sort()
        levels = [p[0] for p in points]
        ttfts, bad_ttft = plottable(p[1] for p in points)
        tpots, bad_tpot = plottable(p[2] for p in points)
        dropped += bad_ttft + bad_tpot
        ttft_ax.plot(levels, ttfts, marker="o", label=label)
        tpot_ax.plot(levels, tpots, marker="o", label=label)
    for ax, name in ((ttft_ax, "TTFT median (ms)"), (tpot_ax, "TPOT median (ms)")):
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_xticks(levels_seen)
        ax.set_ylabel(name)
        ax.set_ylim(bottom=0)
    if lines:
        tpot_ax.legend(fontsize=LEGIBLE, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return Picture(svg_of(fig, "levels"), left_out(dropped, "medians"))


def _vantage_table(runs: list[Run]) -> str:
    head = (
        "device · model",
        "load",
        "sent req/s",
        "lag p99 ms",
        "client CPU %",
        "client",
        "RTT ms",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "goodput",
        "errors",
    )
    rows = []
    for row, s in sorted(runs, key=lambda r: (_vantage(r[0]), r[1].concurrency, r[1].request_rate or 0)):
        load = f"{s.request_rate:g} req/s" if s.request_rate is not None else f"concurrency {s.concurrency}"
        rows.append(
            [
                for_html(_vantage(row)),
                load,
                "" if s.request_rate_achieved is None else f"{s.request_rate_achieved:.1f}",
                "" if s.schedule_lag_ms_p99 is None else f"{s.schedule_lag_ms_p99:.2f}",
                "" if s.client_cpu_pct is None else f"{s.client_cpu_pct:.0f}",
                _client(s),
                "" if s.rtt_ms is None else f"{s.rtt_ms:.2f}",
                f"{s.ttft_ms.median:.1f}",
                f"{s.ttft_ms.p99:.1f}",
                f"{s.tpot_ms.median:.1f}",
                "" if s.goodput is None else f"{s.goodput:.2f}",
                f"{s.errors}/{s.requests}",
            ]
        )
    th = "".join(f"<th>{for_html(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _client(stats: GenerationStats) -> str:
    """The client's verdict: held its schedule, or saturated and why."""
    if not stats.client_saturated:
        return "held"
    return f'<span class="client-saturated">saturated: {for_html(stats.client_saturated_reason)}</span>'


def endpoint_parts(report: CampaignReport) -> list[str]:
    """The HTML sections for the report's endpoint tasks (none when it has none)."""
    runs = _endpoint_runs(report)
    if not runs:
        return []
    return [
        "<h2>Model servers: TTFT and TPOT against concurrency</h2>",
        drawn(
            "TTFT and TPOT against concurrency",
            partial(_levels_svg, runs),
            element_id="endpoint-levels",
            css_class="distributions",
        ),
        "<h2>Model servers: vantage points</h2>",
        f'<div id="endpoint-vantage">{_vantage_table(runs)}</div>',
    ]


__all__ = ["endpoint_parts", "endpoint_tasks"]
