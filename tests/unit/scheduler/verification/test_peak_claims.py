"""Issue 53, scope 5: a worker's peaks are claims. The CPU's fp32 peak is challenged (`cpu_claim`,
the larger of it and the calibration); each peak is held to the calibration taken beside it, the
narrower precisions to the fp32 figure, and every figure to its class's median."""

from __future__ import annotations

from protocol import Calibration, ComputeUnit, DeviceProfile, GpuInfo, Peak, UnitStatus
from scheduler.verification import claim_problems
from scheduler.verification.claims import PEAK_FACTOR, peak_problems

CAL = 150.0
COPY = 12.0


def _peak(precision: str, per_s: float, unit: str = "CPU") -> Peak:
    return Peak.model_validate({"unit": unit, "precision": precision, "per_s": per_s})


def _honest_peaks(scale: float = 1.0) -> tuple[Peak, ...]:
    figures = {"fp32": 190.0, "bf16": 430.0, "int8": 830.0, "read": 14.0, "write": 11.0, "copy": 11.0}
    return tuple(_peak(p, v * scale) for p, v in figures.items())


def _profile(peaks: tuple[Peak, ...], soc: str = "test-cpu", **fields: object) -> DeviceProfile:
    cal = Calibration(cpu_gflops=CAL, mem_bandwidth_gbs=COPY, seconds=1.0, peaks=peaks)
    return DeviceProfile(
        device_name="d", soc=soc, cores_physical=2, cores_logical=2, ram_mb=1024, os="Linux",
        os_version="6", fingerprint="f" * 16,
        units=(UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),),
        calibration=cal, **fields,
    )  # fmt: skip


def test_honest_peaks_measured_beside_their_calibration_raise_nothing() -> None:
    assert claim_problems(_profile(_honest_peaks())) == []


def test_peaks_three_times_what_the_device_measured_are_each_named_against_the_calibration() -> None:
    problems = peak_problems(_profile(_honest_peaks(3.0)))
    named = [p.split("]")[0] for p in problems]
    assert named == ["peaks[CPU fp32", "peaks[CPU read", "peaks[CPU write", "peaks[CPU copy"], problems
    assert f"over {PEAK_FACTOR * CAL:.4g} ({PEAK_FACTOR:g}x calibration.cpu_gflops" in problems[0]
    assert problems == claim_problems(_profile(_honest_peaks(3.0)))[-4:]  # what a peer is judged by


def test_the_challenge_tests_the_larger_of_the_calibration_and_the_fp32_peak() -> None:
    liar = _profile(_honest_peaks(3.0)).calibration
    honest = _profile(()).calibration
    assert liar is not None
    assert honest is not None
    assert liar.cpu_claim == 3.0 * 190.0  # a 3x fp32 peak is challenged at its own word
    assert honest.cpu_claim == CAL


def test_a_narrower_precision_past_what_any_isa_does_over_fp32_is_named() -> None:
    peaks = (_peak("fp32", 190.0), _peak("int8", 190.0 * 40), _peak("bf16", 190.0 * 10))
    problems = peak_problems(_profile(peaks))
    assert len(problems) == 1, problems
    assert problems[0].startswith("peaks[CPU int8] 7600 GOPS over"), problems
    assert "32x the fp32 peak" in problems[0]


def test_a_peak_far_above_its_class_median_is_named_even_within_the_isa_bounds() -> None:
    peers = [_profile(_honest_peaks(f)) for f in (0.9, 1.0, 1.1)]
    inflated = (*_honest_peaks()[:2], _peak("int8", 3 * 830.0))  # within 32x fp32: only its class refutes it
    problems = peak_problems(_profile(inflated), peers)
    assert problems == ["peaks[CPU int8] 2490 GOPS is 3.00x its class's median 830 (at most 1.5x)"], problems


def test_a_gpu_peak_on_a_profile_with_no_gpu_is_a_claim_with_nothing_behind_it() -> None:
    gpu_peak = _peak("fp16", 900_000.0, unit="cuda:0 NVIDIA H100")
    assert "(no GPU listed)" in peak_problems(_profile((gpu_peak,)))[0]
    listed = _profile((gpu_peak,), gpus=(GpuInfo(name="NVIDIA H100", vram_mb=81559, source="nvml"),))
    assert peak_problems(listed) == []


def test_an_unavailable_precision_is_no_claim() -> None:
    missing = Peak.model_validate({"unit": "CPU", "precision": "fp16", "available": False, "reason": "none"})
    assert peak_problems(_profile((missing,))) == []


def test_leaving_the_fp32_peak_out_does_not_lift_the_bound_on_the_others() -> None:
    alone = (_peak("int8", CAL * PEAK_FACTOR * 40),)  # no fp32 figure to hold it to: the calibration is
    (problem,) = peak_problems(_profile(alone))
    assert problem.startswith("peaks[CPU int8]"), problem
    assert "32x the fp32 peak" in problem
