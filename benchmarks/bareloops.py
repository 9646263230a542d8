"""A bare loop of each runtime's own API, for `harness_overhead.py`: the session, interpreter or
program built as that runtime's own documentation builds it, fed the harness's synthesised inputs,
timed with nothing else around the call. Imported by the script (and by its spawned children).
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from typing import Final

from drivers.files.inputs import InputSig, synthesize
from drivers.runtimes.onnx import DTYPES
from protocol import ComputeUnit

THREADS: Final = 1
WARMUPS: Final = 10


def _ort_call(
    path: str, shapes: dict[str, tuple[int, ...]], values: dict[str, float]
) -> Callable[[], object]:
    """ONNX Runtime's own API: a plain session, `session.run(None, feeds)`."""
    import functools

    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.log_severity_level = 3  # as the harness: no "Removing initializer" warnings (logging only)
    session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    sigs = [InputSig(i.name, DTYPES[i.type], tuple(i.shape)) for i in session.get_inputs()]
    return functools.partial(session.run, None, synthesize(sigs, shapes, values))


def _ort_cuda_call(
    path: str, shapes: dict[str, tuple[int, ...]], values: dict[str, float]
) -> Callable[[], object]:
    """ONNX Runtime's own API on CUDA, the harness's session options: `preload_dlls()` (the nvidia-*
    wheels' CUDA and cuDNN), the CUDA provider on device 0 then the CPU one, the EP assignment
    recorded, CPU fallback at the Python level off; `session.run(None, feeds)`, whose host outputs
    end each call after the GPU's work."""
    import functools

    import onnxruntime as ort

    if hasattr(ort, "preload_dlls"):
        ort.preload_dlls()
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.log_severity_level = 4
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    providers = [("CUDAExecutionProvider", {"device_id": "0"}), ("CPUExecutionProvider", {})]
    session = ort.InferenceSession(path, so, providers=providers, enable_fallback=0)
    if session.get_providers()[0] != "CUDAExecutionProvider":
        raise RuntimeError(f"the bare session is on {session.get_providers()}, not CUDA")
    sigs = [InputSig(i.name, DTYPES[i.type], tuple(i.shape)) for i in session.get_inputs()]
    return functools.partial(session.run, None, synthesize(sigs, shapes, values))


def _openvino_call(
    path: str, shapes: dict[str, tuple[int, ...]], values: dict[str, float]
) -> Callable[[], object]:
    """OpenVINO's own API: the .onnx compiled on the CPU, one infer request, `request.infer(feeds)`."""
    import functools

    import openvino as ov

    from drivers.runtimes.openvino import DTYPES as OV_DTYPES

    core = ov.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_NUM_THREADS": THREADS})
    sigs = [
        InputSig(
            p.get_any_name(),
            OV_DTYPES[p.get_element_type().get_type_name()],
            tuple(d.get_length() if d.is_static else None for d in p.get_partial_shape()),
        )
        for p in compiled.inputs
    ]
    return functools.partial(compiled.create_infer_request().infer, synthesize(sigs, shapes, values))


def _litert_call(
    path: str, shapes: dict[str, tuple[int, ...]], values: dict[str, float]
) -> Callable[[], object]:
    """LiteRT's own API: an interpreter, set_tensor each input, invoke, get_tensor each output."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=path, num_threads=THREADS)
    it.allocate_tensors()
    details = it.get_input_details()
    sigs = [InputSig(str(d["name"]), d["dtype"].__name__, tuple(int(n) for n in d["shape"])) for d in details]
    index = {str(d["name"]): d["index"] for d in it.get_input_details()}
    sets = [(index[n], a) for n, a in synthesize(sigs, shapes, values).items()]
    outs = [d["index"] for d in it.get_output_details()]

    def run() -> object:
        for i, a in sets:
            it.set_tensor(i, a)
        it.invoke()
        return [it.get_tensor(o) for o in outs]

    return run


def _executorch_call(
    path: str, shapes: dict[str, tuple[int, ...]], values: dict[str, float]
) -> Callable[[], object]:
    """ExecuTorch's own API: `Runtime.get().load_program(path).load_method("forward")`, then
    `method.execute(tensors)`; its thread pool set to THREADS before the program loads, as the
    driver does."""
    import warnings

    import torch

    from drivers.runtimes.executorch import DTYPES as ET_DTYPES

    with warnings.catch_warnings():  # "This API is experimental": the wrapper's import warns
        warnings.simplefilter("ignore")
        from executorch.extension.pybindings import portable_lib
        from executorch.runtime import Runtime

    portable_lib._unsafe_reset_threadpool(THREADS)
    method = Runtime.get().load_program(path).load_method("forward")
    assert method is not None
    meta = method.metadata
    sigs = []
    for i in range(meta.num_inputs()):
        info = meta.input_tensor_meta(i)
        sigs.append(InputSig(f"input_{i}", ET_DTYPES[int(info.dtype())], tuple(info.sizes())))
    tensors = [torch.from_numpy(a) for a in synthesize(sigs, shapes, values).values()]
    return functools.partial(method.execute, tensors)


BARE: Final = {
    ComputeUnit.CPU_ONNX: _ort_call,
    ComputeUnit.GPU_ONNX: _ort_cuda_call,
    ComputeUnit.CPU_OPENVINO: _openvino_call,
    ComputeUnit.CPU_LITERT: _litert_call,
    ComputeUnit.CPU_EXECUTORCH: _executorch_call,
}
RUNTIMES: Final = {
    "onnxruntime": ComputeUnit.CPU_ONNX,
    "openvino": ComputeUnit.CPU_OPENVINO,
    "litert": ComputeUnit.CPU_LITERT,
    "executorch": ComputeUnit.CPU_EXECUTORCH,
}


def bare_child(
    path: str, case_shapes: dict[str, tuple[int, ...]], case_values: dict[str, float], runs: int, unit: str
) -> float:
    """In a spawned child: the runtime's own API, the same feeds, a plain timed loop; the median in ms."""
    call = BARE[ComputeUnit(unit)](path, case_shapes, case_values)
    call()
    for _ in range(WARMUPS):
        call()
    ts = [0] * runs
    pc = time.perf_counter_ns
    for i in range(runs):
        t0 = pc()
        call()
        ts[i] = pc() - t0
    return statistics.median(ts) / 1e6
