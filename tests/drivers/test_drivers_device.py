"""Device facts, the profile, meters and calibration, measured for real on this machine."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from drivers import detect_profile
from drivers.calibrate import calibrate, calibration_key
from drivers.device import detect_gpus, fingerprint, parse_smi, runtime_versions
from drivers.meters import CpuMeter, GpuSampler, peak_mb, reset_peak
from protocol import ComputeUnit, DeviceProfile, GpuInfo


def test_nvidia_smi_output_is_parsed() -> None:
    out = "NVIDIA A100-SXM4-40GB, 40960, 550.54.15\nNVIDIA L4, 23034, 550.54.15\ngarbage line\n"
    assert parse_smi(out) == (
        GpuInfo(name="NVIDIA A100-SXM4-40GB", vram_mb=40960, driver="550.54.15", source="nvidia-smi"),
        GpuInfo(name="NVIDIA L4", vram_mb=23034, driver="550.54.15", source="nvidia-smi"),
    )


def test_no_gpu_comes_with_a_reason_per_source() -> None:
    gpus, reason = detect_gpus()
    if not gpus:
        assert "NVML" in reason
        assert "torch" in reason
        assert "nvidia-smi" in reason


def test_fingerprint_is_stable_and_hardware_sensitive() -> None:
    a = fingerprint("cpu", 2, 24000, ())
    assert a == fingerprint("cpu", 2, 24000, ())
    assert a != fingerprint("cpu", 4, 24000, ())
    assert len(a) == 64


def test_runtime_versions_come_from_metadata() -> None:
    versions = runtime_versions()
    assert "onnxruntime" in versions
    assert "numpy" in versions
    assert "python" in versions


def test_profile_lists_every_unit_and_round_trips_as_json() -> None:
    profile = detect_profile(calibrate=False)
    assert [s.unit for s in profile.units] == list(ComputeUnit)
    assert ComputeUnit.CPU_ONNX in profile.usable_units()
    assert all(s.reason for s in profile.units if not s.usable)
    assert DeviceProfile.model_validate_json(profile.model_dump_json()) == profile
    assert profile.calibration is None
    assert profile.cores_logical >= 1
    assert profile.ram_mb > 0


def test_calibration_is_measured_once_then_reused(tmp_path: Path) -> None:
    key = calibration_key("f" * 64, {"numpy": "2", "onnxruntime": "1"})
    first = calibrate(tmp_path, key)
    assert first.cpu_gflops > 0
    assert first.mem_bandwidth_gbs > 0
    assert first.key == key
    assert (tmp_path / f"calibration-{key}.json").is_file()
    assert calibrate(tmp_path, key) == first  # timings never repeat exactly: equal means cached
    assert calibration_key("f" * 64, {"numpy": "3", "onnxruntime": "1"}) != key


def test_kernel_high_water_mark_sees_a_touched_allocation() -> None:
    assert reset_peak()
    before = peak_mb()
    block = np.ones(64 << 18, dtype=np.float32)  # 64 MiB, touched
    assert peak_mb() >= before + 60
    del block
    assert reset_peak()
    assert peak_mb() < before + 60


def test_cpu_meter_counts_this_process() -> None:
    with CpuMeter() as meter:
        total = sum(i * i for i in range(300_000))
    assert total > 0
    assert meter.cpu_s > 0
    assert meter.cores_used > 0
    assert meter.background_cores >= 0


def test_gpu_sampler_is_silent_without_nvml() -> None:
    _, reason = detect_gpus()
    with GpuSampler() as gpu:
        pass
    if "NVMLError" in reason:
        assert gpu.util_pct is None
        assert gpu.mem_mb is None
