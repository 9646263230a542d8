"""The dashboard's matrix of a verified campaign, in headless Chromium (issue 38, scope 8): a replicated
figure carries its mark (✓2/2), a refused one (the outlier's) shows its verdict in place of its figure,
and a device that ran several tasks in one column (its own and a replica of another's) shows one and
names the others.

The page is the real dashboard.html; its own functions draw the tasks of a campaign the scheduler
played (`test_report_screens._verified`: four peers, one halving liar), each result as
`/api/jobs/{id}` gives it (`node.http.shapes.result`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest
from kit.reports import _verified

from labs.views.test_http_dashboard import CHROMIUM, Cdp, page
from node.http.shapes import result

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
__all__ = ["page"]  # the fixture, re-used from test_http_dashboard

DASHBOARD: Final = Path(__file__).parents[3] / "node" / "assets" / "dashboard.html"

DRAW = """
((campaign, results) => {
  for (const [id, r] of Object.entries(results)) rows.set(id, withVerified(r));
  renderMatrix(campaign);
  return JSON.stringify([...document.querySelectorAll("#matrix tbody td[data-task]")].map(td => ({
    task: td.dataset.task, text: td.textContent, verified: td.dataset.verified || "",
    median: td.dataset.median || "", klass: td.className})));
})
"""


async def test_the_matrix_marks_replicated_figures_and_shows_no_refused_one(page: Cdp) -> None:
    report = _verified()
    tasks = [
        {"task_id": t.row["JobId"], "compute_unit": t.row["ComputeUnits"], "device_name": t.row["DeviceName"],
         "state": "done"}
        for t in report.results
    ]  # fmt: skip
    results = {t.row["JobId"]: result(t) for t in report.results}
    verdicts = {t.row["JobId"]: t.row["Verified"] for t in report.results}
    assert any(v.startswith("outlier") for v in verdicts.values())  # the campaign has a refused figure
    await page.open(DASHBOARD.as_uri(), 30)  # no server behind it: the page's own fetches fail, quietly
    campaign = {"campaign_id": report.campaign_id, "tasks": tasks}
    cells: list[dict[str, Any]] = json.loads(
        await page.evaluate(f"({DRAW})({json.dumps(campaign)}, {json.dumps(results)})")
    )
    assert cells
    for cell in cells:
        verdict = verdicts[cell["task"]]
        assert cell["verified"] == verdict
        if verdict.startswith("outlier"):
            assert not cell["median"]  # never shown as a figure
            assert cell["text"].startswith("outlier")
            assert cell["klass"] == "bad"
        else:
            assert verdict.startswith("replicated")
            assert cell["median"]
            assert "✓" + verdict.split(" ")[1] in cell["text"]
    shown = sum(int(c["text"].split("+", 1)[1].split(" ")[0]) + 1 if "+" in c["text"] else 1 for c in cells)
    assert shown == len(tasks)  # every task shown or named: the replicas share their device's cell


VERIFICATION = """
((campaign) => {
  renderVerification(campaign);
  const rows = [...document.querySelectorAll("#verification-table tbody tr")];
  return JSON.stringify(rows.map(tr => ({outcome: tr.dataset.outcome,
    cells: [...tr.querySelectorAll("td")].map(td => td.textContent)})));
})
"""


async def test_the_verification_table_shows_each_groups_agreed_figure_band_and_outlier(page: Cdp) -> None:
    report = _verified()
    groups = [g.model_dump(mode="json") for g in report.verification]  # as GET /api/campaigns gives it
    campaign = {"campaign_id": report.campaign_id, "tasks": [], "verification": groups}
    await page.open(DASHBOARD.as_uri(), 30)
    rows: list[dict[str, Any]] = json.loads(await page.evaluate(f"({VERIFICATION})({json.dumps(campaign)})"))
    assert [r["outcome"] for r in rows] == ["replicated", "replicated"]
    [first, second] = [r["cells"] for r in rows]
    assert first[3:5] == ["10.050", "27.0%"]  # the agreed figure and the band
    assert "12D3-b0 10.000 [10.0.1.0/24] replicated 2/2" in first[5]
    assert second[6] == "12D3-b3"  # the outlier, and why
    assert "12D3-b3: 5 ms against the agreed 10 ms" in second[7]
    none: list[dict[str, Any]] = json.loads(
        await page.evaluate(f"({VERIFICATION})({json.dumps({'campaign_id': 'c', 'tasks': []})})")
    )
    assert none == []
    said = await page.evaluate('document.getElementById("verification").textContent')
    assert "no job asked verify" in said


SPEEDUP = """
((campaign, results) => {
  for (const [id, r] of Object.entries(results)) rows.set(id, withVerified(r));
  renderMatrix(campaign);
  return JSON.stringify([...document.querySelectorAll("#matrix tbody td[data-task]")].map(td => ({
    task: td.dataset.task, text: td.textContent,
    speedup: (td.querySelector("[data-speedup]") || {dataset: {}}).dataset.speedup || ""})));
})
"""


async def test_the_matrix_shows_a_units_speedup_over_its_devices_cpu(page: Cdp) -> None:
    """Issue 51, scope 5: each task's SpeedupVsCpu as the campaign stands (GET /api/campaigns'
    `speedups`, `ApiState.speedups`) beside the unit's figure, each result as `/api/jobs/{id}` gives it
    (its typed figures hold no speed-up: a baseline may complete after the row); the baseline's cell
    shows none."""
    said = "4.00x (3.50-4.60) vs CPU (ONNX)"
    results = {
        "t-cpu": {"figures": {"InferenceMsMedian": 8.0, "Unstable": False}, "row": {"Verified": ""}},
        "t-gpu": {"figures": {"InferenceMsMedian": 2.0, "Unstable": False}, "row": {"Verified": ""}},
    }
    tasks = [
        {"task_id": "t-cpu", "compute_unit": "CPU (ONNX)", "device_name": "box", "state": "done"},
        {"task_id": "t-gpu", "compute_unit": "GPU (ONNX)", "device_name": "box", "state": "done"},
    ]
    await page.open(DASHBOARD.as_uri(), 30)
    campaign = {"campaign_id": "c", "tasks": tasks, "speedups": {"t-gpu": said}}
    cells = {
        c["task"]: c
        for c in json.loads(
            await page.evaluate(f"({SPEEDUP})({json.dumps(campaign)}, {json.dumps(results)})")
        )
    }
    assert cells["t-gpu"]["speedup"] == said
    assert f"speed-up {said}" in cells["t-gpu"]["text"]
    assert cells["t-cpu"]["speedup"] == ""
    assert "speed-up" not in cells["t-cpu"]["text"]
