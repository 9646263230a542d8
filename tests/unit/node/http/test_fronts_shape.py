"""GET /api/campaigns' `fronts` and `ranking` (issue 51): the very values results.json holds, [] and null
for a campaign without them; the OpenAPI schema names both."""

from __future__ import annotations

import json
from pathlib import Path

from kit.golden_campaigns import CAMPAIGNS, CREATED, Golden

import scheduler as sch
from node.cli.report import read_report
from node.http import shapes
from node.http.openapi import SCHEMAS
from node.http.state import ApiState, CampaignState
from node.submitter.outputs import Shown, campaign_rows
from node.submitter.store import CampaignRecord, CampaignStatus
from scheduler.results import with_speedups

GENERATE = Path(__file__).resolve().parents[3] / "golden" / "generate" / "results.json"
RUNTIMES = Path(__file__).resolve().parents[3] / "golden" / "reports" / "runtimes_results.json"


def _state(campaign: sch.Campaign) -> CampaignState:
    record = CampaignRecord(
        campaign_id="serve-1",
        name=campaign.name,
        created_utc="2026-01-01T00:00:00",
        source="",
        text="",
        models={},
        snapshot=None,
        status=CampaignStatus.FINISHED,
        out_dir="",
    )
    return CampaignState(record, campaign, (), running=False)


def test_the_campaign_object_carries_results_jsons_fronts_and_ranking() -> None:
    report = read_report(GENERATE)
    document = json.loads(GENERATE.read_text())
    shown = shapes.campaign(_state(report.campaign), report.fronts, report.ranking)
    assert shown["fronts"] == document["fronts"]
    assert shown["ranking"] == document["ranking"]
    assert shown["ranking"]["standings"][0]["rank"] == 1
    bare = shapes.campaign(_state(report.campaign))
    assert (bare["fronts"], bare["ranking"]) == ([], None)
    assert {"fronts", "ranking"} <= set(SCHEMAS["Campaign"]["properties"])


class _Rows:
    """What `ApiState.fronts` reads of the serving state: the campaign's rows as its files render them."""

    def __init__(self, golden: Golden) -> None:
        self.golden = golden

    def rows(self, state: CampaignState) -> list[Shown]:
        g = self.golden
        return campaign_rows(g.scheduler, g.results, CREATED, g.campaign)


def test_the_live_fronts_are_results_jsons() -> None:
    golden = CAMPAIGNS["generate"]()
    document = json.loads(GENERATE.read_text())
    fronts, ranking = ApiState.fronts(_Rows(golden), _state(golden.campaign))  # type: ignore[arg-type]
    assert [f.model_dump(mode="json") for f in fronts] == document["fronts"]
    assert ranking is not None
    assert ranking.model_dump(mode="json") == document["ranking"]
    tensor = CAMPAIGNS["tensor"]()
    assert ApiState.fronts(_Rows(tensor), _state(tensor.campaign)) == ((), None)  # type: ignore[arg-type]


def test_the_campaign_object_carries_each_tasks_speedup_as_the_files_have_it_now() -> None:
    """GET /api/campaigns' `speedups` (issue 51): each task's SpeedupVsCpu from the campaign's rows as
    they stand (README's runtimes run: OpenVINO's CPU row against ONNX Runtime's), so a row whose
    baseline completes later gets its cell on the dashboard's next poll; none for a campaign without
    two tensor units, and the OpenAPI schema names it."""
    report = read_report(RUNTIMES)

    class Rows:
        def rows(self, state: CampaignState) -> list[Shown]:
            return with_speedups([(t.row, t) for t in report.results])  # type: ignore[misc]

    said = ApiState.speedups(Rows(), _state(report.campaign))  # type: ignore[arg-type]
    openvino = next(t.row["JobId"] for t in report.results if t.row["ComputeUnits"] == "CPU (OpenVINO)")
    assert said == ((openvino, "0.09x (0.00-1.15) vs CPU (ONNX)"),)
    assert shapes.campaign(_state(report.campaign), speedups=said)["speedups"] == dict(said)
    assert shapes.campaign(_state(report.campaign))["speedups"] == {}
    assert "speedups" in SCHEMAS["Campaign"]["properties"]
    generate = CAMPAIGNS["generate"]()
    assert ApiState.speedups(_Rows(generate), _state(generate.campaign)) == ()  # type: ignore[arg-type]
