"""The CPU's peak kernels, one per precision and memory access, each with its library named, or the
reason it cannot be had here (see `drivers.measuring.peakchild` for how each is swept).

fp32: numpy's `matmul` (its BLAS, threadpoolctl names it). bf16 and fp16: torch's `mm` (oneDNN) where
torch is installed (`.[torch]`) and the CPU has the instructions (`cpu_flags`: avx512_bf16 or amx_bf16;
avx512_fp16 or amx_fp16; an Arm's bf16 / fphp): a precision the CPU only emulates is no peak (torch's
fp16 matmul ran at 1-3 GFLOPS on an AVX-512 CPU without avx512_fp16), so it is reported unavailable
with the flag it lacks. int8: ONNX Runtime's `MatMulInteger` (u8 x s8 -> s32, MLAS, a base
dependency) on every CPU, named with its instruction: a dot product where the CPU has one (avx512_vnni,
avx_vnni, amx_int8; an Arm's asimddp or i8mm), else MLAS's widening multiply-add (AVX2's vpmaddubsw,
Arm's smull), native int8 arithmetic, not an emulation: 201 GOPS beside fp32's 117 GFLOPS on a 2-core
AMD EPYC with AVX2 and no VNNI (2026-11-30, n = 1024). Memory:
numpy, one thread: read `np.dot(x, x)` over float64 (BLAS ddot: one pass), write `x.fill(1.0)`, copy
`np.copyto(y, x)` (bytes read plus written, as the calibration counts), from twice the last-level cache
up (`memory_sizes`).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from protocol import Peak

MATMUL_SIZES: Final = (256, 512, 1024, 2048, 4096)
LLC_FALLBACK: Final = 32 << 20
MIB: Final = 1 << 20
CPU: Final = "CPU"
BF16_FLAGS: Final = ("avx512_bf16", "amx_bf16", "bf16")
FP16_FLAGS: Final = ("avx512_fp16", "amx_fp16", "fphp")
INT8_FLAGS: Final = ("avx512_vnni", "avx_vnni", "amx_int8", "asimddp", "i8mm")

Call = Callable[[], object]


@dataclass(frozen=True)
class Kernel:
    """One figure's kernel: its precision, library, call text, and at a size its call and work.

    Attributes:
        make: the call at a size and thread count (None: the library's own), inputs allocated (the
            allocation is not timed).
        work: operations (matmul) or bytes (memory) of one call at a size.
        sizes: the sizes to sweep, in order.
        label: a size for people ("n=1024", "256 MiB").
        memory: True: a memory access (plateau by agreement), False: a matmul (by growth).
        threads: the thread counts each size is timed with (the faster counts: a library that splits
            a product over every core waits for its slowest thread, and with a core busy elsewhere
            one thread can be several times faster, as `challengechild.Kernel` found).
        limit: a context that holds the library at a thread count while a size is timed.
    """

    unit: str
    precision: str
    library: str
    kernel: str
    make: Callable[[int, int | None], Call]
    work: Callable[[int], float]
    sizes: tuple[int, ...]
    label: Callable[[int], str]
    memory: bool = False
    threads: tuple[int | None, ...] = (None, 1)
    limit: Callable[[int | None], AbstractContextManager[object]] = lambda _: nullcontext()


def unavailable(unit: str, precision: str, reason: str, library: str = "") -> Peak:
    """A precision the unit or the installed libraries cannot do, with why."""
    return Peak.model_validate(
        {"unit": unit, "precision": precision, "available": False, "reason": reason[:256], "library": library}
    )


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (Linux /proc/cpuinfo `flags`, or an Arm's `Features`); empty elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def llc_bytes() -> int:
    """The largest cache's size (sysfs), `LLC_FALLBACK` where it cannot be read."""
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=LLC_FALLBACK)


def memory_cap() -> int:
    """The largest array a memory figure may allocate: an eighth of the memory available, 1 GiB at most."""
    import psutil

    return int(min(psutil.virtual_memory().available // 8, 1 << 30))


def memory_sizes(llc: int, cap: int) -> tuple[int, ...]:
    """Array bytes from twice the last-level cache (a power of two MiB) doubling up to `cap` (at
    least one size, even past the cap: a figure is better than none)."""
    first = 1 << max(20, math.ceil(math.log2(max(2 * llc, MIB))))
    sizes = [first]
    while sizes[-1] * 2 <= cap:
        sizes.append(sizes[-1] * 2)
    return tuple(sizes)


def matmul_label(n: int) -> str:
    """A matmul's size for people."""
    return f"n={n}"


def mib_label(size: int) -> str:
    """An array's size for people."""
    return f"{size // MIB} MiB"


def flops(n: int) -> float:
    """Operations of one n x n x n product (a multiply and an add each)."""
    return 2.0 * float(n) ** 3


def version(dist: str) -> str:
    """An installed distribution's version, "?" if it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def numpy_library() -> str:
    """numpy's version and the BLAS it runs (threadpoolctl's account)."""
    from threadpoolctl import threadpool_info

    pools = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    blas = [f"{i.get('internal_api')} {i.get('version')}" for i in pools]
    return f"numpy {version('numpy')} ({', '.join(blas) or 'BLAS unknown'})"


def fp32_kernel() -> Kernel:
    """numpy's float32 matmul on its BLAS (every thread it starts)."""
    import numpy as np

    def make(n: int, threads: int | None) -> Call:
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
        out = np.empty((n, n), dtype=np.float32)
        return lambda: np.matmul(a, b, out=out)

    text = "numpy.matmul(a, b, out=c), float32 n x n"
    return Kernel(
        CPU, "fp32", numpy_library(), text, make, flops, MATMUL_SIZES, matmul_label, limit=blas_limit()
    )


def blas_limit() -> Callable[[int | None], AbstractContextManager[object]]:
    """threadpoolctl's BLAS limit (its controller made once: it finds the loaded libraries)."""
    from threadpoolctl import ThreadpoolController

    pools = ThreadpoolController()

    def limit(threads: int | None) -> AbstractContextManager[object]:
        held: AbstractContextManager[object] = pools.limit(limits=threads, user_api="blas")
        return held

    return limit


def torch_kernel(precision: str, flags: frozenset[str]) -> Kernel | Peak:
    """torch's `mm` on the CPU in bf16 or fp16, or why not (torch missing, the CPU lacking the flag)."""
    needed = BF16_FLAGS if precision == "bf16" else FP16_FLAGS
    if not flags & set(needed):
        why = f"the CPU has none of {', '.join(needed)}: {precision} is emulated"
        return unavailable(CPU, precision, why)
    if importlib.util.find_spec("torch") is None:
        return unavailable(CPU, precision, "torch is not installed (pip install 'sark-node[torch]')")
    import torch

    dtype = torch.bfloat16 if precision == "bf16" else torch.float16

    @contextmanager
    def limit(threads: int | None) -> Iterator[None]:
        before = torch.get_num_threads()
        torch.set_num_threads(threads or before)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def make(n: int, threads: int | None) -> Call:
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(n, n, generator=generator).to(dtype)
        b = torch.randn(n, n, generator=generator).to(dtype)
        out = torch.empty(n, n, dtype=dtype)
        return lambda: torch.mm(a, b, out=out)

    library = f"torch {torch.__version__} (oneDNN {'on' if torch.backends.mkldnn.enabled else 'off'})"
    text = f"torch.mm(a, b, out=c), {dtype} n x n"
    return Kernel(CPU, precision, library, text, make, flops, MATMUL_SIZES, matmul_label, limit=limit)


def int8_kernel(flags: frozenset[str]) -> Kernel:
    """ONNX Runtime's MatMulInteger (u8 x s8 -> s32) on its CPU provider, named with its instruction."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper

    def make(n: int, threads: int | None) -> Call:
        graph = helper.make_graph(
            [helper.make_node("MatMulInteger", ["A", "B"], ["C"])],
            "peak",
            [
                helper.make_tensor_value_info("A", TensorProto.UINT8, [n, n]),
                helper.make_tensor_value_info("B", TensorProto.INT8, [n, n]),
            ],
            [helper.make_tensor_value_info("C", TensorProto.INT32, [n, n])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or 0
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        binding = session.io_binding()
        binding.bind_cpu_input("A", rng.integers(0, 256, (n, n), dtype=np.uint8))
        binding.bind_cpu_input("B", rng.integers(-128, 128, (n, n), dtype=np.int8))
        binding.bind_output("C")
        return lambda: session.run_with_iobinding(binding)

    text = "onnxruntime MatMulInteger (uint8 x int8 -> int32), n x n, IO bound once"
    library = f"onnxruntime {ort.__version__} (CPUExecutionProvider, MLAS; {int8_instruction(flags)})"
    return Kernel(CPU, "int8", library, text, make, flops, MATMUL_SIZES, matmul_label)


def int8_instruction(flags: frozenset[str]) -> str:
    """The instruction MLAS's int8 matmul rests on here: the CPU's dot product, or its widening
    multiply-add where it has none."""
    dot = [flag for flag in INT8_FLAGS if flag in flags]
    if dot:
        return f"int8 dot product: {dot[0]}"
    return f"widening multiply-add: none of {', '.join(INT8_FLAGS)}"


def memory_kernel(access: str, sizes: tuple[int, ...]) -> Kernel:
    """numpy's read (ddot), write (fill) or copy over float64 arrays of `sizes` bytes."""
    import numpy as np

    def make(size: int, threads: int | None) -> Call:
        x = np.ones(size // 8, dtype=np.float64)
        if access == "read":
            return lambda: np.dot(x, x)
        if access == "write":
            return lambda: x.fill(1.0)
        y = np.empty_like(x)
        return lambda: np.copyto(y, x)

    calls = {"read": "numpy.dot(x, x) (BLAS ddot)", "write": "x.fill(1.0)", "copy": "numpy.copyto(y, x)"}
    text = f"{calls[access]}, float64; bytes {'read + written' if access == 'copy' else 'once'}"

    def work(size: int) -> float:
        return float(2 * size if access == "copy" else size)

    library = numpy_library()
    return Kernel(CPU, access, library, text, make, work, sizes, mib_label, memory=True, threads=(None,))


def cpu_kernels() -> list[Kernel | Peak]:
    """Every CPU figure's kernel, in order (fp32, bf16, int8, fp16, read, write, copy), or why not."""
    flags = cpu_flags()
    return [cpu_kernel(p, flags) for p in ("fp32", "bf16", "int8", "fp16", "read", "write", "copy")]


def cpu_kernel(precision: str, flags: frozenset[str] | None = None) -> Kernel | Peak:
    """One CPU figure's kernel (a peaks task's: only its own library is imported), or why not."""
    flags = cpu_flags() if flags is None else flags
    if precision == "fp32":
        return fp32_kernel()
    if precision in ("bf16", "fp16"):
        return torch_kernel(precision, flags)
    if precision == "int8":
        return int8_kernel(flags)
    if precision in ("read", "write", "copy"):
        return memory_kernel(precision, memory_sizes(llc_bytes(), memory_cap()))
    return unavailable(CPU, precision, f"no CPU kernel for {precision}: a GPU precision")


__all__ = [
    "CPU",
    "Kernel",
    "cpu_flags",
    "cpu_kernel",
    "cpu_kernels",
    "flops",
    "fp32_kernel",
    "int8_instruction",
    "int8_kernel",
    "llc_bytes",
    "memory_cap",
    "memory_kernel",
    "memory_sizes",
    "torch_kernel",
    "unavailable",
]
