"""LiteRT: the harness's `CPU (LiteRT)` row beside LiteRT's own benchmark tool on the same model, and a
bare loop of LiteRT's Interpreter, in the same rounds (issue 51).

The tool is `litert-benchmark` (`ai_edge_litert.tools.benchmark_litert_model`, shipped in the
`ai-edge-litert` wheel): LiteRT's CompiledModel API on the CPU accelerator (XNNPACK), random inputs
written into its input buffers once, `run_by_name` timed with `time.perf_counter` around each run,
its JSON's median rounded to 0.01 ms (so the script calls the tool's `run_benchmark` in a spawned
child with that rounding left out, and runs the command too as the check). The harness runs the
Interpreter (the `CPU (LiteRT)` driver: XNNPACK delegate, set_tensor / invoke / get_tensor each
run); the bare loop is
`bareloops._litert_call`, the same calls with nothing around them, in a spawned child.

Per round and model (the MLP and the convnet `harness_overhead.py` uses), interleaved: the harness,
the bare loop, the tool, all 1 thread, the same runs and warm-ups. Ratios: harness / tool and
bare / tool medians. Writes benchmarks/out/litert_tool.json.

    .venv/bin/python benchmarks/litert_tool.py [--rounds 3] [--runs 1000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bareloops import THREADS, WARMUPS, bare_child  # noqa: E402

from drivers import measure  # noqa: E402
from drivers.files.litemodels import write_convnet, write_mlp  # noqa: E402
from protocol import ComputeUnit, TaskSpec  # noqa: E402

UNIT = ComputeUnit.CPU_LITERT


def harness(model: Path, runs: int) -> float:
    spec = TaskSpec(compute_unit=UNIT, runs=runs, warmups=WARMUPS, load_runs=1, threads=THREADS)
    return measure(model, spec).inference_ms.median


def bare(model: Path, runs: int) -> float:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        result: float = pool.apply(bare_child, (str(model), {}, {}, runs, UNIT.value))
    return result


def tool_child(model: str, runs: int) -> float:
    """In a spawned child: the tool's own `run_benchmark` with its own arguments, its results' rounding
    to 0.01 ms left out (the module's `round` shadowed by the identity), so a 0.05 ms model's median
    keeps its digits; everything else is the tool's code as `litert-benchmark` runs it."""
    from ai_edge_litert.tools import benchmark_litert_model as bench

    bench.round = lambda value, digits=None: value  # type: ignore[attr-defined]
    argv = ["--model", model, "--num_runs", str(runs), "--warmup_runs", str(WARMUPS)]
    sys.argv = ["litert-benchmark", *argv, "--num_threads", str(THREADS)]
    results = bench.run_benchmark(bench.parse_args())
    return float(results["latency"]["median_ms"])


def tool(model: Path, runs: int) -> float:
    """litert-benchmark's median (ms), the same threads, runs and warm-ups, in a fresh process."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        result: float = pool.apply(tool_child, (str(model), runs))
    return result


def rounded_tool(model: Path, runs: int, folder: Path) -> float:
    """The `litert-benchmark` command itself, its JSON's median as written (0.01 ms steps): the check
    that the unrounded call above is the same tool."""
    out = folder / "litert_tool.json"
    exe = Path(sys.executable).parent / "litert-benchmark"
    args = ["--model", str(model), "--num_runs", str(runs), "--warmup_runs", str(WARMUPS)]
    args += ["--num_threads", str(THREADS), "--result_json", str(out)]
    subprocess.run([str(exe), *args], check=True, capture_output=True, timeout=300)
    return float(json.loads(out.read_text())["latency"]["median_ms"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    document: dict[str, object] = {"args": vars(args), "models": {}}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        models = {
            "mlp 512x4": write_mlp(folder / "mlp.tflite", width=512, layers=4),
            "convnet 32x40x40": write_convnet(folder / "convnet.tflite"),
        }
        for name, model in models.items():
            rounds = []
            for i in range(args.rounds):
                ours, loop = harness(model, args.runs), bare(model, args.runs)
                theirs, command = tool(model, args.runs), rounded_tool(model, args.runs, folder)
                load = os.getloadavg()[0]
                rounds.append({"harness_ms": ours, "bare_ms": loop, "tool_ms": theirs,
                               "tool_command_ms": command, "load": load})  # fmt: skip
                print(f"{name} round {i + 1}: {rounds[-1]}", flush=True)
            summary = {}
            for key in ("harness_ms", "bare_ms"):
                ratio = [r[key] / r["tool_ms"] for r in rounds]
                summary[f"{key[:-3]}_over_tool"] = [statistics.median(ratio), min(ratio), max(ratio)]
            print(f"{name}: {summary}", flush=True)
            document["models"][name] = {"rounds": rounds, "summary": summary}  # type: ignore[index]
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "litert_tool.json").write_text(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
