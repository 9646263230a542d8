"""The dashboard's views of an LLM campaign, in headless Chromium: the generation table leads with TTFT,
TPOT, ITL, decode tok/s and ROUGE-L under the labels and formulas of `scheduler.results.llmview`, and the
latency strip writes its ticks in plain milliseconds, none over the caption or cut at the edge.

The page is the real dashboard.html; its own render functions draw the rows of a real results.json
(`sark-node submit examples/llm.yaml`), and the drawing is measured in the same synchronous call, so
the page's once-a-second refresh cannot interleave.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest

from labs.views.test_http_dashboard import CHROMIUM, STRIP, Cdp, page
from node.http.shapes import dashboard_figures
from protocol import Measurement
from scheduler.results import E2E, LLM_FIGURES

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
__all__ = ["page"]  # the fixture, re-used from test_http_dashboard

DASHBOARD: Final = Path(__file__).parents[3] / "node" / "assets" / "dashboard.html"
LLM_RESULTS: Final = Path(__file__).resolve().parents[2] / "golden" / "reports" / "llm_results.json"

DRAW = """
((doc) => {
  const tasks = doc.results.map(r => ({task_id: r.row.JobId, compute_unit: r.row.ComputeUnits,
    device_name: r.row.DeviceName, state: r.row.Status === "Complete" ? "done" : "unschedulable"}));
  for (const r of doc.results) if (r.row.Status === "Complete") rows.set(r.row.JobId, r.figures);
  const campaign = {campaign_id: doc.campaign_id, tasks};
  renderGeneration(campaign);
  renderMatrix(campaign);
  renderPicture(campaign);
  const lead = document.getElementById("generation-lead");
  return JSON.stringify({
    titles: [...lead.querySelectorAll("th[title]")].map(th => th.title),
    cells: Object.fromEntries([...lead.querySelectorAll("td[data-figure]")]
      .map(td => [td.dataset.figure, td.textContent])),
    stability: lead.querySelector("tbody tr td:last-child").textContent,
    leads: document.getElementById("generation")
      .compareDocumentPosition(document.getElementById("matrix")) === Node.DOCUMENT_POSITION_FOLLOWING,
    strip: JSON.parse(%s),
  });
})
"""


def _with_figures(document: dict[str, Any]) -> dict[str, Any]:
    """Each measured result with the typed figures `/api/jobs/{id}` gives the dashboard."""
    for r in document["results"]:
        signed = r.get("signed")
        measurement = Measurement.model_validate(signed["measurement"]) if signed else None
        r["figures"] = dashboard_figures(measurement) if measurement is not None else None
    return document


async def _drawn(page: Cdp, document: dict[str, Any]) -> dict[str, Any]:
    document = json.loads(json.dumps(_with_figures(document)))
    await page.open(DASHBOARD.as_uri(), 30)  # no server behind it: the page's own fetches fail, quietly
    drawn: dict[str, Any] = json.loads(await page.evaluate(f"({DRAW % STRIP})({json.dumps(document)})"))
    return drawn


async def test_an_llm_campaign_leads_with_its_figures_each_naming_its_formula(page: Cdp) -> None:
    document = json.loads(LLM_RESULTS.read_text())
    drawn = await _drawn(page, document)
    assert drawn["titles"] == [f.titled for f in (*LLM_FIGURES, E2E)]  # the report's labels, in its order
    [row] = [r["row"] for r in document["results"] if r["row"]["Status"] == "Complete"]
    assert drawn["cells"]["TtftMsMedian"] == f"{float(row['TtftMsMedian']):.1f}"
    assert drawn["cells"]["RougeL"] == f"{float(row['RougeL']):.3f}"
    assert drawn["stability"].startswith("unstable: ")  # and why
    assert drawn["leads"]  # above the matrix


async def test_the_latency_strip_writes_plain_ms_and_keeps_its_ticks_in_the_picture(page: Cdp) -> None:
    document = json.loads(LLM_RESULTS.read_text())  # a slowest request of 35.8 s: 3.76e+4 in toPrecision
    strip = (await _drawn(page, document))["strip"]
    assert len(strip["ticks"]) == 5
    assert strip["ticks"][0] == "0"
    assert all(t.replace(".", "").isdigit() for t in strip["ticks"]), strip["ticks"]  # no "e+"
    assert strip["overTheCaption"] == []
    assert strip["cut"] == []
