"""Issue 38, scope 6: a CPU that claims a speed it does not have is refused by its challenge.

Real processes: a gate, an honest calibrating `join` and one that advertises 4x the CPU GFLOPS it
measured (tests/lab/speedliar.py `fast`: a unique claim, a class of one that no class median
refutes), and `sark-node submit` with a `verify:` block, which challenges each peer before its first
task over `/sark/challenge/1.0.0` (a drawn matmul in the worker's spawned child, rows committed,
checked, timed). The liar's rows carry `claim_unverified: challenge: n=..., X GFLOPS measured
against Y claimed`; the honest worker's carry no mark. The liar starts with the honest worker's
calibration in its cache (one machine, one figure: the liar's claim is exactly 4x the honest one's),
so the test turns on the challenge, not on two calibrations taken under different loads. It is
timing-dependent by nature (exclusive): an honest device passes above 1/3 of its claim, so the
4x liar fails as long as this machine's challenge runs between 1/3 and 4/3 of its calibration.
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path

import pytest

from e2e.conftest import MODEL, ROOT, CampaignLab, Swarm, submitter_id, write_campaign

pytestmark = pytest.mark.exclusive  # the challenge times a product measured here
LIAR = ROOT / "tests" / "lab" / "speedliar.py"


def test_a_cpu_claiming_4x_its_speed_is_refused_by_its_challenge_and_an_honest_one_passes(
    tmp_path: Path,
) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        me = submitter_id(tmp_path / "submitter")
        gate = lab.gate().ready["addrs"][0]
        ids = {}
        for name in ("honest", "fast"):
            if name == "fast":  # the honest one's calibration (cached under the machine's key): one figure
                shutil.copytree(tmp_path / "honest" / "profile", tmp_path / "fast" / "profile")
            proc = lab.real_worker(name, [gate], me, program=[sys.executable, str(LIAR), name], timeout=120)
            ids[name] = proc.ready["peer_id"]
        swarm = Swarm(lab, gate, {}, tmp_path / "submitter", tmp_path)
        claimed = {p["peer_id"]: p["calibration"]["cpu_gflops"] for p in lab.peers([gate])}
        assert claimed[ids["fast"]] > 0
        job = {"compute_unit": "CPU (ONNX)", "devices": "all", "num_inference_runs": 10, "warmup_runs": 1,
               "require": {"peers": list(ids.values())}}  # fmt: skip
        body = {"name": "challenged", "model": {"path": MODEL.name}, "max_inflight": 1, "jobs": [job],
                "verify": {"unverified": "allow", "same_host": "allow"}}  # fmt: skip
        (tmp_path / "c").mkdir()
        path = write_campaign(tmp_path / "c" / "c.yaml", body)
        done = swarm.run("submit", str(path), "--events", "--wait-peers", "2", "--out", str(tmp_path / "out"))
        assert done.returncode == 0, done.stderr[-3000:]
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        rounds = [e for e in events if e.get("event") == "challenge"]
        print(json.dumps(rounds, indent=1))  # the figures, for the record
        outcome = next(e for e in events if e.get("event") == "outcome")
        with open(outcome["files"]["csv"], newline="") as f:
            rows = {r["WorkerPeerId"]: r for r in csv.DictReader(f)}
    finally:
        lab.close()
    fast, honest = rows[ids["fast"]], rows[ids["honest"]]
    assert fast["Claim"].startswith("claim_unverified: challenge: n="), fast["Claim"]
    assert f"against {claimed[ids['fast']]:.3g} claimed" in fast["Claim"]
    assert honest["Claim"] == "", honest["Claim"]
    by_peer = {e["subject"] for e in rounds}
    assert by_peer == set(ids.values())  # each challenged, once per campaign
    lies = [e["problem"] for e in rounds if e["subject"] == ids["fast"]]
    assert lies, rounds  # its rows were right (it computed them): it was too slow, or did not commit in time
    assert all(p == "" or p.startswith("no commitment within") for p in lies), lies
