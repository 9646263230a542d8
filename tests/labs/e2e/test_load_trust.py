"""Issue 29 for a lone worker's load: its records are checked against the load the submitter gave it.

One campaign, one endpoint job a worker, against a stub server that notes each request's model (each job
names its own). The workers are real `join`s: an honest one and four liars (tests/kit/loadliar.py) that
send their requests as an honest client does, then sign self-consistent records that lie. Two run an open
loop (`request_rate`) whose seed the submitter drew for the offer (`arrival_seed`), so it knows every
planned send: one says each request was planned when it was sent (a schedule of its own, no lag), one
keeps half its records and says no planned send was left unsent (a hidden backlog). One runs a closed
loop of two slots and adds a copy of each record a millisecond later (the first overlap makes three in
flight); another adds thousands of zero-length records at one instant (they never overlap: physics
refutes them, `scheduler.verification.sendcheck.physics_problems`). The honest worker and the first liar
also search for the request rate the server sustains: the submitter drew the search's seed too, and each
level is an open loop at its rate from that seed, so the liar's own schedule is refused at its first
level. Under `submit` and under `serve` (which answers `/api/health` throughout), every lie is refused
naming the field, the honest rows are Complete and count what the server saw of their jobs, and all three
files are written.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kit.campaignlab import ROOT, CampaignLab, Health, Swarm, campaign_end, submitter_id
from kit.sse_server import scheduled, serve_sse

LOADLIAR = ROOT / "tests" / "kit" / "loadliar.py"
RATE, DURATION_S = 20.0, 2.0
ROLES = ("honest", "reschedule", "hide", "crowd", "zero")
CLOSED = ("crowd", "zero")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Swarm, dict[str, str]]]:
    root = tmp_path_factory.mktemp("openloop")
    lab = CampaignLab(root, record_ttl=30.0)
    try:
        submitter_dir = root / "submitter"
        gate = lab.gate().ready["addrs"][0]
        me = submitter_id(submitter_dir)
        liar = [sys.executable, str(LOADLIAR)]
        procs = {
            role: lab.real_worker(
                role, [gate], me, wait=False, program=None if role == "honest" else [*liar, role]
            )
            for role in ROLES
        }
        for proc in procs.values():
            proc.ready = proc.wait_event("ready", 90)
        ids = {role: p.ready["peer_id"] for role, p in procs.items()}
        yield Swarm(lab, gate, {p.ready["peer_id"]: p for p in procs.values()}, submitter_dir, root), ids
    finally:
        lab.close()


def _body(url: str, ids: dict[str, str]) -> dict[str, Any]:
    load = {"prompts": "builtin:summaries", "max_new_tokens": 4, "duration_s": DURATION_S}
    jobs = [
        {
            "endpoint": {"url": url, "model": role},
            "generate": {**load, **({"concurrency": 2} if role in CLOSED else {"request_rate": RATE})},
            "require": {"peers": [ids[role]]},
        }
        for role in ROLES
    ]
    search = {
        "slo": {"ttft_ms": 1000},
        "rate": {"min": 4, "max": 8},
        "level_s": 1.0,
        "rate_resolution_pct": 50,
    }
    for role in ("honest", "reschedule"):  # a rate search: each level's sends from the offer's seed
        jobs.append(
            {
                "endpoint": {"url": url, "model": f"search-{role}"},
                "generate": {"prompts": "builtin:summaries", "max_new_tokens": 4, "capacity": search},
                "require": {"peers": [ids[role]]},
            }
        )
    return {"name": "open-loop-trust", "jobs": jobs}


def _server() -> Any:
    return serve_sse(
        lambda body, attempt: scheduled(["The", " fox"], first_s=0.02, every_s=0.005, usage=(9, 2))
    )


def _seen(server: Any) -> Counter[str]:
    """The server's own count of the requests of each job (each names its role as its model)."""
    return Counter(str(s.body.get("model")) for s in server.seen if s.path.endswith("/chat/completions"))


def test_submit_refuses_each_lie_about_the_load(lab: tuple[Swarm, dict[str, str]]) -> None:
    swarm, ids = lab
    out = swarm.root / "submit"
    out.mkdir()
    with _server() as server:
        campaign = out / "open.yaml"
        campaign.write_text(json.dumps(_body(server.url, ids)))
        done = swarm.run(
            "submit", str(campaign), "--json", "--wait-peers", str(len(ROLES)), "--out", str(out), timeout=300
        )
        seen = _seen(server)
    assert done.returncode == 1, done.stderr[-3000:]  # the liars' tasks failed
    _check(json.loads(done.stdout.strip().splitlines()[-1])["files"], ids, seen)


def test_serve_refuses_them_answering_throughout(lab: tuple[Swarm, dict[str, str]]) -> None:
    swarm, ids = lab
    out = swarm.root / "serve"
    network = ["--allow-http", "--allow-network", "127.0.0.0/8", "--refresh", "0.5"]
    where = ["--data-dir", str(swarm.submitter_dir), "--gate", swarm.gate, "--out", str(out)]
    served = swarm.lab.submitter(["serve", "--http", "127.0.0.1:0", "--events", *where, *network])
    api = f"{served.wait_event('http', 90)['url']}/api"
    while served.wait_event("peers", 90)["count"] < len(ROLES):
        pass
    health = Health(api)
    try:
        with _server() as server:
            created = httpx.post(f"{api}/campaigns", json=_body(server.url, ids), timeout=60)
            assert created.status_code == 201, created.text
            ended = campaign_end(served, created.json()["campaign_id"], 300)
            seen = _seen(server)
        after = httpx.get(f"{api}/health", timeout=30)
    finally:
        health.stop()
    assert served.popen.poll() is None, served.log_excerpt()
    assert (after.status_code, health.failed) == (200, [])
    assert health.asked > 0
    assert ended["event"] == "campaign_done", ended
    _check(ended["files"], ids, seen)


def _check(files: dict[str, str], ids: dict[str, str], seen: Counter[str]) -> None:
    assert all(Path(files[kind]).is_file() for kind in ("csv", "json", "html")), files
    with open(files["csv"], newline="") as f:
        every = list(csv.DictReader(f))
    rows = {r["FileName"]: r for r in every if r["CapacityRow"] != "level"}  # a job's model names it
    levels = [r for r in every if r["CapacityRow"] == "level"]
    assert rows["search-honest"]["Status"] == "Complete", rows["search-honest"]["Detail"]
    assert len(levels) >= 2
    assert all(r["FileName"] == "search-honest" for r in levels)
    assert seen["search-honest"] == sum(int(r["Requests"]) for r in levels)
    searched = rows["search-reschedule"]
    assert (searched["Status"], searched["FailureReason"]) == ("Failed", "invalid"), searched
    lied = "rejected result: capacity.levels[0].generation.records[0].planned_s: "
    assert lied in searched["Detail"]
    assert "not a planned send of the level's schedule" in searched["Detail"]
    assert seen["search-reschedule"] > 0

    honest = rows["honest"]
    assert honest["Status"] == "Complete", honest["Detail"]
    assert int(honest["Requests"]) == seen["honest"] > 0  # the server's own count of the honest job
    assert int(honest["Requests"]) + int(honest["Unsent"]) > 0.5 * RATE * DURATION_S

    rescheduled = rows["reschedule"]
    assert (rescheduled["Status"], rescheduled["FailureReason"]) == ("Failed", "invalid"), rescheduled
    assert "rejected result: generation.records[0].planned_s: " in rescheduled["Detail"], rescheduled
    assert "not a planned send of the schedule" in rescheduled["Detail"]

    hidden = rows["hide"]
    assert (hidden["Status"], hidden["FailureReason"]) == ("Failed", "invalid"), hidden
    assert "rejected result: generation.unsent: the worker says 0, the schedule leaves " in hidden["Detail"]
    crowded = rows["crowd"]
    assert (crowded["Status"], crowded["FailureReason"]) == ("Failed", "invalid"), crowded
    assert "rejected result: generation.records: 3 requests in flight at " in crowded["Detail"], crowded
    assert "more than the 2 slots of its closed loop" in crowded["Detail"]
    zero = rows["zero"]
    assert (zero["Status"], zero["FailureReason"]) == ("Failed", "invalid"), zero
    assert "rejected result: generation.records[" in zero["Detail"], zero
    assert "].e2e_ms: 0.0 ms, a request that succeeded in no time" in zero["Detail"], zero
    assert zero["Requests"] == ""  # none of its records is counted anywhere
    assert all(seen[role] > 0 for role in ROLES)  # every liar sent for real; only its records lied
