"""Issue 15: any libp2p node can be a gate. A js-libp2p node (tests/labs/interop/gate.mjs, from npm) serves
kad-dht on /sark/kad/1.0.0 and circuit relay v2, nothing of ours; real `sark-node` processes use it."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from kit import zygote
from kit.campaignlab import MODEL, CampaignLab, submitter_id, write_campaign
from kit.procs import SARK, Lab

from labs.interop.conftest import js_find_providers, start_js_gate
from node.p2p.dht import shard_cid
from node.p2p.shards import Shard

SMALL_JOB = {"num_inference_runs": 20, "warmup_runs": 2, "load_runs": 1, "processes": 1}


def _peers(lab: Lab, gate: str, name: str) -> subprocess.CompletedProcess[str]:
    args = [*SARK, "peers", "--json", "--gate", gate, "--data-dir", str(lab.root / name)]
    return zygote.run(args, capture_output=True, text=True, timeout=60)


def _listed(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])["peers"]
    return {row["peer_id"]: row for row in rows}


def test_js_gate_lists_every_worker_direct_and_runs_a_campaign(tmp_path: Path) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        gate = start_js_gate(lab).ready["addrs"][0]
        me = submitter_id(tmp_path / "submitter")
        workers = [lab.real_worker(f"w{i}", [gate], me, wait=False) for i in range(2)]
        ids = {w.wait_event("ready", 60)["peer_id"] for w in workers}

        # The first worker had nobody to dial it back ("unknown"); once the second asked it for a
        # dial-back it checks again. Bounded wait for that, then every worker is listed as direct.
        deadline = time.monotonic() + 60
        while True:
            done = _peers(lab, gate, f"peers-{time.monotonic_ns()}")
            assert done.returncode == 0, done.stderr
            listed = _listed(done)
            if set(listed) == ids and all(p["reachability"] == "direct" for p in listed.values()):
                break
            assert time.monotonic() < deadline, f"not every worker listed as direct: {listed}"
        assert all("CPU (ONNX)" in p["units"] for p in listed.values())

        campaign = write_campaign(tmp_path / "campaign.yaml", {
            "name": "interop",
            "model": {"path": MODEL.name},
            "jobs": [{"compute_unit": "CPU (ONNX)", "devices": "all", **SMALL_JOB}],
        })  # fmt: skip
        args = ["submit", str(campaign), "--json", "--wait-peers", "2", "--out", str(tmp_path / "out")]
        submit = zygote.run(
            [*SARK, *args, "--gate", gate, "--data-dir", str(tmp_path / "submitter")],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert submit.returncode == 0, submit.stderr
        tasks = json.loads(submit.stdout.strip().splitlines()[-1])["tasks"]
        assert [t["state"] for t in tasks] == ["done", "done"]
        assert {t["peer_id"] for t in tasks} == ids
    finally:
        lab.close()


def test_a_standard_kad_client_finds_the_workers_on_a_sark_gate(lab: Lab, profile_file: Path) -> None:
    gate = lab.gate().ready["addrs"][0]
    workers = [lab.worker(f"w{i}", [gate], profile_file, wait=False) for i in range(2)]
    ids = {w.wait_event("ready", 30)["peer_id"] for w in workers}
    # Two workers fit the root key of each sharded tree (issue 43): a standard CID a js client reads.
    any_worker = hashlib.sha256(b"sark/cap/v2/any/0/0").hexdigest()
    cpu = hashlib.sha256(b"sark/cap/v2/CPU (ONNX)/0/0").hexdigest()

    answers = {a["key"]: a for a in js_find_providers(gate, [any_worker, cpu])}

    assert answers[any_worker]["cid"] == shard_cid(Shard(None, 0, 0))
    for key in (any_worker, cpu):
        assert set(answers[key]["providers"]) == ids
        assert all(addrs for addrs in answers[key]["providers"].values())


def test_a_gate_that_refuses_provider_records_is_named(lab: Lab, profile_file: Path) -> None:
    gate = start_js_gate(lab, "js-gate", "--refuse-providers").ready["addrs"][0]
    worker = lab.worker("w0", [gate], profile_file)
    assert worker.ready["refused_by"] == [gate]
    # alone behind a gate with no /sark/reach, nobody could dial it back: unknown, not a guess
    assert worker.ready["reachability"] == "unknown"
    warning = [line for line in worker.log_excerpt().splitlines() if line.startswith("warning: gate")]
    assert warning == [
        f"warning: gate {gate} refused or dropped our provider records: "
        "submitters that use only this gate will not find this worker"
    ]

    campaign = write_campaign(lab.root / "campaign.yaml", {
        "model": {"path": MODEL.name}, "jobs": [{"compute_unit": "CPU (ONNX)", **SMALL_JOB}],
    })  # fmt: skip
    args = ["submit", str(campaign), "--json", "--discover-timeout", "2", "--out", str(lab.root / "out")]
    submit = subprocess.Popen(  # beside `peers`: two independent processes, half the wait
        [*SARK, *args, "--gate", gate, "--data-dir", str(lab.root / "submitter")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        done = _peers(lab, gate, "peers")
        _, submit_err = submit.communicate(timeout=120)
    finally:
        submit.kill()
        submit.wait()

    assert done.returncode == 1
    assert "error: no worker found (no_provider): no worker advertises any unit" in done.stderr
    assert submit.returncode == 1, submit_err
    assert "error: no worker found (no_provider)" in submit_err


def test_peers_with_no_gate_answering_exits_1_naming_it(lab: Lab) -> None:
    js = start_js_gate(lab)
    gate = js.ready["addrs"][0]
    lab.kill(js)
    done = _peers(lab, gate, "peers")
    assert done.returncode == 1
    assert "no gate answered" in done.stderr
    assert gate.rsplit("/p2p/", 1)[-1] in done.stderr
