"""report.html's part for live telemetry and sustained runs: latency, clock, temperature, power and
background load over time, one figure per measured task (device · unit), on one time axis; and each
sustained run's windows with its throttling verdict.

Read from the report: the raw samples and the signed measurement's marks, telemetry and sustained
windows. Latency over time is drawn from the raw parts (`protocol.windows.windows`: the median of
the runs between two marks), so a re-rendered report draws the same picture. A task with no
telemetry (an endpoint task, an older result) gets nothing from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Final

from node.report.pictures import Picture, drawn, left_out, plottable
from node.report.stacked import Line, Panel, stacked_svg
from protocol import Measurement, Window, for_html, visible
from protocol.windows import windows
from scheduler.results import CampaignReport

MAX_FIGURES: Final = 12
"""Tasks drawn at most (a campaign over many devices lists the rest by name)."""
PANELS: Final = ("clock MHz", "temp °C", "power W", "load")
"""The panels below the latency's, in order (`_series` numbers them 1 to 4)."""


def _measured(report: CampaignReport) -> list[tuple[str, Measurement, tuple[float, ...]]]:
    """(label, measurement, raw samples) of every task whose signed measurement has telemetry."""
    found = []
    for task in report.results:
        measured = task.measurement
        if measured is None or measured.telemetry is None:
            continue
        row = task.row
        label = visible(
            f"{row.get('DeviceName', '?')} · {row.get('ComputeUnits', '?')} · {row.get('JobId', '')}"
        )
        found.append((label, measured, task.samples_ms))
    return found


def _stretches(m: Measurement, samples: Sequence[float]) -> tuple[Window, ...]:
    if m.sustained is not None:
        return m.sustained.windows
    if len(m.mark_runs) != len(m.mark_ms) or (m.mark_runs and m.mark_runs[-1] > len(samples)):
        return ()
    return windows(samples, m.mark_runs, m.mark_ms)


def timeline_svg(label: str, m: Measurement, samples: Sequence[float]) -> Picture:
    """Latency, clock, temperature, power and background load against time (s), stacked, x shared;
    a reading a picture cannot place is a gap in its line, counted in the caption. Drawn by hand
    (`node.report.stacked`), not by matplotlib: a report draws up to `MAX_FIGURES` of them."""
    assert m.telemetry is not None
    t, dropped = plottable(p.t_ms / 1000 for p in m.telemetry.points)
    latency = Panel("median ms", legend=False)
    spans = [w for w in _stretches(m, samples) if w.median_ms is not None]
    if spans:  # each stretch's median held from its start to its end
        edges, bad_edges = plottable([w.start_ms / 1000 for w in spans] + [spans[-1].end_ms / 1000])
        medians, bad_medians = plottable([w.median_ms for w in spans] + [spans[-1].median_ms])
        latency.lines.append(Line("median ms", edges, medians, step=True))
        dropped += bad_edges + bad_medians
    panels = [
        latency,
        *(Panel(what, empty=f"no {what.split()[0]} reading on this device") for what in PANELS),
    ]
    for row, name, readings in _series(m):
        ys, bad = plottable(readings)
        dropped += bad
        if any(y is not None for y in readings):  # a reading this device does not give draws no line
            panels[row].lines.append(Line(name, t, ys))
    title = f"{label}: every {m.telemetry.period_ms:g} ms"
    svg = stacked_svg(title, "time since the timed phase began (s; processes back to back)", panels)
    return Picture(svg, left_out(dropped, "readings"))


def _series(m: Measurement) -> list[tuple[int, str, list[float | None]]]:
    """Each telemetry line: the axis it goes on (1 clock, 2 temperature, 3 power, 4 load), its name,
    and its readings (None where the point has none)."""
    assert m.telemetry is not None
    points = m.telemetry.points
    return [
        *(
            (1, visible(group), [p.cpu_mhz[k] if k < len(p.cpu_mhz) else None for p in points])
            for k, group in enumerate(m.telemetry.groups)
        ),
        (1, "GPU SM", [p.gpu_sm_mhz for p in points]),
        (2, "hottest sensor", [p.temp_c for p in points]),
        (2, "GPU", [p.gpu_temp_c for p in points]),
        (3, "GPU board", [p.gpu_power_w for p in points]),
        (4, "other processes (cores)", [p.background_cores for p in points]),
        (4, "CPU share of the measuring process", [p.cpu_share for p in points]),
    ]


def _windows_table(sustained_runs: list[tuple[str, Measurement]]) -> str:
    head = (
        "window",
        "start-end s",
        "runs",
        "median ms",
        "drift %",
        "clock MHz",
        "temp °C",
        "background",
        "CPU share",
        "causes",
    )
    blocks = []
    for label, m in sustained_runs:
        s = m.sustained
        assert s is not None
        verdict = f"throttled: {s.detail}" if s.throttled else "not throttled (every window within 10 %)"
        rows = []
        for k, w in enumerate(s.windows, start=1):
            span = f"{w.start_ms / 1000:.1f}-{w.end_ms / 1000:.1f}"
            figures = [_f(w.median_ms, 3), _f(w.drift_pct, 1), _f(w.cpu_mhz, 0), _f(w.temp_c, 1)]
            load = [_f(w.background_cores, 2), _f(w.cpu_share, 2)]
            cells = [str(k), span, str(w.runs), *figures, *load, ", ".join(c.value for c in w.causes)]
            rows.append("<tr>" + "".join(f"<td>{for_html(c)}</td>" for c in cells) + "</tr>")
        th = "".join(f"<th>{for_html(h)}</th>" for h in head)
        blocks.append(
            f"<h3>{for_html(label)}</h3><p>{for_html(verdict)}</p>"
            f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    return "".join(blocks)


def _f(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def telemetry_parts(report: CampaignReport) -> list[str]:
    """The HTML sections for the report's telemetry and sustained runs (none when it has none)."""
    measured = _measured(report)
    if not measured:
        return []
    parts = ["<h2>Telemetry over time</h2>"]
    for k, (label, m, samples) in enumerate(measured[:MAX_FIGURES]):
        draw = partial(timeline_svg, label, m, samples)
        parts.append(drawn(f"telemetry of {label}", draw, element_id=f"telemetry-{k}", css_class="telemetry"))
    if len(measured) > MAX_FIGURES:
        rest = ", ".join(label for label, _, _ in measured[MAX_FIGURES:])
        parts.append(f"<p>Not drawn ({len(measured) - MAX_FIGURES} more): {for_html(rest)}</p>")
    sustained = [(label, m) for label, m, _ in measured if m.sustained is not None]
    if sustained:
        parts += [
            "<h2>Sustained runs: windows</h2>",
            f'<div id="sustained">{_windows_table(sustained)}</div>',
        ]
    return parts
