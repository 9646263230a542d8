"""What a campaign produced, presented: report.html, the Markdown report and the terminal tables.

The report's shaping (entries, matrices, the LLM figures, two campaigns compared) is the results
room's (`scheduler.results`, pure); this package only draws and lays out what it shaped, through the
output seams (HTML, Markdown, terminal). Every renderer takes the typed `CampaignReport` (or a typed
part of it), never a results.json dict, and validates nothing again
(tests/unit/repository/test_renderers_typed.py).

Modules:
    render     drawing report.html (a page that cannot be built says why)
    plots      report.html's pictures of one model's rows: heatmap, distributions, load and memory, processes
    pictures   the one seam every report picture passes: drawn, or a note naming it and the error
    tables     the terminal's rich tables (latency matrix, diffs) and the Markdown report, through the seams
    genreport  report.html's generation sections (TTFT and TPOT per device, quality) and the terminal's table
    frontreport a sweep's throughput-latency fronts: report.html's picture and every point; the points on
               each front in Markdown and the terminal
    rankreport the campaign's ranking of its fronts (rank:): report.html, Markdown, the terminal
    endreport  report.html's model-server sections: TTFT and TPOT against concurrency, vantage points
    telereport report.html's telemetry over time (latency, clock, temperature, power) and sustained windows
    stacked    stacked line panels on one time axis written as SVG by hand (the telemetry timelines)
    matrix     the device x unit matrix's cells: median with p90/p99/max and count, or the ending and why
    roofline   report.html's roofline per device: each row's achieved FLOP/s against its unit's measured peaks
    provenance report.html's provenance: each task's worker, signature, verification, class, claim
    costreport performance per dollar and per watt: report.html's section, Markdown, the terminal's table
    peakreport a peaks campaign's figures, device x figure: report.html's section, Markdown, the terminal
    bundles    a results folder's bundle read with limits and checked (`sark-node verify`)
    board      the static board of many verified campaigns (index.html, proof/), incremental, deterministic
    imports    other tools' files read with limits and kept on a board (`sark-node import`), unverified
    verifyreport one agreed figure per class (band, replicas, outlier): report.html's section, Markdown,
               the terminal's table after the matrix

Callers import the module they need (`from node.report.render import render_html`): the package root
imports nothing, so that a command that does not draw never loads matplotlib.
"""

from __future__ import annotations

__all__ = [
    "endreport",
    "frontreport",
    "genreport",
    "peakreport",
    "pictures",
    "plots",
    "rankreport",
    "render",
    "roofline",
    "stacked",
    "tables",
    "telereport",
    "verifyreport",
]
