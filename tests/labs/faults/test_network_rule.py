"""Issue 38, scope 3: the network rule across real networks, without the lab switch, under `submit`
and under `serve`.

Three routed /24s in namespaces (tests/kit/routed.py): h1 holds the gate, the model server, the
submitter and an honest `join` worker; h2 an honest worker; h3 two keys of one owner, both
tests/kit/replicaliar.py `norun` (a Sybil pair lying the same way: the same zeros for outputs, the
timings of nothing, so they agree with each other exactly and only the network rule keeps them
apart; a halved timing is within the band of this machine's noise under a loaded suite, and would
test the band instead). Every worker advertises one written profile, so one device class, and runs a
paced workload (`kit.campaignlab.PACE_MS`): the honest pair agrees beside the rest of the suite.

One campaign, `verify: {replicas: 2}` and no `same_host`: its first job on all four peers, its
second on the Sybils alone. The two honest workers form a verified quorum whose rows name both their
networks; the Sybils are never each other's quorum (never `replicated`); alone in their class they
are `unverifiable`, the row naming the rule (distinct networks) and nothing run alone. The same
campaign runs under `submit`, then under `serve` (posted to its API from inside h1), on one swarm.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit import zygote
from kit.campaignlab import LIAR, PACE_MS, paced_env
from kit.fleet import _SERVE, MODEL
from kit.netns import running
from kit.procs import SARK, Lab, Proc
from kit.routed import HOSTS, NETWORKS, RoutedNet

from node.config import NodeConfig
from node.p2p.identity import identity_peer_id
from protocol import ComputeUnit, DeviceProfile, UnitStatus

H1, H2, H3 = (HOSTS[h][0] for h in ("h1", "h2", "h3"))
_POST = """\
import httpx, sys
method, url = sys.argv[1], sys.argv[2]
r = httpx.request(method, url, content=sys.stdin.buffer.read() or None,
                  headers={"Content-Type": "application/json"}, timeout=60)
print(r.status_code); sys.stdout.write(r.text)
"""


@pytest.fixture
def rnet() -> Iterator[RoutedNet]:
    """Three routed /24s, always torn down; skipped where namespaces are refused."""
    yield from running(RoutedNet())


def _profile(root: Path) -> Path:
    """One written profile for every worker (one device class; no probe, no calibration)."""
    profile = DeviceProfile(
        device_name="lab", soc="test-cpu", cores_physical=1, cores_logical=2, ram_mb=1024, os="Linux",
        os_version="6", fingerprint="f" * 16,
        units=(UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),),
    )  # fmt: skip
    path = root / "profile.json"
    path.write_text(profile.model_dump_json())
    return path


def _worker(lab: Lab, name: str, ns: str, ip: str, gate: str, me: str, liar: bool) -> Proc:
    """A `join` in its namespace; the profile is written once, before the first (rewriting it per
    worker raced a worker reading it: 'EOF while parsing', CI-equivalent at 489f6484)."""
    profile = lab.root / "profile.json"
    args = ["join", "--listen", f"/ip4/{ip}/tcp/0", "--data-dir", str(lab.root / name), "--allow", me]
    args += ["--record-ttl", "30", "--profile", str(profile), "--allow-http"]
    args += ["--allow-network", "10.77.0.0/24", "--heartbeat", "0.5", "--lease-ttl", "3", "--events"]
    program = [sys.executable, str(LIAR), "norun"] if liar else SARK
    return lab.start(name, [*program, *args, "--gate", gate], ns=ns, env=paced_env(PACE_MS))


def _campaign(root: Path, url: str, ids: dict[str, str]) -> dict[str, Any]:
    job = {"compute_unit": "CPU (ONNX)", "devices": "all", "num_inference_runs": 20, "warmup_runs": 1,
           "load_runs": 1, "processes": 1, "threads": 1}  # fmt: skip
    everyone = {**job, "require": {"peers": sorted(ids.values())}}
    sybils = {**job, "require": {"peers": [ids["s1"], ids["s2"]]}}
    return {"name": "networks", "model_url": url, "verify": {"replicas": 2}, "max_inflight": 1,
            "jobs": [everyone, sybils]}  # fmt: skip


def _api(ns: str, method: str, url: str, body: str = "") -> tuple[int, str]:
    """An HTTP request from inside namespace `ns` (serve listens on its loopback)."""
    argv = ["ip", "netns", "exec", ns, sys.executable, "-c", _POST, method, url]
    done = zygote.run(argv, input=body, capture_output=True, text=True, timeout=90, check=True)
    status, _, text = done.stdout.partition("\n")
    return int(status), text


def check_rows(rows: list[dict[str, str]], ids: dict[str, str]) -> None:
    """The honest pair verified on both networks, the Sybils never each other's quorum."""
    sybils = {ids["s1"], ids["s2"]}
    honest = {ids["w1"]: NETWORKS["h1"], ids["w2"]: NETWORKS["h2"]}
    for row in rows:
        peer, verdict = row["WorkerPeerId"], row["Verified"]
        if verdict.startswith("replicated"):
            assert peer in honest, row  # a Sybil's figure is never verified
            assert sorted(row["QuorumNetworks"].split(";")) == sorted(honest.values()), row
        if peer in sybils and row["Status"] == "Complete":  # refuted by an honest partner's outputs
            # by its outputs; or no majority where a loaded honest replica could not vouch (its spread)
            assert "outputs differ" in verdict or "cannot vouch" in verdict, verdict
    alone = [r for r in rows if r["JobId"].split("-job-")[1].startswith("1-")]
    assert len(alone) == 2, rows
    for row in alone:  # only the Sybils in their class: no quorum, nothing ran alone, the rule named
        assert row["WorkerPeerId"] == "", row
        assert (row["Status"], row["Verified"], row["FailureReason"]) == (
            "Unverifiable",
            "unverifiable",
            "no_quorum",
        )
        assert "distinct networks" in row["Detail"], row["Detail"]
        assert row["InferenceMsMedian"] == ""
    verified = {r["WorkerPeerId"] for r in rows if r["Verified"].startswith("replicated")}
    assert verified == set(honest), rows  # both honest workers verified, each by the other's network
    for row in rows:  # an honest row not verified: its pair's timings too far apart on a loaded machine
        if row["WorkerPeerId"] in honest and not row["Verified"].startswith("replicated"):
            verdict = row["Verified"]
            assert verdict.startswith("disagreed: "), verdict
            assert "no majority within the band" in verdict, verdict


@pytest.mark.netns
@pytest.mark.timeout(900)  # a deadline on a loaded machine, not a speed: two campaigns, one at a time
def test_two_networks_verify_and_a_sybil_pair_on_one_is_never_a_quorum(
    rnet: RoutedNet, tmp_path: Path
) -> None:
    lab = Lab(tmp_path, record_ttl=30.0)
    try:
        me = identity_peer_id(NodeConfig(data_dir=tmp_path / "submitter").key_file())
        gate = str(lab.gate("gate", 60, listen=f"/ip4/{H1}/tcp/0", ns=rnet.h1).ready["addrs"][0])
        www = tmp_path / "www"
        www.mkdir()
        (www / MODEL.name).write_bytes(MODEL.read_bytes())
        port = lab.start("www", [sys.executable, "-c", _SERVE, str(www), H1], ns=rnet.h1).wait_event(
            "ready", 30
        )
        url = f"http://{H1}:{port['port']}/{MODEL.name}"
        where = {"w1": (rnet.h1, H1, False), "w2": (rnet.h2, H2, False), "s1": (rnet.h3, H3, True),
                 "s2": (rnet.h3, H3, True)}  # fmt: skip
        _profile(lab.root)
        started = {n: _worker(lab, n, ns, ip, gate, me, liar) for n, (ns, ip, liar) in where.items()}
        ids = {n: p.wait_event("ready", 90)["peer_id"] for n, p in started.items()}
        body = json.dumps(_campaign(tmp_path, url, ids))
        (tmp_path / "c").mkdir()
        (tmp_path / "c" / "c.yaml").write_text(body)
        stored = ["--gate", gate, "--data-dir", str(tmp_path / "submitter")]
        stored += ["--allow-http", "--allow-network", "10.77.0.0/24"]  # the model server in h1
        submit = [*SARK, "submit", str(tmp_path / "c" / "c.yaml"), "--json", "--wait-peers", "4"]
        argv = [*submit, "--out", str(tmp_path / "out"), *stored]
        done = zygote.run(argv, capture_output=True, text=True, timeout=300, netns=rnet.h1)
        assert done.returncode == 1, done.stderr[-3000:]  # the Sybils' job: unverifiable, said
        assert "unverifiable" in done.stderr, done.stderr[-3000:]
        outcome = json.loads(done.stdout.strip().splitlines()[-1])
        with open(outcome["files"]["csv"], newline="") as f:
            check_rows(list(csv.DictReader(f)), ids)

        network = ["--refresh", "0.5"]
        served = lab.start(
            "serve", [*SARK, "serve", "--http", "127.0.0.1:0", "--events", *stored, *network,
                      "--out", str(tmp_path / "served")], ns=rnet.h1,
        )  # fmt: skip
        api = f"{served.wait_event('http', 90)['url']}/api"
        while served.wait_event("peers", 90)["count"] < len(ids):
            pass
        status, text = _api(rnet.h1, "POST", f"{api}/campaigns", body)
        assert status == 201, text
        cid = json.loads(text)["campaign_id"]
        while (ended := served.wait_event("campaign_done", 300))["campaign"] != cid:
            pass
        status, text = _api(rnet.h1, "GET", f"{api}/campaigns/{cid}/results")
        assert status == 200, text
        rows = list(csv.DictReader(text.splitlines()))
        with open(ended["files"]["csv"], newline="") as f:
            assert list(csv.DictReader(f)) == rows
        check_rows(rows, ids)
    finally:
        lab.close()
