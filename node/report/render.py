"""report.html, a campaign report as people read it in a browser (matplotlib figures inline).

report.html is one self-contained file: inline CSS, figures as inline SVG drawn by matplotlib's
object API (no pyplot state, no backend switch), no script, font or image fetched from anywhere.
The data it shows is shaped by `scheduler.results.report`; this module only draws and writes it. Text is
HTML-escaped where each table is built, and drawn with mathtext off (a "$" a peer wrote stays text).
The terminal and Markdown views are `tables`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Final

from node.report.costreport import cost_html
from node.report.endreport import endpoint_parts, endpoint_tasks
from node.report.frontreport import front_parts
from node.report.genreport import generation_parts, lead_parts
from node.report.matrix import matrix_html
from node.report.peakreport import peaks_html
from node.report.pictures import drawn, not_drawn
from node.report.plots import (
    distributions_svg,
    heatmap_svg,
    processes_svg,
    resourced,
    resources_svg,
    row_label,
    sampled,
    spread,
)
from node.report.provenance import provenance_html
from node.report.rankreport import ranking_html
from node.report.roofline import Costs, roofline_parts
from node.report.telereport import telemetry_parts
from node.report.verifyreport import verification_html
from protocol import for_html, visible
from scheduler.results import (
    NO_DEVICE,
    CampaignReport,
    LatencyMatrix,
    ReportEntry,
    decimals_for,
    entries_of,
    latency_matrices,
    shown,
)

log = logging.getLogger(__name__)

_CSS: Final = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1200px;color:#222;
padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}h3{font-size:1rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.unstable{color:#b00020;font-weight:600}.stable{color:#1b5e20}.muted{color:#777}
figure{margin:.5rem 0}figure svg{max-width:100%;height:auto}
.model{display:flex;flex-wrap:wrap;gap:0 1.5rem;align-items:flex-start}.model>.matrix{flex:1 1 28rem}
.model>figure{flex:0 1 auto}
code{font-size:.8rem}.median{font-size:1rem}.nb{white-space:nowrap}
small.reason{display:inline-block;min-width:14rem;max-width:32rem;overflow-wrap:anywhere;text-align:left}
@media print{body{margin:0;max-width:none}h2{break-after:avoid}table,figure{break-inside:avoid}}
"""


def _fmt(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


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
            what, why = e.ending  # a refused figure's verdict, not "Complete"
            rows.append([for_html(row_label(e, entries)), "", "", for_html(what), for_html(why)])
            continue
        verdict = (
            '<span class="unstable">unstable</span>' if e.unstable else '<span class="stable">stable</span>'
        )
        rows.append(
            [
                for_html(row_label(e, entries)),
                "; ".join(shown(m, decimals_for(e.stats)) for m in e.process_medians_ms),
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
                for_html(row_label(e, entries)),
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


def render_html(report: CampaignReport, rank: str = "", costs: Costs | None = None) -> str:
    """report.html for a campaign report: one self-contained page, whatever the report holds (`rank`:
    the cost figure its performance per dollar and per watt table is ranked by; "" the first shown;
    `costs`: each model's FLOPs and bytes per inference by sha256, counted by the submitter, for the
    roofline section; None: no roofline, as from a results.json alone, which holds no count).

    Each picture is drawn or replaced by a note saying why (`pictures.drawn`); if the page itself
    cannot be built, the page says that instead, so a report.html is always written."""
    import matplotlib

    try:
        with matplotlib.rc_context({"text.parse_math": False}):  # a "$" a peer wrote is text, not mathtext
            return _page(report, rank, costs)
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


def _page(report: CampaignReport, rank: str, costs: Costs | None = None) -> str:
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
            key=lambda e: (e.device == NO_DEVICE, row_label(e, entries)),
        )
        what = "end-to-end time per request" if matrix.model in generative else "inference latency"
        parts += _model_parts(k, matrix, mine, what)
    parts += peaks_html(report)  # a peaks job's figures, one line per device x figure
    parts += verification_html(report)  # one agreed figure per class, its band, replicas and outlier
    parts += cost_html(report, rank)  # performance per dollar and per watt, with each price's source
    parts += roofline_parts(entries, costs)  # achieved FLOP/s per row against its unit's measured peaks
    parts += generation_parts(report) + front_parts(report) + ranking_html(report)
    parts += endpoint_parts(report) + telemetry_parts(report)
    ordered = sorted(entries, key=lambda e: (e.model, row_label(e, entries)))
    parts += ["<h2>Run conditions</h2>", f'<div id="conditions">{_conditions_html(ordered)}</div>']
    parts += provenance_html(report)
    return _wrap(title, parts)


def _model_parts(k: int, matrix: LatencyMatrix, mine: Sequence[ReportEntry], what: str) -> list[str]:
    """One model's sections: its matrix, heatmap, distributions, resources, processes and stability."""
    model = visible(matrix.model)
    heatmap = f'<p class="muted" id="heatmap-{k}">No heatmap: fewer than two medians to compare.</p>'
    if sum(1 for row in matrix.cells for c in row if c is not None and c.median_ms) >= 2:
        # colour compares medians: with fewer than two there is nothing to compare (the table says it)
        heatmap = drawn(
            f"heatmap of {model}",
            partial(heatmap_svg, matrix, f"h{k}", what),
            element_id=f"heatmap-{k}",
            css_class="heatmap",
        )
    parts = [  # the heatmap beside its table where the page is wide enough, under it where not
        f"<h2>{for_html(matrix.model)}: device x compute unit, median {what} (ms)</h2>",
        f'<div class="model"><div id="matrix-{k}" class="matrix">{matrix_html(matrix)}</div>{heatmap}</div>',
    ]
    if sampled(mine):
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
        parts += ["<h2>Load time and peak memory</h2>", _resources(k, model, mine)]
        parts += ["<h2>Processes and stability</h2>", _processes(k, model, mine)]
    parts.append(f'<div id="stability-{k}">{_stability_html(mine)}</div>')
    return parts


def _resources(k: int, model: str, mine: Sequence[ReportEntry]) -> str:
    """The load time and peak memory picture, or a line saying why a model's rows have none."""
    if resourced(mine):
        return drawn(
            f"load time and peak memory of {model}",
            partial(resources_svg, mine, f"r{k}"),
            element_id=f"resources-{k}",
            css_class="resources",
        )
    served = all(e.unit.startswith("Endpoint") for e in mine if e.complete)
    why = " (a model server loads its model in its own process, which the worker does not measure)"
    said = f"No load time or peak memory for these rows{why if served else ''}."
    return f'<p class="muted" id="resources-{k}">{said}</p>'


def _processes(k: int, model: str, mine: Sequence[ReportEntry]) -> str:
    """The per-process picture, or a line saying that no row had two processes to compare."""
    if spread(mine):
        return drawn(
            f"per-process medians of {model}",
            partial(processes_svg, mine, f"p{k}"),
            element_id=f"processes-{k}",
            css_class="processes",
        )
    said = "Each row was measured in one process: no spread between processes to draw."
    return f'<p class="muted" id="processes-{k}">{said}</p>'


def write_html_report(path: Path, report: CampaignReport, costs: Costs | None = None) -> Path:
    """Write report.html for a campaign report to `path` (`costs` as `render_html`); returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(report, costs=costs), encoding="utf-8")
    return path
