"""`generate.capacity` in a campaign, a capacity result's check on the submitter, and its rows."""

from __future__ import annotations

import pytest

import scheduler as sch
from protocol import (
    CapacityLevel,
    CapacityResult,
    FailureReason,
    Measurement,
    RequestRecord,
    TaskSpec,
    derive,
)
from protocol.capacity import derive_capacity, level_spec, saturation
from protocol.genstats import summarize_generation
from protocol.stats import NO_SAMPLES
from scheduler.results import capacity_columns, level_rows

SEARCH = """
name: knee
jobs:
  - endpoint: {url: "http://127.0.0.1:8000/v1", model: m}
    generate:
      prompts: builtin:summaries
      max_new_tokens: 4
      capacity: {slo: {ttft_ms: 150, tpot_ms: 50}, goodput_pct: 90, max_concurrency: 256, level_s: 2}
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(sch.CampaignError) as info:
        sch.parse_campaign(text)
    return [f"{p.path}: {p.problem}" for p in info.value.problems]


def test_a_capacity_block_is_one_job_with_its_slo() -> None:
    (job,) = sch.parse_campaign(SEARCH).jobs
    generate = job.spec.generate
    assert generate is not None
    assert generate.capacity is not None
    assert (generate.capacity.max_concurrency, generate.capacity.level_s) == (256, 2.0)
    assert (generate.slo.ttft_ms, generate.slo.tpot_ms) == (150, 50)


def test_a_rate_range_searches_request_rates() -> None:
    text = SEARCH.replace("max_concurrency: 256", "rate: {min: 1, max: 64}")
    (job,) = sch.parse_campaign(text).jobs
    assert job.spec.generate is not None
    capacity = job.spec.generate.capacity
    assert capacity is not None
    assert (capacity.rate_min, capacity.rate_max, capacity.max_concurrency) == (1, 64, None)


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ("max_new_tokens: 4", "max_new_tokens: 4\n      concurrency: 4", "jobs[0].generate.capacity"),
        ("slo: {ttft_ms: 150, tpot_ms: 50}, ", "", "jobs[0].generate.capacity.slo"),
        ("slo: {ttft_ms: 150, tpot_ms: 50}", "slo: {ttft: 150}", "jobs[0].generate.capacity.slo"),
        ("max_concurrency: 256", "rate: 5", "jobs[0].generate.capacity.rate"),
        ("max_concurrency: 256", "max_concurrency: 0", "jobs[0].generate.capacity.max_concurrency"),
        ("level_s: 2", "level_s: 2, knee: 3", "jobs[0].generate.capacity"),
        ('endpoint: {url: "http://127.0.0.1:8000/v1", model: m}', "compute_unit: CPU (PyTorch)",
         "jobs[0].generate.capacity"),
    ],
)  # fmt: skip
def test_a_bad_capacity_block_is_named_at_its_path(old: str, new: str, where: str) -> None:
    text = SEARCH.replace(old, new)
    if "compute_unit" in new:
        text = "model: {path: m.gguf}\n" + text
    problems = _problems(text)
    assert any(p.startswith(where) for p in problems), problems


def _record(at: float, ttft: float) -> RequestRecord:
    return RequestRecord(prompt_id="p", prompt_tokens=3, output_tokens=3, ttft_ms=ttft, e2e_ms=ttft + 10,
                         token_times_ms=(ttft, ttft + 5, ttft + 10), started_s=at)  # fmt: skip


def _searched() -> tuple[TaskSpec, Measurement]:
    (job,) = sch.parse_campaign(SEARCH).jobs
    generate = job.spec.generate
    assert generate is not None
    levels = []
    for level, ttft in ((1.0, 20.0), (2.0, 20.0), (4.0, 200.0), (3.0, 20.0)):
        records = tuple(_record(i * 0.01, ttft + (60.0 * i if ttft > 150 else 0.0)) for i in range(12))
        stats = summarize_generation(records, 1.0, level_spec(generate, level))
        end = saturation(records, generate) if ttft > 150 else None
        levels.append(CapacityLevel(level=level, generation=stats, ended_early=end, passed=False))
    raw = CapacityResult(by="concurrency", goodput_pct=90, levels=tuple(levels), knee=None,
                         first_fail=None, finished=False)  # fmt: skip
    found = derive_capacity(raw, generate)
    m = Measurement(compute_unit=job.spec.compute_unit, load_ms=NO_SAMPLES, load_first_ms=0.0,
                    first_inference_ms=0.0, warmups_used=0, inference_ms=NO_SAMPLES,
                    peak_load_ram_mb=0.0, peak_inference_ram_mb=0.0, cpu_cores_used=0.0,
                    generation=found.levels[3].generation, capacity=found)  # fmt: skip
    return job.spec, derive(m, job.spec)


def test_an_honest_search_passes_the_check_as_sent() -> None:
    spec, m = _searched()
    assert sch.check_figures(m, spec) == m
    assert m.capacity is not None
    assert (m.capacity.knee, m.capacity.first_fail) == (3, 4)


def test_a_forged_knee_is_refused_inconsistent() -> None:
    spec, m = _searched()
    assert m.capacity is not None
    refused = sch.check_figures(m.with_(capacity=m.capacity.with_(knee=4.0, first_fail=None)), spec)
    assert isinstance(refused, sch.Refusal)
    assert refused.reason == FailureReason.INCONSISTENT
    assert "capacity.knee" in refused.detail


def test_a_level_whose_records_meet_the_slo_cannot_be_called_failed() -> None:
    spec, m = _searched()
    assert m.capacity is not None
    levels = list(m.capacity.levels)
    levels[1] = levels[1].with_(passed=False)
    refused = sch.check_figures(m.with_(capacity=m.capacity.with_(levels=tuple(levels))), spec)
    assert isinstance(refused, sch.Refusal)
    assert refused.reason == FailureReason.INCONSISTENT


def test_capacity_levels_for_a_task_that_asked_for_none_are_invalid() -> None:
    spec, m = _searched()
    assert spec.generate is not None
    plain = spec.with_(generate=spec.generate.with_(capacity=None))
    refused = sch.check_figures(m, plain)
    assert isinstance(refused, sch.Refusal)
    assert refused.reason == FailureReason.INVALID


def test_the_capacity_row_and_one_row_per_level() -> None:
    _, m = _searched()
    assert m.capacity is not None
    row = dict.fromkeys(sch.CSV_COLUMNS, "") | {"JobId": "t1", "Status": "Complete"} | capacity_columns(m)
    assert (row["CapacityRow"], row["CapacityKnee"], row["CapacityFirstFail"]) == ("knee", "3", "4")
    search = (row["CapacityBy"], row["CapacityGoodputPct"], row["CapacityFinished"])
    assert search == ("concurrency", "90", "True")
    levels = level_rows(row, m.capacity)
    assert [r["JobId"] for r in levels] == ["t1/1", "t1/2", "t1/3", "t1/4"]
    assert [r["Concurrency"] for r in levels] == ["1", "2", "4", "3"]
    assert [r["LevelPassed"] for r in levels] == ["True", "True", "False", "True"]
    assert [r["LevelEndedEarly"] for r in levels] == ["", "", "ttft_rising", ""]
    assert "queue is growing" in levels[2]["Detail"]
    assert all(r["CapacityRow"] == "level" and r["CapacityKnee"] == "" for r in levels)
    assert set(levels[0]) == set(sch.CSV_COLUMNS)
    assert sch.to_csv([row, *levels]).count("\n") == 6
