"""Issue 29: a lease ends at dispatch + transfer allowance + timeout_s x overrun, whatever its heartbeats say.

The worker is the real `sark-node join` (tests/kit/stall.py wraps only its `Runner.dispatch`): it
commits, is dispatched, and then reports "queued" in every heartbeat without ever running the task.
`sark-node submit` must end the lease at its bound, with cause `lease_overrun`, and exit as a campaign
with a failed task does.
"""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

from kit.campaignlab import MODEL, ROOT, CampaignLab, Swarm, submitter_id, write_campaign

from protocol import ModelRef
from scheduler.state import transfer_allowance_s
from scheduler.verification import OVERRUN

STALL = ROOT / "tests" / "kit" / "stall.py"
TIMEOUT_S = 2.0
"""The job's own timeout: the bound is mostly the transfer allowance (15 s and up); the lab waits it out."""


def test_a_worker_that_heartbeats_queued_forever_loses_the_task_at_the_bound(tmp_path: Path) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        submitter_dir = tmp_path / "submitter"
        gate = lab.gate().ready["addrs"][0]
        stall = lab.real_worker(
            "stall", [gate], submitter_id(submitter_dir), program=[sys.executable, str(STALL)]
        )
        swarm = Swarm(lab, gate, {stall.ready["peer_id"]: stall}, submitter_dir, tmp_path)
        job = {"compute_unit": "CPU (ONNX)", "devices": 1, "num_inference_runs": 20, "timeout_s": TIMEOUT_S}
        campaign = write_campaign(
            tmp_path / "c.yaml", {"name": "stall", "model": {"path": MODEL.name}, "jobs": [job]}
        )
        submitter = swarm.start_submit(
            "submit", str(campaign), "--wait-peers", "1", "--out", str(tmp_path / "out")
        )
        committed = submitter.wait_event("committed", 90)
        beats = [submitter.wait_event("heartbeat", 30) for _ in range(3)]
        outcome = submitter.wait_event("outcome", 120)
        ended = time.time()
        assert submitter.popen.wait(timeout=60) == 1  # a task failed: the campaign says so, as before
    finally:
        lab.close()
    assert {b["phase"] for b in beats} == {"queued"}  # alive, and saying so, the whole time
    model = ModelRef(name=MODEL.name, size=MODEL.stat().st_size, sha256="ab" * 32)
    bound = transfer_allowance_s(model) + TIMEOUT_S * OVERRUN
    assert bound - 1.0 <= ended - committed["t"] <= bound + 10.0  # held to its bound, then ended
    with open(outcome["files"]["csv"], newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert (row["Status"], row["FailureReason"]) == ("Failed", "lease_overrun")
    assert "overran" in row["Detail"]
    assert row["WorkerPeerId"] == stall.ready["peer_id"]
