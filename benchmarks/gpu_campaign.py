"""`GPU (ONNX)` on the embedded swarm, as a user runs it (issue 54; a GPU machine).

Runs `sark-node submit examples/campaign.yaml` (README's main job: a `CPU (ONNX)` and a `GPU (ONNX)`
job on the packaged convnet), then a campaign written here on a model with an op that onnxruntime
has on the CPU only (`ai.onnx.ml.Scaler` between two MatMuls): once as asked (`strict_placement`
left at true: the task fails as a fallback, with the share of nodes on each provider named), once
with `strict_placement: false` (a Complete row marked `fallback`, with its shares). Prints each
row's unit, status, providers and fallback mark from results.csv; writes
benchmarks/out/gpu_campaign.json. Exit 0 when the convnet's GPU row is Complete on CUDA and the
Scaler model's rows are as said.
    python benchmarks/gpu_campaign.py
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from kit.procs import SARK  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "gpu_campaign.json"
UNIT = "ComputeUnits"


def scaler_model(path: Path) -> Path:
    """MatMul -> ai.onnx.ml Scaler (CPU only in onnxruntime) -> MatMul, float[1, 256]."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array(rng.standard_normal((256, 256)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((256, 256)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Scaler", ["h"], ["s"], domain="ai.onnx.ml", offset=[0.5], scale=[0.25]),
        helper.make_node("MatMul", ["s", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "scaler",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256])],
        [w1, w2],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)]
    save(helper.make_model(graph, opset_imports=opsets, ir_version=8), str(path))
    return path


def submit(campaign: Path, out: Path, data: Path) -> dict[str, Any]:
    done = subprocess.run(
        [*SARK, "submit", str(campaign), "--out", str(out), "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    rows: list[dict[str, str]] = []
    for found in sorted(out.glob("*/results.csv")):  # --out DIR holds one folder per campaign
        with open(found, newline="") as f:
            rows += list(csv.DictReader(f))
    keep = (UNIT, "Status", "Providers", "Fallback", "InferenceMsMedian", "FailureReason", "Detail", "Errors")
    picked = [{k: r.get(k, "") for k in keep if k in r} | {"all": r} for r in rows]
    for r in picked:
        print("  " + "  ".join(f"{k}={v}" for k, v in r.items() if k != "all"), flush=True)
    return {"exit": done.returncode, "stderr": done.stderr[-3000:], "rows": picked}


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print("examples/campaign.yaml:", flush=True)
        found["example"] = submit(ROOT / "examples" / "campaign.yaml", root / "example", root / "data")
        scaler_model(root / "scaler.onnx")
        jobs = [
            {"compute_unit": "GPU (ONNX)", "num_inference_runs": 200, "warmup_runs": 10, "devices": "all"},
            {"compute_unit": "GPU (ONNX)", "num_inference_runs": 200, "warmup_runs": 10, "devices": "all",
             "strict_placement": False},
        ]  # fmt: skip
        campaign = {"name": "scaler-on-gpu", "processes": 1, "model": {"path": "scaler.onnx"}, "jobs": jobs}
        (root / "scaler.yaml").write_text(json.dumps(campaign))
        print("a model with a CPU-only op (ai.onnx.ml Scaler), strict and not:", flush=True)
        found["scaler"] = submit(root / "scaler.yaml", root / "scaler", root / "data")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(found, indent=1))
    example = found["example"]["rows"]
    gpu_ok = any(
        r.get(UNIT) == "GPU (ONNX)" and r.get("Status") == "Complete" and "CUDA" in r.get("Providers", "")
        for r in example
    )
    print(f"example exit {found['example']['exit']}, GPU (ONNX) row Complete on CUDA: {gpu_ok}")
    print(f"scaler exit {found['scaler']['exit']}: {found['scaler']['stderr'][-400:]}")
    print(f"wrote {OUT}")
    return 0 if gpu_ok else 1


if __name__ == "__main__":
    sys.exit(main())
