"""A large swarm on one machine: join, discovery, campaign wall time, per-task overhead, memory.

    .venv/bin/python benchmarks/scale.py [--workers 100] [--tasks 0] [--gates 1]

Starts gates and `--workers` `sark-node join` processes on loopback (`--batch` at a time: each probes
its device in a child that imports the runtimes, too much for 2 cores a hundred at once), then
`sark-node peers --json` as a fresh process (how many workers it lists, and how long it took), then a
fresh submitter that runs a campaign: with `--tasks 0` (the default) one job with `devices: all`, one
task per worker; otherwise `--tasks` small jobs of `devices: 1`. At most `MAX_INFLIGHT` tasks run at
once: the workers share this machine's cores. Prints the time until every worker was ready, the time
from the fresh submitter's start to its discovery of every worker, the campaign's wall time, the
per-task overhead p50/p99 (as in dispatch.py), and memory: RSS of an idle worker (after join, before
any task), the total RSS of the gates and idle workers, and the peak RSS of a busy worker with its
measuring child. Writes benchmarks/out/scale-<workers>.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from swarmlab import (
    MODEL,
    OUT,
    SARK,
    Lab,
    Proc,
    overheads,
    start_workers,
    submitter_id,
    summary,
    tree_rss_mib,
    until,
    worker_events,
)  # fmt: skip

MAX_INFLIGHT = 4
"""Every worker shares this machine's 2 cores: more measurements at once than this only starve the
nodes' event loops (heartbeats miss their lease, attempts are lost). A real fleet has a CPU per device."""
JOB = {"compute_unit": "CPU (ONNX)", "devices": 1, "num_inference_runs": 5, "warmup_runs": 1, "load_runs": 1,
       "processes": 1, "threads": 1}  # fmt: skip


class PeakRss:
    """Samples every worker's process tree twice a second; keeps each one's peak."""

    def __init__(self, procs: list[Proc]) -> None:
        self.procs = procs
        self.peaks = {p.popen.pid: 0.0 for p in procs}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for pid in self.peaks:
                self.peaks[pid] = max(self.peaks[pid], tree_rss_mib(pid))


def run(workers: int, tasks: int, gates: int, batch: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="sark-scale-"))
    lab = Lab(work, record_ttl=120.0)
    try:
        me = submitter_id(work / "submitter")
        gate_addrs = [lab.gate(f"gate{i}").ready["addrs"][0] for i in range(gates)]
        started = time.perf_counter()
        gate_flags = [flag for addr in gate_addrs for flag in ("--gate", addr)]
        procs = start_workers(lab, workers, gate_addrs[0], me, *gate_flags[2:], batch=batch)
        join_s = time.perf_counter() - started
        idle = [tree_rss_mib(p.popen.pid) for p in procs]
        total_rss = sum(idle) + sum(tree_rss_mib(g.popen.pid) for g in lab.procs if g not in procs)
        started = time.perf_counter()
        listed = lab.peers(gate_addrs, timeout=300)
        peers_s = time.perf_counter() - started
        shutil.copy(MODEL, work / MODEL.name)
        jobs = [JOB] * tasks if tasks else [{**JOB, "devices": "all"}]
        campaign = {
            "name": "scale",
            "model": {"path": MODEL.name},
            "max_inflight": MAX_INFLIGHT,
            "jobs": jobs,
        }
        (work / "c.yaml").write_text(json.dumps(campaign))
        with PeakRss(procs) as rss:
            started = time.perf_counter()
            sub = lab.start("submitter", [*SARK, "submit", str(work / "c.yaml"), *gate_flags, "--data-dir",
                                          str(work / "submitter"), "--out", str(work / "out"), "--events",
                                          "--wait-peers", str(workers),
                                          "--discover-timeout", "60"])  # fmt: skip
            seen = until(sub, "outcome", 3600)
            wall = time.perf_counter() - started
        discovered = next(e for e in seen if e["event"] == "discovered")
        outcome = next(e for e in seen if e["event"] == "outcome")
        with open(outcome["files"]["csv"], newline="") as f:
            endings = Counter(f"{r['Status']} {r['FailureReason']}".strip() for r in csv.DictReader(f))
        rows = overheads(seen, worker_events(procs))
        losses = Counter(e["detail"][:80] for e in seen if e["event"] in ("lost", "lapsed"))
        busy = [peak for pid, peak in rss.peaks.items()]
    finally:
        lab.close()
        shutil.rmtree(work, ignore_errors=True)
    return {
        "workers": workers, "gates": gates, "batch": batch, "tasks": tasks or workers, "completed": len(rows),
        "workers_join_s": join_s, "peers_listed": len(listed), "peers_s": peers_s,
        "discovered": discovered["peers"], "discovery_s": discovered["seconds"],
        "total_idle_rss_mib": total_rss,
        "campaign_wall_s": wall, "endings": dict(endings), "losses": dict(losses), **summary(rows),
        "idle_worker_rss_mib": statistics.median(idle), "busy_worker_peak_rss_mib": max(busy),
    }  # fmt: skip


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=0, help="0: one devices: all job (a task per worker)")
    parser.add_argument("--gates", type=int, default=1)
    parser.add_argument(
        "--batch", type=int, default=10, help="workers started at a time (each probes its device)"
    )
    args = parser.parse_args()
    r = run(args.workers, args.tasks, args.gates, args.batch)
    joined = f"{r['workers_join_s']:.1f} s, {r['batch']} at a time"
    print(f"{r['workers']} workers joined in {joined} ({r['gates']} gate(s))")
    print(
        f"`peers` (a fresh process) listed {r['peers_listed']}/{r['workers']} workers in {r['peers_s']:.1f} s"
    )
    print(f"fresh submitter discovered {r['discovered']}/{r['workers']} workers in {r['discovery_s']:.2f} s")
    print(f"campaign: {r['completed']}/{r['tasks']} tasks in {r['campaign_wall_s']:.1f} s; per-task overhead "
          f"p50 {r['overhead_p50_ms']:.0f} ms, p99 {r['overhead_p99_ms']:.0f} ms")  # fmt: skip
    print(f"task endings: {r['endings']}")
    if r["losses"]:
        print(f"attempts lost: {r['losses']}")
    print(f"memory: idle worker {r['idle_worker_rss_mib']:.0f} MiB, gates and idle workers together "
          f"{r['total_idle_rss_mib'] / 1024:.2f} GiB, busy worker with its child "
          f"{r['busy_worker_peak_rss_mib']:.0f} MiB (peak)")  # fmt: skip
    OUT.mkdir(exist_ok=True)
    (OUT / f"scale-{args.workers}.json").write_text(json.dumps(r, indent=1))


if __name__ == "__main__":
    main()
