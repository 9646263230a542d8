"""llama.cpp through xllamacpp: the binding of `CPU (llama.cpp)` and `GPU (llama.cpp)`, its log, and
the layers' placement read from it.

xllamacpp (one abi3 extension module, llama.cpp of 2026 built in: gemma3, qwen3, llama4, gpt-oss...)
runs llama.cpp's server in-process: a `Server` made from `CommonParams` loads the model, and
`handle_completions` / `handle_chat_completions` stream each token's chunk to a Python callback with
llama.cpp's own timings. Its other handlers (`/tokenize`, `/apply-template`) answer on the server's
loopback port alone, keyed (`call`). Its CPU wheel holds the CPU backend only; its CUDA wheels (same
package name, from xllamacpp's own index) list a CUDA device. Importing it imports nothing else heavy (no
transformers, jinja2 or torch), so the child stays light.

A GPU unit where the installed build lists no GPU device runs on the CPU backend with every layer
still asked onto the GPU (`n_gpu_layers`): llama.cpp then puts every layer on the CPU without a word
of warning, the silent fallback the field complains of. Here it is never silent: the asked device is
"GPU", the layers' placement is read from llama.cpp's log, and the run is a `fallback` with GPU 0 %
(the probe lists the unit unusable for that reason).

llama.cpp's log (llama.cpp's `common_log`, written to stderr by its own thread) is caught during a
load: stderr's file descriptor is pointed at a temporary file, the log at debug verbosity (where
"layer N assigned to device CUDA0" is written), drained (`common_log_pause` joins its writer thread
after the queued lines) and left paused: a paused log drops every line under its own lock, so
nothing llama.cpp logs after the load reaches the node's stderr, not even the line its server thread
writes as it starts ("srv update_slots: all slots are idle", which once reached a worker's stderr
when the log was resumed and then quieted: the thread had passed the verbosity check before the
quieting). The next load resumes it inside its own capture; errors of a request come back in its
answer, never from the log. Placement is what llama.cpp did, not what was asked. The log's functions are
C++ symbols of the extension module (Itanium-mangled, as on Linux and macOS); where they are absent,
no layer is read and every run is a fallback that says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import http.client
import importlib.util
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from drivers.runtimes.driver import Placement
from drivers.runtimes.missing import FROZEN, not_installed
from protocol import ComputeUnit

UNITS: Final = (ComputeUnit.CPU_LLAMACPP, ComputeUnit.GPU_LLAMACPP)
DIST: Final = "xllamacpp"
CPU_DEVICE: Final = "CPU"
NO_GPU_DEVICE: Final = "GPU"  # the device a GPU unit asks for when the installed build has no GPU
ALL_LAYERS: Final = 999  # n_gpu_layers: every layer that can be offloaded
LOAD_VERBOSITY: Final = 5  # "layer N assigned to device" is a debug line: written at 5 (none at 4, measured)
SUMMARY_VERBOSITY: Final = 4  # the load's summary ("offloaded N/M layers to GPU", each model buffer)
QUIET_VERBOSITY: Final = 1  # errors only (and the log paused after a load: none written)
LOG_BYTES: Final = 4 << 20  # the load's log read back (a load writes about 40 KB)
CALL_TIMEOUT_S: Final = 60.0  # one loopback call to the server's own handler (a millisecond or so, measured)
ANSWER_BYTES: Final = 4 << 20  # an answer read back (a 4096-token prompt's ids: about 30 KB)
_LAYER: Final = re.compile(r"layer\s+(\d+) assigned to device ([^\s,]+)")
_OFFLOADED: Final = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_BUFFER: Final = re.compile(r"load_tensors:\s+(\S+) model buffer size")
_LAYERS_ALL: Final = re.compile(r"print_info: n_layer_all\s+=\s+(\d+)")
# common/log.h's functions, as GCC and Clang mangle them
_LOG_MAIN: Final = "_Z15common_log_mainv"
_LOG_PAUSE: Final = "_Z16common_log_pauseP10common_log"
_LOG_RESUME: Final = "_Z17common_log_resumeP10common_log"
_LOG_THOLD: Final = "_Z30common_log_set_verbosity_tholdi"


@dataclass(frozen=True)
class Binding:
    """xllamacpp loaded in this process, with the handles of llama.cpp's log.

    Attributes:
        module: the `xllamacpp` module (`CommonParams`, `Server`).
        log: llama.cpp's log functions (ctypes), or None where the build does not export them.
    """

    module: Any
    log: Any

    @property
    def build(self) -> str:
        """The binding and its version ("xllamacpp 2026.10.11549"): llama.cpp is built into it."""
        return f"{DIST} {self.module.__version__}"

    def system_info(self) -> str:
        """llama.cpp's own account of the build, shortened: the CPU features it was compiled with
        ("CPU : SSE3 = 1 | AVX = 1 | ..." -> "SSE3 AVX ...")."""
        text = str(self.module.get_system_info())
        return " ".join(m.group(1) for m in re.finditer(r"(\w+) = 1", text))

    def devices(self) -> list[tuple[str, str]]:
        """ggml's devices in this build: (name, "CPU" or "GPU"...), as llama.cpp lists them."""
        listed = self.module.get_device_info()
        return [(str(d["name"]), str(d["type"].name).rsplit("_", 1)[-1]) for d in listed]

    def verbosity(self) -> int:
        """The verbosity a load runs at: debug where the log can be quieted after the load, else the
        load's summary alone (a build that does not export the log's functions keeps its verbosity for
        every request after, and debug writes lines per token)."""
        return LOAD_VERBOSITY if self.log is not None else SUMMARY_VERBOSITY

    def gpus(self) -> tuple[str, ...]:
        """The names of ggml's GPU devices in this build ("CUDA0"), as its load log names them."""
        return tuple(name for name, kind in self.devices() if kind in ("GPU", "IGPU"))

    @contextlib.contextmanager
    def captured(self) -> Iterator[list[str]]:
        """llama.cpp's log lines written inside the block (filled when it ends), then the log paused
        (every later line dropped) and quieted: every line queued inside the block is written, however
        far its writer thread lags."""
        lines: list[str] = []
        with tempfile.TemporaryFile() as sink:
            saved = os.dup(2)
            os.dup2(sink.fileno(), 2)
            if self.log is not None:
                self.log.resume(self.log.main())  # paused by the load before (a no-op if running)
            try:
                yield lines
            finally:
                if self.log is not None:
                    # its writer thread joined after every queued line, and left stopped: llama.cpp's
                    # log drops every line while paused (under its own lock), so a line a server
                    # thread was writing as the load ended is caught here or dropped, never written.
                    # Quieted only then: the writer reads the verbosity again as it prints a debug
                    # line, so quieting first dropped the debug lines a lagging writer still held
                    # (a busy machine: a load's "layer N assigned" lines, CI at 0899dfb9)
                    self.log.pause(self.log.main())
                    self.log.thold(QUIET_VERBOSITY)
                os.dup2(saved, 2)
                os.close(saved)
                sink.seek(0)
                lines.extend(sink.read(LOG_BYTES).decode(errors="replace").splitlines())


@dataclass(frozen=True)
class Target:
    """The device a llama.cpp unit runs on and the device its layers are asked onto.

    Attributes:
        bound: the loaded binding.
        device: the device asked for: "CPU", the GPU build's device ("CUDA0", "Vulkan0"), or
            `NO_GPU_DEVICE` when a GPU unit runs on the CPU backend because the build has no GPU.
        offload: every layer asked onto the GPU (`n_gpu_layers`), as on any GPU unit.
        missing: why no GPU device runs here, when the CPU backend stands in.
    """

    bound: Binding
    device: str
    offload: bool
    missing: str = ""


def missing_runtime() -> str:
    """Why llama.cpp cannot run here ("" when xllamacpp is installed)."""
    if importlib.util.find_spec(DIST) is not None:
        return ""
    if FROZEN:
        return not_installed([DIST], "llamacpp", "the llama.cpp units", frozen=FROZEN)
    return f"{DIST} not installed (pip install -e '.[llamacpp]')"


def binding(unit: ComputeUnit) -> tuple[Target | None, str]:
    """The device `unit` runs on, the binding loaded once per process, or None and why not: the CPU
    device, a GPU device of the installed build, else (a GPU unit) the CPU backend standing in with
    every layer asked onto the GPU, and why no GPU device runs."""
    reason = missing_runtime()
    if reason:
        return None, reason
    try:
        bound = _load()
    except ImportError as exc:  # a shared library the build needs (libcuda...) is not on this machine
        return None, f"{DIST}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    devices = bound.devices()
    if unit == ComputeUnit.CPU_LLAMACPP:
        cpu = next((name for name, kind in devices if kind == "CPU"), "")
        return (Target(bound, cpu, offload=False), "") if cpu else (None, f"{DIST}: ggml lists no CPU device")
    gpu = next((name for name, kind in devices if kind in ("GPU", "IGPU")), "")
    if gpu:
        return Target(bound, gpu, offload=True), ""
    listed = ", ".join(name for name, _ in devices) or "none"
    missing = f"{DIST}'s build here has no GPU device (ggml lists {listed}; its CUDA wheels do)"
    return Target(bound, NO_GPU_DEVICE, offload=True, missing=missing), ""


@dataclass(frozen=True)
class _Log:
    main: Any
    pause: Any
    resume: Any
    thold: Any


@functools.cache
def _load() -> Binding:
    """Import xllamacpp and find llama.cpp's log functions in its extension module."""
    import xllamacpp

    return Binding(module=xllamacpp, log=_log_functions(xllamacpp.xllamacpp.__file__))


def _log_functions(path: str) -> _Log | None:
    try:
        lib = ctypes.CDLL(path)
        names = (_LOG_MAIN, _LOG_PAUSE, _LOG_RESUME, _LOG_THOLD)
        main, pause, resume, thold = (getattr(lib, name) for name in names)
    except (OSError, AttributeError):  # another build, another mangling: placement is then unread
        return None
    main.restype, main.argtypes = ctypes.c_void_p, []
    pause.argtypes = resume.argtypes = [ctypes.c_void_p]
    thold.argtypes = [ctypes.c_int]
    return _Log(main, pause, resume, thold)


def layers_on(log: Iterable[str]) -> dict[str, int]:
    """How many layers llama.cpp assigned to each device, read from its load log's debug lines."""
    layers: dict[int, str] = {}
    for line in log:
        found = _LAYER.search(line)
        if found:
            layers[int(found.group(1))] = found.group(2)
    counts: dict[str, int] = {}
    for device in layers.values():
        counts[device] = counts.get(device, 0) + 1
    return counts


def layers_summarized(log: list[str], gpus: tuple[str, ...]) -> dict[str, int]:
    """The layers per device from llama.cpp's summary of a load, where no debug line was written (a
    load at `SUMMARY_VERBOSITY`): "offloaded N/M layers to GPU" (M counts the output layer, as the
    debug lines do) and one "model buffer size" line per buffer. The N layers are on the one GPU
    device (of `gpus`) holding a model buffer, the other M - N on the CPU. A build with no GPU device
    writes no such line: every layer is on the CPU, the model's "n_layer_all" and its output layer.
    Nothing is read where the summary is missing, or where several GPU devices hold buffers (a split
    the summary does not tell apart)."""
    offloaded = [m for line in log if (m := _OFFLOADED.search(line))]
    if not offloaded:
        layers = [int(m.group(1)) for line in log if (m := _LAYERS_ALL.search(line))]
        loaded = any(_BUFFER.search(line) for line in log)
        return {CPU_DEVICE: layers[-1] + 1} if not gpus and layers and loaded else {}
    on_gpu, total = int(offloaded[-1].group(1)), int(offloaded[-1].group(2))
    held = {m.group(1) for line in log if (m := _BUFFER.search(line))} & set(gpus)
    if on_gpu == 0:
        return {CPU_DEVICE: total}
    if len(held) != 1 or on_gpu > total:
        return {}
    return {held.pop(): on_gpu} | ({CPU_DEVICE: total - on_gpu} if total > on_gpu else {})


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


def call(server: Any, key: str, path: str, body: dict[str, object]) -> tuple[dict[str, Any] | None, str]:
    """One call to an in-process server's own HTTP handler (`/tokenize`, `/apply-template`: llama.cpp's
    code, which xllamacpp does not expose to Python) on its loopback port, with the API key the port
    answers alone: its JSON answer, read within `ANSWER_BYTES`, or None and why."""
    where = urlsplit(str(server.listening_address))
    connection = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=CALL_TIMEOUT_S)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    try:
        connection.request("POST", path, json.dumps(body), headers)
        answer = connection.getresponse()
        raw, status = answer.read(ANSWER_BYTES), answer.status
    except (OSError, http.client.HTTPException) as exc:
        return None, str(exc) or type(exc).__name__
    finally:
        connection.close()
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if status != 200 or not isinstance(parsed, dict):
        return None, f"{status} {raw[:300].decode(errors='replace')}"
    return parsed, ""


def versions() -> dict[str, str]:
    """The binding's version (llama.cpp itself is built into it)."""
    import importlib.metadata

    return {"llama.cpp": importlib.metadata.version(DIST)}  # xllamacpp's (llama.cpp is built into it)


__all__ = [
    "UNITS",
    "Binding",
    "Target",
    "binding",
    "call",
    "layers_on",
    "layers_summarized",
    "missing_runtime",
    "placement",
    "versions",
]
