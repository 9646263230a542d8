"""Issue 24, fleet load: `fleet: 2` at a set rate on the embedded swarm, against a stub of known timing.

The stub answers every request with its first token after `FIRST_S` and one more every `EVERY_S`,
and records what it saw. The campaign asks two workers for `RATE` req/s over `DURATION_S` from a set
seed, so the schedule (and the count it asks for) is known before the run.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

from kit import zygote
from kit.campaignlab import Swarm
from kit.procs import SARK, Proc
from kit.sse_server import Reply, scheduled, serve_sse

from protocol.arrivals import arrivals

RATE, DURATION_S, SEED = 40.0, 4.0, 24
FIRST_S, EVERY_S = 0.05, 0.005
TEXTS = ["The", " quick", " brown", " fox"]


def _campaign(tmp_path: Path, url: str, *, duration_s: float = DURATION_S, rate: float = RATE) -> Path:
    endpoint = {"url": url, "model": "scripted"}
    generate = {"prompts": "builtin:summaries", "max_new_tokens": 4, "request_rate": rate}
    job = {"endpoint": endpoint, "generate": {**generate, "duration_s": duration_s}}
    path = tmp_path / "fleet.yaml"
    path.write_text(json.dumps({"name": "fleet", "jobs": [{**job, "fleet": {"workers": 2, "seed": SEED}}]}))
    return path


def _submit(campaign: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    args = [*SARK, "submit", str(campaign), "--json", "--workers", "2", "--wait-peers", "2"]
    args += ["--out", str(tmp_path / "out"), "--data-dir", str(tmp_path / "data")]
    args += ["--allow-http", "--allow-network", "127.0.0.0/8"]
    env = {**os.environ, "SARK_CALIBRATE": "false"}
    return zygote.run(args, capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)


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
    # the stub's TTFT: never before its first token, and the first token's time, not the answer's (each
    # answer's last token comes (tokens - 1) x EVERY_S after its first at the least); bounds a busy
    # machine cannot cross (beside kit.load 4 the median was 85.6 ms, over the 50 + 30 ms once asserted)
    ttft, e2e = float(merged["TtftMsMedian"]), float(merged["E2eMsMedian"])
    assert ttft >= FIRST_S * 1e3
    assert e2e - ttft >= (len(TEXTS) - 1) * EVERY_S * 1e3
    assert float(merged["ScheduleLagMsP99"]) >= 0
    assert merged["ClientSaturated"] in ("True", "False")
    assert float(merged["ClientCpuMaxPct"]) >= 0

    assert len(members) == 2
    assert len({r["WorkerPeerId"] for r in members}) == 2
    assert all(r["Status"] == "Complete" and r["FleetSize"] == "2" for r in members)
    assert sum(int(r["Requests"]) for r in members) == int(merged["Requests"]) == len(seen)
    assert sorted(merged["WorkerPeerId"].split(";")) == sorted(r["WorkerPeerId"] for r in members)


def _wait(proc: Proc, kind: str, timeout: float = 120.0, **match: Any) -> dict[str, Any]:
    while True:
        event = proc.wait_event(kind, timeout)
        if all(event.get(k) == v for k, v in match.items()):
            return event


def test_a_member_killed_mid_run_is_named_and_the_rest_is_kept(swarm2: Swarm, tmp_path: Path) -> None:
    started = threading.Event()
    count = itertools.count(1)

    def script(body: dict[str, object], attempt: int) -> Reply:
        if next(count) == 20:  # a fifth of the way into the run: both members are sending
            started.set()
        return scheduled(TEXTS, first_s=FIRST_S, every_s=EVERY_S, usage=(9, 4))

    with serve_sse(script) as server:
        campaign = _campaign(tmp_path, server.url, duration_s=5.0, rate=20.0)
        submitter = swarm2.start_submit(
            "submit", str(campaign), "--wait-peers", "2", "--out", str(tmp_path / "out")
        )
        member = _wait(submitter, "fleet_member")
        victim = member["peer"]
        assert member["bound_s"] is not None  # the clock probe over /sark/clock/1.0.0 was answered
        assert abs(member["offset_s"]) <= member["bound_s"] + 0.005  # one machine: one clock
        assert started.wait(60), "the stub never saw the run's requests"
        swarm2.lab.kill(swarm2.workers[victim])
        assert _wait(submitter, "lapsed")["peer"] == victim
        outcome = _wait(submitter, "outcome", timeout=120)
        seen = len([s for s in server.seen if s.path.endswith("/chat/completions")])
    assert submitter.popen.wait(timeout=30) == 1  # a member failed: the campaign says so
    rows = _rows(outcome)
    [merged] = [r for r in rows if r["ComputeUnits"] == "Endpoint (fleet)"]
    [kept] = [r for r in rows if r["ComputeUnits"] == "Endpoint (black-box)" and r["Status"] == "Complete"]
    [lost] = [r for r in rows if r["WorkerPeerId"] == victim and r["ComputeUnits"] != "Endpoint (fleet)"]
    assert lost["Status"] == "Failed"
    assert merged["Status"] == "Complete"
    assert victim in merged["FleetLost"]
    assert victim in merged["Detail"]
    assert merged["FleetSize"] == "2"
    assert merged["WorkerPeerId"] == kept["WorkerPeerId"] != victim
    assert merged["Requests"] == kept["Requests"]  # what the survivor measured, all of it
    assert 0 < int(merged["Requests"]) < seen  # the victim's sent requests died with it
