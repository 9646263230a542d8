"""OpenVINO: a model with a dynamic input compiled for the shapes fed against compiled as read, and
OpenVINO's own `benchmark_app` on the same model, in the same rounds.

Per round and model (a convnet of `drivers.files.models.write_convnet` with a dynamic batch, at two
sizes), interleaved: one `drivers.measure` on `CPU (OpenVINO)` as a job runs it now (reshaped to the
fed batch of 1 before compile), one with `dynamic_shapes: true` (compiled as read, dynamic), both f32,
1 thread, and `benchmark_app` (the openvino wheel's) with the same shape, precision, thread, one
stream and one synchronous request. Ratios: dynamic / reshaped (what a job paid before), and the
harness's median / benchmark_app's median latency (benchmark_app times `infer()` in C++ with its
inputs set once; the harness times a Python call of `request.infer(feeds)`). Writes
benchmarks/out/openvino_shapes.json.

    .venv/bin/python benchmarks/openvino_shapes.py [--rounds 3] [--runs 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from drivers import measure  # noqa: E402
from drivers.files.models import write_convnet  # noqa: E402
from protocol import ComputeUnit, TaskSpec  # noqa: E402

MODELS = {
    "convnet-64": {"channels": 16, "blocks": 3, "size": 64},
    "convnet-96": {"channels": 32, "blocks": 4, "size": 96},
}


def harness(model: Path, runs: int, dynamic: bool) -> float:
    spec = TaskSpec(
        compute_unit=ComputeUnit.CPU_OPENVINO,
        runs=runs,
        warmups=20,
        load_runs=1,
        threads=1,
        dynamic_shapes=dynamic,
    )
    return measure(model, spec).inference_ms.median


def benchmark_app(model: Path, size: int, folder: Path) -> float:
    tool = Path(sys.executable).parent / "benchmark_app"
    args = ["-m", str(model), "-d", "CPU", "-hint", "none", "-nstreams", "1", "-nireq", "1", "-api", "sync"]
    args += ["-shape", f"x[1,3,{size},{size}]", "-t", "5", "-nthreads", "1", "-infer_precision", "f32"]
    args += ["-json_stats", "-report_type", "no_counters", "-report_folder", str(folder)]
    subprocess.run([str(tool), *args], check=True, capture_output=True, timeout=120)
    report = json.loads((folder / "benchmark_report.json").read_text())
    return float(report["execution_results"]["latency (ms)"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    document: dict[str, object] = {"args": vars(args), "models": {}}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for name, shape in MODELS.items():
            model = write_convnet(folder / f"{name}.onnx", **shape)
            rounds = []
            for i in range(args.rounds):
                fed, dyn = harness(model, args.runs, False), harness(model, args.runs, True)
                tool = benchmark_app(model, shape["size"], folder)
                rounds.append(
                    {
                        "reshaped_ms": fed,
                        "dynamic_ms": dyn,
                        "benchmark_app_ms": tool,
                        "load": os.getloadavg()[0],
                    }
                )
                print(f"{name} round {i + 1}: {rounds[-1]}", flush=True)
            slow = [r["dynamic_ms"] / r["reshaped_ms"] for r in rounds]
            tool_ratio = [r["reshaped_ms"] / r["benchmark_app_ms"] for r in rounds]
            summary = {
                "dynamic_over_reshaped": [statistics.median(slow), min(slow), max(slow)],
                "harness_over_benchmark_app": [
                    statistics.median(tool_ratio),
                    min(tool_ratio),
                    max(tool_ratio),
                ],
            }
            print(
                f"{name}: dynamic / reshaped {summary['dynamic_over_reshaped']}, "
                f"harness / benchmark_app {summary['harness_over_benchmark_app']}"
            )
            document["models"][name] = {"shape": shape, "rounds": rounds, "summary": summary}  # type: ignore[index]
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "openvino_shapes.json").write_text(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
