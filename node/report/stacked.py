"""Stacked line panels on one time axis, written as SVG by hand: report.html's telemetry timelines.

A timeline is five small panels (latency, clock, temperature, power, load) of a few lines each; the
page draws up to `telereport.MAX_FIGURES` of them. matplotlib laid each one out with 10 axes of tick
objects and wrote it through its SVG backend: 0.2-0.3 CPU-s a timeline, most of a `submit`'s report
(benchmarks/report_render.py measures the two side by side). Here a panel is a frame, its ticks at
1, 2, 2.5 or 5 times a power of ten (`ticks`), and a polyline per line, broken where a value is NaN
(a reading the picture cannot place, counted by the caller): the same picture in a few milliseconds.

Every text is escaped (`for_html`), every coordinate finite: a value the caller passes is finite
and within `pictures.PLOT_LIMIT`, or NaN.
"""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from protocol import for_html

WIDTH: Final = 792.0
"""The page's width in points (11 in), as report.html has always drawn a timeline."""
HEIGHT: Final = 504.0
"""Its height (7 in)."""
LEFT, RIGHT, TOP, BOTTOM, GAP = 0.075, 0.985, 0.93, 0.07, 0.25
"""The panels' box as fractions of the page (from the bottom, as matplotlib counts) and the gap
between two panels as a fraction of a panel's height."""
FONT: Final = 10.0
"""Every text's size in points: tick labels, axis labels, legends and the title."""
COLOURS: Final = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
"""The lines' colours in turn, in each panel (matplotlib's first eight, as the pictures had)."""
TICKS: Final = 6
"""About how many ticks an axis gets (the step of 1, 2, 2.5 or 5 times a power of ten nearest to it)."""
LEGEND_COLUMNS: Final = 3
TITLE_CHARS, TITLE_LINES = 120, 3
"""A title wraps at about the page's width in characters, on at most three lines above the panels."""


@dataclass(frozen=True)
class Line:
    """One line of a panel: its name (the legend's) and its y values at the panel's x values (NaN: a
    gap); `step` draws it as a step holding each value to the next x (a window's median)."""

    name: str
    x: Sequence[float]
    y: Sequence[float]
    step: bool = False


@dataclass
class Panel:
    """One panel: its y label, its lines (the caller adds them as it reads the telemetry), whether
    they get a legend, and the note it shows in their place when it has none ("no power reading on
    this device")."""

    label: str
    lines: list[Line] = field(default_factory=list)
    legend: bool = True
    empty: str = ""


def ticks(low: float, high: float, most: int = TICKS + 2) -> tuple[float, float, list[float]]:
    """An axis for values from `low` to `high`: its limits (5 % wider, as matplotlib's margins) and
    its ticks inside them, at a step of 1, 2, 2.5 or 5 times a power of ten: the step whose count is
    nearest `TICKS` with no more than `most` (a short axis has room for fewer labels)."""
    if high < low:
        low, high = high, low
    span = high - low
    if span <= max(abs(low), abs(high)) * 1e-9 or span < 1e-200:  # one value: an axis around it
        pad = abs(high) * 0.05 or 0.5
        low, high = low - pad, high + pad
        span = high - low
    low, high = low - span * 0.05, high + span * 0.05
    power = 10.0 ** math.floor(math.log10((high - low) / TICKS))

    def at(step: float) -> list[float]:
        first = math.ceil(low / step)
        return [k * step for k in range(first, math.floor(high / step) + 1)]

    steps = [k * power * scale for scale in (0.1, 1.0, 10.0, 100.0) for k in (1.0, 2.0, 2.5, 5.0)]
    fitting = [at(step) for step in steps if (high - low) / step <= most + 1 and len(at(step)) <= most]
    return low, high, min(fitting, key=lambda values: abs(len(values) - TICKS))


def tick_label(value: float, values: Sequence[float]) -> str:
    """A tick's label with as many decimals as its axis's step needs ("2.5", "1000", "0.02")."""
    step = values[1] - values[0] if len(values) > 1 else abs(value) or 1.0
    if max(abs(v) for v in values) >= 1e6:
        return f"{value:.3g}"
    decimals = max(0, -math.floor(math.log10(step) + 1e-9) + (1 if f"{step:g}".endswith("25") else 0))
    text = f"{value:.{decimals}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text  # never "-0.0"


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


def _runs(points: list[tuple[float, float]]) -> list[list[tuple[float, float]]]:
    """The stretches of a line between its gaps (a point with a NaN coordinate ends one)."""
    out: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if math.isfinite(x) and math.isfinite(y):
            out[-1].append((x, y))
        elif out[-1]:
            out.append([])
    return [run for run in out if run]


def _points(line: Line) -> list[tuple[float, float]]:
    pairs = list(zip(line.x, line.y, strict=False))
    if not line.step:
        return pairs
    held: list[tuple[float, float]] = []
    for (x, y), (nx, _) in zip(pairs, [*pairs[1:], (math.nan, math.nan)], strict=True):
        held.append((x, y))
        if math.isfinite(nx):
            held.append((nx, y))
    return held


def _along(points: list[tuple[float, float]], between: int = 8) -> list[tuple[float, float]]:
    """A line's points and `between` more on each of its segments (where a legend would hide it)."""
    out = []
    for (x, y), (nx, ny) in itertools.pairwise(points):
        out += [(x + (nx - x) * k / between, y + (ny - y) * k / between) for k in range(between)]
    return [*out, *points[-1:]]


def _text(x: float, y: float, text: str, anchor: str = "start", extra: str = "") -> str:
    return (
        f'<text x="{x:.2f}" y="{y:.2f}" text-anchor="{anchor}" font-size="{FONT:g}"{extra}>'
        f"{for_html(text)}</text>"
    )


class _Frame:
    """One panel's box on the page and its axes' mapping from values to points."""

    def __init__(self, top: float, height: float, x: tuple[float, float], y: tuple[float, float]) -> None:
        self.left, self.right = LEFT * WIDTH, RIGHT * WIDTH
        self.top, self.bottom = top, top + height
        self.x, self.y = x, y

    def px(self, value: float) -> float:
        return self.left + (value - self.x[0]) / (self.x[1] - self.x[0]) * (self.right - self.left)

    def py(self, value: float) -> float:
        return self.bottom - (value - self.y[0]) / (self.y[1] - self.y[0]) * (self.bottom - self.top)


def _panel(frame: _Frame, panel: Panel, yticks: list[float], xticks: list[float], last: bool) -> list[str]:
    f = frame
    out = [f'<rect x="{f.left:.2f}" y="{f.top:.2f}" width="{f.right - f.left:.2f}" '
           f'height="{f.bottom - f.top:.2f}" fill="none" stroke="#000" stroke-width="0.8"/>']  # fmt: skip
    for value in yticks:
        y = f.py(value)
        out.append(f'<path d="M{f.left:.2f} {y:.2f}h-3.5" stroke="#000" stroke-width="0.8"/>')
        out.append(_text(f.left - 5.5, y + FONT * 0.35, tick_label(value, yticks), "end", ' class="tick"'))
    for value in xticks:
        x = f.px(value)
        out.append(f'<path d="M{x:.2f} {f.bottom:.2f}v3.5" stroke="#000" stroke-width="0.8"/>')
        if last:
            out.append(_text(x, f.bottom + 5.5 + FONT, tick_label(value, xticks), "middle", ' class="tick"'))
    middle = (f.top + f.bottom) / 2
    turned = f' transform="rotate(-90 {f.left - 44.0:.2f} {middle:.2f})"'
    out.append(_text(f.left - 44.0, middle, panel.label, "middle", turned))
    for k, line in enumerate(panel.lines):
        colour = COLOURS[k % len(COLOURS)]
        for run in _runs(_points(line)):
            coords = " ".join(f"{f.px(x):.2f},{f.py(y):.2f}" for x, y in run)
            if len(run) == 1:  # a lone reading (one between two gaps, or the only one): a dot
                out.append(
                    f'<circle cx="{f.px(run[0][0]):.2f}" cy="{f.py(run[0][1]):.2f}" r="2" fill="{colour}"/>'
                )
            else:
                out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
    if not panel.lines and panel.empty:
        out.append(_text((f.left + f.right) / 2, middle + FONT * 0.35, panel.empty, "middle"))
    if panel.legend and panel.lines:
        out += _legend(f, panel.lines)
    return out


def _legend(f: _Frame, lines: list[Line]) -> list[str]:
    """The lines' names in rows of `LEGEND_COLUMNS`, on a white box at one of nine places in the panel
    (its corners, the middles of its sides, its centre): the first that hides the least of the lines
    (top right where none hides any)."""
    columns = min(LEGEND_COLUMNS, len(lines))
    rows = math.ceil(len(lines) / columns)
    widths = [max(len(lines[k].name) for k in range(c, len(lines), columns)) * FONT * 0.6 + 28
              for c in range(columns)]  # fmt: skip
    width, height = sum(widths) + 6, rows * (FONT + 4) + 6
    xs = (f.right - width - 4, f.left + 4, (f.left + f.right - width) / 2)
    ys = (f.top + 4, (f.top + f.bottom - height) / 2, f.bottom - height - 4)
    corners = [(x, y) for y in ys for x in xs]  # top right first, as matplotlib's "best" tries
    drawn = [(f.px(x), f.py(y)) for line in lines for x, y in _along(_points(line))]

    def covered(corner: tuple[float, float]) -> int:
        x, y = corner
        return sum(x <= px <= x + width and y <= py <= y + height for px, py in drawn)

    x0, y0 = min(corners, key=covered)  # the first place that hides the least of the lines
    out = [f'<rect x="{x0:.2f}" y="{y0:.2f}" width="{width:.2f}" height="{height:.2f}" fill="#fff" '
           f'fill-opacity="0.8" stroke="#ccc" stroke-width="0.8"/>']  # fmt: skip
    for k, line in enumerate(lines):
        column, row = k % columns, k // columns
        x = x0 + 4 + sum(widths[:column])
        y = y0 + 3 + row * (FONT + 4) + FONT * 0.85
        colour = COLOURS[k % len(COLOURS)]
        out.append(f'<path d="M{x:.2f} {y - FONT * 0.35:.2f}h18" stroke="{colour}" stroke-width="1.5"/>')
        out.append(_text(x + 22, y, line.name))
    return out


def stacked_svg(title: str, xlabel: str, panels: list[Panel]) -> str:
    """The panels stacked on one x axis (each line's x values, all panels' range) as inline SVG,
    `WIDTH` x `HEIGHT` points, the title above and `xlabel` below."""
    xs = _finite([x for p in panels for line in p.lines for x in line.x])
    x_low, x_high, xticks = ticks(min(xs, default=0.0), max(xs, default=1.0))
    inner = (TOP - BOTTOM) * HEIGHT
    height = inner / (len(panels) + GAP * (len(panels) - 1))
    room = max(2, int(height / (FONT * 1.6)))  # tick labels a panel holds apart
    body = []
    for k, panel in enumerate(panels):
        ys = _finite([y for line in panel.lines for y in line.y])
        y_low, y_high, yticks = ticks(min(ys, default=0.0), max(ys, default=1.0), most=room)
        top = (1 - TOP) * HEIGHT + k * height * (1 + GAP)
        frame = _Frame(top, height, (x_low, x_high), (y_low, y_high))
        body += _panel(frame, panel, yticks, xticks, last=k == len(panels) - 1)
    centre = WIDTH * (LEFT + RIGHT) / 2
    said = textwrap.wrap(title, TITLE_CHARS)[:TITLE_LINES] or [""]
    heading = "".join(
        _text(centre, (1 - TOP) * HEIGHT - 8 - (len(said) - 1 - k) * (FONT + 2), line, "middle")
        for k, line in enumerate(said)
    )
    below = _text(centre, HEIGHT - 6, xlabel, "middle")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH:g}pt" height="{HEIGHT:g}pt" '
        f'viewBox="0 0 {WIDTH:g} {HEIGHT:g}" font-family="DejaVu Sans, sans-serif">'
        f'<rect width="{WIDTH:g}" height="{HEIGHT:g}" fill="#fff"/>{heading}{"".join(body)}{below}</svg>'
    )
