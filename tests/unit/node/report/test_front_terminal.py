"""Issue 51, scope 3: a sweep's fronts and the campaign's ranking in the terminal and Markdown, pinned.

tests/golden/generate/results.json (written by the real write path from `kit.golden_campaigns`, a
black-box server at two request rates, `rank: {at: p90, ttft_ms: 100}`) is rendered as `submit` ends
(120 columns, no colour) and as `report --format md`, and compared with
tests/golden/reports/generate_terminal.txt and generate_report.md. Rewrite them with `SARK_REGOLD=1`
when a view changes on purpose, and read the diff.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from node.cli.campaign import end_tables
from node.cli.report import read_report
from node.report.tables import render_markdown
from scheduler.results import CampaignReport

GOLDEN = Path(__file__).resolve().parents[3] / "golden"


def _report() -> CampaignReport:
    return read_report(GOLDEN / "generate" / "results.json")


def _terminal(report: CampaignReport) -> str:
    out = io.StringIO()
    Console(file=out, width=120, color_system=None, force_terminal=False).print(end_tables(report))
    return out.getvalue()


@pytest.mark.parametrize(
    ("name", "render"), [("generate_terminal.txt", _terminal), ("generate_report.md", render_markdown)]
)
def test_the_generate_campaigns_front_and_ranking_are_the_golden_ones(name: str, render: object) -> None:
    assert callable(render)
    shown = render(_report())
    golden = GOLDEN / "reports" / name
    if os.environ.get("SARK_REGOLD"):
        golden.write_text(shown)
    assert shown == golden.read_text()


def test_the_terminal_lists_each_point_on_the_front_and_the_ranking() -> None:
    report = _report()
    shown = _terminal(report)
    front = shown.split("throughput-latency front per device or server", 1)[1].split("Ranking: ", 1)[0]
    for point in report.fronts[0].points:
        assert point.on_front  # two rates, equal figures: neither beats the other
        assert point.load in front
    assert front.count("single") == len(report.fronts[0].points)  # each point's verification
    assert "Ranking: output tok/s at TTFT p90 <= 100 ms" in shown
    ranked = shown.split("Ranking: ", 1)[1]
    assert "unchecked · single" in ranked  # the tier said beside the rank
    assert "TTFT 28.1 ms" in ranked  # the figure the bound read


def test_a_point_off_the_front_is_counted_not_listed() -> None:
    report = _report()
    front = report.fronts[0]
    slower = front.points[1].with_(load="request_rate=99", latency_ms=999.0, on_front=False)
    shown = _terminal(report.with_(fronts=(front.with_(points=(*front.points, slower)),)))
    assert "request_rate=99" not in shown
    assert "1 point off the front: report.html lists every point" in " ".join(shown.split())  # wrapped


def test_report_html_ranks_after_the_front_with_the_rule_and_the_order() -> None:
    from node.report.render import render_html

    html = render_html(_report())
    assert html.index('id="front-points"') < html.index('<table id="ranking">')
    ranking = html.split('<table id="ranking">', 1)[1].split("</table>", 1)[0]
    assert '<tr data-rank="1">' in ranking
    assert "unchecked · single" in ranking
    assert "Ranking: output tok/s at TTFT p90 &lt;= 100 ms" in html
    assert "failed verification never ranks" in html
