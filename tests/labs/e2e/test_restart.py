"""Issue 13 item 3: a worker restarted with the same data folder (same identity) joins direct again,
and a campaign with a local-path model completes on it."""

from __future__ import annotations

import json
from pathlib import Path

from kit import zygote
from kit.campaignlab import MODEL, CampaignLab, submitter_id, write_campaign
from kit.procs import SARK

SMALL_JOB = {"num_inference_runs": 20, "warmup_runs": 2, "load_runs": 1, "processes": 1}


def test_a_restarted_worker_joins_direct_and_runs_a_campaign(tmp_path: Path) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        gate = lab.gate().ready["addrs"][0]
        me = submitter_id(tmp_path / "submitter")
        first = lab.real_worker("w0", [gate], me)
        assert first.ready["reachability"] == "direct"
        lab.kill(first)  # SIGKILL: the gate keeps whatever it knew of this peer id

        again = lab.real_worker("w0", [gate], me)  # same data folder: same identity key
        assert again.ready["peer_id"] == first.ready["peer_id"]
        assert again.ready["reachability"] == "direct", again.log_excerpt()
        assert again.ready["circuit_addrs"] == []

        campaign = write_campaign(tmp_path / "campaign.yaml", {
            "name": "restart",
            "model": {"path": MODEL.name},
            "jobs": [{"compute_unit": "CPU (ONNX)", "devices": "all", **SMALL_JOB}],
        })  # fmt: skip
        args = ["submit", str(campaign), "--json", "--wait-peers", "1", "--out", str(tmp_path / "out")]
        done = zygote.run(
            [*SARK, *args, "--gate", gate, "--data-dir", str(tmp_path / "submitter")],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
        tasks = json.loads(done.stdout.strip().splitlines()[-1])["tasks"]
        assert [(t["state"], t["peer_id"]) for t in tasks] == [("done", again.ready["peer_id"])]
    finally:
        lab.close()
