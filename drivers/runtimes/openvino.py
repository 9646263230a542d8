"""OpenVINO driver: `CPU (OpenVINO)`, `GPU (OpenVINO)`, `NPU (OpenVINO)`, on the same .onnx file.

OpenVINO reads ONNX directly, so one model file runs on ONNX Runtime and on OpenVINO. A `torch.export`
program (.pt2, owner opt-in: loading it unpickles) is converted in the child (`convert_model`, saved
as fp32 IR), so one .pt2 runs on OpenVINO and on ExecuTorch (which lowers it too), the conversion
recorded with each row. A unit is usable
only after the probe model (the ONNX driver's 1-node Relu) compiled on that very device, ran, and gave
Relu's answer, with the compiled model naming that device, alone, as where it executes. The model is
compiled on the plain device, never on `AUTO` (which picks the CPU silently when the GPU is missing):
an op the device lacks fails the load with OpenVINO's reason instead of running elsewhere.
On the CPU the model runs in f32 (`INFERENCE_PRECISION_HINT`) unless the job asks another precision
(`precision: bf16`, `f16`): OpenVINO's CPU plugin otherwise runs bf16 wherever the CPU has bf16
instructions (AVX512_BF16, AMX), so the same fp32 model would give other answers (0.03 apart from ONNX
Runtime's on a convnet) and other timings (0.66-0.73 of f32's) on such a machine; a job that wants
what OpenVINO's users get there asks for bf16, and the row says which ran.

A model with dynamic input dimensions is reshaped to the shapes the job feeds before it is compiled
(`drivers.files.inputs.fed_shapes`: the campaign's files, its `input_shapes`, else the documented
defaults), as OpenVINO's guidance and its `benchmark_app` run it: compiled as read, dynamic, it ran
1.18-1.32 times as long on three third-party models, so an "ONNX Runtime against OpenVINO" row
compared OpenVINO at a handicap. A job that asks `dynamic_shapes: true` keeps them dynamic. The row
records what the compiled model reports (`Settings.runtime`: precision, performance hint, streams,
the requests it would run at once, the shapes compiled for).

The performance hint is the job's (`performance_hint: latency`, the default: one stream, what a
single caller waits for; `throughput`: the streams and requests OpenVINO picks for the device). The
timed runs are one synchronous request, whatever the hint; after them, apart, a throughput run puts
the compiled model's own `OPTIMAL_NUMBER_OF_INFER_REQUESTS` requests in flight (`AsyncInferQueue`,
as `benchmark_app` does) and the row records the inferences per second it gave (`ThroughputPerS`),
with the requests (`AsyncRequests`).

Placement is read from the compiled model's runtime (executed) graph: each executed node and the
device that runs it (a HETERO node's `affinity`, else the compiled model's execution device), the
graph's own bookkeeping (inputs, outputs, constants) left out.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from drivers.errors import TaskFailed
from drivers.files.inputs import Dim, InputSig, fed_shapes
from drivers.runtimes.driver import Feeds, LoadOptions, Placement, Settings
from drivers.runtimes.missing import not_installed
from drivers.runtimes.notices import dropping
from drivers.runtimes.onnx import PROBE_MODEL
from protocol import AsyncRun, ComputeUnit, FailureReason, ModelFormat, UnitStatus

# Compute unit -> OpenVINO device name.
DEVICES: Final = {
    ComputeUnit.CPU_OPENVINO: "CPU",
    ComputeUnit.GPU_OPENVINO: "GPU",
    ComputeUnit.NPU_OPENVINO: "NPU",
}
# The compiled model's properties a row records (`Settings.runtime`): our name -> OpenVINO's.
RECORDED: Final = {
    "precision": "INFERENCE_PRECISION_HINT",
    "hint": "PERFORMANCE_HINT",
    "streams": "NUM_STREAMS",
    "optimal_requests": "OPTIMAL_NUMBER_OF_INFER_REQUESTS",
}
# A job's performance hint -> OpenVINO's.
HINTS: Final = {"latency": "LATENCY", "throughput": "THROUGHPUT"}
# A throughput run times at least this many inferences per infer request in flight.
ROUNDS_PER_REQUEST: Final = 4
# Runtime-graph layer types that are the graph's bookkeeping, not work placed on a device.
BOOKKEEPING: Final = frozenset({"Input", "Output", "Parameter", "Result", "Constant"})
# OpenVINO element type name -> numpy dtype name.
DTYPES: Final = {
    "f32": "float32",
    "f16": "float16",
    "f64": "float64",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u8": "uint8",
    "boolean": "bool",
}


def _ov() -> Any:
    import openvino

    return openvino


def executed_share(nodes: list[tuple[str, str]], device: str) -> dict[str, float]:
    """Share of executed nodes per device from (layer type, device) pairs; bookkeeping left out."""
    counts = Counter(dev or device for layer, dev in nodes if layer not in BOOKKEEPING)
    total = sum(counts.values())
    return {dev: n / total for dev, n in sorted(counts.items())} if total else {}


def runtime_nodes(compiled: Any) -> list[tuple[str, str]]:
    """(layer type, affinity or "") of every node of a compiled model's runtime graph."""
    nodes = []
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        layer = info["layerType"].astype(str) if "layerType" in info else op.get_type_name()
        affinity = info["affinity"].astype(str) if "affinity" in info else ""
        nodes.append((layer, affinity))
    return nodes


def probe_device(device: str) -> tuple[bool, str]:
    """Compile and run the probe model on `device`: (usable, reason or the device's full name)."""
    import numpy as np

    ov = _ov()
    core = ov.Core()
    if device not in core.available_devices:
        listed = ", ".join(core.available_devices) or "none"
        return False, f"no {device} device (OpenVINO {ov.get_version()} lists {listed})"
    try:
        compiled = core.compile_model(core.read_model(io.BytesIO(PROBE_MODEL)), device)
        out = compiled({"x": np.array([[-1.0, 0.0, 2.0, -3.0]], dtype=np.float32)}).to_tuple()[0]
        where = list(compiled.get_property("EXECUTION_DEVICES"))
    except Exception as exc:  # the runtime's error is the reason
        return False, _first_line(exc)
    if not np.array_equal(out, np.array([[0.0, 0.0, 2.0, 0.0]], dtype=np.float32)):
        return False, f"the probe model gave {out.tolist()} on {device}, not Relu's answer"
    if where != [device]:
        return False, f"the probe model executed on {', '.join(where)}, not {device}"
    return True, str(core.get_property(device, "FULL_DEVICE_NAME"))


class OpenvinoDriver:
    """OpenVINO on one device (CPU, GPU or NPU), ONNX models read directly."""

    formats: frozenset[ModelFormat] = frozenset({ModelFormat.ONNX, ModelFormat.TORCH_EXPORT})
    converts: frozenset[ModelFormat] = frozenset({ModelFormat.TORCH_EXPORT})

    def __init__(self, unit: ComputeUnit) -> None:
        self.unit = unit
        self.device = DEVICES[unit]

    def probe(self) -> UnitStatus:
        """Run the probe model on this unit's device; unusable with OpenVINO's reason otherwise."""
        if importlib.util.find_spec("openvino") is None:
            reason = not_installed(["openvino"], "openvino", "OpenVINO units")
            return UnitStatus(unit=self.unit, usable=False, reason=reason)
        usable, said = probe_device(self.device)
        if not usable:
            return UnitStatus(unit=self.unit, usable=False, reason=said)
        return UnitStatus(unit=self.unit, usable=True, provider=f"{self.device}: {said}"[:128])

    def prepare(self) -> None:
        """Import openvino."""
        _ov()

    def versions(self) -> dict[str, str]:
        """The OpenVINO version."""
        return {"openvino": str(_ov().get_version())}

    def convert(self, path: Path, out: Path, options: LoadOptions) -> tuple[Path, str]:
        """Convert a `torch.export` program (.pt2) to OpenVINO IR in this child (owner opt-in only:
        loading a .pt2 unpickles), its weights kept in fp32 (`save_model` would halve them by
        default, and the rows would compare fp16 weights with fp32 ones). torch's and the frontend's
        chatter on fd 2 and their warnings are held off; a failure is its exception, as the detail."""
        if not options.allow_code_models:
            raise TaskFailed(
                FailureReason.FORMAT,
                f"{path.name}: torch programs run code when loaded; the owner has not opted in",
            )
        import warnings

        ir = out / f"{path.stem}.xml"
        try:
            with dropping(lambda _: True), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import torch

                model = _ov().convert_model(torch.export.load(str(path)))
                _ov().save_model(model, str(ir), compress_to_fp16=False)
        except Exception as exc:  # translate the converter's error at the seam
            raise TaskFailed(
                FailureReason.LOAD, f"OpenVINO could not convert the program: {_first_line(exc)}"
            ) from exc
        return ir, f"torch.export .pt2 to OpenVINO IR (fp32) by openvino {_ov().get_version()}"

    def load(self, path: Path, options: LoadOptions) -> OpenvinoLoaded:
        """Read the .onnx (or the IR a conversion wrote), reshape its dynamic inputs to the shapes the
        job feeds (unless it keeps them dynamic), and compile it on this unit's device (precision,
        threads and cache as asked).

        Raises:
            TaskFailed: LOAD with OpenVINO's reason; INPUT for shapes the model cannot take.
        """
        ov = _ov()
        config: dict[str, Any] = {"PERFORMANCE_HINT": HINTS[options.performance_hint]}
        if self.device == "CPU":  # the model's own precision unless asked, as ONNX Runtime runs it
            config["INFERENCE_PRECISION_HINT"] = options.precision or "f32"
            if options.threads is not None:
                config["INFERENCE_NUM_THREADS"] = options.threads
        elif options.precision:
            config["INFERENCE_PRECISION_HINT"] = options.precision
        if options.cache_dir:
            config["CACHE_DIR"] = options.cache_dir
        try:
            core = ov.Core()
            model = core.read_model(str(path))
        except Exception as exc:  # translate the runtime's error at the seam
            raise TaskFailed(
                FailureReason.LOAD, f"OpenVINO could not read the model: {_first_line(exc)}"
            ) from exc
        reshaped = {} if options.dynamic_shapes else _fed(model.inputs, options)
        try:
            if reshaped:
                model.reshape({name: ov.PartialShape(list(shape)) for name, shape in reshaped.items()})
            compiled = core.compile_model(model, self.device, config)
        except Exception as exc:  # translate the runtime's error at the seam
            raise TaskFailed(
                FailureReason.LOAD, f"OpenVINO could not load the model: {_first_line(exc)}"
            ) from exc
        shapes = "dynamic" if options.dynamic_shapes and _dynamic(model.inputs) else "static"
        return OpenvinoLoaded(compiled, self.device, shapes if not reshaped else "reshaped to the fed shapes")


def _sigs(ports: Any) -> list[InputSig]:
    """Input ports as signatures: element types mapped to numpy names, dynamic sizes as None.

    Raises:
        TaskFailed: INPUT for an element type that cannot be synthesised.
    """
    sigs = []
    for port in ports:
        kind = port.get_element_type().get_type_name()
        if kind not in DTYPES:
            raise TaskFailed(
                FailureReason.INPUT,
                f"input {port.get_any_name()!r} has type {kind}: cannot be synthesised",
            )
        dims: tuple[Dim, ...] = tuple(
            d.get_length() if d.is_static else None for d in port.get_partial_shape()
        )
        sigs.append(InputSig(port.get_any_name(), DTYPES[kind], dims))
    return sigs


def _dynamic(ports: Any) -> bool:
    return any(port.get_partial_shape().is_dynamic for port in ports)


def _fed(ports: Any, options: LoadOptions) -> dict[str, tuple[int, ...]]:
    """The shapes to compile the model's dynamic inputs for: those the job will feed (none: all static)."""
    if not _dynamic(ports):
        return {}
    return fed_shapes(_sigs(ports), options.input_shapes, options.input_data)


class OpenvinoLoaded:
    """A model compiled on one OpenVINO device, with one infer request."""

    def __init__(self, compiled: Any, device: str, shapes: str = "static") -> None:
        self.compiled, self.device, self.shapes = compiled, device, shapes
        self.request = compiled.create_infer_request()

    def inputs(self) -> list[InputSig]:
        """The compiled model's inputs, element types mapped to numpy names, dynamic sizes as None."""
        return _sigs(self.compiled.inputs)

    def runner(self, feeds: Feeds) -> Callable[[], object]:
        """`request.infer(feeds)`, exactly what a bare loop of OpenVINO's API calls."""
        return functools.partial(self.request.infer, dict(feeds))

    def throughput(self, feeds: Feeds, inferences: int) -> AsyncRun:
        """OpenVINO's own way to throughput, as `benchmark_app` runs it: an `AsyncInferQueue` of the
        compiled model's `OPTIMAL_NUMBER_OF_INFER_REQUESTS` requests, each given the feeds once and
        started once untimed (its first inference allocates), then at least `inferences` (and
        `ROUNDS_PER_REQUEST` per request) started as requests free up, timed from the first start
        to the last completion. Under the latency hint it is one request: the sync loop's rate."""
        requests = max(1, int(self.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
        queue = _ov().AsyncInferQueue(self.compiled, requests)
        for request in queue:
            for name, array in feeds.items():
                request.set_tensor(name, _ov().Tensor(array))
        for _ in range(requests):
            queue.start_async()
        queue.wait_all()
        count = max(inferences, ROUNDS_PER_REQUEST * requests)
        t0 = time.perf_counter_ns()
        for _ in range(count):
            queue.start_async()  # blocks until a request is free
        queue.wait_all()
        wall_ms = (time.perf_counter_ns() - t0) / 1e6
        return AsyncRun(requests=requests, inferences=count, wall_ms=max(wall_ms, 1e-6))

    def placement(self) -> Placement:
        """The devices the compiled model executes on and the share of executed nodes on each."""
        where = tuple(str(d) for d in self.compiled.get_property("EXECUTION_DEVICES"))
        share = executed_share(runtime_nodes(self.compiled), where[0] if where else self.device)
        return Placement(where, share, fallback=where != (self.device,), asked=self.device)

    def settings(self) -> Settings:
        """Inference threads (CPU only); OpenVINO's streams are its inter-op parallelism. Beside them,
        as the compiled model reports them: the precision it computes in, its performance hint, its
        streams and the infer requests it would run at once for throughput, and the shapes it was
        compiled for."""
        threads = int(self.compiled.get_property("INFERENCE_NUM_THREADS")) if self.device == "CPU" else None
        streams = int(self.compiled.get_property("NUM_STREAMS")) if self.device == "CPU" else None
        runtime = {"shapes": self.shapes}
        for key, name in RECORDED.items():
            with contextlib.suppress(Exception):  # a device plugin without the property leaves it out
                value = self.compiled.get_property(name)
                runtime[key] = str(value.get_type_name() if hasattr(value, "get_type_name") else value)
        return Settings(intra_op_threads=threads or None, inter_op_threads=streams, runtime=runtime)


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line and not line.startswith("Exception from")]
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}"
