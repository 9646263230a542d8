"""Per-task dispatch overhead of `sark-node submit`, and model transfer over /sark/blob vs HTTP.

    .venv/bin/python benchmarks/dispatch.py [--tasks 50] [--workers 3] [--no-transfer]

Starts a gate and N `sark-node join` workers as processes on loopback, submits a campaign of small
tasks (one job per task, `devices: 1`) from a fresh submitter process, and reads every event line.
For each task:

    overhead = (result accepted at the submitter - offer sent)        submit-to-result
             - (outcome on the worker - measurement start)            the worker's own measured time
             - (measurement start - commit on the worker)             waiting behind other tasks

i.e. what negotiation, dispatch, result signing, verification and storage cost. All processes share
one clock (one machine). Then runs benchmarks/transfer.py (100 MB over /sark/blob and over HTTP from
loopback, in the same run) and prints its ratio. Writes benchmarks/out/dispatch.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from lab.procs import LOOPBACK, SARK, Lab, Proc  # noqa: E402

OUT = Path(__file__).parent / "out"
MODEL = ROOT / "examples" / "models" / "tiny-convnet.onnx"


def _start_swarm(lab: Lab, workers: int, submitter: str) -> tuple[str, list[Proc]]:
    gate = lab.gate().ready["addrs"][0]
    procs = []
    for i in range(workers):
        args = [
            "join",
            "--listen",
            LOOPBACK,
            "--data-dir",
            str(lab.root / f"w{i}"),
            "--allow",
            submitter,
            "--gate",
            gate,
            "--no-calibrate",
            "--events",
        ]
        proc = lab._start(f"w{i}", args)
        procs.append(proc)
    for proc in procs:
        proc.ready = proc.wait_event("ready", 120)
    return gate, procs


def _events(proc: Proc) -> list[dict[str, Any]]:
    out = []
    while not proc.events.empty():
        out.append(proc.events.get_nowait())
    return out


def _overheads(submitter: list[dict[str, Any]], workers: list[dict[str, Any]]) -> list[dict[str, float]]:
    offered: dict[str, float] = {}
    accepted: dict[str, float] = {}
    for e in submitter:
        if e["event"] == "offered":
            offered[e["task"]] = e["t"]  # the last offer is the one that led to the result
        elif e["event"] == "accepted":
            accepted[e["task"]] = e["t"]
    marks: dict[str, dict[str, float]] = {}
    for e in workers:
        if e["event"] in ("committed", "run", "outcome"):
            marks.setdefault(e["task"], {})[e["event"]] = e["t"]
    rows = []
    for task, t_acc in accepted.items():
        m = marks[task]
        total = t_acc - offered[task]
        measured = m["outcome"] - m["run"]
        queued = m["run"] - m["committed"]
        rows.append(
            {
                "total_ms": total * 1e3,
                "measured_ms": measured * 1e3,
                "queued_ms": queued * 1e3,
                "overhead_ms": (total - measured - queued) * 1e3,
                "offer_to_commit_ms": (m["committed"] - offered[task]) * 1e3,
                "outcome_to_accept_ms": (t_acc - m["outcome"]) * 1e3,
            }
        )
    return rows


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(tasks: int, workers: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="sark-dispatch-"))
    lab = Lab(work, record_ttl=60.0)
    try:
        ident = subprocess.run(
            [*SARK, "id", "--data-dir", str(work / "submitter")], capture_output=True, text=True, check=True
        ).stdout.strip()
        gate, procs = _start_swarm(lab, workers, ident)
        shutil.copy(MODEL, work / MODEL.name)
        job = {
            "compute_unit": "CPU (ONNX)",
            "devices": 1,
            "num_inference_runs": 5,
            "warmup_runs": 1,
            "load_runs": 1,
            "processes": 1,
            "threads": 1,
        }
        campaign = {"name": "dispatch", "model": {"path": MODEL.name}, "jobs": [job] * tasks}
        (work / "c.yaml").write_text(json.dumps(campaign))
        started = time.perf_counter()
        sub = lab._start(
            "submitter",
            [
                "submit",
                str(work / "c.yaml"),
                "--gate",
                gate,
                "--data-dir",
                str(work / "submitter"),
                "--out",
                str(work / "out"),
                "--events",
                "--wait-peers",
                str(workers),
            ],
        )
        submitter_events = _until(sub, "outcome", 900)
        wall = time.perf_counter() - started
        worker_events = [e for p in procs for e in _events(p)]
        rows = _overheads(submitter_events, worker_events)
    finally:
        lab.close()
        shutil.rmtree(work, ignore_errors=True)
    over = [r["overhead_ms"] for r in rows]
    return {
        "tasks": tasks,
        "workers": workers,
        "completed": len(rows),
        "campaign_wall_s": wall,
        "overhead_p50_ms": statistics.median(over),
        "overhead_p99_ms": _pct(over, 0.99),
        "measured_p50_ms": statistics.median(r["measured_ms"] for r in rows),
        "rows": rows,
    }


def _until(proc: Proc, kind: str, timeout: float) -> list[dict[str, Any]]:
    """Every event up to and including the first of `kind`."""
    seen = []
    deadline = time.monotonic() + timeout
    while True:
        event = proc.events.get(timeout=max(0.1, deadline - time.monotonic()))
        seen.append(event)
        if event["event"] == kind:
            return seen


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--no-transfer", action="store_true", help="skip the /sark/blob vs HTTP part")
    args = parser.parse_args()
    result = run(args.tasks, args.workers)
    print(
        f"{result['completed']}/{result['tasks']} tasks on {result['workers']} workers in "
        f"{result['campaign_wall_s']:.1f} s"
    )
    print(
        f"per-task overhead p50 {result['overhead_p50_ms']:.1f} ms, p99 {result['overhead_p99_ms']:.1f} ms "
        f"(worker's own measured time p50 {result['measured_p50_ms']:.0f} ms)"
    )
    if not args.no_transfer:
        done = subprocess.run(
            [sys.executable, str(Path(__file__).parent / "transfer.py")],
            text=True,
            capture_output=True,
            check=True,
        )
        print(done.stdout.strip())
        result["transfer"] = json.loads((OUT / "transfer.json").read_text())
    OUT.mkdir(exist_ok=True)
    (OUT / "dispatch.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
