"""Issue 53: a campaign's peaks figure is a claim like any other. The submitter derives it again from
the worker's timed calls (work at the size over the fastest call), refuses a figure its timings
contradict (`inconsistent`), parts that cannot be the task's (`invalid`), and a figure, however
consistent, past physics or past what a calibration taken on a quiet machine allows."""

from __future__ import annotations

import pytest

from protocol import (
    GPU_PEAK_BATCH,
    Calibration,
    ComputeUnit,
    DeviceProfile,
    FailureReason,
    GpuInfo,
    Measurement,
    Peak,
    PeakRun,
    PeakSpec,
    TaskSpec,
    UnitStatus,
)
from protocol.aggregate import derive_peak, peak_work
from scheduler.verification import Refusal, check_figures, replica_of
from scheduler.verification.agreement import agree
from scheduler.verification.claims import MAX_GFLOPS_PER_CORE, PEAK_FACTOR

CAL = 150.0
N = 512
TIMES = (0.0021, 0.0019, 0.0020, 0.0022, 0.0019, 0.0020)
"""Six timed calls of a 512 product: 2 x 512^3 / 0.0019 s = 141.3 GFLOPS, under 2 x 150."""


def _spec(
    precision: str = "fp32", unit: ComputeUnit = ComputeUnit.CPU_ONNX, largest: int | None = None
) -> TaskSpec:
    return TaskSpec(compute_unit=unit, processes=1, peaks=PeakSpec(precision=precision, largest=largest))  # type: ignore[arg-type]


def _run(
    precision: str = "fp32", unit: str = "CPU", size: int = N, times: tuple[float, ...] = TIMES, **kw: object
) -> PeakRun:
    peak = Peak.model_validate({"unit": unit, "precision": precision, "library": "numpy", "kernel": "matmul"})
    return derive_peak(PeakRun.model_validate({"peak": peak, "size": size, "times_s": times, **kw}))


def _measurement(run: PeakRun, unit: ComputeUnit = ComputeUnit.CPU_ONNX) -> Measurement:
    return Measurement.nothing_timed(unit).with_(peak_run=run, warmups_used=3)


def _profile(quiet: bool = True, cores: int = 2, gpu: bool = False) -> DeviceProfile:
    cal = Calibration(cpu_gflops=CAL, mem_bandwidth_gbs=12.0, seconds=1.0, quiet=quiet)
    units = (UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),)
    gpus = (GpuInfo(name="H100", vram_mb=81_000, source="nvml"),) if gpu else ()
    return DeviceProfile(
        device_name="d", soc="test-cpu", cores_physical=cores, cores_logical=cores, ram_mb=4096, os="Linux",
        os_version="6", fingerprint="f" * 16, units=units, calibration=cal, gpus=gpus,
    )  # fmt: skip


def _refused(m: Measurement, spec: TaskSpec, profile: DeviceProfile | None = None) -> Refusal:
    verdict = check_figures(m, spec, profile or _profile())
    assert isinstance(verdict, Refusal), verdict
    return verdict


def test_an_honest_figure_is_derived_again_from_its_timings() -> None:
    run = _run()
    assert run.peak.per_s == pytest.approx(2 * N**3 / min(TIMES) / 1e9)
    verdict = check_figures(_measurement(run), _spec(), _profile())
    assert isinstance(verdict, Measurement)
    assert verdict.peak_run == run
    assert verdict.inference_ms.n == 0  # it timed no model


def test_work_is_the_kernels_own_count_at_the_size() -> None:
    assert peak_work("fp32", 1024, 1) == 2.0 * 1024**3
    assert peak_work("int8", 1024, GPU_PEAK_BATCH) == GPU_PEAK_BATCH * 2.0 * 1024**3
    assert peak_work("copy", 64 << 20, 1) == 2 * (64 << 20)
    assert peak_work("read", 64 << 20, 1) == 64 << 20


def test_a_figure_its_timings_contradict_is_refused_inconsistent() -> None:
    run = _run()
    lied = run.with_(peak=run.peak.with_(per_s=3 * run.peak.per_s))
    refusal = _refused(_measurement(lied), _spec())
    assert refusal.reason == FailureReason.INCONSISTENT
    assert "peak_run.peak.per_s" in refusal.detail


def test_timings_three_times_faster_are_consistent_but_past_a_quiet_calibration() -> None:
    """The cheater writes its timings too: a third of each gives 3x the figure, consistent with its
    parts; a calibration taken on a quiet machine says the device does not do that."""
    liar = _run(times=tuple(t / 3 for t in TIMES))
    refusal = _refused(_measurement(liar), _spec())
    assert refusal.reason == FailureReason.INVALID
    assert f"over {PEAK_FACTOR * CAL:.4g} ({PEAK_FACTOR:g}x calibration.cpu_gflops" in refusal.detail


def test_a_calibration_taken_under_load_is_no_ceiling_physics_still_is() -> None:
    """An honest worker calibrated beside other work: its peak stands far above that calibration."""
    fast = _run(times=tuple(t / 3 for t in TIMES))
    assert isinstance(check_figures(_measurement(fast), _spec(), _profile(quiet=False)), Measurement)
    cores = 2
    beyond = _run(times=tuple(t / 1000 for t in TIMES))  # 141 TFLOPS from two cores
    assert beyond.peak.per_s > cores * MAX_GFLOPS_PER_CORE
    refusal = _refused(_measurement(beyond), _spec(), _profile(quiet=False, cores=cores))
    assert refusal.reason == FailureReason.INVALID
    assert f"{cores} cores x {MAX_GFLOPS_PER_CORE:g} GFLOPS" in refusal.detail


@pytest.mark.parametrize(
    ("run", "spec", "named"),
    [
        (_run(precision="int8"), _spec("fp32"), "the task asked for fp32"),
        (_run(batch=GPU_PEAK_BATCH), _spec(), "the kernel runs 1"),
        (_run(times=TIMES[:4]), _spec(), "4 timed calls, at least 5"),
        (_run(size=1024), _spec(largest=512), "past the task's largest size 512"),
        (_run(unit="cuda:0 H100"), _spec(), "is not a figure of CPU (ONNX)"),
        (_run(times=(*TIMES, 0.0)), _spec(), "a timed call of 0.0 s"),
        (_run(times=(*TIMES, 700.0)), _spec(), "past the task's timeout"),
    ],
    ids=["precision", "batch", "repeats", "largest", "unit", "zero call", "timeout"],
)
def test_parts_that_cannot_be_the_tasks_are_refused_invalid(run: PeakRun, spec: TaskSpec, named: str) -> None:
    refusal = _refused(_measurement(run), spec)
    assert refusal.reason == FailureReason.INVALID
    assert named in refusal.detail


def test_a_gpu_figure_runs_the_batch_and_needs_a_gpu_listed() -> None:
    spec = _spec("fp16", ComputeUnit.GPU_TORCH)
    run = _run("fp16", unit="cuda:0 H100", size=4096, batch=GPU_PEAK_BATCH)
    assert isinstance(
        check_figures(_measurement(run, ComputeUnit.GPU_TORCH), spec, _profile(gpu=True)), Measurement
    )
    refusal = _refused(_measurement(run, ComputeUnit.GPU_TORCH), spec, _profile(gpu=False))
    assert "no GPU listed" in refusal.detail
    unbatched = _run("fp16", unit="cuda:0 H100", size=4096)
    refusal = _refused(_measurement(unbatched, ComputeUnit.GPU_TORCH), spec, _profile(gpu=True))
    assert f"the kernel runs {GPU_PEAK_BATCH}" in refusal.detail


def test_a_models_figures_in_a_peaks_result_and_a_peak_in_a_models_are_refused() -> None:
    with_samples = _measurement(_run()).with_(samples_ms=(1.0,), process_runs=(1,))
    assert "a model's figures in a peaks result" in _refused(with_samples, _spec()).detail
    model_task = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX)
    assert "a peaks figure for a model's task" in _refused(_measurement(_run()), model_task).detail


def test_an_unavailable_figure_is_a_failure_never_a_result() -> None:
    peak = Peak.model_validate(
        {"unit": "CPU", "precision": "bf16", "available": False, "reason": "no avx512_bf16"}
    )
    run = PeakRun(peak=peak, size=1)
    assert (
        "an unavailable figure travels as the task's failure"
        in _refused(_measurement(run), _spec("bf16")).detail
    )


def test_replicas_of_a_peaks_task_agree_on_the_figure_whatever_size_each_swept() -> None:
    """`verify: {replicas: N}` on a peaks job compares the figures (the time per 10^12 operations),
    not the empty inference median: two honest sweeps agree, a figure three times another does not."""
    a = _run()
    b = _run(size=1024, times=tuple(t * 8 * 1.05 for t in TIMES))  # 8x the work, 5 % slower
    liar = _run(times=tuple(t / 3 for t in TIMES))
    replicas = [
        replica_of(peer, _measurement(run), _spec()) for peer, run in (("a", a), ("b", b), ("l", liar))
    ]
    assert replicas[0].median_ms == pytest.approx(1e3 / a.peak.per_s)
    assert agree(replicas[0], replicas[1], class_spread=0.02)
    assert not agree(replicas[0], replicas[2], class_spread=0.02)
