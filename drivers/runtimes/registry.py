"""The explicit registry of drivers, one per compute unit: a new runtime plugs in here."""

from __future__ import annotations

from typing import Final

from drivers.runtimes.coreml import CoremlDriver
from drivers.runtimes.driver import Driver
from drivers.runtimes.executorch import ExecutorchDriver
from drivers.runtimes.litert import LitertDriver
from drivers.runtimes.llamaunits import LlamacppDriver
from drivers.runtimes.onnx import OnnxDriver
from drivers.runtimes.openvino import OpenvinoDriver
from drivers.runtimes.torchrt import TorchDriver
from protocol import ComputeUnit

REGISTRY: Final[dict[ComputeUnit, Driver]] = {
    ComputeUnit.CPU_ONNX: OnnxDriver(ComputeUnit.CPU_ONNX),
    ComputeUnit.GPU_ONNX: OnnxDriver(ComputeUnit.GPU_ONNX),
    ComputeUnit.GPU_COREML: CoremlDriver(ComputeUnit.GPU_COREML),
    ComputeUnit.NE_COREML: CoremlDriver(ComputeUnit.NE_COREML),
    ComputeUnit.CPU_TORCH: TorchDriver(ComputeUnit.CPU_TORCH),
    ComputeUnit.GPU_TORCH: TorchDriver(ComputeUnit.GPU_TORCH),
    ComputeUnit.CPU_OPENVINO: OpenvinoDriver(ComputeUnit.CPU_OPENVINO),
    ComputeUnit.GPU_OPENVINO: OpenvinoDriver(ComputeUnit.GPU_OPENVINO),
    ComputeUnit.NPU_OPENVINO: OpenvinoDriver(ComputeUnit.NPU_OPENVINO),
    ComputeUnit.CPU_LITERT: LitertDriver(ComputeUnit.CPU_LITERT),
    ComputeUnit.GPU_LITERT: LitertDriver(ComputeUnit.GPU_LITERT),
    ComputeUnit.NPU_LITERT: LitertDriver(ComputeUnit.NPU_LITERT),
    ComputeUnit.CPU_EXECUTORCH: ExecutorchDriver(ComputeUnit.CPU_EXECUTORCH),
    ComputeUnit.CPU_LLAMACPP: LlamacppDriver(ComputeUnit.CPU_LLAMACPP),
    ComputeUnit.GPU_LLAMACPP: LlamacppDriver(ComputeUnit.GPU_LLAMACPP),
}


def driver_for(unit: ComputeUnit) -> Driver:
    """The registered driver of a compute unit."""
    return REGISTRY[unit]
