"""Issue 50: a closed-loop fleet member's records of 0.5 us are refused by the floor the submitter measured.

One campaign, `fleet: 3` closed loops of two slots for `DURATION_S`, against a stub server whose every
first token comes after `FIRST_S`. The members are real `join` workers: two honest, one liar
(tests/kit/loadliar.py `tiny`) that sends its share as an honest client does, then signs 4,900 more
records of 0.5 us at the instant its last real one started: above zero, never overlapping, under half
its own loopback round trip less 1 ms, so physics alone merged them (the issue: 5,015 requests at TTFT
0.000 ms while the server saw 229). The submitter probes the server itself before the members send
(`drivers.endpoint.floorprobe`, marked `user: sark-floor-probe`, kept apart by the stub): the liar's
row is Failed `invalid` naming its first record under that floor, the floor and the member; the merged
row is Complete from the honest members alone, names the liar lost, and counts no more requests than
the server saw. The same liar alone, a closed loop of its own beside an honest one's (`concurrency`,
`duration_s`, no fleet): its offer waits for the submitter's probe, and it is refused the same way.

The fleet's probe meets a busy server: the stub answers the job's first probe in `BUSY_S`, four times
its load's first token (the weather's case, 2026-11-27: a probe's quickest 106 ms at load 13, an
honest member's record 36 ms, refused). The first result with a record under that floor has the
server probed again at its arrival (`FloorBook.again`), the floor becomes the least of the probes,
and the honest members are accepted; the liar is refused by the lowered floor, which its detail names.
"""

from __future__ import annotations

import csv
import itertools
import json
import queue
import re
import sys
from pathlib import Path
from typing import Any

from kit.campaignlab import ROOT, CampaignLab, Swarm, submitter_id
from kit.procs import Proc
from kit.sse_server import Reply, scheduled, serve_sse

from drivers.endpoint.floorprobe import FLOOR_SAMPLES, PROBE_USER
from scheduler.verification import FLOOR_SHARE

LOADLIAR = ROOT / "tests" / "kit" / "loadliar.py"
DURATION_S, SLOTS, SIZE = 3.0, 2, 3
FIRST_S, EVERY_S = 0.05, 0.005
BUSY_S = 4 * FIRST_S  # the job's first probe: a floor of 99.5 ms, twice the honest records' time
TEXTS = ["The", " quick", " brown", " fox"]
ROLES = ("honest-a", "honest-b", "tiny")


def _campaign(root: Path, url: str) -> Path:
    generate = {
        "prompts": "builtin:summaries",
        "max_new_tokens": 4,
        "concurrency": SLOTS,
        "duration_s": DURATION_S,
    }
    job = {"endpoint": {"url": url, "model": "scripted"}, "generate": generate, "fleet": SIZE}
    path = root / "floor.yaml"
    path.write_text(json.dumps({"name": "fleet-floor", "jobs": [job]}))
    return path


def _events(submitter: Proc, timeout: float) -> dict[str, list[dict[str, Any]]]:
    """Every event the submitter printed, by kind, up to its outcome."""
    kinds: dict[str, list[dict[str, Any]]] = {}
    while "outcome" not in kinds:
        try:
            event = submitter.events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no outcome within {timeout} s\n{submitter.log_excerpt()}") from None
        kinds.setdefault(str(event.get("event")), []).append(event)
    return kinds


def test_a_members_records_under_the_servers_floor_are_refused_and_not_merged(tmp_path: Path) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        submitter_dir = tmp_path / "submitter"
        gate = lab.gate().ready["addrs"][0]
        me = submitter_id(submitter_dir)
        liar = [sys.executable, str(LOADLIAR), "tiny"]
        procs = {
            role: lab.real_worker(role, [gate], me, wait=False, program=liar if role == "tiny" else None)
            for role in ROLES
        }
        for proc in procs.values():
            proc.ready = proc.wait_event("ready", 90)
        peers = {role: p.ready["peer_id"] for role, p in procs.items()}
        swarm = Swarm(lab, gate, {p.ready["peer_id"]: p for p in procs.values()}, submitter_dir, tmp_path)
        probed = itertools.count()

        def script(body: dict[str, object], attempt: int) -> Reply:
            busy = body.get("user") == PROBE_USER and next(probed) < FLOOR_SAMPLES
            return scheduled(TEXTS, first_s=BUSY_S if busy else FIRST_S, every_s=EVERY_S, usage=(9, 4))

        with serve_sse(script) as server:
            submitter = swarm.start_submit(
                "submit", str(_campaign(tmp_path, server.url)), "--wait-peers", str(SIZE),
                "--out", str(tmp_path / "out"),
            )  # fmt: skip
            events = _events(submitter, 180)
            seen = sum(1 for s in server.seen if s.path.endswith("/chat/completions"))
            probes = len(server.probes)
        assert submitter.popen.wait(timeout=60) == 1  # a member failed: the campaign says so
    finally:
        lab.close()
    first, *again = events["server_floor"]
    assert first["read"] == "before"
    assert len(first["ttft_ms"]) == FLOOR_SAMPLES
    assert min(first["ttft_ms"]) >= BUSY_S * 1e3  # the busy moment, seen from the submitter
    assert first["floor_ms"] > FIRST_S * 1e3  # over the honest records' time: alone, it refused them
    assert again  # the first result under it had the server probed again
    assert {e["read"] for e in again} == {"again"}
    assert probes == FLOOR_SAMPLES * (1 + len(again))
    lowered = min(e["floor_ms"] for e in again if e["floor_ms"] is not None)
    assert FLOOR_SHARE * (FIRST_S * 1e3 - 5.0) <= lowered < FIRST_S * 1e3
    _check(events["outcome"][0], peers, seen, lowered)


def _check(outcome: dict[str, Any], peers: dict[str, str], seen: int, floor_ms: float) -> None:
    with open(outcome["files"]["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    [merged] = [r for r in rows if r["ComputeUnits"] == "Endpoint (fleet)"]
    by_peer = {r["WorkerPeerId"]: r for r in rows if r["ComputeUnits"] != "Endpoint (fleet)"}

    tiny = by_peer[peers["tiny"]]
    assert (tiny["Status"], tiny["FailureReason"]) == ("Failed", "invalid")
    found = re.search(
        r"generation\.records\[\d+\]\.ttft_ms: 0\.0004 ms, under the server's floor of ([\d.]+) ms "
        r"\(.*measured to the server itself in 5 requests at a result's arrival; the least of the job's \d "
        r"probes \(the floor before: [\d.]+ ms\)\) \(fleet member \d of 3\)",
        tiny["Detail"],
    )
    assert found, tiny["Detail"]
    assert abs(float(found[1]) - floor_ms) < 0.01
    honest = [by_peer[peers[role]] for role in ("honest-a", "honest-b")]
    assert [r["Status"] for r in honest] == ["Complete", "Complete"]

    assert merged["Status"] == "Complete"
    assert sorted(merged["WorkerPeerId"].split(";")) == sorted(peers[r] for r in ("honest-a", "honest-b"))
    assert peers["tiny"] in merged["FleetLost"]
    assert int(merged["Requests"]) == sum(int(r["Requests"]) for r in honest)
    assert int(merged["Requests"]) <= seen  # the server's own count bounds the row
    assert float(merged["TtftMsMedian"]) >= FIRST_S * 1e3


def test_a_lone_closed_loops_records_under_the_servers_floor_are_refused(tmp_path: Path) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        submitter_dir = tmp_path / "submitter"
        gate = lab.gate().ready["addrs"][0]
        me = submitter_id(submitter_dir)
        liar = [sys.executable, str(LOADLIAR), "tiny"]
        procs = {
            role: lab.real_worker(role, [gate], me, wait=False, program=liar if role == "tiny" else None)
            for role in ("honest", "tiny")
        }
        for proc in procs.values():
            proc.ready = proc.wait_event("ready", 90)
        peers = {role: p.ready["peer_id"] for role, p in procs.items()}
        swarm = Swarm(lab, gate, {p.ready["peer_id"]: p for p in procs.values()}, submitter_dir, tmp_path)
        script = lambda body, attempt: scheduled(TEXTS, first_s=FIRST_S, every_s=EVERY_S, usage=(9, 4))  # noqa: E731
        with serve_sse(script) as server:
            load = {
                "prompts": "builtin:summaries",
                "max_new_tokens": 4,
                "concurrency": SLOTS,
                "duration_s": 2.0,
            }
            jobs = [
                {
                    "endpoint": {"url": server.url, "model": "scripted"},
                    "generate": load,
                    "require": {"peers": [peers[r]]},
                }
                for r in ("honest", "tiny")
            ]
            campaign = tmp_path / "lone.yaml"
            campaign.write_text(json.dumps({"name": "lone-floor", "jobs": jobs}))
            submitter = swarm.start_submit(
                "submit", str(campaign), "--wait-peers", "2", "--out", str(tmp_path / "out")
            )
            events = _events(submitter, 180)
            seen = sum(1 for s in server.seen if s.path.endswith("/chat/completions"))
        assert submitter.popen.wait(timeout=60) == 1
    finally:
        lab.close()
    assert sorted(e["job"] for e in events["server_floor"] if e["read"] == "before") == [0, 1]  # one a job
    with open(events["outcome"][0]["files"]["csv"], newline="") as f:
        rows = {r["WorkerPeerId"]: r for r in csv.DictReader(f)}
    honest, tiny = rows[peers["honest"]], rows[peers["tiny"]]
    assert honest["Status"] == "Complete"
    assert float(honest["TtftMsMedian"]) >= FIRST_S * 1e3
    assert int(honest["Requests"]) <= seen
    assert (tiny["Status"], tiny["FailureReason"]) == ("Failed", "invalid")
    assert re.search(
        r"generation\.records\[\d+\]\.ttft_ms: 0\.0004 ms, under the server's floor of", tiny["Detail"]
    )
    assert "fleet member" not in tiny["Detail"]
