"""Issue 51, scope 3: the live dashboard's fronts and ranking, in headless Chromium.

The page is the real dashboard.html; its own `renderFronts` draws the `fronts` and `ranking` that GET
/api/campaigns serves (`node.http.shapes.campaign`, the very values of results.json), here those of
tests/golden/generate/results.json with a second device added: one verified point slower than an
unchecked one, and a server whose every point missed the bound. What it shows is read back in the same
synchronous call, so the page's once-a-second refresh cannot interleave. A target's markup stays text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest

from labs.views.test_http_dashboard import CHROMIUM, Cdp, page
from node.cli.report import read_report
from scheduler.results import Front, ranking_of

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
__all__ = ["page"]  # the fixture, re-used from test_http_dashboard

DASHBOARD: Final = Path(__file__).parents[3] / "node" / "assets" / "dashboard.html"
GENERATE: Final = Path(__file__).resolve().parents[2] / "golden" / "generate" / "results.json"
HOSTILE: Final = '<img src=x onerror="window.pwned=1">'

DRAW = """
((campaign) => {
  renderFronts(campaign);
  const cells = sel => [...document.querySelectorAll(sel + " tbody tr")]
    .map(tr => [...tr.children].map(td => td.textContent));
  return JSON.stringify({
    front: cells("#front-table"), ranking: cells("#ranking"),
    titles: [...document.querySelectorAll("#fronts h3")].map(h => h.textContent),
    note: document.querySelector("#fronts p").textContent,
    images: document.querySelectorAll("#fronts img").length, pwned: !!window.pwned,
    above: document.getElementById("fronts")
      .compareDocumentPosition(document.getElementById("matrix")) === Node.DOCUMENT_POSITION_FOLLOWING,
  });
})
"""


def _campaign() -> dict[str, Any]:
    """GET /api/campaigns' fronts and ranking for the golden generate campaign and two more targets."""
    report = read_report(GENERATE)
    [front] = report.fronts
    fast, slow = front.points
    checked = Front(
        target=f"gpu1 · {HOSTILE}",
        points=(slow.with_(load="concurrency=2", throughput=9.0, verified="replicated 2/2"),),
    )
    missed = Front(target="cpu2 · late", points=(fast.with_(bounded={"ttft_ms": 420.0}),))
    groups = (front, checked, missed)
    ranking = ranking_of(report.campaign.rank, groups)
    assert ranking is not None
    shown_fronts = [g.model_dump(mode="json") for g in groups if len(g.points) > 1]
    return {
        "campaign_id": report.campaign_id,
        "fronts": shown_fronts,
        "ranking": ranking.model_dump(mode="json"),
    }


async def test_the_dashboard_lists_the_front_and_the_ranking_as_results_json_has_them(page: Cdp) -> None:
    await page.open(DASHBOARD.as_uri(), 30)  # no server behind it: the page's own fetches fail, quietly
    drawn = json.loads(await page.evaluate(f"({DRAW})({json.dumps(_campaign())})"))
    assert drawn["titles"] == [
        "Throughput-latency front per device or server",
        "Ranking: output tok/s at TTFT p90 <= 100 ms",
    ]
    assert drawn["front"] == [
        ["cpu0 · Endpoint (black-box) · m", "request_rate=5", "15.0", "34.5", "single", "0.0%"],
        ["cpu0 · Endpoint (black-box) · m", "request_rate=10", "15.0", "34.5", "single", "0.0%"],
    ]
    assert "every point on its front" in drawn["note"]
    ranks = [(r[0], r[1], r[2], r[4]) for r in drawn["ranking"]]
    assert ranks == [
        ("1", f"gpu1 · {HOSTILE}", "9.000", "verified · replicated 2/2"),  # slower, but verified: first
        ("2", "cpu0 · Endpoint (black-box) · m", "15.00", "unchecked · single"),
        ("", "cpu2 · late", "", ""),
    ]
    assert drawn["ranking"][2][6] == "no eligible point: request_rate=5: TTFT p90 420.0 ms over 100 ms"
    assert drawn["images"] == 0  # the target's markup shown as text
    assert not drawn["pwned"]
    assert drawn["above"]  # above the matrix, under the generation table
