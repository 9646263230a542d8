"""Issue 6 trust against real worker processes on loopback: a submitter the worker does not allow,
hand-made signed offers over a real Noise connection, and a hostile model URL with a canary.

The hostile-URL table itself (>= 20 spellings, redirects, schemes, a loopback canary) lives in
tests/unit/node/transfer/test_fetch.py::test_hostile_url_refused_before_any_connection and the endless body in
tests/unit/node/transfer/test_fetch.py::test_endless_body_stops_at_the_cap; here the worker refuses such a URL
as part of a campaign.
"""

from __future__ import annotations

import csv
import hashlib
import http.server
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.campaignlab import MODEL, CampaignLab, submitter_id
from kit.fleet import collect_until
from kit.procs import LOOPBACK, Proc

from node.p2p.host import HostConfig, open_host
from protocol import NEGOTIATE, Commit, Decline, DeclineReason, Offer

from .test_trust import Key, offer


class Canary:
    """A loopback HTTP server that counts every request it gets."""

    def __init__(self) -> None:
        hits: list[str] = []

        class Count(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.hits = hits
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Count)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def canary() -> Iterator[Canary]:
    server = Canary()
    try:
        yield server
    finally:
        server.close()


def _worker(lab: CampaignLab, name: str, gate: str, allow: str, *extra: str) -> Proc:
    """A real worker that may use plain http but no private network (the SSRF rules apply)."""
    args = ["join", "--listen", LOOPBACK, "--data-dir", str(lab.root / name), "--allow", allow]
    args += ["--gate", gate, "--record-ttl", "30", "--no-calibrate", "--allow-http", "--events"]
    args += ["--heartbeat", "0.5", "--lease-ttl", "3", *extra]
    proc = lab._start(name, args)
    proc.ready = proc.wait_event("ready", 60)
    return proc


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[CampaignLab]:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        yield lab
    finally:
        lab.close()


def _campaign(path: Path, model: dict[str, Any]) -> Path:
    job = {"compute_unit": "CPU (ONNX)", "devices": 1, "num_inference_runs": 5, "warmup_runs": 1}
    path.write_text(json.dumps({"model": model, "jobs": [job]}))
    return path


def _submit_args(campaign: Path, gate: str, root: Path) -> list[str]:
    args = ["submit", str(campaign), "--events", "--gate", gate, "--data-dir", str(root / "submitter")]
    return [*args, "--wait-peers", "1", "--out", str(root / "out")]


def _worker_events(proc: Proc) -> list[str]:
    out = []
    while not proc.events.empty():
        out.append(proc.events.get_nowait()["event"])
    return out


def test_a_submitter_the_worker_does_not_allow_is_refused_and_nothing_runs(
    lab: CampaignLab, tmp_path: Path, canary: Canary
) -> None:
    me = submitter_id(tmp_path / "submitter")
    gate = lab.gate().ready["addrs"][0]
    someone_else = submitter_id(tmp_path / "someone-else")
    worker = _worker(lab, "w", gate, someone_else, "--allow-network", "127.0.0.0/8")
    sha = hashlib.sha256(MODEL.read_bytes()).hexdigest()
    campaign = _campaign(tmp_path / "c.yaml", {"url": f"{canary.url}/m.onnx", "sha256": sha})
    sub = lab.submitter(_submit_args(campaign, gate, tmp_path))
    seen = collect_until(sub, "outcome", 120)

    declined = [e for e in seen if e["event"] == "declined"]
    assert declined, [e["event"] for e in seen]
    assert declined[0]["reason"] == "policy"
    assert me in declined[0]["detail"]  # the worker names who it refused
    assert seen[-1]["accepted"] == 0
    assert sub.popen.wait(timeout=30) == 1  # the one task failed: no peer would run it
    results = next((tmp_path / "out").glob("*/results.csv")).read_text()
    [row] = csv.DictReader(results.splitlines())
    assert (row["Status"], row["FailureReason"]) == ("Failed", "policy")
    events = _worker_events(worker)
    assert "declined" in events
    assert not {"committed", "model", "run"} & set(events)  # nothing downloaded or run
    assert canary.hits == []


def test_a_hostile_model_url_fails_its_task_and_the_canary_sees_nothing(
    lab: CampaignLab, tmp_path: Path, canary: Canary
) -> None:
    me = submitter_id(tmp_path / "submitter")
    gate = lab.gate().ready["addrs"][0]
    worker = _worker(lab, "w", gate, me)  # no --allow-network: loopback stays refused
    sha = hashlib.sha256(MODEL.read_bytes()).hexdigest()
    campaign = _campaign(tmp_path / "c.yaml", {"url": f"{canary.url}/m.onnx", "sha256": sha})
    sub = lab.submitter(_submit_args(campaign, gate, tmp_path))
    seen = collect_until(sub, "outcome", 120)

    failed = [e for e in seen if e["event"] == "failed"]
    assert failed, [e["event"] for e in seen]
    assert {e["reason"] for e in failed} == {"url_refused"}
    assert seen[-1]["accepted"] == 0
    outcome = worker.wait_event("outcome", 30)
    assert outcome["reason"] == "url_refused"
    assert canary.hits == []  # refused before any connection


async def test_signed_offers_replayed_expired_or_misdirected_are_refused_by_a_real_worker(
    tmp_path: Path,
) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        me = submitter_id(tmp_path / "submitter")
        gate = lab.gate().ready["addrs"][0]
        worker = _worker(lab, "w", gate, me)
        await _hand_made_offers(tmp_path / "submitter" / "identity.key", me, worker.ready)
        events = _worker_events(worker)
        assert events.count("committed") == 2
        assert events.count("declined") == 4
    finally:
        lab.close()


async def _hand_made_offers(key_file: Path, me: str, ready: dict[str, Any]) -> None:
    worker_id, addrs = ready["peer_id"], tuple(ready["addrs"])
    async with open_host(HostConfig(key_file=key_file, listen=(LOOPBACK,))) as host:
        assert host.peer_id == me  # the submitter's own identity: the worker allows it
        sub = Key(host.private_key, host.peer_id)

        async def ask(message: Offer) -> Any:
            channel = await host.open_channel(worker_id, NEGOTIATE, addrs=addrs, read_timeout=10)
            try:
                await channel.send(message)
                return await channel.receive()
            finally:
                await channel.close()

        good = offer(sub, worker_id)
        assert isinstance(await ask(good), Commit)
        year_nonce = os.urandom(16)
        cases = {
            "replayed": (good, DeclineReason.BAD_OFFER),
            "expired": (offer(sub, worker_id, issued=time.time() - 600), DeclineReason.BAD_OFFER),
            "misdirected": (offer(sub, host.peer_id), DeclineReason.BAD_OFFER),
            "valid for a year": (
                offer(sub, worker_id, task="t2", nonce=year_nonce, lifetime=365 * 86_400),
                DeclineReason.LIFETIME,
            ),
        }
        for case, (message, reason) in cases.items():
            reply = await ask(message)
            assert isinstance(reply, Decline), case
            assert reply.reason == reason, (case, reply.detail)
        # the year-long offer's nonce was never stored: the same nonce in a sane offer commits
        assert isinstance(await ask(offer(sub, worker_id, task="t3", nonce=year_nonce)), Commit)
