"""report.html's hand-written stacked panels (`node.report.stacked`): the axes' ticks, the lines'
gaps, a lone reading, the legend's place, and every text escaped."""

from __future__ import annotations

import math
import re

import pytest

from node.report.stacked import Line, Panel, stacked_svg, tick_label, ticks


@pytest.mark.parametrize(
    ("low", "high", "want"),
    [
        (0.1, 2.8, [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]),
        (0.0, 1.0, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (2600.0, 2600.0, [2500.0, 2550.0, 2600.0, 2650.0, 2700.0]),  # one value: an axis around it
        (-1e15, 1e15, [-1e15, -5e14, 0.0, 5e14, 1e15]),
    ],
)
def test_ticks_are_round_steps_inside_a_slightly_wider_axis(
    low: float, high: float, want: list[float]
) -> None:
    lo, hi, values = ticks(low, high)
    assert lo < low
    assert hi > high
    assert values == pytest.approx(want)
    assert all(lo <= v <= hi for v in values)


@pytest.mark.parametrize(("low", "high"), [(0.0, 5e-324), (0.0, 0.0), (1e-300, 2e-300), (-3.0, -3.0)])
def test_an_axis_of_tiny_or_no_span_still_has_ticks(low: float, high: float) -> None:
    lo, hi, values = ticks(low, high)
    assert math.isfinite(lo)
    assert math.isfinite(hi)
    assert lo < hi
    assert 3 <= len(values) <= 9


def test_tick_labels_carry_the_decimals_their_step_needs() -> None:
    assert [tick_label(v, [0.0, 0.25, 0.5]) for v in (0.0, 0.25, 0.5)] == ["0.00", "0.25", "0.50"]
    assert [tick_label(v, [2500.0, 2550.0]) for v in (2500.0, 2550.0)] == ["2500", "2550"]
    assert tick_label(0.6000000000000001, [0.0, 0.2, 0.4, 0.6]) == "0.6"
    assert tick_label(-0.0, [-0.2, 0.0, 0.2]) == "0.0"
    assert tick_label(-1e-17, [-0.2, 0.0, 0.2]) == "0.0"
    assert tick_label(5e14, [0.0, 5e14, 1e15]) == "5e+14"


def _page(*lines: Line, empty: str = "") -> str:
    return stacked_svg("t", "x", [Panel("y", list(lines), empty=empty)])


def test_a_gap_breaks_a_line_and_a_lone_reading_is_a_dot() -> None:
    nan = math.nan
    page = _page(Line("a", [0, 1, 2, 3, 4, 5], [1.0, 2.0, nan, 3.0, nan, 4.0]))
    assert page.count("<polyline") == 1  # 0-1; 3 and 5 stand alone between gaps
    assert page.count("<circle") == 2
    assert "nan" not in page.lower()


def test_a_step_line_holds_each_value_to_the_next_x() -> None:
    page = _page(Line("m", [0.0, 1.0, 2.0], [5.0, 7.0, 7.0], step=True))
    (points,) = re.findall(r'<polyline points="([^"]+)"', page)
    pairs = [tuple(map(float, p.split(","))) for p in points.split()]
    assert len(pairs) == 5  # (0,5) (1,5) (1,7) (2,7) (2,7)
    assert pairs[0][1] == pairs[1][1]
    assert pairs[1][0] == pairs[2][0]


def test_the_legend_goes_where_it_hides_the_least_of_the_lines() -> None:
    high = Line("high", [0.0, 10.0], [10.0, 10.0])  # along the panel's top: the top corners hide it
    low = Line("low", [0.0, 10.0], [0.0, 0.0])
    page = _page(high, low)
    box = re.search(
        r'<rect x="([\d.]+)" y="([\d.]+)" width="[\d.]+" height="[\d.]+" fill="#fff" fill-opacity', page
    )
    frame = re.search(r'<rect x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)" fill="none"', page)
    assert box is not None
    assert frame is not None
    top, height = float(frame[1]), float(frame[2])
    assert top + height * 0.2 < float(box[2]) < top + height * 0.8  # the middle, between the two lines


def test_every_text_is_escaped_and_a_panel_without_lines_says_why() -> None:
    page = stacked_svg("<b>&", "x <s>", [Panel("y<", [], empty="no <temp> reading")])
    assert "<b>" not in page
    assert "<s>" not in page
    assert "&lt;b&gt;&amp;" in page
    assert "no &lt;temp&gt; reading" in page
    assert "<polyline" not in page
