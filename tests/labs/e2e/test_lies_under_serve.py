"""Issue 29 under `serve`: every lie refused naming its field, the honest rows Complete, a worker that
never starts held only to its lease's bound, the campaign's three files written, and `/api/health`
answering throughout.

The workers are the real `sark-node join`: `tests/kit/boundliar.py` tells one absurd reading a task
(the lies and the refusals `tests/labs/e2e/test_bounds.py` pins under `submit`), `tests/kit/stall.py`
commits and then heartbeats "queued" forever, and an honest one measures. One campaign posted to the
API holds them all: the bounds jobs on the liar and the honest worker, a short job on the staller.
"""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

import httpx
from kit.campaignlab import MODEL, ROOT, CampaignLab, Health, Swarm, campaign_end, submitter_id

from labs.e2e.test_bounds import REFUSED
from protocol import ModelRef
from scheduler.state import transfer_allowance_s
from scheduler.verification import OVERRUN

BOUNDLIAR = ROOT / "tests" / "kit" / "boundliar.py"
STALL = ROOT / "tests" / "kit" / "stall.py"
STALL_TIMEOUT_S = 5.0


def _lab(tmp_path: Path) -> tuple[CampaignLab, Swarm, dict[str, str]]:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    submitter_dir = tmp_path / "submitter"
    me = submitter_id(submitter_dir)
    gate = lab.gate().ready["addrs"][0]
    procs = {
        "liar": lab.real_worker("liar", [gate], me, program=[sys.executable, str(BOUNDLIAR)], wait=False),
        "stall": lab.real_worker("stall", [gate], me, program=[sys.executable, str(STALL)], wait=False),
        "honest": lab.real_worker("honest", [gate], me, wait=False),
    }
    for proc in procs.values():
        proc.ready = proc.wait_event("ready", 90)
    ids = {name: proc.ready["peer_id"] for name, proc in procs.items()}
    swarm = Swarm(lab, gate, {p.ready["peer_id"]: p for p in procs.values()}, submitter_dir, tmp_path, ids)
    return lab, swarm, ids


def _body(model_url: str, ids: dict[str, str]) -> dict[str, object]:
    bounds = [
        {"compute_unit": "CPU (ONNX)", "devices": "all", "num_inference_runs": runs, "warmup_runs": 1,
         "load_runs": 1, "processes": 1, "timeout_s": 120, "require": {"peers": [ids["liar"], ids["honest"]]}}
        for runs in REFUSED
    ]  # fmt: skip
    stall = {"compute_unit": "CPU (ONNX)", "devices": 1, "num_inference_runs": 20,
             "timeout_s": STALL_TIMEOUT_S, "require": {"peers": [ids["stall"]]}}  # fmt: skip
    return {"name": "lies", "model_url": model_url, "jobs": [*bounds, stall]}


def test_serve_refuses_every_lie_and_ends_the_campaign_answering_throughout(
    tmp_path: Path, model_server: str
) -> None:
    lab, swarm, ids = _lab(tmp_path)
    try:
        network = ["--allow-http", "--allow-network", "127.0.0.0/8", "--refresh", "0.5"]
        where = ["--data-dir", str(swarm.submitter_dir), "--gate", swarm.gate, "--out", str(tmp_path / "out")]
        served = lab.submitter(["serve", "--http", "127.0.0.1:0", "--events", *where, *network])
        api = f"{served.wait_event('http', 90)['url']}/api"
        while served.wait_event("peers", 90)["count"] < 3:
            pass
        health = Health(api)
        try:
            created = httpx.post(
                f"{api}/campaigns", json=_body(f"{model_server}/{MODEL.name}", ids), timeout=60
            )
            assert created.status_code == 201, created.text
            cid = created.json()["campaign_id"]
            started = time.monotonic()
            ended = campaign_end(served, cid, 400)
            took = time.monotonic() - started
            after = httpx.get(f"{api}/health", timeout=30)
        finally:
            health.stop()
        assert served.popen.poll() is None, served.log_excerpt()
    finally:
        lab.close()
    assert (after.status_code, health.failed) == (200, [])
    assert health.asked > 0
    assert ended["event"] == "campaign_done", ended
    files = {kind: Path(path) for kind, path in ended["files"].items()}
    assert all(files[kind].is_file() for kind in ("csv", "json", "html")), files
    model = ModelRef(name=MODEL.name, size=MODEL.stat().st_size, sha256="ab" * 32)
    assert (
        took < 120 + transfer_allowance_s(model) + STALL_TIMEOUT_S * OVERRUN
    )  # the staller held it no longer
    with open(files["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    runs_of = dict(enumerate([*REFUSED, 0]))
    for row in rows:
        runs = runs_of[int(row["JobId"].split("-")[-2])]
        if row["WorkerPeerId"] == ids["honest"]:
            assert (row["Status"], row["FailureReason"]) == ("Complete", ""), (runs, row["Detail"])
        elif row["WorkerPeerId"] == ids["liar"]:
            assert (row["Status"], row["FailureReason"]) == ("Failed", "invalid"), (runs, row["Detail"])
            assert REFUSED[runs] in row["Detail"], (runs, row["Detail"])
        else:
            assert row["WorkerPeerId"] == ids["stall"], row
            assert (row["Status"], row["FailureReason"]) == ("Failed", "lease_overrun"), row["Detail"]
    assert {r["WorkerPeerId"] for r in rows} == set(ids.values())
