"""Shared pieces of the swarm benchmarks: a gate and workers as processes, their event lines.

Built on the test lab (tests/kit/procs.py): every process in its own session, killed at the end.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
# the repository root first: tests/ holds folders named after the packages (tests/protocol), which
# would otherwise be imported as namespace packages in place of an installed sark-node
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from kit.procs import LOOPBACK, SARK, Lab, Proc  # noqa: E402

OUT = Path(__file__).parent / "out"
MODEL = ROOT / "examples" / "models" / "tiny-convnet.onnx"

__all__ = ["LOOPBACK", "MODEL", "OUT", "SARK", "Lab", "Proc"]


def submitter_id(data_dir: Path) -> str:
    """The peer id a submitter with this data directory will have (created now)."""
    argv = [*SARK, "id", "--data-dir", str(data_dir)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def start_workers(
    lab: Lab, count: int, gate: str, submitter: str, *extra: str, batch: int | None = None
) -> list[Proc]:
    """`count` workers (each `join --events`), started `batch` at a time (default: all at once), each
    batch waited for before the next: every `join` probes its device in a child that imports the
    runtimes, and 100 such children at once on 2 cores starve every node's event loop for minutes."""
    procs: list[Proc] = []
    step = batch or count
    for first in range(0, count, step):
        started = []
        for i in range(first, min(first + step, count)):
            args = ["join", "--listen", LOOPBACK, "--data-dir", str(lab.root / f"w{i}"), "--allow", submitter,
                    "--gate", gate, "--no-calibrate", "--events", *extra]  # fmt: skip
            started.append(lab.start(f"w{i}", [*SARK, *args]))
        for proc in started:
            proc.ready = proc.wait_event("ready", 600)
        procs += started
    return procs


def events(proc: Proc) -> list[dict[str, Any]]:
    """Every event a process printed that nobody has read yet."""
    out = []
    while not proc.events.empty():
        out.append(proc.events.get_nowait())
    return out


def until(proc: Proc, kind: str, timeout: float) -> list[dict[str, Any]]:
    """Every event up to and including the first of `kind`."""
    seen = []
    deadline = time.monotonic() + timeout
    while True:
        event = proc.events.get(timeout=max(0.1, deadline - time.monotonic()))
        seen.append(event)
        if event["event"] == kind:
            return seen


def worker_events(procs: list[Proc]) -> dict[str, list[dict[str, Any]]]:
    """Every unread event of each worker, by the worker's peer id."""
    return {p.ready["peer_id"]: events(p) for p in procs}


def overheads(
    submitter: list[dict[str, Any]], workers: dict[str, list[dict[str, Any]]]
) -> list[dict[str, float]]:
    """Per accepted task: submit-to-result time minus the worker's own measured time and queue wait."""
    offered: dict[tuple[str, str], float] = {}
    accepted: dict[str, tuple[str, float]] = {}
    for e in submitter:
        if e["event"] == "offered":
            offered[e["task"], e["peer"]] = e["t"]  # the last offer to the peer whose result counted
        elif e["event"] == "accepted":
            accepted[e["task"]] = (e["peer"], e["t"])
    marks: dict[tuple[str, str], dict[str, float]] = {}
    for peer, seen in workers.items():
        for e in seen:
            if e["event"] in ("committed", "run", "outcome"):
                marks.setdefault((e["task"], peer), {})[e["event"]] = e["t"]
    rows = []
    for task, (peer, t_acc) in accepted.items():
        m = marks[task, peer]
        t_offer = offered[task, peer]
        total = t_acc - t_offer
        measured = m["outcome"] - m["run"]
        queued = m["run"] - m["committed"]
        rows.append({
            "total_ms": total * 1e3,
            "measured_ms": measured * 1e3,
            "queued_ms": queued * 1e3,
            "overhead_ms": (total - measured - queued) * 1e3,
            "offer_to_commit_ms": (m["committed"] - t_offer) * 1e3,
            "outcome_to_accept_ms": (t_acc - m["outcome"]) * 1e3,
        })  # fmt: skip
    return rows


def pct(values: list[float], q: float) -> float:
    """The q-quantile by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(rows: list[dict[str, float]]) -> dict[str, float]:
    """p50/p99 of the overhead and the measured time."""
    over = [r["overhead_ms"] for r in rows]
    return {
        "overhead_p50_ms": statistics.median(over),
        "overhead_p99_ms": pct(over, 0.99),
        "measured_p50_ms": statistics.median(r["measured_ms"] for r in rows),
    }


def tree_rss_mib(pid: int) -> float:
    """Resident memory of a process and its children, MiB."""
    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / (1 << 20)
