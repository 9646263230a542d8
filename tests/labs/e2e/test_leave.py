"""Issue 22 part 5, issue 30: SIGTERM or Ctrl-C on a worker mid-measurement is a graceful leave.

A gate and two real `join` workers; one task measuring on worker A (1,500 inference runs);
SIGTERM to A (a service manager stopping it), or SIGINT to A's whole process group (Ctrl-C in its
terminal: the measurement child gets it too). A hands its lease back with a signed release and exits 0
within `LEAVE_S`; the submitter hears a release (never a lapse: it does not wait out the lease) and
the task is committed on worker B at once, completing with exactly one result. The time from the
signal to B's commit is printed (benchmarks/notes/chaos.md keeps the figure); the test pins the
mechanism, not the speed.
"""

from __future__ import annotations

import csv
import os
import queue
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kit.campaignlab import MODEL, Swarm, write_campaign
from kit.procs import Proc
from kit.sizing import timed_job

from node.worker.leave import LEAVE_S

LONG_JOB = timed_job(3.0, 1500)
"""Still measuring when the signal follows its first heartbeat (seconds of runs left even when idle,
sized by time: `lab.sizing`);
B re-runs all of it, so longer only costs the lab CPU."""


def _until(proc: Proc, kind: str, timeout: float = 120.0, **match: Any) -> list[dict[str, Any]]:
    """Every event up to and including the next `kind` whose fields match."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            event = proc.events.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(
                f"{proc.name}: no {kind} {match} within {timeout} s; saw {seen[-5:]}"
            ) from None
        seen.append(event)
        if event.get("event") == kind and all(event.get(k) == v for k, v in match.items()):
            return seen


@pytest.mark.parametrize(
    ("signum", "deliver"),
    [
        (signal.SIGTERM, os.kill),  # a service manager stopping the worker
        (signal.SIGINT, os.killpg),  # Ctrl-C in the terminal: the whole foreground group
    ],
    ids=["SIGTERM", "Ctrl-C"],
)
def test_a_signal_mid_measurement_hands_the_lease_back_and_the_task_moves_at_once(
    swarm2: Swarm, tmp_path: Path, signum: signal.Signals, deliver: Callable[[int, int], None]
) -> None:
    campaign = write_campaign(tmp_path / "c.yaml", {
        "model": {"path": MODEL.name}, "jobs": [{"compute_unit": "CPU (ONNX)", "devices": 1, **LONG_JOB}],
    })  # fmt: skip
    submitter = swarm2.start_submit(
        "submit", str(campaign), "--wait-peers", "2", "--out", str(tmp_path / "out")
    )
    before = _until(submitter, "heartbeat", phase="measuring")
    measuring = before[-1]
    victim_id = measuring["peer"]
    victim = swarm2.workers[victim_id]

    sent_at = time.time()
    deliver(victim.popen.pid, signum)  # the worker leads its own session: its pid is its group's
    try:
        code = victim.popen.wait(timeout=LEAVE_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the worker did not exit within {LEAVE_S} s\n{victim.log_excerpt()}") from None
    exited_at = time.time()
    assert code == 0, victim.log_excerpt()
    worker_events = _until(victim, "left", timeout=5)
    leaving = next(e for e in worker_events if e["event"] == "leaving")
    assert leaving["released"] == [measuring["task"]]
    assert worker_events[-1]["delivered"] == 1  # the release reached the submitter's stream

    after = _until(submitter, "committed", timeout=60)
    released = [e for e in after if e["event"] == "released"]
    assert [e["peer"] for e in released] == [victim_id]
    committed = after[-1]
    assert committed["peer"] != victim_id
    after += _until(submitter, "outcome", timeout=180)
    outcome = after[-1]
    assert not [e for e in before + after if e["event"] == "lapsed"]  # handed back, not waited out
    assert (outcome["released"], outcome["lapsed"], outcome["accepted"]) == (1, 0, 1)
    with open(outcome["files"]["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["Status"], r["WorkerPeerId"]) for r in rows] == [("Complete", committed["peer"])]
    assert submitter.popen.wait(timeout=30) == 0
    print(
        f"\n{signum.name} -> release heard {released[0]['t'] - sent_at:.3f} s, -> commit on B "
        f"{committed['t'] - sent_at:.3f} s; worker exit {exited_at - sent_at:.2f} s"
    )
