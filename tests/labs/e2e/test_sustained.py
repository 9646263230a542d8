"""Issue 25 end to end: a campaign with a sustained job through `sark-node submit`, a gate and a real
worker on loopback: the row's window medians and Throttled verdict, the telemetry series in
results.json, and report.html's timeline and windows."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.campaignlab import MODEL, Swarm, start_swarm, write_campaign


@pytest.fixture
def swarm1(tmp_path: Path) -> Iterator[Swarm]:
    swarm = start_swarm(tmp_path / "swarm", 1)
    try:
        yield swarm
    finally:
        swarm.lab.close()


def test_a_sustained_job_reports_its_windows_and_telemetry(swarm1: Swarm, tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "campaign.yaml", {
        "name": "sustained",
        "model": {"path": MODEL.name},
        "jobs": [{"compute_unit": "CPU (ONNX)", "warmup_runs": 3, "load_runs": 1,
                  "sustain": {"duration_s": 4, "window_s": 1}}],
    })  # fmt: skip
    done = swarm1.run("submit", str(campaign), "--json", "--wait-peers", "1", "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    with open(outcome["files"]["csv"], newline="") as f:
        [row] = list(csv.DictReader(f))
    assert row["Status"] == "Complete", row
    assert len(row["WindowMediansMs"].split(";")) == 4
    assert row["Throttled"] in ("True", "False")
    assert (row["Throttled"] == "True") == bool(row["ThrottleCauses"])
    assert row["TelemetryPeriodMs"] == "250"
    assert int(row["TelemetryPoints"]) >= 8
    measurement = json.loads(Path(outcome["files"]["json"]).read_text())["results"][0]["signed"][
        "measurement"
    ]
    assert len(measurement["sustained"]["windows"]) == 4
    assert measurement["telemetry"]["points"][0]["cpu_mhz"]
    assert len(measurement["mark_runs"]) == 5
    page = Path(outcome["files"]["html"]).read_text()
    assert 'id="telemetry-0"' in page
    assert '<div id="sustained">' in page
