"""report.html, a campaign report as people read it in a browser (matplotlib figures inline).

report.html is one self-contained file: inline CSS, figures as inline SVG drawn by matplotlib's
object API (no pyplot state, no backend switch), no script, font or image fetched from anywhere.
The data it shows is shaped by `scheduler.results.report`; this module only draws and writes it. Text is
HTML-escaped where each table is built, and drawn with mathtext off (a "$" a peer wrote stays text).
The terminal and Markdown views are `tables`.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

from node.report.costreport import cost_html
from node.report.endreport import endpoint_parts, endpoint_tasks
from node.report.genreport import generation_parts, lead_parts
from node.report.matrix import matrix_html
from node.report.pictures import Picture, drawn, fits, inside, left_out, not_drawn, plottable, svg_of
from node.report.provenance import provenance_html
from node.report.telereport import telemetry_parts
from protocol import for_html, visible
from scheduler.results import (
    NO_DEVICE,
    CampaignReport,
    LatencyMatrix,
    ReportEntry,
    device_label,
    entries_of,
    latency_matrices,
)

log = logging.getLogger(__name__)

_CSS: Final = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1200px;color:#222;
padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.unstable{color:#b00020;font-weight:600}.stable{color:#1b5e20}.muted{color:#777}
figure{margin:.5rem 0}figure svg{max-width:100%;height:auto}
code{font-size:.8rem}.median{font-size:1rem}small.tail{white-space:nowrap}
@media print{body{margin:0;max-width:none}h2{break-after:avoid}table,figure{break-inside:avoid}}
"""


def _fmt(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _label(entry: ReportEntry, entries: Sequence[ReportEntry]) -> str:
    return visible(f"{device_label(entry, entries)} · {entry.unit}")  # a label in a figure: no control


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _log_ticks(axis: Any) -> None:
    """Plain numbers at 1, 2 and 5 of each decade on a log axis, and no minor labels (they overlapped)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def heatmap_svg(matrix: LatencyMatrix, salt: str, what: str = "inference latency") -> Picture:
    """The matrix as a heatmap: colour by median latency, each cell annotated (an asterisk if unstable);
    a median a picture cannot place is annotated but not coloured."""
    from matplotlib.colors import LogNorm, Normalize

    medians = [[c.median_ms if c and c.median_ms else None for c in row] for row in matrix.cells]
    values = [plottable(row)[0] for row in medians]
    finite = [v for row in values for v in row if not math.isnan(v)]
    fig = _figure(1.6 + 1.7 * len(matrix.columns), 1.0 + 0.45 * len(matrix.devices))
    ax = fig.add_subplot()
    norm = (
        LogNorm(min(finite), max(finite))
        if finite and min(finite) > 0 and max(finite) / min(finite) > 10
        else Normalize(0.0, max(finite, default=1.0))
    )
    image = ax.imshow(values, cmap="YlOrRd", norm=norm, aspect="auto")
    ax.set_xticks(range(len(matrix.columns)), [visible(c) for c in matrix.columns], rotation=20, ha="right")
    ax.set_yticks(range(len(matrix.devices)), [visible(d) for d in matrix.devices])
    for i, row in enumerate(matrix.cells):
        for j, cell in enumerate(row):
            if cell is None:
                continue
            text = (
                f"{cell.median_ms:.3g}{'*' if cell.unstable else ''}"
                if cell.median_ms
                else visible(cell.ending)
            )
            dark = cell.median_ms is not None and fits(cell.median_ms) and float(norm(cell.median_ms)) > 0.6
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
    bar = fig.colorbar(image, ax=ax, label="median latency (ms)")
    if isinstance(norm, LogNorm):
        _log_ticks(bar.ax.yaxis)
    ax.set_title(f"{visible(matrix.model)}: median {what} (ms; * unstable)", fontsize=10)
    return Picture(svg_of(fig, salt), left_out(sum(plottable(row)[1] for row in medians), "medians"))


def distributions_svg(entries: Sequence[ReportEntry], salt: str, what: str = "inference latency") -> Picture:
    """Latency distributions from the raw samples: a box plot and an ECDF per device and unit."""
    measured = [e for e in entries if e.samples_ms]
    labels = [_label(e, entries) for e in measured]
    kept = [inside(e.samples_ms, log=True) for e in measured]
    fig = _figure(11.0, 1.2 + 0.45 * len(measured))
    box, ecdf = fig.subplots(1, 2)
    box.boxplot(
        [samples or [math.nan] for samples, _ in kept],
        orientation="horizontal",
        tick_labels=labels,
        flierprops={"markersize": 2},
    )
    box.invert_yaxis()
    box.set_xscale("log")
    _log_ticks(box.xaxis)
    box.set_xlabel(f"{what} (ms, log)")
    box.set_title("distribution of every timed run", fontsize=10)
    for (samples, _), label in zip(kept, labels, strict=True):
        xs = sorted(samples)
        ecdf.step(xs, [(k + 1) / len(xs) for k in range(len(xs))], where="post", label=label)
    ecdf.set_xscale("log")
    _log_ticks(ecdf.xaxis)
    ecdf.set_xlabel(f"{what} (ms, log)")
    ecdf.yaxis.set_label_position("right")  # on the left it sat between the two plots
    ecdf.yaxis.tick_right()
    ecdf.set_ylabel("share of runs at or below")
    ecdf.set_title("ECDF", fontsize=10)
    ecdf.legend(fontsize=7, loc="lower right")
    return Picture(svg_of(fig, salt), left_out(sum(n for _, n in kept), "samples", log=True))


def resources_svg(entries: Sequence[ReportEntry], salt: str) -> Picture:
    """Load time (median and first) and peak memory (load and inference) as bar charts."""
    done = [e for e in entries if e.complete]
    labels = [_label(e, entries) for e in done]
    ys = range(len(done))
    fig = _figure(11.0, 1.2 + 0.45 * len(done))
    load, memory = fig.subplots(1, 2, sharey=True)
    dropped = 0
    for ax, pairs, unit, corner in (
        (load, (("median load", "load_ms_median"), ("first load", "load_first_ms")), "ms", "left"),
        (
            memory,
            (("peak at load", "peak_load_ram_mb"), ("peak at inference", "peak_inference_ram_mb")),
            "MB (process peak resident set)",
            "right",
        ),
    ):
        bars = []
        for k, (name, attr) in enumerate(pairs):
            widths, bad = plottable(getattr(e, attr) for e in done)
            dropped += bad
            bars.append(ax.barh([y + 0.4 * k - 0.2 for y in ys], widths, 0.4, label=name))
        ax.set_xlabel(unit)
        # a figure legend "outside": the layout keeps room for it under the x-axis labels, never over a
        # bar or a label (an axes legend anchored below the axes sat on the labels of a one-row chart)
        fig.legend(handles=bars, fontsize=7, loc=f"outside lower {corner}", ncol=2, frameon=False)
    load.set_yticks(list(ys), labels)
    load.invert_yaxis()
    load.set_title("model load time", fontsize=10)
    memory.set_title("peak memory of the whole measuring process (kernel high-water mark)", fontsize=10)
    return Picture(svg_of(fig, salt), left_out(dropped, "readings"))


def process_spread(entry: ReportEntry) -> tuple[float, list[float], int]:
    """A row's median of medians (its figure) and each process median's distance from it in %, with
    how many a picture could not place: a 5 % spread is ±5 whatever the model's speed."""
    medians, dropped = inside(entry.process_medians_ms)
    centre = (
        entry.median_ms if fits(entry.median_ms) and entry.median_ms else statistics.median(medians or [0.0])
    )
    spread = ((m / centre - 1.0) * 100.0 for m in medians) if centre else (math.nan for _ in medians)
    deviations, bad = inside(spread)
    return centre, deviations, dropped + bad


def processes_svg(entries: Sequence[ReportEntry], salt: str) -> Picture:
    """Each process's median per device and unit as its distance from the row's median of medians,
    in % (`process_spread`): the axis is the spread, centred on the row's figure, which its tick label
    gives in ms, so a sub-millisecond model and a 7 s one both fill the plot. Red: unstable."""
    done = [e for e in entries if e.process_medians_ms]
    fig = _figure(7.0, 1.2 + 0.45 * len(done))
    ax = fig.add_subplot()
    widest, dropped = 1.0, 0  # at least ±1 %: a flat row does not fill the axis with nothing
    labels = []
    for y, e in enumerate(done):
        centre, deviations, bad = process_spread(e)
        dropped += bad
        widest = max([widest, *(abs(d) for d in deviations)])
        ax.plot(
            deviations, [y] * len(deviations), "o", color="#b00020" if e.unstable else "#1b5e20", alpha=0.8
        )
        labels.append(
            f"{_label(e, entries)} ({centre:.3g} ms)"
            if centre < 1000
            else f"{_label(e, entries)} ({centre:,.0f} ms)"
        )
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(done)), labels)
    ax.invert_yaxis()
    ax.set_xlim(-1.15 * widest, 1.15 * widest)
    ax.set_xlabel("process median, % from the row's median of medians (in brackets); red: unstable")
    ax.set_title("per-process medians", fontsize=10)
    return Picture(svg_of(fig, salt), left_out(dropped, "process medians"))


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], numeric: frozenset[int] = frozenset()) -> str:
    th = "".join(f"<th>{for_html(h)}</th>" for h in head)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _stability_html(entries: Sequence[ReportEntry]) -> str:
    rows = []
    for e in entries:
        if not e.complete:
            rows.append([for_html(_label(e, entries)), "", "", for_html(e.status), for_html(e.detail)])
            continue
        verdict = (
            '<span class="unstable">unstable</span>' if e.unstable else '<span class="stable">stable</span>'
        )
        rows.append(
            [
                for_html(_label(e, entries)),
                "; ".join(f"{m:.3f}" for m in e.process_medians_ms),
                _fmt(e.process_spread_pct, 1),
                verdict,
                for_html("; ".join(e.unstable_reasons)),
            ]
        )
    return _table(["device · unit", "process medians (ms)", "spread %", "stability", "reasons"], rows)


def _conditions_html(entries: Sequence[ReportEntry]) -> str:
    rows = []
    for e in entries:
        c, p = e.conditions, e.device_profile
        if c is None:
            continue
        threads = f"intra {c.intra_op_threads or 'default'}, inter {c.inter_op_threads or 'default'}"
        spin = "" if c.spinning is None else (", spinning" if c.spinning else ", no spin")
        cal = p.calibration if p is not None else None
        rows.append(
            [
                for_html(_label(e, entries)),
                f"{c.background_cores:.2f}",
                for_html(threads + spin),
                for_html(", ".join(f"{k} {v}" for k, v in sorted(c.runtime_versions.items()))),
                f'<code title="{for_html(c.model_sha256)}">{for_html(c.model_sha256[:16])}</code>',
                for_html(" / ".join(x for x in (c.thermal, c.power) if x) or "not exposed"),
                "" if cal is None else for_html(cal.summary()),
            ]
        )
    head = ["device · unit", "background cores", "threads", "runtimes", "model sha256", "thermal / power"]
    return _table([*head, "calibration"], rows, frozenset({1}))


def render_html(report: CampaignReport, rank: str = "") -> str:
    """report.html for a campaign report: one self-contained page, whatever the report holds (`rank`:
    the cost figure its performance per dollar and per watt table is ranked by; "" the first shown).

    Each picture is drawn or replaced by a note saying why (`pictures.drawn`); if the page itself
    cannot be built, the page says that instead, so a report.html is always written."""
    import matplotlib

    try:
        with matplotlib.rc_context({"text.parse_math": False}):  # a "$" a peer wrote is text, not mathtext
            return _page(report, rank)
    except Exception as exc:  # the renderer's boundary: no stored value may stop the outputs
        log.warning("report.html not rendered: %s: %s", type(exc).__name__, exc)
        return _unrendered(report, exc)


def _title(report: CampaignReport) -> str:
    return f"{report.campaign.name} · {report.campaign_id}"


def _wrap(title: str, parts: Sequence[str]) -> str:
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{for_html(title)}</title><style>{_CSS}</style></head><body>"
        + "\n".join(parts)
        + "</body></html>\n"
    )


def _unrendered(report: CampaignReport, exc: Exception) -> str:
    """The page written when the report cannot be built: why, and where the results are."""
    title = _title(report)
    why = not_drawn("the report", exc)
    return _wrap(
        title,
        [
            f"<h1>sark-node report: {for_html(title)}</h1>",
            f'<p class="note" id="not-rendered">{for_html(why)}</p>',
            "<p>results.csv and results.json beside this file hold every result.</p>",
        ],
    )


def _page(report: CampaignReport, rank: str) -> str:
    """The page itself (`render_html` sets how matplotlib draws text around it)."""
    entries = entries_of(report)
    title = _title(report)
    done = sum(e.complete for e in entries)
    created = next((t.row["CreatedUtc"] for t in report.results if t.row.get("CreatedUtc")), None)
    parts = [
        f"<h1>sark-node report: {for_html(title)}</h1>",
        f"<p>{done} of {len(entries)} task(s) measured"
        + (f"; results from {for_html(created)}" if created else "")
        + ". Median = median of the process medians; * marks a result flagged unstable.</p>",
    ]
    parts += lead_parts(report)  # an LLM campaign leads with TTFT, TPOT, ITL, decode tok/s, ROUGE-L
    served = endpoint_tasks(report)  # model servers: no load, no processes; their own sections below
    generative = {e.model for e in entries if e.generation is not None}
    for k, matrix in enumerate(latency_matrices([e for e in entries if e.task_id not in served])):
        mine = sorted(
            (e for e in entries if e.model == matrix.model and e.task_id not in served),
            key=lambda e: (e.device == NO_DEVICE, _label(e, entries)),
        )
        what = "end-to-end time per request" if matrix.model in generative else "inference latency"
        parts += _model_parts(k, matrix, mine, what)
    parts += cost_html(report, rank)  # performance per dollar and per watt, with each price's source
    parts += generation_parts(report) + endpoint_parts(report) + telemetry_parts(report)
    ordered = sorted(entries, key=lambda e: (e.model, _label(e, entries)))
    parts += ["<h2>Run conditions</h2>", f'<div id="conditions">{_conditions_html(ordered)}</div>']
    parts += provenance_html(report)
    return _wrap(title, parts)


def _model_parts(k: int, matrix: LatencyMatrix, mine: Sequence[ReportEntry], what: str) -> list[str]:
    """One model's sections: its matrix, heatmap, distributions, resources, processes and stability."""
    model = visible(matrix.model)
    parts = [
        f"<h2>{for_html(matrix.model)}: device x compute unit, median {what} (ms)</h2>",
        f'<div id="matrix-{k}" class="matrix">{matrix_html(matrix)}</div>',
    ]
    if sum(1 for row in matrix.cells for c in row if c is not None and c.median_ms) >= 2:
        # colour compares medians: with fewer than two there is nothing to compare (the table says it)
        heatmap = drawn(
            f"heatmap of {model}",
            partial(heatmap_svg, matrix, f"h{k}", what),
            element_id=f"heatmap-{k}",
            css_class="heatmap",
        )
        parts.append(heatmap)
    if any(e.samples_ms for e in mine):
        parts += [
            "<h2>Latency distributions</h2>",
            drawn(
                f"latency distributions of {model}",
                partial(distributions_svg, mine, f"d{k}", what),
                element_id=f"distributions-{k}",
                css_class="distributions",
            ),
        ]
    if any(e.complete for e in mine):
        parts += [
            "<h2>Load time and peak memory</h2>",
            drawn(
                f"load time and peak memory of {model}",
                partial(resources_svg, mine, f"r{k}"),
                element_id=f"resources-{k}",
                css_class="resources",
            ),
            "<h2>Processes and stability</h2>",
            drawn(
                f"per-process medians of {model}",
                partial(processes_svg, mine, f"p{k}"),
                element_id=f"processes-{k}",
                css_class="processes",
            ),
        ]
    parts.append(f'<div id="stability-{k}">{_stability_html(mine)}</div>')
    return parts


def write_html_report(path: Path, report: CampaignReport) -> Path:
    """Write report.html for a campaign report to `path`; returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(report), encoding="utf-8")
    return path
