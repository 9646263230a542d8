"""Issue 24, fleet load: `fleet: 2` at a set rate on the embedded swarm, against a stub of known timing.

The stub answers every request with its first token after `FIRST_S` and one more every `EVERY_S`,
and records what it saw. The campaign asks two workers for `RATE` req/s over `DURATION_S` from a set
seed, so the schedule (and the count it asks for) is known before the run.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from lab.procs import SARK
from lab.sse_server import scheduled, serve_sse

from scheduler.fleet import arrivals

RATE, DURATION_S, SEED = 40.0, 4.0, 24
FIRST_S, EVERY_S = 0.05, 0.005
TEXTS = ["The", " quick", " brown", " fox"]


def _campaign(tmp_path: Path, url: str) -> Path:
    endpoint = {"url": url, "model": "scripted"}
    generate = {"prompts": "builtin:summaries", "max_new_tokens": 4, "request_rate": RATE}
    job = {"endpoint": endpoint, "generate": {**generate, "duration_s": DURATION_S}}
    path = tmp_path / "fleet.yaml"
    path.write_text(json.dumps({"name": "fleet", "jobs": [{**job, "fleet": {"workers": 2, "seed": SEED}}]}))
    return path


def _submit(campaign: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    args = [*SARK, "submit", str(campaign), "--json", "--workers", "2", "--wait-peers", "2"]
    args += ["--out", str(tmp_path / "out"), "--data-dir", str(tmp_path / "data")]
    args += ["--allow-http", "--allow-network", "127.0.0.0/8"]
    env = {**os.environ, "SARK_CALIBRATE": "false"}
    return subprocess.run(args, capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)


def _rows(outcome: dict[str, Any]) -> list[dict[str, str]]:
    with open(outcome["files"]["csv"], newline="") as f:
        return list(csv.DictReader(f))


def test_two_workers_hold_one_schedule_and_merge_into_one_row(tmp_path: Path) -> None:
    script = lambda body, attempt: scheduled(TEXTS, first_s=FIRST_S, every_s=EVERY_S, usage=(9, 4))  # noqa: E731
    with serve_sse(script) as server:
        done = _submit(_campaign(tmp_path, server.url), tmp_path)
        seen = [s for s in server.seen if s.path.endswith("/chat/completions")]
    assert done.returncode == 0, done.stderr[-3000:]
    rows = _rows(json.loads(done.stdout.strip().splitlines()[-1]))
    [merged] = [r for r in rows if r["ComputeUnits"] == "Endpoint (fleet)"]
    members = [r for r in rows if r["ComputeUnits"] == "Endpoint (black-box)"]

    asked = len(arrivals(RATE, DURATION_S, SEED))
    assert abs(asked - RATE * DURATION_S) <= 0.15 * RATE * DURATION_S  # the seeded schedule itself
    assert merged["Status"] == "Complete"
    assert merged["FleetSize"] == "2"
    assert merged["FleetLost"] == ""
    assert int(merged["Requests"]) == asked
    assert abs(int(merged["Requests"]) - RATE * DURATION_S) <= 0.15 * RATE * DURATION_S
    assert abs(float(merged["RequestRateAchieved"]) - RATE) <= 0.10 * RATE
    assert merged["Errors"] == "0"
    assert FIRST_S * 1e3 <= float(merged["TtftMsMedian"]) <= FIRST_S * 1e3 + 30  # the stub's TTFT
    assert float(merged["ScheduleLagMsP99"]) >= 0
    assert merged["ClientSaturated"] in ("true", "false")
    assert float(merged["ClientCpuMaxPct"]) >= 0

    assert len(members) == 2
    assert len({r["WorkerPeerId"] for r in members}) == 2
    assert all(r["Status"] == "Complete" and r["FleetSize"] == "2" for r in members)
    assert sum(int(r["Requests"]) for r in members) == int(merged["Requests"]) == len(seen)
    assert sorted(merged["WorkerPeerId"].split(";")) == sorted(r["WorkerPeerId"] for r in members)
