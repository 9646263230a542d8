"""report.html's roofline per device: each row's achieved FLOP/s against the unit's measured peaks.

What is drawn, per device (one picture, log-log): x is a model's arithmetic intensity (FLOPs / bytes per
inference, counted from its ONNX graph on the submitter: `drivers.files.graphcost`, in a child), y its
achieved GFLOP/s (FLOPs per inference / the row's median latency). The roof is the unit's measured peaks
from the worker's profile (`Calibration.peaks`, `sark-node info --bench`): a memory slope (the highest
of its read, write and copy bandwidths, named) and one compute ceiling per matmul precision measured.
A device whose profile has no peaks for the row's unit is said in a line, not drawn; a model without a
count (not ONNX, or its graph could not be read) is listed with why.

The peaks are the worker's word, checked as any calibration claim (`scheduler.verification.claims`): a
row whose peer is `claim_unverified` (its row's Claim) draws no roof, and the line says why. The count is
the submitter's own, from the pinned bytes; a row's latency is the submitter's derived figure. A point
above its roof says one of them is wrong.

Labels sit in a column right of the axes, each joined to its point by a line, spread so that no two
overlap (`spread`): points of near intensity and speed never pile their names on one another.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, Protocol

from node.report.pictures import Picture, drawn, fits, svg_of
from protocol import BANDWIDTHS, MATMUL_PRECISIONS, ComputeUnit, DeviceProfile, Peak, for_html, visible
from scheduler.results import ReportEntry, device_label

CUDA_UNITS: Final = frozenset({ComputeUnit.GPU_ONNX, ComputeUnit.GPU_TORCH, ComputeUnit.GPU_LLAMACPP})
"""The units that run on a CUDA GPU, whose peaks `sark-node info --bench` names "cuda:<i> <name>"."""
LABEL_PT: Final = 8.0
"""The labels' font size; they are spread `LABEL_PT * 1.5` points apart."""


class Counted(Protocol):
    """A model's cost per inference as the report reads it (`drivers.files.graphcost.GraphCost`)."""

    @property
    def flops(self) -> float: ...
    @property
    def bytes(self) -> float: ...
    @property
    def uncounted(self) -> tuple[str, ...]: ...
    @property
    def assumed(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Costs:
    """Each model's cost per inference by its sha256, or why it has none (the submitter's count)."""

    by_model: tuple[tuple[str, Counted | str], ...] = ()

    @classmethod
    def of(cls, found: Mapping[str, Counted | str]) -> Costs:
        """The counts as `count_costs` gives them, by sha256."""
        return cls(tuple(sorted(found.items(), key=lambda item: item[0])))

    def get(self, sha256: str) -> Counted | str | None:
        """The model's cost, the reason it has none, or None when it was not counted at all."""
        return next((cost for sha, cost in self.by_model if sha == sha256), None)


@dataclass(frozen=True)
class Roof:
    """One unit's roof: its memory slope and compute ceilings (GFLOP/s; GB/s)."""

    unit: str
    bandwidth: float
    access: str
    ceilings: tuple[tuple[str, float], ...]

    def attainable(self, intensity: float, precision: str = "fp32") -> float | None:
        """The roof's GFLOP/s at `intensity` for `precision` (None when that ceiling was not measured)."""
        ceiling = dict(self.ceilings).get(precision)
        return None if ceiling is None else min(ceiling, self.bandwidth * intensity)


@dataclass(frozen=True)
class Point:
    """One row on its device's roofline."""

    label: str
    intensity: float  # FLOPs / byte
    gflops: float  # achieved GFLOP/s
    gbs: float  # achieved GB/s
    roof: Roof | None


def roof_of(peaks: Sequence[Peak], unit: str) -> Roof | None:
    """The roof of `unit` ("CPU", "cuda:0 ...") from measured peaks; None without a bandwidth or a ceiling."""
    mine = [p for p in peaks if p.unit == unit and p.available and p.per_s > 0 and math.isfinite(p.per_s)]
    memory = [p for p in mine if p.precision in BANDWIDTHS]
    ceilings = tuple((p.precision, p.per_s) for p in mine if p.precision in MATMUL_PRECISIONS)
    if not memory or not ceilings:
        return None
    best = max(memory, key=lambda p: p.per_s)
    return Roof(unit, best.per_s, best.precision, ceilings)


def peak_unit(row_unit: str, profile: DeviceProfile | None) -> str | None:
    """The peaks' unit a row ran on: "CPU" for a CPU row, the first CUDA GPU for a CUDA row, else None."""
    cal = profile.calibration if profile is not None else None
    if cal is None:
        return None
    if row_unit.startswith("CPU"):
        return "CPU"
    if row_unit in CUDA_UNITS:
        return next((p.unit for p in cal.peaks if p.unit.startswith("cuda:")), None)
    return None


def point_of(entry: ReportEntry, cost: Counted, label: str) -> Point | None:
    """A completed row's point (achieved GFLOP/s and GB/s from its median), None without a median."""
    if not entry.complete or entry.median_ms is None or not entry.median_ms > 0:
        return None
    if not (cost.flops > 0 and cost.bytes > 0):
        return None
    seconds = entry.median_ms / 1e3
    unit = peak_unit(entry.unit, entry.device_profile)
    cal = entry.device_profile.calibration if entry.device_profile is not None else None
    trusted = unit is not None and cal is not None and not entry.claim  # a refused claim draws no roof
    roof = roof_of(cal.peaks, unit) if trusted and unit is not None and cal is not None else None
    gflops, gbs = cost.flops / seconds / 1e9, cost.bytes / seconds / 1e9
    point = Point(label, cost.flops / cost.bytes, gflops, gbs, roof)
    return point if all(fits(v) for v in (point.intensity, point.gflops, point.gbs)) else None


def spread(positions: Sequence[float], gap: float, lo: float = 0.0, hi: float = 1.0) -> list[float]:
    """Label positions as near `positions` as they can be, in the same order, at least `gap` apart and
    within [lo, hi] where there is room (where there is not, `gap` apart from `lo` up)."""
    order = sorted(range(len(positions)), key=lambda i: positions[i])
    placed = [min(max(positions[i], lo), hi) for i in order]
    for j in range(1, len(placed)):
        placed[j] = max(placed[j], placed[j - 1] + gap)
    if placed and placed[-1] > hi:
        placed[-1] = hi
        for j in range(len(placed) - 2, -1, -1):
            placed[j] = min(placed[j], placed[j + 1] - gap)
        if placed[0] < lo:
            placed = [lo + j * gap for j in range(len(placed))]
    out = [0.0] * len(positions)
    for j, i in enumerate(order):
        out[i] = placed[j]
    return out


def roofline_parts(entries: Sequence[ReportEntry], costs: Costs | None) -> list[str]:
    """The roofline section: one picture and one table per device with a counted row (none without one)."""
    if costs is None:
        return []
    rows = [e for e in entries if e.complete and costs.get(e.model_sha256) is not None]
    if not rows:  # no ONNX model measured (an LLM's, a model server's campaign): no section
        return []
    parts = ["<h2>Roofline</h2>", f"<p>{for_html(_HOW)}</p>"]
    devices = sorted({device_label(e, entries) for e in rows})
    for k, device in enumerate(devices):
        mine = [e for e in rows if device_label(e, entries) == device]
        parts += _device_parts(k, device, mine, costs)
    return parts


_HOW: Final = (
    "FLOPs and bytes per inference are counted from each ONNX graph on the submitter (shape inference; "
    "MatMul, Gemm and Conv nodes; bytes: the weights once plus those nodes' activations). Achieved = "
    "count / the row's median latency. The roof is the worker's measured peaks (sark-node info --bench): "
    "its best memory bandwidth, and one ceiling per matmul precision; % of roof is against fp32."
)


def _device_parts(k: int, device: str, mine: Sequence[ReportEntry], costs: Costs) -> list[str]:
    points: list[Point] = []
    rows: list[list[str]] = []
    for e in sorted(mine, key=lambda e: (e.unit, e.model)):
        cost = costs.get(e.model_sha256)
        if cost is None:
            continue
        label = visible(f"{e.model} · {e.unit}")
        if isinstance(cost, str):
            rows.append([for_html(label), f"not counted: {for_html(cost)}", *[""] * 7])
            continue
        if not (cost.flops > 0 and cost.bytes > 0):
            rows.append([for_html(label), "no MatMul, Gemm or Conv counted in its graph", *[""] * 7])
            continue
        point = point_of(e, cost, label)
        if point is None:
            rows.append([for_html(label), "no median to divide by", *[""] * 7])
            continue
        points.append(point)
        rows.append(_row(point, cost, e))
    drawable = [p for p in points if p.roof is not None]
    title = f"<h3>{for_html(visible(device))}</h3>"
    if drawable:
        picture = drawn(
            f"roofline of {visible(device)}",
            partial(roofline_svg, drawable, f"rl{k}"),
            element_id=f"roofline-{k}",
            css_class="roofline",
        )
    else:
        claims = sorted({e.claim for e in mine if e.claim})
        why = (
            f"its advertised figures were not believed ({'; '.join(claims)})"
            if claims
            else "no measured peaks for its units in its profile (the worker ran no sark-node info --bench)"
        )
        said = f"No roof drawn for {visible(device)}: {why}." if points else "No point to draw."
        picture = f'<p class="muted" id="roofline-{k}">{for_html(said)}</p>'
    head = ["model · unit", "GFLOP / inference", "MB / inference", "FLOP / byte", "median ms",
            "achieved GFLOP/s", "achieved GB/s", "fp32 roof GFLOP/s", "% of roof"]  # fmt: skip
    return [title, picture, f'<div id="roofline-table-{k}">{_table(head, rows)}</div>']


def _row(point: Point, cost: Counted, entry: ReportEntry) -> list[str]:
    roof = point.roof.attainable(point.intensity) if point.roof is not None else None
    share = f"{100 * point.gflops / roof:.1f}" if roof else ""
    notes = []
    if cost.assumed:
        notes.append(f"taken as 1: {', '.join(cost.assumed)}")
    if cost.uncounted:
        more = f" and {len(cost.uncounted) - 6} more" if len(cost.uncounted) > 6 else ""
        notes.append(f"ops left out of the count: {', '.join(cost.uncounted[:6])}{more}")
    said = f'<br><small class="muted">{for_html("; ".join(notes))}</small>' if notes else ""
    label = for_html(point.label) + said
    return [label, f"{cost.flops / 1e9:.4g}", f"{cost.bytes / 1e6:.4g}", f"{point.intensity:.3g}",
            f"{entry.median_ms:.4g}", f"{point.gflops:.4g}", f"{point.gbs:.4g}",
            "" if roof is None else f"{roof:.4g}", share]  # fmt: skip


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    th = "".join(f"<th>{for_html(h)}</th>" for h in head)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{c}</td>' if i else f"<td>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


_COLOURS: Final = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
_STYLES: Final[dict[str, Any]] = {
    "fp32": "-", "tf32": (0, (5, 1)), "fp16": "--", "bf16": "-.", "int8": ":", "fp8": (0, (1, 3))
}  # fmt: skip


def roofline_svg(points: Sequence[Point], salt: str) -> Picture:
    """The roofline picture (`roofline_figure`) as inline SVG."""
    return Picture(svg_of(roofline_figure(points), salt))


def roofline_figure(points: Sequence[Point]) -> Any:
    """The roofs of the points' units and the points, labelled in a column right of the axes."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    roofs = list({p.roof.unit: p.roof for p in points if p.roof is not None}.values())
    xs = [p.intensity for p in points] + [c / r.bandwidth for r in roofs for _, c in r.ceilings]
    ys = [p.gflops for p in points] + [c for r in roofs for _, c in r.ceilings]
    x_lo, x_hi = min(xs) / 10, max(xs) * 10
    y_lo, y_hi = min(ys) / 10, max(ys) * 4
    height = max(3.6, 0.3 * len(points) + 1.2)
    fig = Figure(figsize=(9.0, height), layout="constrained")
    ax = fig.add_subplot()
    ax.set(xscale="log", yscale="log", xlim=(x_lo, x_hi), ylim=(y_lo, y_hi))
    for r, roof in enumerate(roofs):
        _draw_roof(ax, roof, _COLOURS[r % len(_COLOURS)], x_lo, x_hi)
    for p in points:
        colour = _COLOURS[roofs.index(p.roof) % len(_COLOURS)] if p.roof in roofs else "#444"
        ax.plot([p.intensity], [p.gflops], "o", color=colour, markersize=5)
    _labels(fig, ax, points, (y_lo, y_hi))
    for axis in (ax.xaxis, ax.yaxis):  # plain numbers: report.html draws with mathtext off
        axis.set_major_locator(LogLocator(subs=(1.0,)))
        axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("GFLOP/s")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=7, frameon=False)
    return fig


def _draw_roof(ax: Any, roof: Roof, colour: str, x_lo: float, x_hi: float) -> None:
    top = max(c for _, c in roof.ceilings)
    ridge = top / roof.bandwidth
    ax.plot([x_lo, ridge], [roof.bandwidth * x_lo, top], color=colour, lw=1.2,
            label=f"{visible(roof.unit)}: {roof.access} {roof.bandwidth:.3g} GB/s")  # fmt: skip
    for precision, ceiling in roof.ceilings:
        start = ceiling / roof.bandwidth
        style, figure = _STYLES.get(precision, "-"), "GOPS" if precision == "int8" else "GFLOPS"
        ax.plot([start, x_hi], [ceiling, ceiling], color=colour, lw=1.0, linestyle=style,
                label=f"{visible(roof.unit)}: {precision} {ceiling:.4g} {figure}")  # fmt: skip


def _labels(fig: Any, ax: Any, points: Sequence[Point], ylim: tuple[float, float]) -> None:
    """Each point's name in a column right of the axes, spread (`spread`) by the axes' height as laid
    out (the labels then only narrow it), joined to its point by a line."""
    lo, hi = (math.log10(v) for v in ylim)
    fractions = [(math.log10(p.gflops) - lo) / (hi - lo) for p in points]
    fig.draw_without_rendering()
    gap = LABEL_PT * 1.5 * fig.dpi / 72 / ax.get_window_extent().height
    for p, y in zip(points, spread(fractions, gap), strict=True):
        ax.annotate(p.label, xy=(p.intensity, p.gflops), xycoords="data", xytext=(1.03, y),
                    textcoords="axes fraction", fontsize=LABEL_PT, va="center",
                    arrowprops={"arrowstyle": "-", "color": "#999", "lw": 0.6})  # fmt: skip


__all__ = ["Costs", "Counted", "Point", "Roof", "point_of", "roof_of", "roofline_figure", "roofline_parts",
           "roofline_svg", "spread"]  # fmt: skip
