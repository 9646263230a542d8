"""Issue 5 acceptance 3: a worker killed mid-measurement, and a submitter killed mid-campaign.

The worker-killing test has a swarm of its own; the tests that kill only the submitter (or cancel)
share one gate and two workers (`kept2`), each with a submitter folder of its own.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit import zygote
from kit.campaignlab import MODEL, Swarm, start_swarm, write_campaign
from kit.procs import SARK, Proc
from kit.sizing import timed_job
from kit.sse_server import scheduled, serve_sse

from node.config import NodeConfig

LONG_JOB = timed_job(3.0, 1500)
"""Still measuring when a process is killed at its first heartbeat (seconds of runs left even when
idle, 1,500 runs at least: `lab.sizing`); the worker that takes over re-runs all of it, so
longer only costs the lab CPU."""


@pytest.fixture(scope="module")
def workers2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Swarm]:
    """A gate and two workers kept by the tests that kill only the submitter, never a worker."""
    swarm = start_swarm(tmp_path_factory.mktemp("workers2"), 2)
    try:
        yield swarm
    finally:
        swarm.lab.close()


@pytest.fixture
def kept2(workers2: Swarm, tmp_path: Path) -> Swarm:
    """The kept workers for one test: a submitter folder of its own (its own campaign store, the
    identity the workers allow copied in), and the workers' earlier events dropped."""
    data = tmp_path / "submitter"
    data.mkdir()
    shutil.copy2(NodeConfig(data_dir=workers2.submitter_dir).key_file(), NodeConfig(data_dir=data).key_file())
    workers2.drain()
    return dataclasses.replace(workers2, submitter_dir=data)


def _wait(proc: Proc, kind: str, timeout: float = 120.0, **match: Any) -> dict[str, Any]:
    while True:
        event = proc.wait_event(kind, timeout)
        if all(event.get(k) == v for k, v in match.items()):
            return event


def _rows(path: str) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_worker_killed_mid_measurement_is_redispatched(swarm2: Swarm, tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "c.yaml", {
        "model": {"path": MODEL.name}, "jobs": [{"compute_unit": "CPU (ONNX)", "devices": 1, **LONG_JOB}],
    })  # fmt: skip
    submitter = swarm2.start_submit(
        "submit", str(campaign), "--wait-peers", "2", "--out", str(tmp_path / "out")
    )
    measuring = _wait(submitter, "heartbeat", phase="measuring")
    victim = measuring["peer"]
    swarm2.lab.kill(swarm2.workers[victim])

    lapsed = _wait(submitter, "lapsed")
    assert lapsed["peer"] == victim
    outcome = _wait(submitter, "outcome", timeout=180)
    assert outcome["accepted"] == 1
    rows = _rows(outcome["files"]["csv"])
    assert len(rows) == 1  # exactly one result for the one task
    assert rows[0]["Status"] == "Complete"
    assert rows[0]["WorkerPeerId"] != victim
    assert submitter.popen.wait(timeout=30) == 0


def test_submitter_killed_and_resumed_loses_nothing(kept2: Swarm, tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "c.yaml", {
        "model": {"path": MODEL.name}, "jobs": [{"compute_unit": "CPU (ONNX)", "devices": "all", **LONG_JOB}],
    })  # fmt: skip
    submitter = kept2.start_submit(
        "submit", str(campaign), "--wait-peers", "2", "--out", str(tmp_path / "out")
    )
    campaign_id = _wait(submitter, "campaign")["campaign"]
    _wait(submitter, "committed")
    _wait(submitter, "committed")
    kept2.lab.kill(submitter)

    done = kept2.run("submit", "--resume", campaign_id, "--json", "--wait-peers", "2")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert [t["state"] for t in outcome["tasks"]] == ["done", "done"], [
        (t["detail"], t["attempts"]) for t in outcome["tasks"]
    ]
    rows = _rows(outcome["files"]["csv"])
    assert sorted(r["Status"] for r in rows) == ["Complete", "Complete"]
    assert {r["WorkerPeerId"] for r in rows} == set(kept2.workers)
    assert len({r["JobId"] for r in rows}) == 2


def test_cancel_from_another_process_stops_the_tasks_on_their_workers(kept2: Swarm, tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "c.yaml", {
        "model": {"path": MODEL.name},
        "jobs": [{"compute_unit": "CPU (ONNX)", "devices": "all", **LONG_JOB, "num_inference_runs": 100_000}],
    })  # fmt: skip
    submitter = kept2.start_submit(
        "submit", str(campaign), "--wait-peers", "2", "--out", str(tmp_path / "out")
    )
    campaign_id = _wait(submitter, "campaign")["campaign"]
    for proc in kept2.workers.values():  # both measure (a task not yet dispatched has none to stop)
        _wait(proc, "measuring")
    done = zygote.run(
        [*SARK, "cancel", campaign_id, "--data-dir", str(kept2.submitter_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr

    outcome = _wait(submitter, "outcome", timeout=60)
    rows = _rows(outcome["files"]["csv"])
    assert sorted(r["Status"] for r in rows) == ["Cancelled", "Cancelled"]
    for proc in kept2.workers.values():  # each worker stopped its measurement: a cancelled outcome
        _wait(proc, "outcome", timeout=30, reason="cancelled")
    assert submitter.popen.wait(timeout=30) == 1
    for args in (["status", "--json"], ["status", campaign_id, "--json"]):  # the list, and the campaign
        argv = [*SARK, *args, "--data-dir", str(kept2.submitter_dir)]
        shown = zygote.run(argv, capture_output=True, text=True, timeout=60)
        document = json.loads(shown.stdout)
        assert document.get("campaigns", [document])[0]["status"] == "cancelled", shown.stdout


def test_a_resumed_fleet_checks_its_reclaimed_members_against_the_deals_they_signed(
    kept2: Swarm, tmp_path: Path
) -> None:
    """A fleet of two whose submitter is killed once both members run their deals: `--resume` reclaims
    them and checks their records against the deals kept in the store (before, a reclaimed member was
    refused `internal`, its deal unknown, and the fleet lost it). Killed at the submitter's "committed"
    instead, before the dispatch, a member's lease is kept only for its silence (`lease_ttl_s`, 10 s):
    a resume slower than that on a busy machine (4 of 5 beside `kit.load 4`) finds none, and the member
    is lost, as a fleet member must be once its planned sends passed."""
    script = lambda body, attempt: scheduled(["The", " fox"], first_s=0.02, every_s=0.005)  # noqa: E731
    allow = ("--allow-http", "--allow-network", "127.0.0.0/8")
    with serve_sse(script) as server:
        generate = {"prompts": "builtin:summaries", "max_new_tokens": 2, "request_rate": 10, "duration_s": 6}
        job = {"endpoint": {"url": server.url, "model": "scripted"}, "generate": generate}
        campaign = tmp_path / "fleet.yaml"
        campaign.write_text(
            json.dumps({"name": "fleet", "jobs": [{**job, "fleet": {"workers": 2, "seed": 3}}]})
        )
        submitter = kept2.start_submit("submit", str(campaign), "--wait-peers", "2", *allow)
        campaign_id = _wait(submitter, "campaign")["campaign"]
        for proc in kept2.workers.values():  # dispatched: each runs its deal whatever the submitter does
            _wait(proc, "run")
        kept2.lab.kill(submitter)
        done = kept2.run("submit", "--resume", campaign_id, "--json", "--wait-peers", "2", *allow)
        sent = len([s for s in server.seen if s.path.endswith("/chat/completions")])
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0, (
        done.stderr[-3000:],
        [(t["detail"], t["reasons"]) for t in outcome["tasks"]],
    )
    assert [t["state"] for t in outcome["tasks"]] == ["done", "done"], [
        (t["detail"], t["reasons"]) for t in outcome["tasks"]
    ]
    rows = _rows(outcome["files"]["csv"])
    [merged] = [r for r in rows if r["ComputeUnits"] == "Endpoint (fleet)"]
    assert (merged["Status"], merged["FleetLost"]) == ("Complete", "")
    assert int(merged["Requests"]) == sent  # every dealt request the server saw, verified
