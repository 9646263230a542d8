"""OpenVINO: a model with a dynamic input compiled for the shapes fed against compiled as read, and
OpenVINO's own `benchmark_app` on the same model, in the same rounds.

Per round and model (a convnet of `drivers.files.models.write_convnet` with a dynamic batch, at two
sizes), interleaved: one `drivers.measure` on `CPU (OpenVINO)` as a job runs it now (reshaped to the
fed batch of 1 before compile), one with `dynamic_shapes: true` (compiled as read, dynamic), both f32,
1 thread, and `benchmark_app` (the openvino wheel's) with the same shape, precision, thread, one
stream and one synchronous request. Ratios: dynamic / reshaped (what a job paid before), and the
harness's median / benchmark_app's median latency (benchmark_app times `infer()` in C++ with its
inputs set once; the harness times a Python call of `request.infer(feeds)`).

`--part throughput` (issue 51): per round, model and performance hint (latency, throughput), one
`drivers.measure` on `CPU (OpenVINO)` with that `performance_hint` (the runtime's threads, one
process; its throughput run after the timed runs: `ThroughputPerS`), then `benchmark_app -hint <hint>`
(its async API, its own requests and streams, `-t` seconds) on the same model and shape. Ratio: the
row's inferences/s over benchmark_app's, and the requests each kept in flight. Writes
benchmarks/out/openvino_shapes.json (or openvino_throughput.json).

    .venv/bin/python benchmarks/openvino_shapes.py [--rounds 3] [--runs 300]
    .venv/bin/python benchmarks/openvino_shapes.py --part throughput [--rounds 3] [--runs 1000]
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


def harness_throughput(model: Path, runs: int, hint: str) -> tuple[float, int, float]:
    """The row's ThroughputPerS and AsyncRequests under `hint`, the runtime's own threads, and its
    sync loop's rate (1000 / the median latency)."""
    spec = TaskSpec(
        compute_unit=ComputeUnit.CPU_OPENVINO,
        runs=runs,
        warmups=20,
        load_runs=1,
        performance_hint=hint,  # type: ignore[arg-type]
    )
    m = measure(model, spec)
    assert m.throughput_per_s is not None, "no throughput run"
    return m.throughput_per_s, max(run.requests for run in m.async_runs), 1000.0 / m.inference_ms.median


def app_throughput(
    model: Path, size: int, hint: str, api: list[str], folder: Path, seconds: int
) -> tuple[float, int]:
    """benchmark_app's throughput (inferences/s) and parallel infer requests under `hint` (its API as
    the hint picks it unless `api` says: `-hint latency` runs the sync API)."""
    tool = Path(sys.executable).parent / "benchmark_app"
    args = ["-m", str(model), "-d", "CPU", "-hint", hint, *api, "-shape", f"x[1,3,{size},{size}]"]
    args += ["-t", str(seconds), "-infer_precision", "f32", "-json_stats", "-report_type", "no_counters"]
    args += ["-report_folder", str(folder)]
    subprocess.run([str(tool), *args], check=True, capture_output=True, timeout=120)
    report = json.loads((folder / "benchmark_report.json").read_text())
    setup = report["configuration_setup"]
    return float(report["execution_results"]["throughput"]), int(setup["number of parallel infer requests"])


# Each hint as benchmark_app runs it by default, and the latency hint on benchmark_app's async API with
# one request (its own advice to emulate sync), as the harness's throughput run does.
VARIANTS = {
    "latency": ("latency", []),
    "latency, benchmark_app -api async -nireq 1": ("latency", ["-api", "async", "-nireq", "1"]),
    "throughput": ("throughput", []),
}


def throughput_part(args: argparse.Namespace, folder: Path) -> dict[str, object]:
    """The row's throughput against benchmark_app's, per model and hint, interleaved in rounds."""
    models: dict[str, object] = {}
    for name, shape in MODELS.items():
        model = write_convnet(folder / f"{name}.onnx", **shape)
        for label, (hint, api) in VARIANTS.items():
            rounds = []
            for i in range(args.rounds):
                ours, ours_req, sync = harness_throughput(model, args.runs, hint)
                theirs, their_req = app_throughput(model, shape["size"], hint, api, folder, args.seconds)
                rounds.append({"harness_per_s": ours, "harness_requests": ours_req,
                               "harness_sync_per_s": sync, "benchmark_app_per_s": theirs,
                               "benchmark_app_requests": their_req, "load": os.getloadavg()[0]})  # fmt: skip
                print(f"{name} {label} round {i + 1}: {rounds[-1]}", flush=True)
            ratio = [r["harness_per_s"] / r["benchmark_app_per_s"] for r in rounds]
            sync_ratio = [r["harness_sync_per_s"] / r["benchmark_app_per_s"] for r in rounds]
            summary = [statistics.median(ratio), min(ratio), max(ratio)]
            sync_summary = [statistics.median(sync_ratio), min(sync_ratio), max(sync_ratio)]
            print(f"{name} {label}: harness / benchmark_app {summary}, sync {sync_summary}", flush=True)
            found = {"shape": shape, "rounds": rounds, "harness_over_benchmark_app": summary,
                     "harness_sync_over_benchmark_app": sync_summary}  # fmt: skip
            models[f"{name} {label}"] = found
    return models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("shapes", "throughput"), default="shapes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--seconds", type=int, default=3, help="benchmark_app's -t in the throughput part")
    args = parser.parse_args()
    if args.part == "throughput":
        with tempfile.TemporaryDirectory() as scratch:
            found = {"args": vars(args), "models": throughput_part(args, Path(scratch))}
        out = ROOT / "benchmarks" / "out"
        out.mkdir(parents=True, exist_ok=True)
        (out / "openvino_throughput.json").write_text(json.dumps(found, indent=2))
        return
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
