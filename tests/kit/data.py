"""Plain test data shared by the swarm tests."""

from __future__ import annotations

from typing import Any

from protocol import ComputeUnit, DeviceProfile, Measurement, Stats, UnitStatus
from scheduler.results import CampaignReport


def make_profile(name: str = "lab-device") -> DeviceProfile:
    """A small truthful-looking profile: CPU (ONNX) usable, GPU (ONNX) not."""
    return DeviceProfile(
        device_name=name,
        soc="test-cpu",
        cores_physical=1,
        cores_logical=2,
        ram_mb=1024,
        os="Linux",
        os_version="6",
        fingerprint="f" * 16,
        units=(
            UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),
            UnitStatus(unit=ComputeUnit.GPU_ONNX, usable=False, reason="no GPU"),
        ),
    )


def signed_part(
    device: str,
    median: float,
    *,
    reasons: tuple[str, ...] = (),
    load_ms: float = 12.5,
    peaks_mb: tuple[float, float] = (100.0, 120.0),
) -> dict[str, Any]:
    """A results.json entry's "signed" part: a device and a measurement whose figures a report shows
    (its median, process medians 2 % apart, stability, loads and peaks), as the submitter derived them."""
    top = median * 1.04
    stats = Stats(
        n=40,
        min=median,
        max=top,
        mean=median * 1.02,
        median=median,
        stddev=0.0,
        p90=top,
        p95=top,
        p99=top,
        cv=0.0,
    )
    measurement = Measurement(
        compute_unit=ComputeUnit.CPU_ONNX,
        load_ms=stats.with_(median=load_ms),
        load_first_ms=20.0,
        first_inference_ms=median,
        warmups_used=1,
        inference_ms=stats,
        process_medians_ms=(median, median * 1.02),
        process_spread_pct=2.0,
        unstable=bool(reasons),
        unstable_reasons=reasons,
        peak_load_ram_mb=peaks_mb[0],
        peak_inference_ram_mb=peaks_mb[1],
        cpu_cores_used=1.0,
    )
    return {
        "worker": f"peer-{device}",
        "device": make_profile().model_dump(mode="json"),
        "measurement": measurement.model_dump(mode="json"),
    }


def report_of(
    results: list[dict[str, Any]], *, campaign_id: str = "campaign-9", name: str = "shapes"
) -> CampaignReport:
    """A campaign report holding these results.json entries (row, samples, signed part), read as
    `CampaignReport.from_json` reads a file: every renderer takes the typed value, never the dict."""
    campaign = {"name": name, "models": [], "jobs": []}
    return CampaignReport.model_validate(
        {"campaign_id": campaign_id, "campaign": campaign, "results": results}
    )
