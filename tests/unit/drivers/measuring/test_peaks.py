"""Issue 53, scope 1: each unit's peaks. The sweep's plateau rule, memory sizes past the last-level
cache, each figure naming its library, kernel and sizes, a precision the CPU or the libraries cannot
do reported unavailable with why, the GPU's capability table, the figures' cache, and the one
measuring child `info --bench` starts."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable
from pathlib import Path

import trio

from drivers.measuring import peaks
from drivers.measuring.gpupeaks import gpu_kernels, precisions, tensor_cores
from drivers.measuring.peakchild import Timed, plateaued, sweep, taken, watched
from drivers.measuring.peakkernels import (
    MIB,
    Kernel,
    cpu_flags,
    fp32_kernel,
    int8_kernel,
    memory_kernel,
    memory_sizes,
    torch_kernel,
)
from protocol import Peak, Telemetry, TelemetryPoint


def _timed(*rates: float) -> list[Timed]:
    return [Timed(size=i, rate=r, cv=0.0, call_s=0.001) for i, r in enumerate(rates)]


def test_a_matmul_plateaus_when_a_size_no_longer_beats_the_best_by_five_percent() -> None:
    matmul = fp32_kernel()
    assert not plateaued(matmul, _timed(100.0))
    assert not plateaued(matmul, _timed(100.0, 120.0))
    assert plateaued(matmul, _timed(100.0, 120.0, 124.0))
    assert plateaued(matmul, _timed(100.0, 120.0, 60.0))  # fell: past the cache, still the plateau


def test_memory_plateaus_when_two_sizes_agree_whichever_way_it_moved() -> None:
    copy = memory_kernel("copy", (64 * MIB,))
    assert not plateaued(copy, _timed(30.0, 15.0))  # still falling out of the cache
    assert plateaued(copy, _timed(30.0, 15.0, 14.5))


def test_memory_sizes_start_at_twice_the_last_level_cache_and_double_to_the_cap() -> None:
    assert memory_sizes(32 * MIB, 1024 * MIB) == tuple(m * MIB for m in (64, 128, 256, 512, 1024))
    assert memory_sizes(24 * MIB, 200 * MIB) == (64 * MIB, 128 * MIB)  # a power of two past 2 x 24
    assert memory_sizes(32 * MIB, 16 * MIB) == (64 * MIB,)  # one size even past the cap


def test_a_swept_figure_names_its_method_library_kernel_and_sizes() -> None:
    small = dataclasses.replace(fp32_kernel(), sizes=(32, 64))
    peak = sweep(small)
    assert peak.available
    assert peak.per_s > 0
    assert peak.figure == "GFLOPS"
    assert peak.library.startswith("numpy ")
    assert "BLAS unknown" not in peak.library
    assert peak.kernel.startswith("numpy.matmul")
    assert peak.sizes.startswith("n=32")
    assert "; figure at n=" in peak.sizes
    assert "thread" in peak.sizes  # timed at the library's threads and at one: which one counted
    assert "warm-up" in peak.method
    assert peak.cpu_mhz >= 0  # the telemetry sampler ran beside it (0 where no clock is readable)
    assert peak.cpu_share is None or 0 < peak.cpu_share <= 1


def test_a_sweeps_telemetry_is_kept_as_its_mean_clock_hottest_sensor_and_mean_share() -> None:
    points = (
        TelemetryPoint(t_ms=250, cpu_mhz=(2000.0, 3000.0), temp_c=60.0, cpu_share=0.5),
        TelemetryPoint(t_ms=500, cpu_mhz=(2500.0,), temp_c=70.0, cpu_share=1.0),
    )
    kept = watched(Telemetry(period_ms=250, points=points))
    assert kept == {"cpu_mhz": 2500.0, "temp_c": 70.0, "cpu_share": 0.75}
    assert watched(Telemetry(period_ms=250)) == {"cpu_mhz": 0.0, "temp_c": None, "cpu_share": None}


def test_a_memory_figure_counts_a_copys_bytes_both_ways() -> None:
    copy, read = memory_kernel("copy", (MIB,)), memory_kernel("read", (MIB,))
    assert copy.work(MIB) == 2 * read.work(MIB)
    peak = sweep(copy)
    assert peak.figure == "GB/s"
    assert peak.sizes == "1 MiB; figure at 1 MiB"


def test_a_precision_the_cpu_lacks_is_unavailable_naming_the_flags() -> None:
    found = torch_kernel("fp16", frozenset())
    assert isinstance(found, Peak)
    assert not found.available
    assert found.per_s == 0.0
    assert "avx512_fp16" in found.reason


def test_int8_is_measured_on_every_cpu_named_with_its_instruction() -> None:
    # MLAS's int8 kernels are native on a CPU without a dot product too (AVX2's vpmaddubsw): no emulation
    plain, vnni = int8_kernel(frozenset({"avx2"})), int8_kernel(frozenset({"avx2", "avx512_vnni"}))
    none = "none of avx512_vnni, avx_vnni, amx_int8, asimddp, i8mm"
    assert plain.library.endswith(f"widening multiply-add: {none})")
    assert vnni.library.endswith("int8 dot product: avx512_vnni)")
    assert sweep(dataclasses.replace(plain, sizes=(64, 128))).per_s > 0


def test_bf16_is_torch_where_it_is_installed_else_unavailable_naming_the_extra() -> None:
    found = torch_kernel("bf16", frozenset({"avx512_bf16"}))
    if importlib.util.find_spec("torch") is None:
        assert isinstance(found, Peak)
        assert "sark-node[torch]" in found.reason
    else:
        assert isinstance(found, Kernel)
        assert found.library.startswith("torch ")
        assert found.kernel.startswith("torch.mm")


def test_a_kernel_that_fails_is_that_figure_unavailable_with_the_reason() -> None:
    def broken(size: int, threads: int | None) -> Callable[[], object]:
        raise MemoryError("no room")

    kernel = dataclasses.replace(fp32_kernel(), make=broken)
    peak = taken(kernel)
    assert not peak.available
    assert peak.reason == "MemoryError: no room"
    assert peak.precision == "fp32"


def test_the_tensor_core_generation_and_precisions_follow_the_compute_capability() -> None:
    named = {cc: tensor_cores(cc) for cc in ((6, 1), (7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (12, 0))}
    assert named == {
        (6, 1): "none", (7, 0): "Volta", (7, 5): "Turing", (8, 0): "Ampere", (8, 6): "Ampere",
        (8, 9): "Ada Lovelace", (9, 0): "Hopper", (12, 0): "Blackwell",
    }  # fmt: skip
    turing = precisions((7, 5))
    assert [p for p, why in turing.items() if not why] == ["fp32", "fp16", "int8"]
    assert turing["fp8"] == "compute capability 7.5 < 8.9"
    assert all(why == "" for why in precisions((9, 0)).values())


def test_with_no_cuda_device_the_gpu_figures_say_why() -> None:
    (found,) = gpu_kernels()  # this machine: no CUDA device (torch CPU, or no torch)
    assert isinstance(found, Peak)
    assert not found.available
    assert "CUDA" in found.reason


def test_the_figures_are_kept_per_calibration_key_and_a_spoilt_file_is_dropped(tmp_path: Path) -> None:
    figures = (Peak.model_validate({"unit": "CPU", "precision": "fp32", "per_s": 190.0}),)
    peaks.store(tmp_path, "k1", figures)
    assert peaks.cached(tmp_path, "k1") == figures
    assert peaks.cached(tmp_path, "k2") == ()
    peaks.cache_path(tmp_path, "k1").write_text("[{]")
    assert peaks.cached(tmp_path, "k1") == ()
    assert not peaks.cache_path(tmp_path, "k1").exists()


def test_one_measuring_child_sends_each_figure_asked_for() -> None:
    seen: list[str] = []

    async def measured() -> tuple[Peak, ...]:
        only = ("fp16", "int8")
        return await peaks.measure_apart(gpu=False, only=only, on_peak=lambda p: seen.append(p.precision))

    found = trio.run(measured)  # the flags say what this CPU has
    assert [p.precision for p in found] == seen == ["int8", "fp16"]  # in the figures' order
    int8, fp16 = found
    assert fp16.available == bool(cpu_flags() & {"avx512_fp16", "amx_fp16", "fphp"})
    assert int8.available
    assert int8.per_s > 0
    assert int8.library.startswith("onnxruntime ")
    assert int8.background_cores >= 0
