"""Issue 23: a worker that signs figures its own samples contradict is refused, end to end.

The liar is the real `sark-node join` (tests/kit/liar.py wraps only its `drivers.measure`): it
measures the model for real, halves the median, signs the result with its own key and delivers it
over the real protocol. `sark-node submit` must derive the figures again and refuse it.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

from kit.campaignlab import MODEL, ROOT, CampaignLab, Swarm, submitter_id, write_campaign

LIAR = ROOT / "tests" / "kit" / "liar.py"


def test_a_worker_that_halves_its_median_is_refused_inconsistent(tmp_path: Path) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        submitter_dir = tmp_path / "submitter"
        me = submitter_id(submitter_dir)
        gate = lab.gate().ready["addrs"][0]
        liar = lab.real_worker("liar", [gate], me, program=[sys.executable, str(LIAR)])
        swarm = Swarm(lab, gate, {liar.ready["peer_id"]: liar}, submitter_dir, tmp_path)
        job = {"compute_unit": "CPU (ONNX)", "devices": "all", "num_inference_runs": 20, "warmup_runs": 2,
               "load_runs": 1, "processes": 1}  # fmt: skip
        campaign = write_campaign(
            tmp_path / "c.yaml", {"name": "liar", "model": {"path": MODEL.name}, "jobs": [job]}
        )
        done = swarm.run(
            "submit", str(campaign), "--json", "--wait-peers", "1", "--out", str(tmp_path / "out")
        )
        assert done.returncode == 1, done.stderr  # a task failed
        outcome = json.loads(done.stdout.strip().splitlines()[-1])
        with open(outcome["files"]["csv"], newline="") as f:
            (row,) = list(csv.DictReader(f))
    finally:
        lab.close()
    assert (row["Status"], row["FailureReason"]) == ("Failed", "inconsistent")
    assert row["WorkerPeerId"] == liar.ready["peer_id"]
    assert row["InferenceMsMedian"] == ""  # the worker's figures are not shown
    said = re.search(
        r"inference_ms\.median: the worker says ([\d.e+-]+), its raw parts give ([\d.e+-]+)", row["Detail"]
    )
    assert said is not None, row["Detail"]
    claimed, derived = float(said[1]), float(said[2])
    assert claimed == derived / 2
    (task,) = outcome["tasks"]
    assert task["state"] == "failed"
