"""Issue 53: a peaks campaign's figures in every medium. The scheduler plays a peaks job on three CPU
peers (one fails its fp32 task each time); the report has a line per device x figure, grouped by
figure, the failed one saying why, the same in report.html, Markdown and the terminal; the latency
views leave the peaks' pseudo-models out."""

from __future__ import annotations

import io

from kit.golden_campaigns import CREATED, Played, _played
from kit.golden_campaigns import _stored as stored

import scheduler as sch
from node.report.peakreport import peaks_html, peaks_markdown, peaks_table
from node.report.tables import render_markdown
from node.submitter.outputs import campaign_report
from protocol import Measurement, Peak, PeakRun
from protocol.aggregate import derive, peak_work
from scheduler.results import CampaignReport, entries_of, peak_lines

PEAKS = """\
name: peaks
jobs:
  - compute_unit: CPU (ONNX)
    peaks: {precisions: [fp32], memory: [copy]}
"""
TIMES = (0.0020, 0.0019, 0.0021, 0.0020, 0.0022)


def _measured(played: Played, task: sch.TaskView) -> Measurement:
    spec = played.spec(task)
    assert spec.peaks is not None
    precision = spec.peaks.precision
    size = 64 << 20 if precision == "copy" else 512
    peak = Peak.model_validate(
        {"unit": "CPU", "precision": precision, "library": "numpy 2", "kernel": "numpy.matmul(a, b)"}
    )
    run = PeakRun(peak=peak, size=size, times_s=TIMES, warmups=2)
    return derive(Measurement.nothing_timed(spec.compute_unit).with_(peak_run=run), spec)


def _report() -> CampaignReport:
    played = _played("peaks-1", PEAKS, {"2": ["fail:unit_unavailable"] * 3}, 3)
    scheduler = played.node.scheduler
    done = [t for t in scheduler.tasks() if t.status == sch.Status.COMPLETE]
    results = tuple(stored(played.campaign_id, t, _measured(played, t)) for t in done)
    return campaign_report(scheduler, results, CREATED, played.campaign_id, played.campaign)


def test_a_line_per_device_and_figure_grouped_by_figure_the_failed_one_with_why() -> None:
    lines = peak_lines(_report())
    assert [line.precision for line in lines] == ["fp32"] * 3 + ["copy"] * 3
    done = [line for line in lines if line.per_s is not None]
    assert {line.figure for line in done} == {"GFLOPS", "GB/s"}
    fp32 = next(line for line in done if line.precision == "fp32")
    assert fp32.per_s == peak_work("fp32", 512, 1) / min(TIMES) / 1e9
    assert fp32.size == "n=512, all threads"
    failed = [line for line in lines if line.per_s is None]
    assert failed, lines
    assert all(line.status != "Complete" and line.detail for line in failed)


def test_every_medium_shows_the_table_and_the_latency_views_leave_the_peaks_out() -> None:
    report = _report()
    assert entries_of(report) == ()
    html = "".join(peaks_html(report))
    assert 'id="peaks"' in html
    assert "GFLOPS" in html
    markdown = render_markdown(report)
    assert "## Peaks per unit and precision" in markdown
    assert markdown.count("| fp32 |") == 3
    table = peaks_table(report)
    assert table is not None
    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=200).print(table)
    assert "GB/s" in out.getvalue()
    assert peaks_markdown(report)[0] == "## Peaks per unit and precision"
