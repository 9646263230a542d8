"""Probes and option mapping of every driver: onnxruntime EPs, Core ML compute units, torch devices."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any, Final

import numpy as np
import pytest

from drivers.files.models import relu_model, write_convnet
from drivers.runtimes import onnx as ort_driver
from drivers.runtimes.coreml import COMPUTE_UNITS, CoremlDriver, unavailable_reason
from drivers.runtimes.driver import LoadOptions, Placement
from drivers.runtimes.onnx import OnnxDriver, is_fallback, provider_list, provider_options, session_config
from drivers.runtimes.registry import REGISTRY
from drivers.runtimes.torchrt import TorchDriver, gpu_device
from protocol import ComputeUnit


def test_the_embedded_probe_model_is_the_built_relu_model() -> None:
    assert relu_model() == ort_driver.PROBE_MODEL


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("CUDAExecutionProvider", {"device_id": "0"}),
        ("MIGraphXExecutionProvider", {"device_id": "0"}),
        ("DmlExecutionProvider", {"device_id": "0"}),
        ("TensorrtExecutionProvider", {"device_id": "0", "trt_fp16_enable": "False"}),
        ("CoreMLExecutionProvider", {"MLComputeUnits": "CPUAndGPU", "ModelFormat": "MLProgram"}),
        ("CPUExecutionProvider", {}),
    ],
)
def test_provider_option_mapping(name: str, expected: dict[str, str]) -> None:
    assert provider_options(name) == (name, expected)


def test_cache_dir_enables_engine_caches() -> None:
    _, trt = provider_options("TensorrtExecutionProvider", device_id=1, cache_dir="/c")
    assert trt == {
        "device_id": "1",
        "trt_fp16_enable": "False",
        "trt_engine_cache_enable": "True",
        "trt_engine_cache_path": "/c",
    }
    assert provider_options("CoreMLExecutionProvider", cache_dir="/c")[1]["ModelCacheDirectory"] == "/c"


def test_provider_lists_keep_cpu_last_and_back_tensorrt_with_cuda() -> None:
    names = [n for n, _ in provider_list("TensorrtExecutionProvider")]
    assert names == ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    assert [n for n, _ in provider_list("CUDAExecutionProvider")] == [
        "CUDAExecutionProvider",
        "CPUExecutionProvider",
    ]
    assert [n for n, _ in provider_list("CPUExecutionProvider")] == ["CPUExecutionProvider"]


def test_directml_needs_no_memory_pattern_and_sequential_execution() -> None:
    assert session_config("DmlExecutionProvider") == {
        "enable_mem_pattern": False,
        "execution_mode": "sequential",
    }
    assert session_config("CUDAExecutionProvider") == {}


def test_unknown_provider_has_no_mapping() -> None:
    with pytest.raises(ValueError, match="no option mapping"):
        provider_options("ROCMExecutionProvider")


def test_gpu_candidates_by_platform() -> None:
    assert ort_driver.GPU_CANDIDATES["linux"][0] == "CUDAExecutionProvider"
    assert "DmlExecutionProvider" in ort_driver.GPU_CANDIDATES["win32"]
    assert ort_driver.GPU_CANDIDATES["darwin"] == ("CoreMLExecutionProvider",)


CUDA_CPU: Final = ("CUDAExecutionProvider", "CPUExecutionProvider")


@pytest.mark.parametrize(
    ("providers", "share", "least", "fallback"),
    [
        (CUDA_CPU, {"CUDAExecutionProvider": 0.9, "CPUExecutionProvider": 0.1}, 0.5, False),
        (CUDA_CPU, {"CUDAExecutionProvider": 0.9, "CPUExecutionProvider": 0.1}, 1.0, True),  # default: all
        (CUDA_CPU, {"CUDAExecutionProvider": 1.0}, 1.0, False),
        (CUDA_CPU, {"CUDAExecutionProvider": 0.2, "CPUExecutionProvider": 0.8}, 0.5, True),
        (("CPUExecutionProvider",), {"CPUExecutionProvider": 1.0}, 0.5, True),
        ((), {}, 0.5, True),
    ],
)
def test_fallback_verdict(
    providers: tuple[str, ...], share: dict[str, float], least: float, fallback: bool
) -> None:
    whole = is_fallback("CUDAExecutionProvider", providers)
    placement = Placement(providers, share, whole, asked="CUDAExecutionProvider")
    assert placement.fell_back(least) is fallback


def test_cpu_onnx_probe_really_runs() -> None:
    status = OnnxDriver(ComputeUnit.CPU_ONNX).probe()
    assert status.usable
    assert status.provider == "CPUExecutionProvider"


def test_gpu_onnx_probe_is_truthful_about_this_build() -> None:
    import onnxruntime

    status = OnnxDriver(ComputeUnit.GPU_ONNX).probe()
    listed = set(onnxruntime.get_available_providers())
    if not listed & {"CUDAExecutionProvider", "MIGraphXExecutionProvider", "TensorrtExecutionProvider"}:
        assert not status.usable
        assert "not in this onnxruntime build" in status.reason
    else:  # a GPU build: usable only with a provider that really ran
        assert status.usable == (status.provider is not None)


def test_unlisted_provider_probe_says_so_instead_of_running_on_cpu() -> None:
    usable, reason = ort_driver.probe_provider("DmlExecutionProvider")
    assert not usable
    assert "not in this onnxruntime build" in reason


def test_a_cpu_session_records_placement_and_runs(tmp_path: Path) -> None:
    loaded = OnnxDriver(ComputeUnit.CPU_ONNX).load(write_convnet(tmp_path / "c.onnx"), LoadOptions(threads=1))
    placement = loaded.placement()
    assert placement.providers == ("CPUExecutionProvider",)
    assert placement.node_share == {"CPUExecutionProvider": 1.0}
    assert not placement.fallback
    assert loaded.settings().intra_op_threads == 1
    sig = loaded.inputs()[0]
    assert (sig.name, sig.dtype, sig.shape) == ("x", "float32", ("N", 3, 64, 64))
    out: Any = loaded.runner({"x": np.ones((1, 3, 64, 64), np.float32)})()
    assert out[0].shape == (1, 16)


def test_core_ml_compute_unit_mapping() -> None:
    assert COMPUTE_UNITS == {ComputeUnit.GPU_COREML: "CPU_AND_GPU", ComputeUnit.NE_COREML: "CPU_AND_NE"}


@pytest.mark.parametrize(
    ("platform", "installed", "fragment"),
    [
        ("linux", False, "needs macOS (this is linux)"),
        ("linux", True, "can convert, not predict"),
        ("win32", False, "needs macOS (this is win32)"),
        ("darwin", False, "coremltools not installed"),
        ("darwin", True, ""),
    ],
)
def test_core_ml_unavailable_reasons(platform: str, installed: bool, fragment: str) -> None:
    reason = unavailable_reason(platform, installed, "9.0")
    assert (fragment in reason) if fragment else reason == ""


@pytest.mark.parametrize("unit", [ComputeUnit.GPU_COREML, ComputeUnit.NE_COREML])
def test_core_ml_probe_off_macos_is_unavailable_before_any_predict(unit: ComputeUnit) -> None:
    status = CoremlDriver(unit).probe()
    if sys.platform != "darwin":
        assert not status.usable
        assert "macOS" in status.reason


@pytest.mark.parametrize(
    ("cuda", "mps", "device"),
    [(True, True, "cuda:0"), (True, False, "cuda:0"), (False, True, "mps"), (False, False, None)],
)
def test_torch_gpu_device_choice(cuda: bool, mps: bool, device: str | None) -> None:
    assert gpu_device(cuda, mps) == device


@pytest.mark.parametrize("unit", [ComputeUnit.CPU_TORCH, ComputeUnit.GPU_TORCH])
def test_torch_probe(unit: ComputeUnit) -> None:
    status = TorchDriver(unit).probe()
    if importlib.util.find_spec("torch") is None:
        assert not status.usable
        assert "torch not installed" in status.reason
    elif unit == ComputeUnit.CPU_TORCH:
        assert status.usable
        assert status.provider == "cpu"


def test_registry_covers_every_unit() -> None:
    assert set(REGISTRY) == set(ComputeUnit)
    assert all(driver.unit == unit for unit, driver in REGISTRY.items())
