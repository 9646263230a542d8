"""Issue 29: readings no raw part re-derives are bounded, end to end, beside an honest worker.

The liar is the real `sark-node join` (tests/kit/boundliar.py wraps only its `drivers.measure`): it
measures the model for real, replaces one reading per task with an absurd one (telemetry at
+-1e308, energy below idle, 1e300 J, an NVML method on this CPU-only machine, 1e308 MiB of memory,
-300 C), derives every figure again from the lie, signs the result with its own key and delivers it
over the real protocol. One `sark-node submit` runs every lie, one job each, on both workers: each
of the liar's rows is refused `invalid` naming the field, each honest row is Complete (the honest
worker's real readings pass the same bounds), and results.csv, results.json and report.html exist.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from kit.campaignlab import MODEL, ROOT, CampaignLab, Swarm, submitter_id, write_campaign

BOUNDLIAR = ROOT / "tests" / "kit" / "boundliar.py"
REFUSED = {  # the task's runs (the lie tests/kit/boundliar.py tells) -> what the refusal must name
    11: "telemetry.points[0].cpu_mhz[0]: the worker says 1e+308 MHz, outside 0 to 10000 MHz",
    12: "energy_readings[0].joules: the worker says 1.0 J over 40.0 s, below 0.5 x its idle power "
    "(10000.0 W)",
    13: "energy_readings[0].joules: the worker says 10.0 J over 2.0 s, below 0.5 x its idle power (20.0 W)",
    14: "energy_readings[0].joules: the worker says 1e+300 J, outside 0 to 20000 J",
    15: "energy_readings[0].method: the worker says 'nvml-energy-counter', from a device whose profile "
    "lists no GPU",
    16: "peak_load_ram_mb: the worker says 1e+308 MiB, outside 0 to",
    17: "telemetry.points[0].temp_c: the worker says -300.0 C, outside -40 to 150 C",
}


def test_absurd_readings_are_refused_naming_the_field_and_honest_rows_complete(tmp_path: Path) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        submitter_dir = tmp_path / "submitter"
        me = submitter_id(submitter_dir)
        gate = lab.gate().ready["addrs"][0]
        liar = lab.real_worker("liar", [gate], me, program=[sys.executable, str(BOUNDLIAR)], wait=False)
        honest = lab.real_worker("honest", [gate], me, wait=False)
        workers = {}
        for proc in (liar, honest):
            proc.ready = proc.wait_event("ready", 60)
            workers[proc.ready["peer_id"]] = proc
        swarm = Swarm(lab, gate, workers, submitter_dir, tmp_path)
        jobs = [{"compute_unit": "CPU (ONNX)", "devices": "all", "num_inference_runs": runs, "warmup_runs": 1,
                 "load_runs": 1, "processes": 1, "timeout_s": 120} for runs in REFUSED]  # fmt: skip
        campaign = write_campaign(
            tmp_path / "c.yaml", {"name": "bounds", "model": {"path": MODEL.name}, "jobs": jobs}
        )
        out = tmp_path / "out"
        done = swarm.run(
            "submit", str(campaign), "--json", "--wait-peers", "2", "--out", str(out), timeout=400
        )
        assert done.returncode == 1, done.stderr  # the liar's tasks failed
        outcome = json.loads(done.stdout.strip().splitlines()[-1])
        files = {kind: Path(path) for kind, path in outcome["files"].items()}
        with open(files["csv"], newline="") as f:
            rows = list(csv.DictReader(f))
    finally:
        lab.close()
    assert [files[kind].name for kind in ("csv", "json", "html")] == [
        "results.csv",
        "results.json",
        "report.html",
    ]
    assert all(files[kind].is_file() for kind in ("csv", "json", "html"))
    liar_id, honest_id = liar.ready["peer_id"], honest.ready["peer_id"]
    runs_of = {job: runs for job, runs in enumerate(REFUSED)}
    by_worker: dict[str, dict[int, dict[str, str]]] = {liar_id: {}, honest_id: {}}
    for row in rows:
        by_worker[row["WorkerPeerId"]][runs_of[int(row["JobId"].split("-")[-2])]] = row
    assert sorted(by_worker[honest_id]) == sorted(REFUSED)
    for runs, row in by_worker[honest_id].items():
        assert (row["Status"], row["FailureReason"]) == ("Complete", ""), (runs, row["Detail"])
    assert sorted(by_worker[liar_id]) == sorted(REFUSED)
    for runs, row in by_worker[liar_id].items():
        assert (row["Status"], row["FailureReason"]) == ("Failed", "invalid"), (runs, row["Detail"])
        assert REFUSED[runs] in row["Detail"], (runs, row["Detail"])
        assert row["InferenceMsMedian"] == ""  # nothing the liar sent is shown
