"""llama.cpp through llama-cpp-cffi: the binding of `CPU (llama.cpp)` and `GPU (llama.cpp)`, its
log, and the layers' placement read from it.

llama-cpp-cffi ships llama.cpp's C API as three cffi extension modules inside its `llama` package:
`_llama_cpp_cpu` (CPU), `_llama_cpp_cuda_12_6_3` (CUDA) and `_llama_cpp_vulkan_1_x` (Vulkan). The
package's own `__init__` imports transformers and jinja2 and picks a build by itself; here the
extension module of the unit asked for is loaded directly from its file (found with `find_spec`,
the package never imported), so the child stays light.

A GPU unit whose GPU builds cannot load here (no libcuda, no libvulkan) runs as llama-cpp-cffi's own
loader does after that ImportError: on the CPU build, every layer still asked onto the GPU. llama.cpp
then puts every layer on the CPU without a word of warning (measured: SmolLM2-135M, 31 of 31 layers
"assigned to device CPU", no "offloaded" line): the silent fallback the field complains of. Here it
is never silent: the asked device is "GPU", the layers' placement is read from llama.cpp's log, and
the run is a `fallback` with GPU 0 % (the probe lists the unit unusable for that reason).

llama.cpp's log goes to a callback that keeps its lines (none reach the terminal): where each layer
was assigned ("layer N assigned to device CUDA0") is read from it, so placement is what llama.cpp
did, not what was asked.
"""

from __future__ import annotations

import functools
import glob
import importlib.machinery
import importlib.util
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from drivers.runtimes.driver import Placement
from drivers.runtimes.missing import FROZEN, not_installed
from protocol import ComputeUnit

UNITS: Final = (ComputeUnit.CPU_LLAMACPP, ComputeUnit.GPU_LLAMACPP)
DIST: Final = "llama-cpp-cffi"
PINNED: Final = "0.4.20"  # 0.4.31 and later need GCC 14's libstdc++ (not on Debian 12)
CPU_BUILD: Final = "_llama_cpp_cpu"
GPU_BUILDS: Final = ("_llama_cpp_cuda_12_6_3", "_llama_cpp_vulkan_1_x")
CPU_DEVICE: Final = "CPU"
NO_GPU_DEVICE: Final = "GPU"  # the device a GPU unit asks for when no GPU build runs here
ALL_LAYERS: Final = 999  # n_gpu_layers: every layer that can be offloaded
LOG_LINES: Final = 4096  # the log kept in memory (the load writes about 150 lines)
_LAYER: Final = re.compile(r"layer\s+(\d+) assigned to device (\S+)")


@dataclass
class Binding:
    """One llama.cpp build loaded in this process, its log kept.

    Attributes:
        lib: the cffi `lib` (llama.cpp's C functions).
        ffi: the cffi `ffi` (types, buffers, strings).
        build: the extension module's name (`_llama_cpp_cpu`...).
        device: the ggml device the unit runs on ("CPU", "CUDA0", "Vulkan0").
        log: llama.cpp's log lines since the last `take_log`.
    """

    lib: Any
    ffi: Any
    build: str
    device: str
    log: list[str] = field(default_factory=list)
    callback: Any = None  # the cffi callback, kept alive as long as llama.cpp may call it

    def take_log(self) -> list[str]:
        """The log lines written since the last call (and forget them)."""
        lines, self.log[:] = list(self.log), []
        return lines

    def system_info(self) -> str:
        """llama.cpp's own account of the build, shortened: the CPU features it was compiled with
        ("CPU : SSE3 = 1 | AVX = 1 | ..." -> "SSE3 AVX ...")."""
        text = str(self.ffi.string(self.lib.llama_print_system_info()).decode(errors="replace"))
        return " ".join(m.group(1) for m in re.finditer(r"(\w+) = 1", text))


@dataclass(frozen=True)
class Target:
    """The build a llama.cpp unit runs on and the device its layers are asked onto.

    Attributes:
        bound: the loaded build.
        device: the device asked for: "CPU", the GPU build's device ("CUDA0", "Vulkan0"), or
            `NO_GPU_DEVICE` when a GPU unit runs on the CPU build because no GPU build runs here.
        offload: every layer asked onto the GPU (`n_gpu_layers`), as on any GPU unit.
        missing: why no GPU build runs here (each build with its error), when the CPU build stands in.
    """

    bound: Binding
    device: str
    offload: bool
    missing: str = ""


def missing_runtime() -> str:
    """Why llama.cpp cannot run here ("" when llama-cpp-cffi is installed)."""
    if importlib.util.find_spec("llama") is not None:
        return ""
    if FROZEN:
        return not_installed([DIST], "llamacpp", "the llama.cpp units")
    return (
        f"{DIST} not installed (pip install -e '.[llamacpp]' && pip install --no-deps {DIST}=={PINNED}: "
        "its declared dependencies pin transformers<5)"
    )


def binding(unit: ComputeUnit) -> tuple[Target | None, str]:
    """The build `unit` runs on, loaded once per process, or None and why not: the CPU unit's, a GPU
    build with a GPU device, else (a GPU unit) the CPU build standing in, as llama-cpp-cffi's own
    loader falls back, with why no GPU build runs."""
    reason = missing_runtime()
    if reason:
        return None, reason
    if unit == ComputeUnit.CPU_LLAMACPP:
        cpu, why = _try(CPU_BUILD)
        return (Target(cpu, cpu.device, offload=False), "") if cpu else (None, why)
    reasons = []
    for build in GPU_BUILDS:
        loaded, why = _try(build)
        if loaded is None:
            reasons.append(why)
        elif loaded.device:
            return Target(loaded, loaded.device, offload=True), ""
        else:
            reasons.append(f"{build}: no GPU device (ggml lists {', '.join(_devices(loaded)) or 'none'})")
    cpu, why = _try(CPU_BUILD)
    if cpu is None:
        return None, "; ".join([*reasons, why])
    return Target(cpu, NO_GPU_DEVICE, offload=True, missing="; ".join(reasons)), ""


def _try(build: str) -> tuple[Binding | None, str]:
    """One build loaded, or None and the error of the shared library it could not load."""
    try:
        return _load(build), ""
    except ImportError as exc:  # a shared library the build needs is not on this machine
        return None, f"{build}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


@functools.cache
def _load(build: str) -> Binding:
    """Load one extension module from its file, route its log, and initialise its backends."""
    folder = importlib.util.find_spec("llama")
    locations = list(folder.submodule_search_locations or []) if folder else []
    files = [f for where in locations for f in glob.glob(str(Path(where) / f"{build}*.so"))]
    if not files:
        raise ImportError(f"{build} is not in the installed {DIST}")
    name = f"llama.{build}"
    loader = importlib.machinery.ExtensionFileLoader(name, files[0])
    spec = importlib.util.spec_from_file_location(name, files[0], loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    lib, ffi = module.lib, module.ffi
    bound = Binding(lib=lib, ffi=ffi, build=build, device="")

    @ffi.callback("void(enum ggml_log_level, const char *, void *)")  # type: ignore[untyped-decorator]
    def keep(level: int, text: Any, user: Any) -> None:
        if len(bound.log) < LOG_LINES:
            bound.log.append(ffi.string(text).decode(errors="replace"))

    bound.callback = keep
    lib.llama_log_set(keep, ffi.NULL)
    lib.llama_backend_init()
    kind = lib.GGML_BACKEND_DEVICE_TYPE_CPU if build == CPU_BUILD else lib.GGML_BACKEND_DEVICE_TYPE_GPU
    bound.device = next((n for n, t in _typed_devices(bound) if t == kind), "")
    return bound


def _typed_devices(bound: Binding) -> list[tuple[str, int]]:
    lib, ffi = bound.lib, bound.ffi
    devices = [lib.ggml_backend_dev_get(i) for i in range(lib.ggml_backend_dev_count())]
    return [
        (ffi.string(lib.ggml_backend_dev_name(d)).decode(), lib.ggml_backend_dev_type(d)) for d in devices
    ]


def _devices(bound: Binding) -> list[str]:
    return [name for name, _ in _typed_devices(bound)]


def layers_on(log: Iterable[str]) -> dict[str, int]:
    """How many layers llama.cpp assigned to each device, read from its load log."""
    layers: dict[int, str] = {}
    for line in log:
        found = _LAYER.search(line)
        if found:
            layers[int(found.group(1))] = found.group(2)
    counts: dict[str, int] = {}
    for device in layers.values():
        counts[device] = counts.get(device, 0) + 1
    return counts


def placement(layers: dict[str, int], asked: str) -> Placement:
    """Where the model's layers ran: each device's share, the device holding most layers first, and
    the asked device's share even when it holds none ("GPU 0%"). No layer read from the log is a
    fallback (nothing says it ran there)."""
    total = sum(layers.values())
    if total == 0:
        return Placement(providers=(CPU_DEVICE,), fallback=True, asked=asked)
    order = sorted(layers, key=lambda d: (-layers[d], d))
    share = {d: layers[d] / total for d in order} | ({} if asked in layers else {asked: 0.0})
    return Placement(providers=tuple(order), node_share=share, asked=asked)


def versions() -> dict[str, str]:
    """The binding's version (llama.cpp itself is built into it)."""
    import importlib.metadata

    return {"llama.cpp": importlib.metadata.version(DIST)}


__all__ = [
    "UNITS",
    "Binding",
    "Target",
    "binding",
    "layers_on",
    "missing_runtime",
    "placement",
    "versions",
]
