"""Compute units and the runtimes behind them: the names every role agrees on."""

from __future__ import annotations

import enum
from typing import Final


class ComputeUnit(enum.StrEnum):
    """A runtime on a kind of processor, named as the original orchestrator named them."""

    CPU_ONNX = "CPU (ONNX)"
    GPU_ONNX = "GPU (ONNX)"
    GPU_COREML = "GPU (CoreML)"
    NE_COREML = "Neural Engine (CoreML)"
    CPU_TORCH = "CPU (PyTorch)"
    GPU_TORCH = "GPU (PyTorch)"
    CPU_OPENVINO = "CPU (OpenVINO)"
    GPU_OPENVINO = "GPU (OpenVINO)"
    NPU_OPENVINO = "NPU (OpenVINO)"
    CPU_LITERT = "CPU (LiteRT)"
    GPU_LITERT = "GPU (LiteRT)"
    NPU_LITERT = "NPU (LiteRT)"
    CPU_EXECUTORCH = "CPU (ExecuTorch)"
    CPU_LLAMACPP = "CPU (llama.cpp)"
    GPU_LLAMACPP = "GPU (llama.cpp)"


class Runtime(enum.StrEnum):
    """The inference runtime a compute unit runs on."""

    ONNXRUNTIME = "onnxruntime"
    TORCH = "torch"
    COREMLTOOLS = "coremltools"
    OPENVINO = "openvino"
    LITERT = "litert"
    EXECUTORCH = "executorch"
    LLAMACPP = "llama.cpp"


RUNTIME_OF: Final[dict[ComputeUnit, Runtime]] = {
    ComputeUnit.CPU_ONNX: Runtime.ONNXRUNTIME,
    ComputeUnit.GPU_ONNX: Runtime.ONNXRUNTIME,
    ComputeUnit.GPU_COREML: Runtime.COREMLTOOLS,
    ComputeUnit.NE_COREML: Runtime.COREMLTOOLS,
    ComputeUnit.CPU_TORCH: Runtime.TORCH,
    ComputeUnit.GPU_TORCH: Runtime.TORCH,
    ComputeUnit.CPU_OPENVINO: Runtime.OPENVINO,
    ComputeUnit.GPU_OPENVINO: Runtime.OPENVINO,
    ComputeUnit.NPU_OPENVINO: Runtime.OPENVINO,
    ComputeUnit.CPU_LITERT: Runtime.LITERT,
    ComputeUnit.GPU_LITERT: Runtime.LITERT,
    ComputeUnit.NPU_LITERT: Runtime.LITERT,
    ComputeUnit.CPU_EXECUTORCH: Runtime.EXECUTORCH,
    ComputeUnit.CPU_LLAMACPP: Runtime.LLAMACPP,
    ComputeUnit.GPU_LLAMACPP: Runtime.LLAMACPP,
}

# Units on a GPU with memory of its own that NVML or Core ML reads (VRAM needs, NVML energy). OpenVINO's
# GPU and NPU are Intel devices NVML cannot see, mostly on the CPU's package: they are read as the CPU is.
GPU_UNITS: Final[frozenset[ComputeUnit]] = frozenset(
    {ComputeUnit.GPU_ONNX, ComputeUnit.GPU_COREML, ComputeUnit.GPU_TORCH, ComputeUnit.GPU_LLAMACPP}
)

ANY_WORKER_KEY: Final[str] = "sark/cap/v1/any"


def capability_key(unit: ComputeUnit | None) -> str:
    """The string whose sha256 is the DHT provider key for a unit (None: any worker)."""
    return ANY_WORKER_KEY if unit is None else f"sark/cap/v1/{unit.value}"
