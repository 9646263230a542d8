"""report.html's pictures: the one seam every plot passes, so that no stored value can stop the report.

`drawn(name, draw, ...)` is the seam: it calls `draw` (a function that builds one matplotlib figure and
returns it as inline SVG, `svg_of`) and wraps the picture in its `<figure>`; when drawing raises,
whatever the cause (matplotlib overflows on a range of 2e308, an axis limit that is NaN, a bug), the
same `<figure>` holds a note instead naming the picture and the error, and the rest of the page is
drawn as usual. Every plot of `render`, `genreport`, `endreport` and `telereport` goes through it.

Cheap robustness before the seam: `plottable` and `inside` leave out values matplotlib cannot lay out
(not finite, or beyond `PLOT_LIMIT`), and the picture's caption says how many (`left_out`). A
verified result never carries such values (the submitter's checks refuse them), but a report is
also drawn from stored campaigns and results.json files, so the pictures never rely on it.
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Callable, Iterable
from typing import Any, Final, NamedTuple

from protocol import for_html

log = logging.getLogger(__name__)

PLOT_LIMIT: Final = 1e15
"""Largest magnitude a picture draws: every figure a report shows (ms, MHz, °C, W, MiB, tokens/s) is
far inside it, and matplotlib lays out axes up to it without overflowing (at 1e308 it cannot)."""
LEGIBLE: Final = 10
"""The smallest font (points) a picture writes: titles, legends and cell labels (legends at 7 were
unreadable); ticks and axis labels keep matplotlib's 10."""
NOTE_CHARS: Final = 300
"""An error's message is cut to this many characters in a note (some quote the data they choked on)."""


class Picture(NamedTuple):
    """One drawn picture: inline SVG, and a caption saying what it left out ("" when nothing)."""

    svg: str
    caption: str = ""


def svg_of(figure: Any, salt: str, *, crop: bool = True) -> str:
    """A matplotlib figure as inline SVG, its ids salted so that several figures share one page.

    `crop` trims the page to what is drawn (`bbox_inches="tight"`), which costs matplotlib a whole
    layout pass before the drawing; a figure laid out by fixed margins (`telereport.MARGINS`) is drawn
    as it is."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        figure.savefig(buffer, format="svg", bbox_inches="tight" if crop else None)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def not_drawn(name: str, exc: BaseException) -> str:
    """Why a picture is missing, as the report says it: the picture's name and the error."""
    message = str(exc)
    if len(message) > NOTE_CHARS:
        message = message[:NOTE_CHARS] + "…"
    why = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return f"{name}: not drawn ({why})"


def drawn(name: str, draw: Callable[[], Picture], *, element_id: str, css_class: str) -> str:
    """A `<figure>` holding the picture `draw` returns, or, if drawing raises, a note saying which
    picture is missing and why.

    Args:
        name: the picture as a reader knows it ("telemetry of vm-0 · CPU (ONNX)").
        draw: builds the picture (matplotlib's object API, `svg_of`).
        element_id: the figure's HTML id (kept for a note, so links and tests find either).
        css_class: the figure's HTML class; a note adds "not-drawn".
    """
    try:
        svg, caption = draw()
    except Exception as exc:  # the renderer's boundary: no stored value may stop the report
        note = not_drawn(name, exc)
        log.warning("report.html: %s", note)
        return (
            f'<figure id="{element_id}" class="{css_class} not-drawn">'
            f'<p class="note">{for_html(note)}</p></figure>'
        )
    below = f"<figcaption>{for_html(caption)}</figcaption>" if caption else ""
    return f'<figure id="{element_id}" class="{css_class}">{svg}{below}</figure>'


def fits(value: float | None) -> bool:
    """Whether a picture can place the value: finite and within `PLOT_LIMIT`."""
    return value is not None and math.isfinite(value) and abs(value) <= PLOT_LIMIT


def plottable(values: Iterable[float | None]) -> tuple[list[float], int]:
    """The values for a line, each one a picture cannot place as NaN (matplotlib leaves a gap), and
    how many were out of range (a missing reading, None, is a gap too but is not counted)."""
    out: list[float] = []
    bad = 0
    for v in values:
        ok = fits(v)
        bad += v is not None and not ok
        out.append(v if ok and v is not None else math.nan)
    return out, bad


def inside(values: Iterable[float], *, log: bool = False) -> tuple[list[float], int]:
    """The values a picture can place (for box plots, ECDFs and limits), and how many were left out;
    on a `log` axis zero and negative values have no place either."""
    given = list(values)
    kept = [v for v in given if fits(v) and (v > 0 or not log)]
    return kept, len(given) - len(kept)


def left_out(count: int, what: str = "values", *, log: bool = False) -> str:
    """The caption for values a picture left out ("" when none was)."""
    if not count:
        return ""
    why = f"not finite or beyond ±{PLOT_LIMIT:g}"
    return f"{count} {what} not drawn: {why}" + (", or not positive on a log axis" if log else "")


CROWDED: Final = 100.0
"""A log axis spanning more than this ratio labels its decades only (1, 2 and 5 of six decades ran
together); its 2 and 5 keep their tick marks."""


def log_ticks(axis: Any, *, decades: bool = False) -> None:
    """Plain numbers on a log axis ("10000", never "1e+04"): at 1, 2 and 5 of each decade, or at each
    decade alone where the axis spans more than `CROWDED` or `decades` asks (a short vertical colour
    bar); no minor labels (they overlapped)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    def label(value: float, _: int) -> str:
        low, high = sorted(axis.get_view_interval())
        sparse = decades or (low > 0 and high / low > CROWDED)
        text = f"{value:.12g}"
        return "" if sparse and text.lstrip("0.")[:1] != "1" else text

    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(label))
    axis.set_minor_formatter(NullFormatter())
