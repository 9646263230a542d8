"""A CUDA GPU's peak kernels through torch: matmul per precision and memory read, write and copy.

Written against torch's CUDA API: `torch.cuda.is_available`, `get_device_capability`,
`get_device_properties` (`L2_cache_size`, `total_memory`), `torch.backends.cuda.matmul.allow_tf32`,
`torch.mm`, and, for int8 and fp8, the two entry points torch has for them, `torch._int_mm` (s8 x s8
-> s32) and `torch._scaled_mm` (float8_e4m3fn, a per-tensor scale, bf16 out): underscored, so each is
probed (`hasattr`) and a missing one is the precision unavailable with that reason. Each call runs
`BATCH` products back to back and then `torch.cuda.synchronize`, so the figure is the device's, not
the launch's. What the capability allows (`precisions`): tensor cores from 7.0 (Volta), int8 on them
from 7.5 (Turing), tf32 and bf16 from 8.0 (Ampere), fp8 from 8.9 (Ada, Hopper); the generation is
named from the capability (`tensor_cores`). Nothing here runs without a CUDA device: `gpu_kernels`
asks torch first and says why not.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any, Final

from drivers.measuring.peakkernels import (
    Call,
    Kernel,
    flops,
    matmul_label,
    memory_sizes,
    mib_label,
    unavailable,
)
from protocol import GPU_PEAK_BATCH, Peak

GPU_SIZES: Final = (1024, 2048, 4096, 8192, 16384)
BATCH: Final = GPU_PEAK_BATCH
MAX_GPUS: Final = 16
"""The devices measured (`protocol.values.MAX_PEAKS` holds 9 figures for each)."""
GENERATIONS: Final = (
    (10, "Blackwell"),
    (9, "Hopper"),
    (8.9, "Ada Lovelace"),
    (8, "Ampere"),
    (7.5, "Turing"),
    (7, "Volta"),
)
MINIMUM: Final = {"fp32": 0.0, "fp16": 0.0, "int8": 7.5, "tf32": 8.0, "bf16": 8.0, "fp8": 8.9}
"""The compute capability each precision's matmul needs (fp16 runs on every CUDA GPU; on tensor
cores from 7.0)."""


def tensor_cores(capability: tuple[int, int]) -> str:
    """The tensor-core generation of a compute capability ("none" before 7.0)."""
    value = capability[0] + capability[1] / 10.0
    for floor, name in GENERATIONS:
        if value >= floor:
            return name
    return "none"


def precisions(capability: tuple[int, int]) -> dict[str, str]:
    """Each matmul precision and "" when the capability allows it, else why not."""
    value = capability[0] + capability[1] / 10.0
    return {
        p: "" if value >= low else f"compute capability {capability[0]}.{capability[1]} < {low:g}"
        for p, low in MINIMUM.items()
    }


def gpu_kernels() -> list[Kernel | Peak]:
    """Every CUDA device's figures, or one unavailable figure saying why there is none."""
    if importlib.util.find_spec("torch") is None:
        return [unavailable("GPU", "fp32", "torch is not installed: no CUDA figures")]
    import torch

    if not torch.cuda.is_available():
        return [unavailable("GPU", "fp32", f"torch {torch.__version__}: no CUDA device")]
    found: list[Kernel | Peak] = []
    for index in range(min(torch.cuda.device_count(), MAX_GPUS)):
        found.extend(_device_kernels(torch, index))
    return found


def gpu_kernel(precision: str) -> Kernel | Peak:
    """One figure's kernel on the first CUDA device (a peaks task's), or why there is none."""
    if importlib.util.find_spec("torch") is None:
        return unavailable("GPU", precision, "torch is not installed: no CUDA figures")
    import torch

    if not torch.cuda.is_available():
        return unavailable("GPU", precision, f"torch {torch.__version__}: no CUDA device")
    found = [k for k in _device_kernels(torch, 0) if k.precision == precision]
    return found[0] if found else unavailable("GPU", precision, f"no CUDA kernel for {precision}")


def _device_kernels(torch: Any, index: int) -> list[Kernel | Peak]:
    props = torch.cuda.get_device_properties(index)
    capability = (int(props.major), int(props.minor))
    unit = f"cuda:{index} {props.name}"
    library = (
        f"torch {torch.__version__} CUDA {torch.version.cuda}; cc {capability[0]}.{capability[1]}, "
        f"tensor cores: {tensor_cores(capability)}"
    )
    found: list[Kernel | Peak] = []
    for precision, why in precisions(capability).items():
        if why:
            found.append(unavailable(unit, precision, why, library))
        else:
            found.append(_matmul(torch, index, unit, precision, library))
    l2 = int(getattr(props, "L2_cache_size", 0)) or 64 << 20
    sizes = memory_sizes(l2, min(int(props.total_memory) // 8, 4 << 30))
    found.extend(_memory(torch, index, unit, access, sizes, library) for access in ("read", "write", "copy"))
    return found


def _matmul(torch: Any, index: int, unit: str, precision: str, library: str) -> Kernel | Peak:
    entry = {"int8": "_int_mm", "fp8": "_scaled_mm"}.get(precision, "mm")
    if not hasattr(torch, entry):
        return unavailable(unit, precision, f"this torch has no torch.{entry}", library)
    device = torch.device("cuda", index)
    step = _step(torch, device, precision)

    def make(n: int, threads: int | None) -> Call:
        product = step(n)

        def call() -> None:
            for _ in range(BATCH):
                product()
            torch.cuda.synchronize(device)

        return call

    text = f"torch.{entry} x{BATCH} then synchronize, {precision} n x n"
    return Kernel(
        unit,
        precision,
        library,
        text,
        make,
        lambda n: BATCH * flops(n),
        GPU_SIZES,
        matmul_label,
        threads=(None,),
    )


def _step(torch: Any, device: Any, precision: str) -> Callable[[int], Call]:
    def step(n: int) -> Call:
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        base = torch.randn(n, n, device=device)
        if precision == "int8":
            a = base.to(torch.int8)
            return lambda: torch._int_mm(a, a)
        if precision == "fp8":
            a = base.to(torch.float8_e4m3fn)
            b = base.to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm asks
            one = torch.ones((), device=device)
            return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)
        a, out = base.to(dtype), torch.empty(n, n, device=device, dtype=dtype)
        return lambda: torch.mm(a, a, out=out)

    return step


def _memory(torch: Any, index: int, unit: str, access: str, sizes: tuple[int, ...], library: str) -> Kernel:
    device = torch.device("cuda", index)

    def make(size: int, threads: int | None) -> Call:
        x = torch.ones(size // 4, device=device)
        y = torch.empty_like(x)
        ops: dict[str, Call] = {"read": x.sum, "write": lambda: x.fill_(1.0), "copy": lambda: y.copy_(x)}
        op = ops[access]

        def call() -> None:
            for _ in range(BATCH):
                op()
            torch.cuda.synchronize(device)

        return call

    calls = {"read": "x.sum()", "write": "x.fill_(1.0)", "copy": "y.copy_(x)"}
    text = f"torch {calls[access]} x{BATCH} then synchronize, float32"

    def work(size: int) -> float:
        return float(BATCH * size * (2 if access == "copy" else 1))

    return Kernel(unit, access, library, text, make, work, sizes, mib_label, memory=True, threads=(None,))


__all__ = ["BATCH", "MINIMUM", "gpu_kernel", "gpu_kernels", "precisions", "tensor_cores"]
