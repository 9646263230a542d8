"""report.html's pictures of one model's rows: the heatmap, the latency distributions, load time and
peak memory, and the per-process medians (matplotlib's object API, drawn to SVG by `pictures`).

Each takes the typed entries (`scheduler.results.ReportEntry`) it draws and returns a `Picture`: the
SVG and how many readings a picture could not place. `render` decides which are drawn, and where.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from node.report.pictures import LEGIBLE, Picture, fits, inside, left_out, log_ticks, plottable, svg_of
from protocol import visible
from scheduler.results import LatencyMatrix, ReportEntry, device_label, shown

_READINGS = ("load_ms_median", "load_first_ms", "peak_load_ram_mb", "peak_inference_ram_mb")


def sampled(entries: Sequence[ReportEntry]) -> list[ReportEntry]:
    """The rows a distribution is drawn for: a figure that stands (never a refused one: an outlier's,
    a fallback's, a failed task's) with its samples."""
    return [e for e in entries if e.complete and e.samples_ms]


def resourced(entries: Sequence[ReportEntry]) -> list[ReportEntry]:
    """The rows load time and peak memory are drawn for: a figure that stands with any of them above 0
    (a model server loads its model in its own process: its row has none, 0 in results.csv)."""
    return [e for e in entries if e.complete and any((getattr(e, r) or 0.0) > 0.0 for r in _READINGS)]


def spread(entries: Sequence[ReportEntry]) -> list[ReportEntry]:
    """The rows a per-process plot is drawn for: a figure that stands, measured in two processes or more
    (one process has no spread between processes to draw)."""
    return [e for e in entries if e.complete and len(e.process_medians_ms) >= 2]


def row_label(entry: ReportEntry, entries: Sequence[ReportEntry]) -> str:
    return visible(f"{device_label(entry, entries)} · {entry.unit}")  # a label in a figure: no control


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def heatmap_svg(matrix: LatencyMatrix, salt: str, what: str = "inference latency") -> Picture:
    """The matrix as a heatmap: colour by median latency, each cell annotated (an asterisk if unstable);
    a median a picture cannot place is annotated but not coloured."""
    from matplotlib.colors import LogNorm, Normalize

    medians = [[c.median_ms if c and c.median_ms else None for c in row] for row in matrix.cells]
    values = [plottable(row)[0] for row in medians]
    finite = [v for row in values for v in row if not math.isnan(v)]
    fig = _figure(1.6 + 1.7 * len(matrix.columns), 1.6 + 0.45 * len(matrix.devices))  # room for the bar label
    ax = fig.add_subplot()
    low, high = min(finite, default=0.0), max(finite, default=1.0)
    # from the lowest median to the highest: from 0, two medians 10 % apart were coloured alike
    norm = LogNorm(low, high) if low > 0 and high / low > 10 else Normalize(low - 0.25 * (high - low), high)
    image = ax.imshow(values, cmap="YlOrRd", norm=norm, aspect="auto")
    ax.set_xticks(range(len(matrix.columns)), [visible(c) for c in matrix.columns], rotation=20, ha="right")
    ax.set_yticks(range(len(matrix.devices)), [visible(d) for d in matrix.devices])
    for i, row in enumerate(matrix.cells):
        for j, cell in enumerate(row):
            if cell is None:
                continue
            text = (  # the matrix's number, to the digits its spread supports (never "1.25e+04")
                f"{shown(cell.median_ms, cell.decimals)}{'*' if cell.unstable else ''}"
                if cell.median_ms
                else visible(cell.ending)
            )
            dark = cell.median_ms is not None and fits(cell.median_ms) and float(norm(cell.median_ms)) > 0.6
            colour = "white" if dark else "black"
            ax.text(j, i, text, ha="center", va="center", fontsize=LEGIBLE, color=colour)
    bar = fig.colorbar(image, ax=ax, label="median ms")
    if isinstance(norm, LogNorm):
        log_ticks(bar.ax.yaxis, decades=True)
    # over the whole figure: an axes title wider than its axes ran into the colour bar's label
    fig.suptitle(f"{visible(matrix.model)}: median {what} (ms; * unstable)", fontsize=LEGIBLE)
    return Picture(svg_of(fig, salt), left_out(sum(plottable(row)[1] for row in medians), "medians"))


def distributions_svg(entries: Sequence[ReportEntry], salt: str, what: str = "inference latency") -> Picture:
    """Latency distributions from the raw samples: a box plot and an ECDF per device and unit."""
    measured = sampled(entries)
    labels = [row_label(e, entries) for e in measured]
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
    log_ticks(box.xaxis)
    box.set_xlabel(f"{what} (ms, log)")
    box.set_title("distribution of every timed run", fontsize=LEGIBLE)
    for (samples, _), label in zip(kept, labels, strict=True):
        xs = sorted(samples)
        ecdf.step(xs, [(k + 1) / len(xs) for k in range(len(xs))], where="post", label=label)
    ecdf.set_xscale("log")
    log_ticks(ecdf.xaxis)
    ecdf.set_xlabel(f"{what} (ms, log)")
    ecdf.yaxis.set_label_position("right")  # on the left it sat between the two plots
    ecdf.yaxis.tick_right()
    ecdf.set_ylabel("share of runs at or below")
    ecdf.set_title("ECDF", fontsize=LEGIBLE)
    ecdf.legend(fontsize=LEGIBLE, loc="lower right")
    return Picture(svg_of(fig, salt), left_out(sum(n for _, n in kept), "samples", log=True))


def resources_svg(entries: Sequence[ReportEntry], salt: str) -> Picture:
    """Load time (median and first) and peak memory (load and inference) as bar charts."""
    done = resourced(entries)
    labels = [row_label(e, entries) for e in done]
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
        fig.legend(handles=bars, fontsize=LEGIBLE, loc=f"outside lower {corner}", ncol=2, frameon=False)
    load.set_yticks(list(ys), labels)
    load.invert_yaxis()
    load.set_title("model load time", fontsize=LEGIBLE)
    memory.set_title("peak memory of the whole measuring process (kernel high-water mark)", fontsize=LEGIBLE)
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
    done = spread(entries)
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
            f"{row_label(e, entries)} ({centre:.3g} ms)"
            if centre < 1000
            else f"{row_label(e, entries)} ({centre:,.0f} ms)"
        )
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(done)), labels)
    ax.invert_yaxis()
    ax.set_xlim(-1.15 * widest, 1.15 * widest)
    ax.set_xlabel("process median, % from the row's median of medians (in brackets); red: unstable")
    ax.set_title("per-process medians", fontsize=LEGIBLE)
    return Picture(svg_of(fig, salt), left_out(dropped, "process medians"))
