"""Issue 29: a fleet's merged row counts only verified, dealt requests, and a member that leaves is lost.

One campaign, `fleet: 4` at a set rate from a set seed, against a stub server that notes each request's
arrival. The members are real `join` workers: an honest one, one that leaves mid-run (SIGTERM: it hands
its lease back), and two liars (tests/kit/loadliar.py) that send their dealt requests and then sign
self-consistent records that lie: one adds thousands it never sent, one repeats its own. Each prompt
names its place k in the schedule, so the server can tell whose request each one was (member k mod 4)
and when it was due (the start instant plus arrival k).
"""

from __future__ import annotations

import csv
import json
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kit.campaignlab import ROOT, CampaignLab, Swarm, submitter_id
from kit.procs import Proc
from kit.sse_server import Reply, scheduled, serve_sse

from protocol.arrivals import arrivals
from scheduler.verification import LATE_SLACK_S

LOADLIAR = ROOT / "tests" / "kit" / "loadliar.py"
RATE, DURATION_S, SEED, SIZE = 10.0, 8.0, 29, 4
TEXTS = ["The", " quick", " brown", " fox"]
PLACE = re.compile(rb"schedule place (\d+)\b")


def _campaign(root: Path, url: str) -> Path:
    prompts = root / "places.jsonl"
    lines = (
        json.dumps({"prompt": f"schedule place {k}: say four words.", "id": f"p{k}"}) for k in range(400)
    )
    prompts.write_text("\n".join(lines) + "\n")
    generate = {"prompts": prompts.name, "max_new_tokens": 4, "request_rate": RATE, "duration_s": DURATION_S}
    job = {"endpoint": {"url": url, "model": "scripted"}, "generate": generate}
    path = root / "fleet.yaml"
    body = {"name": "fleet-trust", "jobs": [{**job, "fleet": {"workers": SIZE, "seed": SEED}}]}
    path.write_text(json.dumps(body))
    return path


def _members(submitter: Proc) -> dict[str, dict[str, Any]]:
    """Each member's `fleet_member` event by peer id (member index, start instant, clock bound)."""
    members: dict[str, dict[str, Any]] = {}
    while len(members) < SIZE:
        event = submitter.wait_event("fleet_member", 120)
        members[event["peer"]] = event
    return members


def _start(lab: CampaignLab, gate: str, me: str) -> dict[str, Proc]:
    """The four members by role, started at once, each waited for."""
    programs = {
        "honest": None,
        "leaver": None,
        "fabricate": [sys.executable, str(LOADLIAR), "fabricate"],
        "duplicate": [sys.executable, str(LOADLIAR), "duplicate"],
    }
    procs = {role: lab.real_worker(role, [gate], me, wait=False, program=p) for role, p in programs.items()}
    for proc in procs.values():
        proc.ready = proc.wait_event("ready", 90)
    return procs


def test_a_fleets_merged_row_counts_only_verified_dealt_requests(tmp_path: Path) -> None:
    arrived: list[tuple[float, int]] = []  # (wall time, schedule place) of each request the server saw
    lock = threading.Lock()

    def script(body: dict[str, object], attempt: int) -> Reply:
        found = PLACE.search(json.dumps(body).encode())
        if found:  # a request of the schedule (not a probe of the server)
            with lock:
                arrived.append((time.time(), int(found[1])))
        return scheduled(TEXTS, first_s=0.05, every_s=0.005, usage=(9, 4))

    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        submitter_dir = tmp_path / "submitter"
        gate = lab.gate().ready["addrs"][0]
        procs = _start(lab, gate, submitter_id(submitter_dir))
        peers = {role: p.ready["peer_id"] for role, p in procs.items()}
        swarm = Swarm(lab, gate, {p.ready["peer_id"]: p for p in procs.values()}, submitter_dir, tmp_path)
        with serve_sse(script) as server:
            submitter = swarm.start_submit(
                "submit", str(_campaign(tmp_path, server.url)), "--wait-peers", str(SIZE),
                "--out", str(tmp_path / "out"),
            )  # fmt: skip
            members = _members(submitter)
            leaver = members[peers["leaver"]]["member"]
            start_at = members[peers["honest"]]["start_at"]
            while sum(1 for _, k in list(arrived) if k % SIZE == leaver) < 5:  # the leaver is sending
                assert submitter.popen.poll() is None, "the submitter ended before the leaver sent"
                time.sleep(0.05)
            left_at = lab_sigterm(procs["leaver"])
            assert submitter.wait_event("released", 60)["peer"] == peers["leaver"]
            outcome = submitter.wait_event("outcome", 180)
            completions = sum(1 for s in server.seen if s.path.endswith("/chat/completions"))
        assert submitter.popen.wait(timeout=60) == 1  # members failed: the campaign says so
    finally:
        lab.close()
    assert completions == len(arrived)  # every request the server answered carried its place
    _check(outcome, members, peers, arrived, start_at, left_at)


def lab_sigterm(proc: Proc) -> float:
    """SIGTERM the worker (a graceful leave); the wall time it was sent."""
    now = time.time()
    proc.popen.terminate()
    return now


def _check(
    outcome: dict[str, Any],
    members: dict[str, dict[str, Any]],
    peers: dict[str, str],
    arrived: list[tuple[float, int]],
    start_at: float,
    left_at: float,
) -> None:
    assert all(Path(outcome["files"][kind]).exists() for kind in ("csv", "json", "html"))
    with open(outcome["files"]["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    [merged] = [r for r in rows if r["ComputeUnits"] == "Endpoint (fleet)"]
    by_peer = {r["WorkerPeerId"]: r for r in rows if r["ComputeUnits"] != "Endpoint (fleet)"}
    index = {role: members[peer]["member"] for role, peer in peers.items()}

    fabricated, duplicated = by_peer[peers["fabricate"]], by_peer[peers["duplicate"]]
    assert (fabricated["Status"], fabricated["FailureReason"]) == ("Failed", "invalid")
    assert re.search(r"generation\.records: \d{4} records, more than the \d+ sends", fabricated["Detail"])
    assert (duplicated["Status"], duplicated["FailureReason"]) == ("Failed", "invalid")
    assert re.search(
        r"generation\.records\[\d+\]\.planned_s: [\d.e-]+ s repeats records\[0\]", duplicated["Detail"]
    )
    left = by_peer[peers["leaver"]]
    assert (left["Status"], left["FailureReason"]) == ("Failed", "released")
    assert "not replaced" in left["Detail"]
    assert by_peer[peers["honest"]]["Status"] == "Complete"

    assert merged["Status"] == "Complete"
    assert merged["WorkerPeerId"] == peers["honest"]
    assert all(peers[role] in merged["FleetLost"] for role in ("leaver", "fabricate", "duplicate"))
    places = [k for _, k in arrived]
    assert len(places) == len(set(places))  # no request sent twice: no replay
    honest_seen = sum(1 for k in places if k % SIZE == index["honest"])
    assert int(merged["Requests"]) == honest_seen  # the server's own count of what the row counts
    assert int(merged["Requests"]) == int(by_peer[peers["honest"]]["Requests"])
    assert float(merged["ScheduleLagMsP99"]) < LATE_SLACK_S * 1e3

    schedule = arrivals(RATE, DURATION_S, SEED)
    assert len(places) <= len(schedule)  # the server never saw more than the schedule asked
    for when, k in arrived:  # each request came at its own planned time: no burst beyond the schedule
        assert k < len(schedule)
        assert -0.05 <= when - (start_at + schedule[k]) <= LATE_SLACK_S, (k, when - start_at, schedule[k])
    assert not [k for when, k in arrived if k % SIZE == index["leaver"] and when > left_at + 1.0]  # nobody
    # sent the leaver's share after it left: it was not replaced
