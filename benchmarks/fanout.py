"""Model fan-out: N workers fetch the same large model; how many copies does the submitter upload?

    .venv/bin/python benchmarks/fanout.py [--workers 20] [--mb 100]

Builds a valid ONNX model of about `--mb` MB (one MatMul with a square float32 weight), starts a gate
and N workers as processes on loopback, and runs a `devices: all` campaign on it from a fresh
submitter. Workers fetch over /sark/blob from workers that already hold the model before asking the
submitter (which serves one peer at a time). Prints the bytes the submitter uploaded as full copies,
where each worker got the model from, and the time until every worker had it. Writes
benchmarks/out/fanout.json.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from swarmlab import OUT, SARK, Lab, events, start_workers, submitter_id, until


def build_model(path: Path, megabytes: int) -> int:
    """A MatMul with an n x n float32 weight of about `megabytes` MB; returns its size in bytes."""
    n = int(math.sqrt(megabytes * 1_000_000 / 4))
    weight = np.random.default_rng(1).standard_normal((n, n)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "fanout",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
        [numpy_helper.from_array(weight, "w")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path.stat().st_size


def run(workers: int, megabytes: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="sark-fanout-"))
    lab = Lab(work, record_ttl=120.0)
    try:
        size = build_model(work / "big.onnx", megabytes)
        me = submitter_id(work / "submitter")
        gate = lab.gate().ready["addrs"][0]
        procs = start_workers(lab, workers, gate, me)
        job = {"compute_unit": "CPU (ONNX)", "devices": "all", "num_inference_runs": 3, "warmup_runs": 1,
               "load_runs": 1, "processes": 1, "threads": 1}  # fmt: skip
        campaign = {"name": "fanout", "model": {"path": "big.onnx"}, "jobs": [job]}
        (work / "c.yaml").write_text(json.dumps(campaign))
        started = time.time()
        sub = lab.start("submitter", [*SARK, "submit", str(work / "c.yaml"), "--gate", gate, "--data-dir",
                                      str(work / "submitter"), "--out", str(work / "out"), "--events",
                                      "--wait-peers", str(workers), "--discover-timeout", "60"])  # fmt: skip
        seen = until(sub, "outcome", 3600)
        uploads = next(e for e in seen if e["event"] == "uploads")["bytes"]
        models = [e for p in procs for e in events(p) if e["event"] == "model"]
    finally:
        lab.close()
        shutil.rmtree(work, ignore_errors=True)
    uploaded = sum(uploads.values())
    return {
        "workers": workers, "model_bytes": size, "submitter_uploaded_bytes": uploaded,
        "submitter_copies": uploaded / size, "sources": dict(Counter(e["source"] for e in models)),
        "all_fetched_s": max(e["t"] for e in models) - started if models else None,
        "completed": sum(1 for e in seen if e["event"] == "accepted"),
    }  # fmt: skip


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--mb", type=int, default=100)
    args = parser.parse_args()
    r = run(args.workers, args.mb)
    print(f"{r['workers']} workers, model {r['model_bytes'] / 1e6:.0f} MB: the submitter uploaded "
          f"{r['submitter_copies']:.2f} full copies; sources {r['sources']}; every worker had it after "
          f"{r['all_fetched_s']:.1f} s; {r['completed']} results")  # fmt: skip
    OUT.mkdir(exist_ok=True)
    (OUT / "fanout.json").write_text(json.dumps(r, indent=1))


if __name__ == "__main__":
    main()
