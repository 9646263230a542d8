"""Per-task dispatch overhead of `sark-node submit`, and model transfer over /sark/blob vs HTTP.

    .venv/bin/python benchmarks/dispatch.py [--tasks 50] [--workers 3] [--no-transfer]

Starts a gate and N `sark-node join` workers as processes on loopback, submits a campaign of small
tasks (one job per task, `devices: 1`, one intra-op thread) from a fresh submitter process, and
reads every event line. Twice: all tasks offered as fast as the workers take them, and paced to this
machine's two cores (`max_inflight: 2`), since every worker's measuring child competes for the same
CPUs as the nodes' event loops here (on a fleet each device has its own). For each task:

    overhead = (result accepted at the submitter - offer sent)        submit-to-result
             - (outcome on the worker - measurement start)            the worker's own measured time
             - (measurement start - commit on the worker)             waiting behind other tasks

i.e. what negotiation, dispatch, result signing, verification and storage cost. All processes share
one clock (one machine). Then runs benchmarks/transfer.py (10 and 100 MB over /sark/blob and over
HTTP from loopback, one fetcher and several at once, in the same run) and prints its ratios. Writes
benchmarks/out/dispatch.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from swarmlab import (
    MODEL,
    OUT,
    SARK,
    Lab,
    overheads,
    start_workers,
    submitter_id,
    summary,
    until,
    worker_events,
)

SMALL_JOB = {"compute_unit": "CPU (ONNX)", "devices": 1, "num_inference_runs": 5, "warmup_runs": 1,
             "load_runs": 1, "processes": 1, "threads": 1}  # fmt: skip


def run(tasks: int, workers: int, max_inflight: int = 0) -> dict[str, Any]:
    """One campaign of `tasks` small tasks on `workers` fresh workers."""
    work = Path(tempfile.mkdtemp(prefix="sark-dispatch-"))
    lab = Lab(work, record_ttl=60.0)
    try:
        me = submitter_id(work / "submitter")
        gate = lab.gate().ready["addrs"][0]
        procs = start_workers(lab, workers, gate, me)
        shutil.copy(MODEL, work / MODEL.name)
        campaign = {"name": "dispatch", "model": {"path": MODEL.name}, "max_inflight": max_inflight,
                    "jobs": [SMALL_JOB] * tasks}  # fmt: skip
        (work / "c.yaml").write_text(json.dumps(campaign))
        started = time.perf_counter()
        sub = lab.start("submitter", [*SARK, "submit", str(work / "c.yaml"), "--gate", gate, "--data-dir",
                                      str(work / "submitter"), "--out", str(work / "out"), "--events",
                                      "--wait-peers", str(workers)])  # fmt: skip
        submitter_events = until(sub, "outcome", 900)
        wall = time.perf_counter() - started
        rows = overheads(submitter_events, worker_events(procs))
    finally:
        lab.close()
        shutil.rmtree(work, ignore_errors=True)
    return {"tasks": tasks, "workers": workers, "max_inflight": max_inflight, "completed": len(rows),
            "campaign_wall_s": wall,
            **summary(rows), "rows": rows}  # fmt: skip


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--no-transfer", action="store_true", help="skip the /sark/blob vs HTTP part")
    args = parser.parse_args()
    runs: dict[str, Any] = {}
    for label, inflight in (("all at once", 0), ("paced to the 2 cores (max_inflight 2)", 2)):
        r = runs[label] = run(args.tasks, args.workers, inflight)
        print(
            f"{label}: {r['completed']}/{r['tasks']} tasks on {r['workers']} workers in "
            f"{r['campaign_wall_s']:.1f} s; per-task overhead p50 {r['overhead_p50_ms']:.1f} ms, p99 "
            f"{r['overhead_p99_ms']:.1f} ms (worker's own time p50 {r['measured_p50_ms']:.0f} ms)"
        )
    result: dict[str, Any] = {"runs": runs}
    if not args.no_transfer:
        transfer = Path(__file__).parent / "transfer.py"
        done = subprocess.run([sys.executable, str(transfer)], text=True, capture_output=True, check=True)
        print(done.stdout.strip())
        result["transfer"] = json.loads((OUT / "transfer.json").read_text())
    OUT.mkdir(exist_ok=True)
    (OUT / "dispatch.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
