"""Device facts, the profile, meters and calibration, measured for real on this machine."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from drivers import detect_profile
from drivers.measuring.calibrate import calibrate, calibration_key
from drivers.measuring.device import detect_gpus, fingerprint, parse_smi, runtime_versions
from drivers.measuring.meters import CpuMeter, GpuSampler, peak_mb, reset_peak
from protocol import ComputeUnit, DeviceProfile, GpuInfo

pytestmark = pytest.mark.heavy  # many CPU-seconds: handed out first (tests/conftest.py)


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


KEY = calibration_key("f" * 64, {"numpy": "2", "onnxruntime": "1"})
QUIET = math.inf  # every load counts as quiet
LOADED = -1.0  # no load counts as quiet


def test_a_quiet_calibration_is_measured_once_then_reused(tmp_path: Path) -> None:
    first = calibrate(tmp_path, KEY, quiet_cores=QUIET)
    assert first.cpu_gflops > 0
    assert first.mem_bandwidth_gbs > 0
    assert first.key == KEY
    assert first.quiet
    assert first.taken_at > 0
    assert "under load" not in first.summary()
    assert (tmp_path / f"calibration-{KEY}.json").is_file()
    assert calibrate(tmp_path, KEY, quiet_cores=QUIET) == first  # equal timings = cached
    assert calibrate(tmp_path, KEY, quiet_cores=QUIET, force=True) != first  # --recalibrate measures again
    assert calibration_key("f" * 64, {"numpy": "3", "onnxruntime": "1"}) != KEY


def test_a_calibration_taken_under_load_is_marked_kept_while_loaded_and_retaken_when_quiet(
    tmp_path: Path,
) -> None:
    loaded = calibrate(tmp_path, KEY, quiet_cores=LOADED)
    assert not loaded.quiet
    assert f"(under load: {loaded.background_cores:.1f} cores busy)" in loaded.summary()
    assert calibrate(tmp_path, KEY, quiet_cores=LOADED) == loaded  # still loaded: kept, not re-measured
    quiet = calibrate(tmp_path, KEY, quiet_cores=QUIET)
    assert quiet.quiet
    assert quiet.taken_at > loaded.taken_at
    assert calibrate(tmp_path, KEY, quiet_cores=LOADED) == quiet  # a quiet figure is never replaced by load


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


def test_a_phase_of_a_few_milliseconds_reads_no_more_cores_than_the_machine_has() -> None:
    """/proc/stat counts in 10 ms ticks: a phase that returned at once once read 33 background cores
    on 2, which the submitter's bounds refuse; both readings are held to the machine's cores."""
    import os

    from drivers.measuring.meters import CpuMeter

    for _ in range(20):
        with CpuMeter() as meter:
            pass
        cores = os.cpu_count() or 1
        assert 0.0 <= meter.background_cores <= cores
        assert 0.0 <= meter.cores_used <= cores
