"""onnxruntime driver: `CPU (ONNX)`, and `GPU (ONNX)` on CUDA, TensorRT, MIGraphX, DirectML or the CoreML EP.

onnxruntime falls back to the CPU silently, and lists execution providers it cannot use, so a unit
is usable only after the 1-node probe model ran with `session.disable_cpu_ep_fallback=1` and
`enable_fallback=0`. Benchmark sessions keep the CPU provider in the list (shape ops may land there)
but record the per-provider node assignment and flag a fallback.

A pip-installed onnxruntime-gpu finds CUDA and cuDNN in the nvidia-* wheels only after
`onnxruntime.preload_dlls()` (onnxruntime 1.21 and later, documented for exactly that case) loaded
them: the CUDA-family providers call it once before their first session (`_preloaded`), and a build
without it, or without those wheels, leaves the loader to the system's library path as before.
"""

from __future__ import annotations

import contextlib
import functools
import io
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import psutil

from drivers.errors import TaskFailed
from drivers.files.inputs import InputSig
from drivers.runtimes.driver import Feeds, LoadOptions, Placement, Settings
from protocol import ComputeUnit, FailureReason, ModelFormat, UnitStatus

CPU_EP: Final = "CPUExecutionProvider"
CUDA_EP: Final = "CUDAExecutionProvider"
TENSORRT_EP: Final = "TensorrtExecutionProvider"
MIGRAPHX_EP: Final = "MIGraphXExecutionProvider"
DML_EP: Final = "DmlExecutionProvider"
COREML_EP: Final = "CoreMLExecutionProvider"
# Preference order of GPU execution providers per `sys.platform`.
GPU_CANDIDATES: Final[dict[str, tuple[str, ...]]] = {
    "linux": (CUDA_EP, MIGRAPHX_EP, TENSORRT_EP),
    "win32": (CUDA_EP, DML_EP),
    "darwin": (COREML_EP,),
}
# Relu on float[1, 4], opset 17, IR 8: drivers.files.models.relu_model() serialised (a test pins the two
# equal).
PROBE_MODEL: Final = bytes.fromhex(
    "08083a3f0a0c0a0178120179220452656c75120570726f62655a130a0178120e0a0c080112080a0208010a02080462130a01"
    "79120e0a0c080112080a0208010a02080442040a001011"
)
# onnxruntime input type -> numpy dtype name.
DTYPES: Final = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(int16)": "int16",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(bool)": "bool",
}

ProviderEntry = tuple[str, dict[str, str]]


def provider_options(name: str, *, device_id: int = 0, cache_dir: str | None = None) -> ProviderEntry:
    """The option dict a GPU execution provider is given, per the provider's documented keys."""
    if name == TENSORRT_EP:
        opts = {"device_id": str(device_id), "trt_fp16_enable": "False"}
        if cache_dir:
            opts |= {"trt_engine_cache_enable": "True", "trt_engine_cache_path": cache_dir}
        return name, opts
    if name == COREML_EP:
        opts = {"MLComputeUnits": "CPUAndGPU", "ModelFormat": "MLProgram"}
        if cache_dir:
            opts["ModelCacheDirectory"] = cache_dir
        return name, opts
    if name in (CUDA_EP, MIGRAPHX_EP, DML_EP):
        return name, {"device_id": str(device_id)}
    if name == CPU_EP:
        return name, {}
    raise ValueError(f"no option mapping for execution provider {name!r}")


def provider_list(name: str, *, device_id: int = 0, cache_dir: str | None = None) -> list[ProviderEntry]:
    """The full provider list for a session on `name`: TensorRT backed by CUDA, the CPU provider last."""
    entries = [provider_options(name, device_id=device_id, cache_dir=cache_dir)]
    if name == TENSORRT_EP:
        entries.append(provider_options(CUDA_EP, device_id=device_id))
    if name != CPU_EP:
        entries.append((CPU_EP, {}))
    return entries


def session_config(name: str) -> dict[str, Any]:
    """SessionOptions attributes a provider needs (DirectML: no memory pattern, sequential execution)."""
    if name == DML_EP:
        return {"enable_mem_pattern": False, "execution_mode": "sequential"}
    return {}


def node_share(assignment: list[Any]) -> dict[str, float]:
    """Share of graph nodes per provider from `get_provider_graph_assignment_info()`."""
    counts: Counter[str] = Counter()
    for subgraph in assignment:
        counts[str(subgraph.ep_name)] += len(subgraph.get_nodes())
    total = sum(counts.values())
    return {ep: n / total for ep, n in sorted(counts.items())} if total else {}


def is_fallback(requested: str, providers: tuple[str, ...]) -> bool:
    """Whether a session fell back whole: the requested provider is not the primary one. (A share of
    nodes under the campaign's `placement_share` is judged by `drivers.measuring.meters.Placed`.)"""
    return not providers or providers[0] != requested


def _ort() -> Any:
    import onnxruntime

    return onnxruntime


@functools.cache
def _preloaded(ort: Any) -> str:
    """`ort.preload_dlls()` once, before a CUDA or TensorRT session: "" when done, else why not (no
    such call in this build, or its error); the session's own error then says what is missing."""
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return f"onnxruntime {ort.__version__} has no preload_dlls"
    said = io.StringIO()  # it prints what it could not load: kept from stdout (`info --json` is there)
    try:
        with contextlib.redirect_stdout(said):
            preload()
    except Exception as exc:  # a missing nvidia-* wheel: the system's libraries may still serve
        return f"preload_dlls: {type(exc).__name__}: {exc}"
    return " ".join(said.getvalue().split())[:300]


def _options(ort: Any, threads: int | None, *, record: bool) -> Any:
    so = ort.SessionOptions()
    so.log_severity_level = 4  # fatal only: failures reach the caller as exceptions, not stderr noise
    if threads is not None:
        so.intra_op_num_threads = threads
    if record:
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    return so


def probe_provider(name: str) -> tuple[bool, str]:
    """Run the probe model on one provider with CPU fallback disabled: (usable, reason)."""
    ort = _ort()
    available = ort.get_available_providers()
    if name not in available:
        listed = ", ".join(p.removesuffix("ExecutionProvider") for p in available)
        return False, f"not in this onnxruntime build ({ort.__version__} lists {listed})"
    if name == CPU_EP:  # the disable-fallback flag conflicts with the CPU provider itself
        ort.InferenceSession(PROBE_MODEL, _options(ort, 1, record=False), providers=[CPU_EP])
        return True, ""
    if name in (CUDA_EP, TENSORRT_EP):
        _preloaded(ort)
    so = _options(ort, 1, record=False)
    so.log_severity_level = 4
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    try:
        session = ort.InferenceSession(PROBE_MODEL, so, providers=[provider_options(name)], enable_fallback=0)
    except Exception as exc:  # the runtime's error is the reason
        return False, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    primary = session.get_providers()[0]
    return (True, "") if primary == name else (False, f"session ran on {primary}")


class OnnxDriver:
    """onnxruntime on the CPU or on the platform's GPU execution provider."""

    formats: frozenset[ModelFormat] = frozenset({ModelFormat.ONNX})

    def __init__(self, unit: ComputeUnit) -> None:
        self.unit = unit

    def probe(self) -> UnitStatus:
        """Probe the CPU provider, or each GPU candidate of this platform until one really runs."""
        try:
            self.prepare()
        except ImportError as exc:
            return UnitStatus(unit=self.unit, usable=False, reason=f"onnxruntime not installed ({exc})")
        candidates = (CPU_EP,) if self.unit == ComputeUnit.CPU_ONNX else GPU_CANDIDATES.get(sys.platform, ())
        if not candidates:
            return UnitStatus(
                unit=self.unit, usable=False, reason=f"no GPU execution provider for {sys.platform}"
            )
        reasons: dict[str, list[str]] = {}
        for name in candidates:
            usable, reason = probe_provider(name)
            if usable:
                return UnitStatus(unit=self.unit, usable=True, provider=name)
            reasons.setdefault(reason, []).append(name.removesuffix("ExecutionProvider"))
        text = "; ".join(f"{', '.join(names)}: {reason}" for reason, names in reasons.items())
        return UnitStatus(unit=self.unit, usable=False, reason=text)

    def prepare(self) -> None:
        """Import onnxruntime."""
        _ort()

    def versions(self) -> dict[str, str]:
        """The onnxruntime version."""
        return {"onnxruntime": str(_ort().__version__)}

    def load(self, path: Path, options: LoadOptions) -> OnnxLoaded:
        """Open a session on the probed provider with the Python-level fallback disabled."""
        ort = _ort()
        provider = CPU_EP if self.unit == ComputeUnit.CPU_ONNX else self.probe().provider
        if provider is None:
            raise TaskFailed(FailureReason.UNIT_UNAVAILABLE, f"unit unavailable: {self.probe().reason}")
        so = _options(ort, options.threads, record=True)
        for key, value in session_config(provider).items():
            setattr(so, key, ort.ExecutionMode.ORT_SEQUENTIAL if value == "sequential" else value)
        providers = provider_list(provider, cache_dir=options.cache_dir)
        if provider in (CUDA_EP, TENSORRT_EP):
            _preloaded(ort)
        try:
            session = ort.InferenceSession(str(path), so, providers=providers, enable_fallback=0)
        except Exception as exc:  # translate the runtime's error at the seam
            raise TaskFailed(
                FailureReason.LOAD, f"onnxruntime could not load the model: {_first_line(exc)}"
            ) from exc
        return OnnxLoaded(session, provider, options.threads)


class OnnxLoaded:
    """An onnxruntime session and the provider it was asked to run on."""

    def __init__(self, session: Any, requested: str, threads: int | None) -> None:
        self.session, self.requested, self.threads = session, requested, threads

    def inputs(self) -> list[InputSig]:
        """The session's inputs, dtypes mapped to numpy names."""
        sigs = []
        for i in self.session.get_inputs():
            if i.type not in DTYPES:
                raise TaskFailed(
                    FailureReason.INPUT,
                    f"input {i.name!r} has type {i.type}: only numeric and bool tensors can be synthesised",
                )
            sigs.append(InputSig(i.name, DTYPES[i.type], tuple(i.shape)))
        return sigs

    def runner(self, feeds: Feeds) -> Callable[[], object]:
        """`session.run(None, feeds)`, exactly what a bare loop calls."""
        return functools.partial(self.session.run, None, dict(feeds))

    def placement(self) -> Placement:
        """Providers that hold the session and the share of nodes on each."""
        providers = tuple(self.session.get_providers())
        share = node_share(self.session.get_provider_graph_assignment_info())
        return Placement(providers, share, is_fallback(self.requested, providers), asked=self.requested)

    def settings(self) -> Settings:
        """Thread settings: onnxruntime spins its intra-op threads by default."""
        opts = self.session.get_session_options()
        intra = int(opts.intra_op_num_threads) or self.threads or psutil.cpu_count(logical=False)
        inter = int(opts.inter_op_num_threads) or None
        spin = opts.get_session_config_entry("session.intra_op.allow_spinning") if _has_entry(opts) else "1"
        return Settings(intra_op_threads=intra, inter_op_threads=inter, spinning=spin != "0")


def _has_entry(opts: Any) -> bool:
    try:
        opts.get_session_config_entry("session.intra_op.allow_spinning")
    except Exception:  # the entry is unset: onnxruntime raises instead of returning a default
        return False
    return True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
