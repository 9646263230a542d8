"""report.html's telemetry part (latency, clock, temperature, power and load over time; a sustained
run's windows) from the campaign report, and the diff's note when a side was throttled (no processes)."""

from __future__ import annotations

from typing import Any

import pytest
from kit.data import make_profile, report_of

from node.report.telereport import telemetry_parts, timeline_svg
from protocol import (
    ComputeUnit,
    Measurement,
    RunConditions,
    SustainSpec,
    TaskSpec,
    Telemetry,
    TelemetryPoint,
    derive,
)
from protocol.stats import NO_SAMPLES
from scheduler.results import compare, entry_of, sustain_columns

SAMPLES = (10.0,) * 100 + (16.0,) * 60


def _measurement(sustain: SustainSpec | None) -> Measurement:
    points = tuple(
        TelemetryPoint(t_ms=t, cpu_mhz=(2400.0,), temp_c=None, busy_cores=1.0 + (t > 2000), own_cores=1.0,
                       cpu_share=0.9 - 0.4 * (t > 2000))
        for t in range(250, 4001, 250)
    )  # fmt: skip
    raw = Measurement(
        compute_unit=ComputeUnit.CPU_ONNX, load_ms=NO_SAMPLES, load_first_ms=0.0, first_inference_ms=0.0,
        warmups_used=3, inference_ms=NO_SAMPLES, samples_ms=SAMPLES, process_runs=(160,),
        load_samples_ms=(100.0,), first_inferences_ms=(20.0,), peak_load_ram_mb=50.0,
        peak_inference_ram_mb=60.0, cpu_cores_used=1.0, conditions=RunConditions(), mark_runs=(0, 100, 160),
        mark_ms=(0.0, 2000.0, 4000.0),
        telemetry=Telemetry(period_ms=250.0, groups=("cpu0-1 (max clock not exposed)",), points=points),
    )  # fmt: skip
    spec = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, load_runs=1, timeout_s=60.0, sustain=sustain)
    return derive(raw, spec)


def _result(device: str, m: Measurement) -> dict[str, Any]:
    row = {"Status": "Complete", "DeviceName": device, "ComputeUnits": "CPU (ONNX)", "JobId": "c-job-0-0",
           "InferenceMsMedian": f"{m.inference_ms.median:.3f}", **sustain_columns(m)}  # fmt: skip
    measurement = m.model_dump(mode="json", exclude={"samples_ms"})
    signed = {
        "worker": f"peer-{device}",
        "device": make_profile().model_dump(mode="json"),
        "measurement": measurement,
    }
    return {"row": row, "samples_ms": list(m.samples_ms), "signed": signed}


def test_every_task_with_telemetry_gets_a_timeline_and_a_sustained_one_its_windows() -> None:
    sustained = _measurement(SustainSpec(duration_s=4.0, window_s=2.0))
    document = report_of([_result("box<1>", sustained), _result("plain", _measurement(None)),
                          {"row": {"DeviceName": "gone"}, "signed": None}])  # fmt: skip
    page = "".join(telemetry_parts(document))
    assert page.count('class="telemetry"') == 2
    assert page.count("<svg") == 2
    assert "box&lt;1&gt; · CPU (ONNX) · c-job-0-0" in page
    assert "no temp reading on this device" in page
    assert '<div id="sustained">' in page
    assert "throttled: window 2 (2.0-4.0 s): median 16 ms, +60% on window 1: background load" in page
    assert "<td>background_load</td>" in page
    assert telemetry_parts(report_of([{"row": {}, "signed": None}])) == []


def test_a_timeline_is_written_by_hand_without_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    # what keeps report.html's timelines quick (benchmarks/report_render.py): no matplotlib figure is
    # laid out or drawn for them (0.2-0.3 CPU-s a timeline), whatever else the page draws with it
    from matplotlib.figure import Figure

    def refused(self: Figure, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a timeline drew a matplotlib figure")

    monkeypatch.setattr(Figure, "__init__", refused)
    m = _measurement(None)
    picture = timeline_svg("box<1> · CPU (ONNX) · c-job-0-0", m, m.samples_ms)
    assert picture.svg.startswith("<svg")
    assert 'width="792pt" height="504pt"' in picture.svg  # the whole 11 x 7 in page, as before
    assert "box&lt;1&gt; · CPU (ONNX) · c-job-0-0: every 250 ms" in picture.svg
    for what in ("median ms", "clock MHz", "temp °C", "power W", "load", "cpu0-1 (max clock not exposed)"):
        assert f">{what}</text>" in picture.svg, what
    assert "no temp reading on this device" in picture.svg
    assert picture.svg.count("<polyline") == 4  # the medians, the clock, the other processes, the share


def test_the_diff_says_which_side_was_throttled() -> None:
    quiet = _measurement(None)
    hot = _measurement(SustainSpec(duration_s=4.0, window_s=2.0))
    a = entry_of(_result("box", quiet)["row"], quiet.samples_ms, measurement=quiet)
    b = entry_of(_result("box", hot)["row"], hot.samples_ms, measurement=hot)
    assert not a.throttled
    assert b.throttled == "background_load"
    assert "B throttled (background_load)" in compare(a, b).note
