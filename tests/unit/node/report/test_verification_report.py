"""Issue 38, scope 8: one agreed figure per class, with its band, its replicas and the outlier, in
every medium: results.json, report.html's section, the Markdown report, the terminal's table after
the matrix (the function `submit` prints), the API's campaign object and `report --diff`.

The campaign is played by the real scheduler (`test_report_screens._verified`: four peers on four
networks, one halving liar settled as the outlier of a third replica) and written by the real path
(`campaign_report`); hostile text a peer could choose goes through each medium's seam.
"""

from __future__ import annotations

import io
import json
import re
from functools import cache
from typing import Final

from kit.reports import _verified_played
from rich.console import Console

from node.cli.campaign import end_tables
from node.http.shapes import ApiJson, campaign
from node.http.state import CampaignState
from node.report.render import render_html
from node.report.tables import render_markdown
from node.report.verifyreport import (
    NONE_ASKED,
    NOTHING_AGREED,
    agreed_table,
    verification_html,
    verification_table,
)
from node.submitter.store import CampaignRecord, CampaignStatus
from protocol import for_html
from scheduler.results import CampaignReport, agreed_changes

HOSTILE: Final = "[bold]x[/bold] <script>alert(1)</script> | \x1b[31m"


def _text(*renderables: object) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=160, force_terminal=False)
    for renderable in renderables:
        console.print(renderable)
    return buffer.getvalue()


played = cache(_verified_played)  # played once: the tests only read it


def verified() -> CampaignReport:
    return played()[1]


def test_each_medium_shows_the_agreed_figure_the_band_the_replicas_and_the_outlier() -> None:
    report = verified()
    assert CampaignReport.from_json(report.to_json()).verification == report.verification
    first, second = report.verification
    assert (first.agreed_ms, second.agreed_ms, second.outliers) == (10.05, 10.0, ("12D3-b3",))

    page = render_html(report)
    section = re.search(r'<div id="verification">(.*?)</div>', page, re.S)
    assert section is not None
    assert '<td class="num">10.050</td><td class="num">27.0%</td>' in section[1]
    assert "12D3-b3 5.000 [10.0.4.0/24] outlier" in section[1]
    assert "12D3-b3: 5 ms against the agreed 10 ms (band 27.0%)" in section[1]

    md = render_markdown(report)
    assert "## Verification" in md
    assert "| replicated | 10.000 | 27.0% |" in md

    terminal = _text(end_tables(report))  # what `submit` prints: the matrix, then this table
    assert terminal.index("verification: one agreed figure per class") > terminal.index("✓2/2")
    assert "10.050" in terminal
    assert "27.0%" in terminal
    assert "12D3-b3: 5 ms against the agreed 10 ms" in terminal


def test_a_campaign_that_asked_nothing_or_agreed_on_nothing_says_so_in_one_muted_line() -> None:
    report = verified().model_copy(update={"verification": ()})
    assert f'<p class="muted" id="verification">{for_html(NONE_ASKED)}</p>' in verification_html(report)
    assert f"_{NONE_ASKED}_" in render_markdown(report)
    assert verification_table(report) is None
    first = verified().verification[0]
    refused = report.model_copy(update={"verification": (first.model_copy(update={"outcome": "single"}),)})
    assert NOTHING_AGREED in "".join(verification_html(refused))
    assert NOTHING_AGREED not in "".join(verification_html(verified()))
    assert "verification" not in report.document()  # results.json keeps its keys as before


def test_report_diff_compares_the_agreed_figures_and_says_which_side_was_not_verified() -> None:
    report = verified()
    first, second = report.verification
    slower = second.model_copy(update={"agreed_ms": 15.0})
    single = first.model_copy(update={"outcome": "single", "agreed_ms": None, "band": None})
    changes = agreed_changes(report.verification, (single, slower))
    assert [c.verdict for c in changes] == ["B not verified: single", "beyond the band"]
    text = _text(agreed_table(changes))
    assert "B not verified: single" in text
    assert "+50.0%" in text


def test_text_a_peer_wrote_is_shown_as_typed_in_every_medium() -> None:
    report = verified()
    first, second = report.verification
    replica = second.replicas[1].model_copy(update={"peer": HOSTILE, "verdict": HOSTILE})
    hostile = second.model_copy(update={"reason": HOSTILE, "replicas": (replica,), "outliers": (HOSTILE,)})
    report = report.model_copy(update={"verification": (first, hostile)})
    page = "".join(verification_html(report))  # render_html places this section (the first test)
    assert "<script>alert" not in page
    assert "&lt;script&gt;" in page
    terminal = _text(verification_table(report))
    assert "\x1b" not in terminal
    assert "[bold]x[/bold]" in terminal  # markup shown, never applied
    md = render_markdown(report)
    assert "\x1b" not in md
    assert "\\| " in md  # a pipe cannot end the cell


def test_the_apis_campaign_carries_each_groups_verification_as_results_json_does() -> None:
    scheduler, report = played()
    record = CampaignRecord(
        "verified-1", "verified", "2026-01-01T00:00:00Z", "c.yaml", "", {}, None, CampaignStatus.FINISHED, ""
    )
    state = CampaignState(record, scheduler.snapshot().campaign, tuple(scheduler.tasks()), running=False)
    shown = json.loads(bytes(ApiJson(campaign(state)).body))  # GET /api/campaigns/{id}, strict JSON
    assert shown["verification"] == [g.model_dump(mode="json") for g in report.verification]
    assert [g["agreed_ms"] for g in shown["verification"]] == [10.05, 10.0]
