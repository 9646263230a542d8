"""Sustained runs on the submitter: the campaign's `sustain:` block, and the windows derived again from
the raw parts before a result is shown (an altered window or verdict is refused as inconsistent)."""

from __future__ import annotations

import pytest

from protocol import (
    ComputeUnit,
    FailureReason,
    Measurement,
    RunConditions,
    SustainSpec,
    TaskSpec,
    Telemetry,
    TelemetryPoint,
    derive,
)
from protocol.stats import NO_SAMPLES
from scheduler import CampaignError, Refusal, check_figures, parse_campaign
from scheduler.results import sustain_columns

SPEC = TaskSpec(
    compute_unit=ComputeUnit.CPU_ONNX, sustain=SustainSpec(duration_s=4.0, window_s=2.0), timeout_s=60
)
CAMPAIGN = "model: {path: m.onnx}\njobs:\n  - compute_unit: CPU (ONNX)\n    sustain: %s\n"


def sustained() -> Measurement:
    """A 4 s run in two windows, the second 50 % slower while another process took a core."""
    quiet = [TelemetryPoint(t_ms=t, cpu_mhz=(2400.0,), busy_cores=1.0, own_cores=1.0, cpu_share=0.9)
             for t in (500.0, 1000.0, 1500.0, 2000.0)]  # fmt: skip
    loaded = [p.with_(t_ms=p.t_ms + 2000.0, busy_cores=2.0, cpu_share=0.5) for p in quiet]
    raw = Measurement(
        compute_unit=ComputeUnit.CPU_ONNX,
        load_ms=NO_SAMPLES,
        load_first_ms=0.0,
        first_inference_ms=0.0,
        warmups_used=3,
        inference_ms=NO_SAMPLES,
        samples_ms=(10.0,) * 200 + (15.0,) * 130,
        process_runs=(330,),
        load_samples_ms=(100.0, 90.0, 95.0),
        first_inferences_ms=(20.0,),
        peak_load_ram_mb=50.0,
        peak_inference_ram_mb=60.0,
        cpu_cores_used=1.0,
        conditions=RunConditions(background_cores=0.5),
        mark_runs=(0, 200, 330),
        mark_ms=(0.0, 2000.1, 4000.2),
        telemetry=Telemetry(period_ms=500.0, groups=("cpu0-1 (max 2400 MHz)",), points=(*quiet, *loaded)),
    )
    return derive(raw, SPEC)


def test_an_honest_sustained_result_passes_and_fills_its_columns() -> None:
    m = sustained()
    assert m.sustained is not None
    assert [w.median_ms for w in m.sustained.windows] == [10.0, 15.0]
    assert m.sustained.throttled
    assert check_figures(m, SPEC) == m
    columns = sustain_columns(m)
    assert columns["Throttled"] == "True"
    assert columns["ThrottleCauses"] == "background_load"
    assert columns["WindowMediansMs"] == "10.000;15.000"
    assert columns["TelemetryPoints"] == "8"
    assert "background load" in columns["ThrottleDetail"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ("median", "sustained.windows[1].median_ms"),
        ("verdict", "sustained.throttled"),
    ],
)
def test_an_altered_window_or_verdict_is_refused_as_inconsistent(change: str, field: str) -> None:
    m = sustained()
    assert m.sustained is not None
    if change == "median":
        windows = (m.sustained.windows[0], m.sustained.windows[1].with_(median_ms=10.5))
        bad = m.with_(sustained=m.sustained.with_(windows=windows))
    else:
        bad = m.with_(sustained=m.sustained.with_(throttled=False))
    refusal = check_figures(bad, SPEC)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == FailureReason.INCONSISTENT
    assert field in refusal.detail


@pytest.mark.parametrize(
    ("runs", "times", "says"),
    [
        ((0, 200), (0.0, 2000.0, 4000.0), "mark_runs: 2 marks for 3 mark times"),
        ((0, 200, 400), (0.0, 2000.0, 4000.0), "mark_runs: not non-decreasing indexes within the 330"),
        ((0, 200, 330), (0.0, 2000.0, 1000.0), "mark_ms: a negative or decreasing time"),
    ],
)
def test_marks_that_cannot_cut_the_samples_are_invalid(
    runs: tuple[int, ...], times: tuple[float, ...], says: str
) -> None:
    refusal = check_figures(sustained().with_(mark_runs=runs, mark_ms=times), SPEC)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == FailureReason.INVALID
    assert says in refusal.detail


def test_a_sustain_block_makes_one_process_and_a_timeout_past_the_duration() -> None:
    spec = parse_campaign(CAMPAIGN % "{duration_s: 600, window_s: 30}").jobs[0].spec
    assert spec.processes == 1
    assert spec.sustain == SustainSpec(duration_s=600, window_s=30)
    assert spec.timeout_s == 1200.0
    timed = parse_campaign(CAMPAIGN % "{duration_s: 8, window_s: 2}\n    timeout_s: 60").jobs[0].spec
    assert timed.timeout_s == 60.0


@pytest.mark.parametrize(
    ("block", "path", "says"),
    [
        ("{duration_s: 8}", "jobs[0].sustain", "expected {duration_s: seconds, window_s: seconds}"),
        ("{duration_s: 8, window_s: 20}", "jobs[0].sustain", "window_s 20 is longer than duration_s 8"),
        ("{duration_s: '8', window_s: 2}", "jobs[0].sustain", "are numbers of seconds"),
        ("{duration_s: 8, window_s: 0.001}", "jobs[0].sustain", "over 1000 windows"),
        ("{duration_s: 8, window_s: 2}\n    processes: 3", "jobs[0].processes", "runs one process"),
        ("{duration_s: 8, window_s: 2}\n    timeout_s: 5", "jobs[0].sustain", "shorter than timeout_s"),
    ],
)
def test_a_bad_sustain_block_is_named_at_its_path(block: str, path: str, says: str) -> None:
    with pytest.raises(CampaignError) as info:
        parse_campaign(CAMPAIGN % block)
    problems = info.value.problems
    assert [p.path for p in problems] == [path]
    assert says in problems[0].problem
