"""Issue 23: Ctrl-C. `submit` interrupted mid-measurement exits 130 with one line naming the campaign
and its `--resume` command, tells the worker to stop, stores the campaign "interrupted" with no lease
held; `submit --resume` then completes it. `serve` and `gate` stop on Ctrl-C with one line, exit 130."""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

from kit import zygote
from kit.campaignlab import MODEL, CampaignLab, Swarm, write_campaign
from kit.procs import SARK, Proc
from kit.sizing import timed_job

MEASURED_JOB = {**timed_job(3.0, 1500), "warmup_runs": 2}
"""Still measuring when Ctrl-C follows its first heartbeat (seconds of runs left even when idle,
sized by time: `lab.sizing`);
`--resume` re-runs all of it, so longer only costs the lab CPU."""
PACE_MS = 10.0
PACED_JOB = {"num_inference_runs": 1000, "warmup_runs": 2, "load_runs": 1, "processes": 1}
"""At least 10 s of measuring however fast or idle the machine (each inference paced to `PACE_MS`,
tests/kit/pacing): a count sized by a timing taken at one moment ended in 1.3 s once the machine had
quietened, before the first heartbeat of the measuring phase (CI at 83fb9f9)."""


def _wait(proc: Proc, kind: str, timeout: float = 120.0, **match: Any) -> dict[str, Any]:
    while True:
        event = proc.wait_event(kind, timeout)
        if all(event.get(k) == v for k, v in match.items()):
            return event


def _stderr(proc: Proc) -> list[str]:
    assert proc.log is not None
    return proc.log.read_text().splitlines()


def _stored(data_dir: Path, campaign_id: str) -> tuple[str, list[dict[str, Any]]]:
    with sqlite3.connect(data_dir / "campaigns.sqlite") as db:
        status, snapshot = db.execute(
            "SELECT status, snapshot FROM campaigns WHERE id = ?", (campaign_id,)
        ).fetchone()
    return status, json.loads(snapshot)["tasks"]


def test_ctrl_c_mid_measurement_releases_the_lease_and_resume_completes(
    swarm2: Swarm, tmp_path: Path
) -> None:
    campaign = write_campaign(tmp_path / "c.yaml", {
        "model": {"path": MODEL.name}, "jobs": [{"compute_unit": "CPU (ONNX)", "devices": 1, **MEASURED_JOB}],
    })  # fmt: skip
    out = tmp_path / "out"
    submitter = swarm2.start_submit("submit", str(campaign), "--wait-peers", "2", "--out", str(out))
    campaign_id = _wait(submitter, "campaign")["campaign"]
    measuring = _wait(submitter, "heartbeat", phase="measuring")
    submitter.popen.send_signal(signal.SIGINT)

    assert submitter.popen.wait(timeout=60) == 130
    interrupted = _wait(submitter, "interrupted", timeout=5)
    assert interrupted["campaign"] == campaign_id
    lines = _stderr(submitter)
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    assert f"sark-node submit --resume {campaign_id}" in lines[0]
    assert f"--data-dir {swarm2.submitter_dir}" in lines[0]  # the flags this run was given

    worker = swarm2.workers[measuring["peer"]]
    stopped = _wait(worker, "outcome", timeout=30, task=measuring["task"])
    assert (stopped["kind"], stopped["reason"]) == ("failure", "cancelled")  # it stopped measuring
    status, tasks = _stored(swarm2.submitter_dir, campaign_id)
    assert status == "interrupted"
    shown = zygote.run(
        [*SARK, "status", "--json", "--data-dir", str(swarm2.submitter_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(shown.stdout)["campaigns"][0]["status"] == "interrupted"  # not "submitter gone"
    assert [(t["state"], t["lease_id"], t["attempts"]) for t in tasks] == [("pending", None, [])]

    done = swarm2.run("submit", "--resume", campaign_id, "--json", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["campaign_id"] == campaign_id
    with (out / campaign_id / "results.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [row["Status"] for row in rows] == ["Complete"]
    assert _stored(swarm2.submitter_dir, campaign_id)[0] == "finished"


def test_ctrl_c_stops_serve_and_gate_with_one_line(tmp_path: Path) -> None:
    lab = CampaignLab(tmp_path)
    try:
        gate = lab.gate()
        args = ["serve", "--http", "127.0.0.1:0", "--events", "--data-dir", str(tmp_path / "serve")]
        serve = lab.start("serve", [*SARK, *args, "--gate", gate.ready["addrs"][0]])
        _wait(serve, "http", timeout=60)
        for proc in (serve, gate):
            proc.popen.send_signal(signal.SIGINT)
        for proc, line in ((serve, "interrupted: stopped serving"), (gate, "interrupted")):
            assert proc.popen.wait(timeout=60) == 130, proc.log_excerpt()
            assert _stderr(proc) == [line], proc.log_excerpt()
    finally:
        lab.close()


def test_ctrl_c_from_a_terminal_reaches_every_child_and_still_prints_one_line(tmp_path: Path) -> None:
    """A terminal's Ctrl-C goes to the whole process group: README's main command (its embedded swarm
    in the same process, the measuring child apart) gets it mid-measurement. The child leaves it to
    its parent: one line, exit 130, no child's traceback, and the campaign stored "interrupted"."""
    campaign = write_campaign(tmp_path / "c.yaml", {
        "model": {"path": MODEL.name}, "jobs": [{"compute_unit": "CPU (ONNX)", **PACED_JOB}],
    })  # fmt: skip
    data = tmp_path / "data"
    lab = CampaignLab(tmp_path, pace_ms=PACE_MS)
    try:
        args = ["submit", str(campaign), "--events", "--data-dir", str(data), "--out", str(tmp_path / "out")]
        submitter = lab.start("submit", [*SARK, *args], env=lab.paced_env())  # its embedded workers paced
        campaign_id = _wait(submitter, "campaign")["campaign"]
        _wait(submitter, "heartbeat", phase="measuring")
        os.killpg(submitter.popen.pid, signal.SIGINT)  # as the terminal does: the whole group
        assert submitter.popen.wait(timeout=60) == 130
    finally:
        lab.close()
    lines = _stderr(submitter)
    assert len(lines) == 1, lines
    assert f"sark-node submit --resume {campaign_id}" in lines[0]
    assert _stored(data, campaign_id)[0] == "interrupted"
