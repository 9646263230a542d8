"""report.html and the dashboard read as a person reads them (issue 49, scope 5): headless Chromium at
1280 px draws each from the golden results (tests/golden/reports: an LLM run, a tensor campaign with an
Unschedulable GPU, one model on five runtimes) and measures what it drew.

A view fails on
- a clipped text: a box whose content is wider than it while it hides or cuts the rest, a cell whose text
  ends in "…" (a reason cut mid-word), or anything past the window's right edge;
- a text too small to read: an HTML text under 10 px, or an SVG text (matplotlib's or the dashboard's)
  under 10 px at the size the page draws it (its font size times the SVG's scale on screen);
- overlapping labels: two texts of one picture sharing over a tenth of the smaller one's box (a colour
  bar's label over the title, tick labels run together);
- a figure drawn off a readable axis: the axis is read from its own tick labels as a reader reads it
  (values where they are drawn, fitted as linear or logarithmic; neither is a failure), and each
  median must sit where that axis puts its value (within 2 px) and be read off it to 10 % (10 % more
  drawn 2 px or more away: a 1.4 ms median on a linear axis to 110 ms moves 0.6 px). Checked for
  the dashboard's latency strip and report.html's TTFT/TPOT strips.

The last tests feed the same checks what the views used to draw (a reason cut in a narrow box, a 7 px
label over another, the strip's old linear axis), so the checks are seen to fail.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any, Final

import pytest

from labs.views.test_dashboard_llm import DASHBOARD, _with_figures
from labs.views.test_http_dashboard import CHROMIUM, Cdp, page
from node.report.render import render_html
from protocol.genstats import tpot_ms
from scheduler.results import CampaignReport

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
__all__ = ["page"]  # the fixture, re-used from test_http_dashboard

GOLDEN: Final = Path(__file__).resolve().parents[2] / "golden" / "reports"
NAMES: Final = ("llm", "tensor", "runtimes")
WIDTH: Final = 1280

READABLE = """
(() => {
  const found = [];
  const say = (what, e) => found.push(what + ": " + ((e.closest && e.closest("[id]")) || {id: e.tagName}).id
    + ": " + (e.textContent || "").trim().slice(0, 70));
  const own = e => [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
  for (const e of document.querySelectorAll("body *")) {
    if (e.closest("svg") || e.closest("script, style, title")) continue;
    const style = getComputedStyle(e);
    if (style.display === "none") continue;
    const hides = style.overflowX !== "visible" || style.textOverflow === "ellipsis";
    if (hides && e.scrollWidth > e.clientWidth + 1) say("clipped", e);
    if (e.matches("td, small") && own(e) && /…$/.test(e.textContent.trim())) say("cut", e);
    if (e.getBoundingClientRect().right > innerWidth + 1) say("past the window", e);
    if (own(e) && parseFloat(style.fontSize) < 10) say(`small text ${style.fontSize}`, e);
  }
  const area = (a, b) => Math.max(0, Math.min(a.right, b.right) - Math.max(a.left, b.left)) *
                         Math.max(0, Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top));
  const on = (a, b) => area(a, b) > 0.1 * Math.min(a.width * a.height, b.width * b.height);
  for (const svg of document.querySelectorAll("svg")) {
    const texts = [...svg.querySelectorAll("text")].filter(t => t.textContent.trim());
    for (const t of texts) {
      const m = t.getScreenCTM(), px = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
      if (px < 9.95) say(`small picture text ${px.toFixed(1)} px`, t);
    }
    const boxes = texts.map(t => [t, t.getBoundingClientRect()]);
    boxes.forEach(([a, ra], i) => boxes.slice(i + 1).forEach(([b, rb]) => {
      if (on(ra, rb)) say(`overlap with "${b.textContent.trim().slice(0, 40)}"`, a);
    }));
  }
  return found;
})()
"""

AXIS = """
// An axis as a reader reads it: ticks (value at position) fitted as linear or log; null when neither.
function axisOf(ticks) {
  const fit = (f) => {
    const pts = ticks.map(([v, x]) => [f(v), x]).filter(([u]) => isFinite(u));
    if (pts.length < 2) return null;
    const [[u0, x0], [u1, x1]] = [pts[0], pts[pts.length - 1]];
    const b = (x1 - x0) / (u1 - u0), at = u => x0 + b * (u - u0);
    const straight = pts.length === ticks.length && pts.every(([u, x]) => Math.abs(at(u) - x) < 1);
    return straight ? v => at(f(v)) : null;
  };
  return fit(v => v) || fit(Math.log10);
}
// Each (value, drawn at, name) on an axis (`scale`: screen px per unit of the picture): where the axis
// puts the value (2 px), and whether a reader reads it to 10 % (10 % more is 2 px or more away).
function offAxis(name, map, marks, scale) {
  if (!map) return [name + ": its ticks are on no linear or log axis"];
  return marks.flatMap(([v, x, what]) => {
    const off = scale * Math.abs(map(v) - x), step = scale * Math.abs(map(1.1 * v) - map(v));
    return [
      ...(off > 2 ? [`${name}: ${what} ${v} drawn ${off.toFixed(1)} px from where its axis puts it`] : []),
      ...(step < 2 ? [`${name}: ${what} ${v} unresolved (10 % more is ${step.toFixed(2)} px away)`] : []),
    ];
  });
}
"""

STRIP_AXIS = (
    "(() => {"
    + AXIS
    + """
  const svg = document.querySelector("#picture svg");
  const ticks = [...svg.querySelectorAll("text.tick")]
    .map(t => [Number(t.textContent), Number(t.getAttribute("x"))]);
  const marks = [...svg.querySelectorAll("g[data-task]")].map(g =>
    [rows.get(g.dataset.task).InferenceMsMedian, +g.querySelector("rect").getAttribute("x"), "median"]);
  const texts = [...svg.querySelectorAll("text.tick, text.caption")].map(t => t.getBoundingClientRect());
  const box = svg.getBoundingClientRect();
  return [...offAxis("latency strip", axisOf(ticks), marks, 1),
    ...texts.filter(r => r.left < box.left - 0.5 || r.right > box.right + 0.5)
      .map(() => "latency strip: a tick cut")];
})()"""
)

REPORT_AXES = (
    "((medians) => {"
    + AXIS
    + """
  const found = [];
  for (const ax of document.querySelectorAll("#generation-latency g[id^='axes_']")) {
    const xs = ax.querySelector("g[id^='matplotlib.axis_']");  // the x axis comes first
    const ticks = [...xs.querySelectorAll("g[id^='xtick_']")]
      .map(g => [g.querySelector("text"), g.querySelector("use")])
      .filter(([t]) => t && /^[\\d.,]+$/.test(t.textContent.trim()))
      .map(([t, u]) => [Number(t.textContent.replace(/,/g, "")), Number(u.getAttribute("x"))]);
    const marks = [...ax.querySelectorAll("g[id*='-median-']")].map(g => {
      const d = g.querySelector("path").getAttribute("d").trim().split(/[\\s,ML]+/)
        .filter(Boolean).map(Number);
      return [medians[g.id], d[0], g.id];
    });
    if (!marks.length) found.push("TTFT/TPOT: no median found in " + ax.id);
    const m = ax.getScreenCTM();
    found.push(...offAxis("TTFT/TPOT " + ax.id, axisOf(ticks), marks, Math.hypot(m.a, m.b)));
  }
  return found;
})"""
)

DRAW = """
((doc) => {
  const tasks = doc.results.map(r => ({task_id: r.row.JobId, compute_unit: r.row.ComputeUnits,
    device_name: r.row.DeviceName, state: r.row.Status === "Complete" ? "done" : "unschedulable",
    detail: r.row.Status === "Complete" ? "" : r.row.Detail || r.row.Status}));
  for (const r of doc.results) if (r.figures) rows.set(r.row.JobId, r.figures);
  const campaign = {campaign_id: doc.campaign_id, tasks};
  refresh = () => {};  // the page's own polling has no server to poll here
  renderGeneration(campaign);
  renderMatrix(campaign);
  renderPicture(campaign);
  return [...document.querySelectorAll("#matrix td[data-median]")].map(td => td.textContent);
})
"""


def _report(name: str) -> CampaignReport:
    return CampaignReport.from_json((GOLDEN / f"{name}_results.json").read_text())


def _medians(report: CampaignReport) -> dict[str, float]:
    """Each TTFT and TPOT strip's median by its id in the SVG, from the report's records."""
    out: dict[str, float] = {}
    measured = [
        t.measurement.generation for t in report.results if t.measurement and t.measurement.generation
    ]
    for k, g in enumerate(measured):
        ttft = [r.ttft_ms for r in g.records if r.ttft_ms is not None]
        tpot = [t for r in g.records if (t := tpot_ms(r)) is not None]
        out |= {f"ttft-median-{k}": statistics.median(ttft), f"tpot-median-{k}": statistics.median(tpot)}
    return out


async def _open(page: Cdp, path: Path) -> None:
    await page.send(
        "Emulation.setDeviceMetricsOverride", width=WIDTH, height=900, deviceScaleFactor=1, mobile=False
    )
    await page.open(path.as_uri(), 60)


async def _dashboard(page: Cdp, name: str) -> list[str]:
    document = json.loads(
        json.dumps(_with_figures(json.loads((GOLDEN / f"{name}_results.json").read_text())))
    )
    await _open(page, DASHBOARD)  # no server behind it: the page's own fetches fail, quietly
    cells: list[str] = await page.evaluate(f"({DRAW})({json.dumps(document)})")
    return cells


@pytest.mark.parametrize("name", NAMES)
async def test_report_html_is_whole_legible_and_on_its_axes(page: Cdp, tmp_path: Path, name: str) -> None:
    report = _report(name)
    path = tmp_path / "report.html"
    path.write_text(render_html(report))
    await _open(page, path)
    assert await page.evaluate(READABLE) == []
    medians = _medians(report)
    if medians:
        assert await page.evaluate(f"({REPORT_AXES})({json.dumps(medians)})") == []
    if name == "tensor":  # the Unschedulable GPU's reason, whole, in its cell
        reasons = await page.evaluate(
            "[...document.querySelectorAll('#matrix-0 small.reason')].map(s => s.textContent)"
        )
        assert reasons
        assert all("(1.32.0 lists Azure, CPU)" in r for r in reasons), reasons
    assert page.problems == []


@pytest.mark.parametrize("name", NAMES)
async def test_the_dashboard_is_whole_legible_and_on_its_axes(page: Cdp, name: str) -> None:
    cells = await _dashboard(page, name)
    assert cells
    assert all(" p90 " in c and " · p99 " in c and " · max " in c for c in cells), cells  # the tail
    assert all(re.search(r" · n \d+", c) for c in cells), cells  # and its count, as report.html's
    assert await page.evaluate(READABLE) == []
    assert await page.evaluate(STRIP_AXIS) == []
    assert [p for p in page.problems if p.startswith("exception")] == []  # its /api fetches fail here


BROKEN = """<!DOCTYPE html><html><body><table><tr><td><span style="display:inline-block;width:9em;
overflow:hidden;white-space:nowrap">Unschedulable: CUDA, MIGraphX, Tensorrt: not in this onnxruntime build
</span></td><td>Tensorrt: not …</td></tr></table>
<svg width="400" height="100"><text x="10" y="50" style="font-size:12px">median latency (ms)</text>
<text x="60" y="52" style="font-size:7px">title over it</text></svg></body></html>"""


async def test_the_checks_see_a_clipped_reason_small_and_overlapping_labels(
    page: Cdp, tmp_path: Path
) -> None:
    path = tmp_path / "broken.html"
    path.write_text(BROKEN)
    await _open(page, path)
    found = await page.evaluate(READABLE)
    kinds = {f.split(":")[0] for f in found}
    assert {"clipped", "cut", "small picture text 7.0 px"} <= kinds, found
    assert any(f.startswith('overlap with "title over it"') for f in found), found


OLD_AXIS = """
axisOf = measured => {  // the strip as it was: linear from 0 to the slowest run, whatever the span
  const top = Math.max(...measured.map(r => r.InferenceMsMax)) * 1.05 || 1;
  return { log: false, at: v => v / top, ticks: [0, 0.25, 0.5, 0.75, 1].map(f => top * f) };
};
"""


async def test_the_checks_see_a_median_drawn_off_a_readable_axis(page: Cdp) -> None:
    await _dashboard(page, "tensor")  # medians of 1.4 ms, slowest runs of 105 ms
    assert await page.evaluate(STRIP_AXIS) == []
    await page.evaluate(
        OLD_AXIS + 'renderPicture({campaign_id: "", tasks: [...rows.keys()].map(k => '
        '({task_id: k, compute_unit: "CPU", device_name: "vm", state: "done"}))}); 0'
    )
    found: list[Any] = await page.evaluate(STRIP_AXIS)
    assert found
    assert all("unresolved" in f for f in found), found
