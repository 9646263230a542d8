"""Issue 38, scope 6: a CPU that claims a speed it does not have is refused by its challenge.

Real processes: a gate and two real `sark-node join` workers on this machine, and `sark-node plan`
and `submit` with a `verify:` block, which challenge each peer before its first task over
`/sark/challenge/1.0.0` (a drawn product in the worker's spawned child, its rows committed, checked
and timed). The test measures this machine on the challenge's own kernel (the best of five
products, near its peak, so the liar's 4x is 4x what the machine can do; `join`'s calibration, the
best 512 x 512 product over 0.6 s, swung 3-20x on this shared 2-core machine within a minute) and
starts both workers with a profile (`join --profile`, the product's own way to advertise a written
profile): the honest one advertises half that figure (a calibration taken on a busier day: a claim
below the truth always passes), the liar 8x it under a CPU name of its own (a unique claim: a class
of one, which no class median refutes). Both skip the device probe, so the
lab starts in seconds. The liar's rows carry `claim_unverified: challenge: n=..., X GFLOPS measured
against Y claimed`, and `plan` says so beforehand; the honest worker's carry no mark.
Timing-dependent by nature (exclusive), with margins this shared machine keeps: the honest worker
passes while its best challenge round stays above 0.2x the figure measured here, the liar is refused
while it stays under 3.2x (the bound itself, 1/2.5 of a claim, is pinned exactly by the pure tests in
tests/scheduler/test_challenge.py).
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest

from drivers.challengechild import digests, product
from e2e.conftest import MODEL, CampaignLab, Swarm, submitter_id, write_campaign
from protocol import Calibration, ComputeUnit, DeviceProfile, UnitStatus
from scheduler.verification import challenge

pytestmark = pytest.mark.exclusive  # the challenge times a product measured here
FACTOR = 8.0
HONEST = 0.5


def _kernel_gflops(seed: int, rows: int = 2048) -> float:
    """This machine's speed on the challenge's own kernel, as a round times it (less the network)."""
    start = time.perf_counter()
    digests(product(seed, rows))
    return challenge.gflops(rows, time.perf_counter() - start, 0.0)


def _profiles(root: Path) -> tuple[Path, Path, float]:
    """The honest profile (half this machine's speed) and the liar's (8x it, its own CPU name)."""
    measured = max(_kernel_gflops(seed) for seed in range(5))  # near this machine's peak
    honest = DeviceProfile(
        device_name="honest", soc="test-cpu", cores_physical=1, cores_logical=2, ram_mb=1024, os="Linux",
        os_version="6", fingerprint="f" * 16,
        units=(UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),),
        calibration=Calibration(cpu_gflops=measured * HONEST, mem_bandwidth_gbs=10.0, seconds=1.0),
    )  # fmt: skip
    claim = Calibration(cpu_gflops=measured * FACTOR, mem_bandwidth_gbs=10.0, seconds=1.0)
    liar = honest.with_(device_name="fast", soc="test-cpu-fast", calibration=claim)
    paths = root / "honest.json", root / "fast.json"
    for path, profile in zip(paths, (honest, liar), strict=True):
        path.write_text(profile.model_dump_json())
    return paths[0], paths[1], measured


def test_a_cpu_claiming_8x_its_speed_is_refused_by_its_challenge_and_an_honest_one_passes(
    tmp_path: Path,
) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        me = submitter_id(tmp_path / "submitter")
        gate = lab.gate().ready["addrs"][0]
        honest_file, liar_file, measured = _profiles(tmp_path)
        started = {
            name: lab.real_worker(name, [gate], me, wait=False, extra=["--profile", str(path)])
            for name, path in (("honest", honest_file), ("fast", liar_file))
        }
        ids = {name: proc.wait_event("ready", 60)["peer_id"] for name, proc in started.items()}
        swarm = Swarm(lab, gate, {}, tmp_path / "submitter", tmp_path)
        job = {"compute_unit": "CPU (ONNX)", "devices": "all", "num_inference_runs": 10, "warmup_runs": 1,
               "require": {"peers": list(ids.values())}}  # fmt: skip
        body = {"name": "challenged", "model": {"path": MODEL.name}, "max_inflight": 1, "jobs": [job],
                "verify": {"unverified": "allow", "same_host": "allow"}}  # fmt: skip
        (tmp_path / "c").mkdir()
        path = write_campaign(tmp_path / "c" / "c.yaml", body)
        planned = swarm.run("plan", str(path), "--json", "--wait-peers", "2")  # challenges with its own key
        assert planned.returncode == 0, planned.stderr[-3000:]
        (planned_job,) = json.loads(planned.stdout)["jobs"]
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
    assert f"against {measured * FACTOR:.3g} claimed" in fast["Claim"]
    assert honest["Claim"] == "", honest["Claim"]
    (said,) = planned_job["claims"][ids["fast"]]  # plan says it beforehand
    assert said.startswith("challenge: n="), said
    assert ids["honest"] not in planned_job["claims"]
    assert honest["Status"] == fast["Status"] == "Complete", (honest["Status"], fast["Status"])
    assert {e["subject"] for e in rounds} == set(ids.values())  # each challenged, once per campaign
    lies = [e["problem"] for e in rounds if e["subject"] == ids["fast"]]
    assert lies, rounds  # its rows were right (it computed them): it was too slow, or did not commit in time
    assert all(p == "" or p.startswith("no commitment within") for p in lies), lies
