"""The report's pure data: entries from result rows, the device x unit matrix, Mann-Whitney, diffs."""

from __future__ import annotations

import pytest

from protocol import ComputeUnit, DeviceProfile, Measurement, Stats
from scheduler.results import (
    COLUMNS,
    NO_DEVICE,
    CampaignReport,
    ReportEntry,
    compare,
    device_label,
    diff_entries,
    entries_of,
    entry_of,
    job_index_of,
    latency_matrices,
    mann_whitney,
    match_entries,
)

# Reference values from scipy.stats.mannwhitneyu(a, b, method="asymptotic") (continuity and tie corrected).
MWU_CASES = [
    ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 0.0, 0.012185780355344813),
    ([1, 2, 2, 3, 4], [2, 3, 5, 6, 6, 7], 4.5, 0.06414661873440437),
    (
        [0.5, 0.7, 0.7, 0.9, 1.1, 1.1, 1.1, 1.3],
        [0.6, 0.7, 1.2, 1.4, 1.4, 1.5, 1.6],
        14.0,
        0.11524971218079373,
    ),
]


@pytest.mark.parametrize(("a", "b", "u", "p"), MWU_CASES)
def test_mann_whitney_matches_the_reference(a: list[float], b: list[float], u: float, p: float) -> None:
    result = mann_whitney(a, b)
    assert result.u == u
    assert result.p_value == pytest.approx(p, rel=1e-9)
    assert mann_whitney(b, a).p_value == pytest.approx(p, rel=1e-9)  # two-sided: symmetric


def test_mann_whitney_all_tied_is_no_evidence_and_empty_is_an_error() -> None:
    assert mann_whitney([1.0] * 5, [1.0] * 7).p_value == 1.0
    with pytest.raises(ValueError, match="non-empty"):
        mann_whitney([], [1.0])


def test_job_index_comes_from_the_task_id() -> None:
    assert job_index_of("campaign-17-job-3-0") == 3
    assert job_index_of("campaign-17-job-12-4") == 12
    assert job_index_of("odd") == 0


def _row(
    device: str, unit: str, median: float | None, *, job: int = 0, status: str = "Complete"
) -> dict[str, str]:
    return {
        "Status": status,
        "JobId": f"campaign-1-job-{job}-0",
        "FileName": "m.onnx",
        "ComputeUnits": unit,
        "DeviceName": device,
        "InferenceMsMedian": "" if median is None else f"{median:.3f}",
        "ProcessMedians": "" if median is None else f"{median:.3f};{median * 1.01:.3f}",
        "ProcessSpreadPct": "" if median is None else "1.00",
        "Unstable": "False",
        "WorkerPeerId": f"peer-{device}",
        "FailureReason": "" if median is not None else "no_feasible_peer",
    }


def _entry(
    device: str,
    samples: list[float],
    *,
    medians: tuple[float, ...] = (),
    fingerprint: str = "",
    unit: str = "CPU (ONNX)",
    job: int = 0,
    worker: str | None = None,
) -> ReportEntry:
    ordered = sorted(samples)
    return ReportEntry(
        task_id=f"c-job-{job}-0",
        job_index=job,
        status="Complete",
        model="m.onnx",
        unit=unit,
        device=device,
        fingerprint=fingerprint,
        worker=f"peer-{device}" if worker is None else worker,
        median_ms=ordered[len(ordered) // 2],
        samples_ms=tuple(samples),
        process_medians_ms=medians,
    )


def _measurement(median: float = 2.0) -> Measurement:
    stats = Stats(n=3, min=1, max=3, mean=2, median=median, stddev=1, p90=3, p95=3, p99=3, cv=0.5)
    return Measurement(
        compute_unit=ComputeUnit.CPU_ONNX,
        load_ms=stats.with_(median=5.5),
        load_first_ms=4.0,
        first_inference_ms=3.0,
        warmups_used=1,
        inference_ms=stats,
        process_medians_ms=(1.9, 2.1),
        process_spread_pct=10.0,
        unstable=True,
        unstable_reasons=("a", "b"),
        peak_load_ram_mb=10.0,
        peak_inference_ram_mb=11.0,
        cpu_cores_used=1.0,
    )


def _measured(device: str, unit: str, median: float, *, job: int = 0) -> ReportEntry:
    return entry_of(_row(device, unit, median, job=job), [], measurement=_measurement(median))


def test_entry_of_takes_who_from_the_row_and_every_figure_from_the_typed_value() -> None:
    entry = entry_of(_row("box", "CPU (ONNX)", 2.0), [1.0, 2.0, 3.0], measurement=_measurement())
    assert (entry.device, entry.unit, entry.median_ms, entry.load_ms_median) == (
        "box",
        "CPU (ONNX)",
        2.0,
        5.5,
    )
    assert entry.process_medians_ms == (1.9, 2.1)
    assert entry.unstable
    assert entry.unstable_reasons == ("a", "b")
    assert entry.samples_ms == (1.0, 2.0, 3.0)
    assert entry.complete
    failed = entry_of(_row("", "GPU (ONNX)", None, status="Unschedulable"), [])
    assert failed.device == NO_DEVICE
    assert not failed.complete
    assert failed.detail == "no_feasible_peer"


def test_no_figure_is_parsed_back_from_a_row_cell() -> None:
    """Every numeric cell of the row is garbage (or a lie): the entry's figures are the typed value's."""
    lies = {"Unstable": "False", "UnstableReasons": "lies", "Throttled": "True", "ThrottleCauses": "thermal"}
    row = _row("box", "CPU (ONNX)", 2.0) | {c.name: "999.999" for c in COLUMNS if c.form} | lies
    entry = entry_of(row, [], measurement=_measurement())
    assert entry == entry_of(_row("box", "CPU (ONNX)", 2.0), [], measurement=_measurement())
    assert (entry.median_ms, entry.process_spread_pct, entry.peak_inference_ram_mb) == (2.0, 10.0, 11.0)
    assert (entry.unstable, entry.unstable_reasons, entry.throttled) == (True, ("a", "b"), "")
    garbage = row | {c.name: "not a number" for c in COLUMNS if c.form}
    assert entry_of(garbage, [], measurement=_measurement()) == entry
    bare = entry_of(row, [])  # no typed value: no figure at all, whatever the cells say
    assert (bare.median_ms, bare.load_ms_median, bare.process_medians_ms, bare.unstable) == (
        None,
        None,
        (),
        False,
    )
    assert not bare.complete


def test_entries_from_a_campaign_report_take_the_device_fingerprint() -> None:
    device = DeviceProfile(
        device_name="box", soc="x", cores_physical=1, cores_logical=1, ram_mb=1, os="Linux", os_version="1",
        fingerprint="f" * 64,
    )  # fmt: skip
    document = {
        "results": [
            {
                "row": _row("box", "CPU (ONNX)", 2.0),
                "samples_ms": [1.0, 2.0, 3.0],
                "signed": {
                    "worker": "peer-box",
                    "device": device.model_dump(mode="json"),
                    "measurement": _measurement().model_dump(),
                },
            },
            {
                "row": _row("", "GPU (ONNX)", None, status="Unschedulable", job=1),
                "samples_ms": [],
                "signed": None,
            },
        ]
    }
    campaign = {"name": "c", "models": [], "jobs": []}
    report = CampaignReport.model_validate({"campaign_id": "c-1", "campaign": campaign, **document})
    first, second = entries_of(report)
    assert first.fingerprint == "f" * 64
    assert first.process_medians_ms == (1.9, 2.1)  # from the signed measurement
    assert first.device_profile == device
    assert second.fingerprint == ""
    assert second.job_index == 1


def test_the_matrix_has_devices_down_units_across_and_the_unplaced_last() -> None:
    entries = [
        _measured("b-box", "CPU (ONNX)", 2.0),
        _measured("a-box", "CPU (ONNX)", 1.0),
        entry_of(_row("", "GPU (ONNX)", None, status="Unschedulable", job=1), []),
    ]
    (matrix,) = latency_matrices(entries)
    assert matrix.model == "m.onnx"
    assert matrix.devices == ("a-box", "b-box", NO_DEVICE)
    assert matrix.columns == ("CPU (ONNX)", "GPU (ONNX)")
    a_cpu, a_gpu = matrix.cells[0]
    assert a_cpu is not None
    assert a_cpu.median_ms == 1.0
    assert a_gpu is None
    gpu = matrix.cells[2][1]
    assert gpu is not None
    assert gpu.median_ms is None
    assert gpu.status == "Unschedulable"


def test_two_jobs_on_one_unit_get_a_column_each_and_same_named_workers_a_row_each() -> None:
    one = _measured("box", "CPU (ONNX)", 1.0)
    two = _measured("box", "CPU (ONNX)", 2.0, job=1)
    other = _measured("box", "CPU (ONNX)", 3.0).with_(worker="peer-other-abcdef")
    (matrix,) = latency_matrices([one, two, other])
    assert matrix.columns == ("CPU (ONNX) · job 0", "CPU (ONNX) · job 1")
    assert matrix.devices == ("box [abcdef]", "box [er-box]")


def test_a_device_that_ran_two_tasks_in_a_column_shows_one_and_names_the_other() -> None:
    """A replica of another device's task (or a retry) lands in the same cell as the device's own: the
    cell shows the completed one and every view names the other, none drops it silently."""
    from rich.text import Text

    from node.report.matrix import cell_html, cell_markdown, cell_rich

    failed = entry_of(_row("box", "CPU (ONNX)", None, status="Failed"), []).with_(task_id="c-job-0-4")
    own = _measured("box", "CPU (ONNX)", 1.0)
    (matrix,) = latency_matrices([failed, own])
    ((cell,),) = matrix.cells
    assert cell is not None
    assert cell.median_ms == 1.0  # the completed one, whichever came first
    assert cell.also == ("c-job-0-4",)
    for shown in (cell_html(cell), cell_markdown(cell), Text.from_markup(cell_rich(cell)).plain):
        assert "+1 more task here: 0-4" in shown
    (alone,) = latency_matrices([own])
    assert alone.cells[0][0] is not None
    assert "more task" not in cell_markdown(alone.cells[0][0])


def test_diff_pairs_by_fingerprint_and_name_then_fingerprint_then_name() -> None:
    a = [_entry("x", [1.0], fingerprint="f1"), _entry("renamed", [1.0], fingerprint="f2"), _entry("y", [1.0])]
    b = [
        _entry("x", [1.0], fingerprint="f1"),
        _entry("new-name", [1.0], fingerprint="f2"),
        _entry("y", [1.0]),
    ]
    b.append(_entry("z", [1.0]))
    pairs = match_entries(a, b)
    named = {(p.device if p else None, q.device if q else None) for p, q in pairs}
    assert named == {("x", "x"), ("renamed", "new-name"), ("y", "y"), (None, "z")}


def test_a_clear_slowdown_is_a_significant_regression() -> None:
    before = _entry("x", [1.0 + 0.01 * (i % 7) for i in range(60)], medians=(1.02, 1.03, 1.03))
    after = _entry("x", [2.0 + 0.01 * (i % 7) for i in range(60)], medians=(2.02, 2.03, 2.04))
    row = compare(before, after)
    assert row.significant
    assert row.regression
    assert not row.improvement
    assert row.verdict == "regression"
    assert row.change_pct == pytest.approx((2.03 - 1.03) / 1.03 * 100.0)
    assert row.p_value is not None
    assert row.p_value < 1e-6
    assert compare(after, before).verdict == "improvement"


def test_the_same_distribution_is_no_significant_change() -> None:
    samples = [1.0 + 0.01 * (i % 7) for i in range(60)]
    row = compare(
        _entry("x", samples, medians=(1.02, 1.03)), _entry("x", samples[::-1], medians=(1.03, 1.02))
    )
    assert not row.significant
    assert row.verdict == "no significant change"
    assert row.p_value == pytest.approx(1.0)


def test_a_small_or_process_overlapping_change_does_not_count() -> None:
    base = [1.0 + 0.001 * (i % 5) for i in range(200)]
    shifted = [x * 1.03 for x in base]  # p tiny, but 3% is under the 5% threshold
    small = compare(_entry("x", base, medians=(1.0, 1.001)), _entry("x", shifted, medians=(1.03, 1.031)))
    assert small.p_value is not None
    assert small.p_value < 1e-6
    assert not small.significant
    assert "change under 5%" in small.note
    assert compare(_entry("x", base), _entry("x", shifted), threshold_pct=2.0).significant
    slower = [x * 1.2 for x in base]  # 20% slower, but one process of B sat with A's
    overlap = compare(_entry("x", base, medians=(1.0, 1.1)), _entry("x", slower, medians=(1.05, 1.2)))
    assert not overlap.significant
    assert "process medians overlap" in overlap.note


def test_unmatched_and_failed_tasks_are_listed_not_judged() -> None:
    failed = _entry("y", [1.0]).with_(status="Failed", median_ms=None)
    rows = diff_entries([_entry("x", [1.0]), _entry("y", [1.0])], [failed, _entry("z", [1.0])])
    verdicts = {(r.device, r.verdict) for r in rows}
    assert verdicts == {("x", "only in A"), ("y", "no result in B"), ("z", "only in B")}
    assert not any(r.significant for r in rows)


def test_two_workers_sharing_a_device_name_are_told_apart_on_every_row() -> None:
    vm_a = _entry("vm", [1.0], worker="12D3KooWaaaaaa")
    vm_a2 = _entry("vm", [1.0], unit="GPU (ONNX)", worker="12D3KooWaaaaaa")
    vm_b = _entry("vm", [2.0], worker="12D3KooWbbbbbb")
    unplaced = _entry("vm", [3.0], unit="CPU (PyTorch)", worker="")
    alone = _entry("box", [1.0])
    entries = [vm_a, vm_a2, vm_b, unplaced, alone]
    labels = [device_label(e, entries) for e in entries]
    assert labels == ["vm [aaaaaa]", "vm [aaaaaa]", "vm [bbbbbb]", "vm [no worker]", "box"]
    assert device_label(vm_a, [vm_a, unplaced]) == "vm"  # one worker: nothing to tell apart


def test_the_diff_says_how_each_sides_figure_was_verified_where_its_campaign_asked() -> None:
    """Issue 38, scope 8: `report --diff` names each side's verification (replicated k/n, single) where
    that campaign asked for it, and why a side has no figure (its outlier verdict); a campaign that
    asked nothing adds no word."""
    samples = [1.0, 1.1, 1.2, 1.3, 1.4]
    checked = _entry("x", samples).with_(verified="replicated 2/2 (same host)")
    alone = _entry("y", samples).with_(verified="single")
    liar = _entry("y", samples).with_(verified="outlier: peer-y: 0.6 ms against the agreed 1.2 ms")
    plain = [_entry("x", samples).with_(verified="single"), _entry("y", samples).with_(verified="single")]

    rows = {r.device: r for r in diff_entries([checked, alone], plain)}
    assert "A replicated 2/2" in rows["x"].note
    assert "A single" in rows["y"].note
    assert "B single" not in rows["x"].note + rows["y"].note  # B asked nothing
    (refused,) = [r for r in diff_entries([checked, liar], plain) if r.device == "y"]
    assert refused.verdict == "no result in A"
    assert "A outlier: peer-y: 0.6 ms against the agreed 1.2 ms" in refused.note
