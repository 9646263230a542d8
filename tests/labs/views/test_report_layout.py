"""report.html's pictures laid out for reading, measured in headless Chromium: no two labels overlap, and
no legend covers a bar or a label. The test renders a realistic campaign (three devices, one of them noisy, a
failure and an unschedulable unit) and measures every text and legend box the browser drew.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest
from kit.data import report_of, signed_part

from labs.views.test_http_dashboard import CHROMIUM, Cdp, page
from node.report.plots import process_spread, processes_svg
from node.report.render import write_html_report
from scheduler.results import CampaignReport, ReportEntry

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
__all__ = ["page"]  # the fixture, re-used from test_http_dashboard

# Every pair of drawn labels in one picture whose boxes overlap by more than a sliver, and every legend
# box that intersects a bar of its own axes.
MEASURE = """
(() => {
  const area = (a, b) => Math.max(0, Math.min(a.right, b.right) - Math.max(a.left, b.left)) *
                         Math.max(0, Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top));
  const found = [];
  document.querySelectorAll("figure").forEach(figure => {
    const texts = [...figure.querySelectorAll("text")]
      .filter(t => t.textContent.trim() && !t.closest("[id^=legend]"))
      .map(t => ({text: t.textContent.trim(), box: t.getBoundingClientRect()}))
      .filter(t => t.box.width > 0 && t.box.height > 0);
    for (let i = 0; i < texts.length; i++)
      for (let j = i + 1; j < texts.length; j++) {
        const shared = area(texts[i].box, texts[j].box);
        const size = t => t.box.width * t.box.height;
        const smaller = Math.min(size(texts[i]), size(texts[j]));
        if (shared > 0.1 * smaller)
          found.push(`${figure.id}: label "${texts[i].text}" overlaps "${texts[j].text}"`);
      }
    figure.querySelectorAll("g[id^=legend]").forEach(legend => {
      const box = legend.getBoundingClientRect();
      for (const t of texts)
        if (area(t.box, box) > 1) found.push(`${figure.id}: a legend covers the label "${t.text}"`);
    });
    figure.querySelectorAll("g[id^=axes]").forEach(axes => {
      const bars = [...axes.querySelectorAll(":scope > g[id^=patch]")].slice(1)  // [0]: the background
        .map(p => p.getBoundingClientRect()).filter(b => b.width > 0 && b.height > 0);
      axes.querySelectorAll(":scope > g[id^=legend]").forEach(legend => {
        const box = legend.getBoundingClientRect();
        if (bars.some(b => area(b, box) > 1)) found.push(`${figure.id}: a legend covers a bar`);
      });
    });
  });
  return JSON.stringify({figures: document.querySelectorAll("figure svg").length, found});
})()
"""


def _result(
    device: str, worker: str, unit: str, median: float | None, status: str = "Complete"
) -> dict[str, Any]:
    measured = median is not None
    samples = [median * (1 + 0.02 * (i % 7)) for i in range(60)] if measured else []
    row = {
        "Status": status,
        "JobId": f"campaign-5-job-{0 if unit == 'CPU (ONNX)' else 1}-{worker[-1:] or 0}",
        "FileName": "mobilenet.onnx",
        "ComputeUnits": unit,
        "DeviceName": device,
        "InferenceMsMedian": f"{median:.3f}" if measured else "",
        "ProcessMedians": f"{median:.3f};{median * 1.05:.3f};{median * 0.97:.3f}" if measured else "",
        "ProcessSpreadPct": "8.00" if measured else "",
        "Unstable": "True" if device == "noisy-laptop" else "False",
        "UnstableReasons": "background load of 1.50 cores (> 0.2)" if device == "noisy-laptop" else "",
        "LoadMsMedian": "41.5" if measured else "",
        "LoadMsFirst": "120.0" if measured else "",
        "PeakLoadRamUsage": "180.0" if measured else "",
        "PeakInferenceRamUsage": "240.0" if measured else "",
        "WorkerPeerId": worker,
        "FailureReason": "" if measured else "no_feasible_peer",
        "Detail": "" if measured else "GPU (ONNX) unavailable on every peer",
    }
    reasons = ("background load of 1.50 cores (> 0.2)",) if device == "noisy-laptop" else ()
    signed = (
        signed_part(device, median, reasons=reasons, load_ms=41.5, peaks_mb=(180.0, 240.0))
        if measured
        else None
    )
    return {"row": row, "samples_ms": samples, "signed": signed}


async def _overlaps(page: Cdp, tmp_path: Path, document: CampaignReport, figures: int) -> None:
    report = write_html_report(tmp_path / "report.html", document)
    await page.open(report.as_uri(), 30)
    reply = await page.send("Runtime.evaluate", expression=MEASURE, returnByValue=True)
    measured = json.loads(reply["result"]["value"])
    assert measured["figures"] == figures  # the test saw every picture
    assert measured["found"] == [], "\n".join(" ".join(f.split()) for f in measured["found"])
    assert page.problems == []


async def test_no_label_overlaps_another_and_no_legend_covers_a_bar(page: Cdp, tmp_path: Path) -> None:
    results = [
        _result("workstation", "12D3KooWaaaa1", "CPU (ONNX)", 1.8),
        _result("noisy-laptop", "12D3KooWbbbb2", "CPU (ONNX)", 6.4),
        _result("raspberry-pi-5", "12D3KooWcccc3", "CPU (ONNX)", 38.0),
        _result("", "", "GPU (ONNX)", None, status="Unschedulable"),
    ]
    document = report_of(results, campaign_id="campaign-5", name="layout")
    # heatmap, distributions, resources, processes
    await _overlaps(page, tmp_path, document, 4)


LLM_RESULTS: Final = Path(__file__).resolve().parents[2] / "golden" / "reports" / "llm_results.json"
"""results.json of `sark-node submit examples/llm.yaml` on this machine's embedded swarm (one worker)."""


async def test_a_one_device_llm_report_keeps_legends_off_the_axis_labels(page: Cdp, tmp_path: Path) -> None:
    """examples/llm.yaml on one worker: one row per chart, where the load-time and memory legends
    printed over the x-axis labels, and the TTFT and TPOT axis labels (with their formulas) meet."""
    document = CampaignReport.from_json(LLM_RESULTS.read_text())
    # distributions, resources, generation TTFT/TPOT (one device: no heatmap; one process: a line, no
    # per-process picture)
    await _overlaps(page, tmp_path, document, 3)


def _timed(median: float | None, medians: tuple[float, ...]) -> ReportEntry:
    return ReportEntry(
        task_id="c-job-0-0", job_index=0, status="Complete", model="m.onnx", unit="CPU (ONNX)",
        device="d", median_ms=median, process_medians_ms=medians,
    )  # fmt: skip


def test_the_process_plot_spans_the_spread_whatever_the_models_speed() -> None:
    """The per-process plot's axis is each process median's distance from the row's figure in %: a
    0.5 ms model and a 7.5 s one with the same relative spread are drawn alike (an axis from 0 ms
    left a 1 % spread one dot-width wide), and what a picture cannot place is counted, not drawn."""
    fast = process_spread(_timed(0.5, (0.5, 0.525, 0.475)))
    slow = process_spread(_timed(7500.0, (7500.0, 7875.0, 7125.0)))
    assert fast[0] == 0.5
    assert slow[0] == 7500.0
    assert fast[1] == pytest.approx([0.0, 5.0, -5.0])
    assert slow[1] == pytest.approx([0.0, 5.0, -5.0])
    assert fast[2] == slow[2] == 0
    centre, deviations, dropped = process_spread(_timed(1e-320, (1.0, float("nan"))))  # a hostile row
    assert (centre, deviations, dropped) == (1e-320, [], 2)
    centre, deviations, _ = process_spread(_timed(None, (2.0, 4.0)))  # no figure: the median of medians
    assert centre == 3.0
    assert deviations == pytest.approx([-100 / 3, 100 / 3])
    picture = processes_svg([_timed(7500.0, (7500.0, 7875.0))], "t")
    assert "(7,500 ms)" in picture.svg
    assert not picture.caption
