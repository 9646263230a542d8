"""Issue 53: a campaign's peaks task on the worker. One figure's kernel swept as `info --bench` sweeps
it (capped by the task's `largest`), sent with its raw parts (every timed call at the figure's size),
in one measuring child; a figure the unit cannot take (here: every GPU figure, no CUDA device) is
the task failed `unit_unavailable` with the reason."""

from __future__ import annotations

import dataclasses

import pytest
from kit.extras import no_cuda

from drivers.errors import TaskFailed
from drivers.measuring.peakchild import MIN_REPEATS, capped, figure
from drivers.measuring.peakkernels import MIB, fp32_kernel, memory_kernel
from drivers.measuring.peaks import measure_peak
from protocol import ComputeUnit, FailureReason, Measurement, PeakSpec, Stage, TaskSpec
from protocol.aggregate import derive_peak, peak_work
from scheduler.verification import check_figures

NO_CUDA = bool(no_cuda())


def test_a_cap_keeps_the_sizes_up_to_it_or_the_cap_alone() -> None:
    matmul = capped(fp32_kernel(), 512)
    assert matmul.sizes == (256, 512)
    assert capped(fp32_kernel(), 100).sizes == (100,)
    memory = memory_kernel("copy", (64 * MIB, 128 * MIB, 256 * MIB))
    assert capped(memory, 128).sizes == (64 * MIB, 128 * MIB)
    assert capped(memory, 16).sizes == (16 * MIB,)  # below twice the cache: still the task's cap
    assert capped(memory, None) is memory


def test_a_figure_carries_every_timed_call_at_its_size_and_derives_to_itself() -> None:
    run = figure("cpu", PeakSpec(precision="fp32", largest=256))
    assert run.peak.available, run.peak.reason
    assert (run.size, run.batch) == (256, 1)
    assert len(run.times_s) >= MIN_REPEATS
    assert run.warmups >= 2
    assert run == derive_peak(run)
    assert run.peak.per_s == peak_work("fp32", 256, 1) / min(run.times_s) / 1e9
    assert run.peak.library.startswith("numpy ")
    assert "matmul" in run.peak.kernel
    assert "figure at n=256" in run.peak.sizes


@pytest.mark.skipif(not NO_CUDA, reason="a CUDA device is here: the GPU figure is measured, not refused")
def test_without_cuda_a_gpu_figure_is_unavailable_with_why() -> None:
    run = figure("gpu", PeakSpec(precision="fp16"))
    assert not run.peak.available
    assert "no CUDA device" in run.peak.reason or "torch is not installed" in run.peak.reason


async def test_a_peaks_task_is_one_child_whose_figure_the_submitter_derives_again() -> None:
    spec = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, peaks=PeakSpec(precision="copy", largest=8))
    measured = await measure_peak(spec)
    run = measured.peak_run
    assert run is not None
    assert run.size == 8 * MIB
    assert measured.inference_ms.n == 0
    assert measured.samples_ms == ()
    assert isinstance(check_figures(measured, spec), Measurement)


@pytest.mark.skipif(not NO_CUDA, reason="a CUDA device is here: the GPU figure is measured, not refused")
async def test_without_cuda_a_gpu_peaks_task_fails_unit_unavailable_naming_why() -> None:
    spec = TaskSpec(compute_unit=ComputeUnit.GPU_TORCH, peaks=PeakSpec(precision="fp16"))
    with pytest.raises(TaskFailed) as info:
        await measure_peak(spec)
    assert (info.value.reason, info.value.stage) == (FailureReason.UNIT_UNAVAILABLE, Stage.RUN)
    assert info.value.detail.startswith("peaks fp16 (GPU): run failed: ")
    assert "CUDA" in info.value.detail or "torch" in info.value.detail


def test_the_memory_kernel_a_cap_makes_is_the_same_kernel() -> None:
    memory = memory_kernel("read", (64 * MIB,))
    assert dataclasses.replace(memory, sizes=(8 * MIB,)) == capped(memory, 8)
