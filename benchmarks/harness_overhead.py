"""Harness overhead: the harness's inference median against a bare loop of each runtime's API, paired trials.

For each model and trial, one harness measurement (`drivers.measure`, one spawned child) and one bare
loop (a spawned child that builds the same session, same feeds, and times `session.run` with nothing
else around it) run back to back, the order alternating between trials. Both use 1 intra-op thread,
the same warm-ups and runs. Prints per model the harness / bare ratio of medians per trial and their
median, then the median of all ratios; writes benchmarks/out/harness_overhead.json. The harness runs
with its telemetry sampler on (every timed phase has it).

Then the sampler alone, interleaved in one process per model (`--sampler-rounds`, 0 to skip): 1 s
blocks of timed runs with `drivers.measuring.telemetry.Sampler` running and without, the order alternating
each round; the ratio of the block medians (on / off) per round, and their median. Interleaving in one
process takes out the process-to-process and drift noise a shared machine puts into the paired trials.

Each runtime against its own API (`--runtimes`, default all installed): ONNX Runtime's `session.run`,
OpenVINO's `request.infer` on the same .onnx files, LiteRT's set_tensor / invoke / get_tensor on
.tflite files built here (`drivers.files.litemodels`), ExecuTorch's `executorch.runtime` API (Runtime,
Program, `Method.execute`) on .pte files lowered here (`drivers.files.etmodels`, in a child); the bare
loops are `benchmarks/bareloops.py`. The sampler rounds use ONNX Runtime's cases.

`--unit "GPU (ONNX)"` runs ONNX Runtime's models on CUDA instead (a GPU machine: issue 54): the
harness's `GPU (ONNX)` against `bareloops._ort_cuda_call`, a bare session with the harness's session
options, more runs a trial (a GPU inference is short); writes benchmarks/out/harness_overhead_gpu.json.

Usage: .venv/bin/python benchmarks/harness_overhead.py [--trials N] [--sampler-rounds N]
       [--runtimes onnxruntime,openvino,litert,executorch] [--only convnet] [--unit "GPU (ONNX)"]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from bareloops import RUNTIMES, THREADS, WARMUPS, bare_child

from drivers import measure
from drivers.files.inputs import InputSig, synthesize
from drivers.files.litemodels import write_convnet as write_lite_convnet
from drivers.files.litemodels import write_mlp
from drivers.files.models import packaged_model, write_convnet
from drivers.runtimes.onnx import DTYPES
from protocol import RUNTIME_OF, ComputeUnit, TaskSpec

OUT = Path(__file__).resolve().parent / "out" / "harness_overhead.json"


@dataclass(frozen=True)
class Case:
    """One model and how it is fed and run."""

    name: str
    path: Path
    runs: int
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)
    unit: ComputeUnit = ComputeUnit.CPU_ONNX


def _lowered(folder: Path, name: str) -> Path:
    """An `etmodels` program lowered in a child (the export toolchain stays out of this process)."""
    subprocess.run(
        [sys.executable, "-m", "drivers.files.etmodels", str(folder), name], check=True, capture_output=True
    )
    return folder / f"{name}.pte"


def sampler_child(
    path: str, case_shapes: dict[str, tuple[int, ...]], case_values: dict[str, float], rounds: int
) -> list[tuple[float, float]]:
    """In a spawned child: (median with the sampler on, median with it off) of 1 s blocks, per round."""
    import onnxruntime as ort

    from drivers.measuring.telemetry import Sampler

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
    from drivers.measuring.telemetry import Sampler

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
    wheel's, the same files; LiteRT: an MLP and a convnet built here (no .tflite ships in a wheel);
    ExecuTorch: the same shapes lowered here from torch.nn (other networks: seeded by torch, not
    numpy). The convnets run a few ms an inference, so a scheduler tick does not move a trial."""
    convnet = write_convnet(tmp / "convnet.onnx", channels=32, blocks=4)
    ov, lite, et = ComputeUnit.CPU_OPENVINO, ComputeUnit.CPU_LITERT, ComputeUnit.CPU_EXECUTORCH
    more = [
        Case("convnet (openvino)", convnet, 300, unit=ov),
        Case("light_squeezenet (openvino)", packaged_model("light_squeezenet"), 80, unit=ov),
        Case("mlp 512x4 (litert)", write_mlp(tmp / "mlp.tflite", width=512, layers=4), 2000, unit=lite),
        Case("convnet 32x40x40 (litert)", write_lite_convnet(tmp / "convnet.tflite"), 300, unit=lite),
    ]
    if "executorch" in runtimes:
        more.append(Case("mlp 512x4 (executorch)", _lowered(tmp, "wide"), 2000, unit=et))
        more.append(Case("convnet 32x40x40 (executorch)", _lowered(tmp, "convnet"), 300, unit=et))
    return [c for c in _ort_cases(convnet) + more if RUNTIME_OF[c.unit].value in runtimes]


def gpu_cases(tmp: Path) -> list[Case]:
    """ONNX Runtime on CUDA: the convnet built here and the onnx wheel's two light models, each run
    enough times a trial that a median stands on hundreds of inferences of a fraction of a ms."""
    convnet = write_convnet(tmp / "convnet.onnx", channels=32, blocks=4)
    gpu = ComputeUnit.GPU_ONNX
    return [
        Case("convnet (local, cuda)", convnet, 2000, unit=gpu),
        Case("light_squeezenet (cuda)", packaged_model("light_squeezenet"), 2000, unit=gpu),
        Case("light_resnet50 (cuda)", packaged_model("light_resnet50"), 1000, unit=gpu),
    ]


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
    parser.add_argument("--only", default="", help="the models whose name contains this text")
    parser.add_argument("--unit", default="", help='"GPU (ONNX)": ONNX Runtime on CUDA instead')
    args = parser.parse_args()
    gpu = args.unit == ComputeUnit.GPU_ONNX.value
    if args.unit and not gpu:
        parser.error(f"--unit takes {ComputeUnit.GPU_ONNX.value!r} only")
    out = OUT.with_name("harness_overhead_gpu.json") if gpu else OUT
    trials, rounds = args.trials, args.sampler_rounds
    runtimes = {RUNTIME_OF[RUNTIMES[name]].value for name in args.runtimes.split(",")}
    psutil.cpu_percent(None)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        every = gpu_cases(Path(tmp)) if gpu else cases(Path(tmp), runtimes)
        models_here = [c for c in every if args.only in c.name]
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
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = {
        "unit": args.unit or "CPU",
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
    out.write_text(json.dumps(summary, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
