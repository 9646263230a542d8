"""Ctrl-C in `sark-node serve` with a campaign mid-measurement: the campaign withdraws its task (the
worker stops measuring, no lease is left), the store says "interrupted", serve exits 130 with one line
naming the campaign and its `--resume` command, and that command completes the campaign."""

from __future__ import annotations

import csv
import json
import signal
import sqlite3
from pathlib import Path

import httpx
from kit import zygote
from kit.sizing import runs_lasting

from labs.views.test_http_api import SARK, ModelServer, model_server, start_serve

__all__ = ["model_server"]  # the module fixture, shared with test_http_api


def test_ctrl_c_withdraws_the_running_campaign_and_resume_completes(
    tmp_path: Path, model_server: ModelServer
) -> None:
    root, log = tmp_path / "serve", tmp_path / "serve.err"
    with log.open("w") as err:
        served = start_serve(root, stderr=err)
    try:
        served.wait_event("peers", 60, count=1)
        body = {
            "model_url": model_server.model_url,
            "jobs": [
                {
                    "compute_unit": "CPU (ONNX)",
                    "num_inference_runs": runs_lasting(6.0, 3000),
                    "warmup_runs": 2,
                    "processes": 1,
                }
            ],
        }
        created = httpx.post(f"{served.api}/campaigns", json=body, timeout=60)
        assert created.status_code == 201, created.text
        cid = created.json()["campaign_id"]
        served.wait_event("heartbeat", 120, phase="measuring")
        served.popen.send_signal(signal.SIGINT)
        assert served.popen.wait(timeout=60) == 130
        served.wait_event("interrupted", 5, campaign=cid)
    finally:
        served.stop()
    lines = log.read_text().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    assert f"campaign {cid} stopped, its leases released" in lines[0]
    assert f"sark-node submit --resume {cid} --data-dir {root}" in lines[0]
    with sqlite3.connect(root / "campaigns.sqlite") as db:
        query = "SELECT status, snapshot FROM campaigns WHERE id = ?"
        status, snapshot = db.execute(query, (cid,)).fetchone()
    assert status == "interrupted"
    assert [(t["state"], t["lease_id"]) for t in json.loads(snapshot)["tasks"]] == [("pending", None)]

    resumed = zygote.run(
        [*SARK, "submit", "--resume", cid, "--data-dir", str(root), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    files = json.loads(resumed.stdout.strip().splitlines()[-1])["files"]
    with Path(files["csv"]).open(newline="") as f:
        assert [row["Status"] for row in csv.DictReader(f)] == ["Complete"]
