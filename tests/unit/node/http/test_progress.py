"""The dashboard's JSON speaks the tasks' one vocabulary (`TaskState`): each task's state and whether it
ended, the campaign's tally by state; the seeds' job words stay in `job_breakdown` and `status` only."""

from __future__ import annotations

import scheduler as sch
from node.http import shapes
from node.http.shapes import task
from node.http.state import CampaignState
from node.submitter.store import CampaignRecord, CampaignStatus
from protocol import ComputeUnit, ModelRef, Phase

MODEL = ModelRef(name="m.onnx", sha256="a" * 64, size=1)


def _view(state: sch.TaskState) -> sch.TaskView:
    progress = sch.TaskProgress(phase=Phase.WARMUP, done=1, total=4)
    return sch.TaskView(
        task_id="c-job-0-0",
        job_index=0,
        unit=ComputeUnit.CPU_ONNX,
        model=MODEL,
        state=state,
        progress=progress,
    )


def test_a_leased_task_shows_its_state_and_phase() -> None:
    shown = task(_view(sch.TaskState.LEASED))
    assert (shown["state"], shown["ended"], shown["phase"]) == ("leased", False, "warmup")
    assert shown["status"] == "running"  # the seeds' word, for their clients


def test_an_ended_task_says_so_and_shows_no_phase() -> None:
    for state in (sch.TaskState.DONE, sch.TaskState.UNSCHEDULABLE, sch.TaskState.CANCELLED):
        shown = task(_view(state))
        assert (shown["state"], shown["ended"], shown["phase"]) == (state.value, True, None)


def test_the_campaigns_tally_is_by_state_every_state_named() -> None:
    campaign = sch.parse_campaign(
        "name: c\nmodel_url: https://example.org/m.onnx\njobs: [{compute_unit: CPU (ONNX)}]"
    )
    record = CampaignRecord(
        campaign_id="c",
        name="c",
        created_utc="2026-01-01T00:00:00",
        source="",
        text="",
        models={},
        snapshot=None,
        status=CampaignStatus.RUNNING,
        out_dir="",
    )
    states = (sch.TaskState.DONE, sch.TaskState.LEASED, sch.TaskState.OFFERED, sch.TaskState.UNSCHEDULABLE)
    shown = shapes.campaign(CampaignState(record, campaign, tuple(_view(s) for s in states), running=True))
    assert list(shown["states"]) == [s.value for s in sch.TaskState]
    assert {s: n for s, n in shown["states"].items() if n} == {
        "offered": 1,
        "leased": 1,
        "done": 1,
        "unschedulable": 1,
    }
    assert shown["job_breakdown"] == {"pending": 1, "running": 1, "complete": 1, "failed": 1}  # the seeds'
