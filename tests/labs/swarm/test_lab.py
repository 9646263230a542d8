"""Issue 4 acceptance 1 and 2 with real processes: a gate, three `join` workers and `peers` on loopback."""

from __future__ import annotations

import time
from pathlib import Path

from kit.procs import Lab


def _peer_ids(lab: Lab, gates: list[str]) -> set[str]:
    return {p["peer_id"] for p in lab.peers(gates)}


def test_peers_lists_three_workers_and_a_killed_one_expires(lab: Lab, profile_file: Path) -> None:
    gates = lab.gate().ready["addrs"]
    workers = [lab.worker(f"w{i}", gates, profile_file, wait=False) for i in range(3)]
    for worker in workers:
        worker.ready = worker.wait_event("ready", 30)
    ids = {w.ready["peer_id"] for w in workers}
    listed = lab.peers(gates)
    assert {p["peer_id"] for p in listed} == ids
    assert all(p["units"] == ["CPU (ONNX)"] and p["reachability"] == "direct" for p in listed)

    lab.kill(workers[0])
    deadline = time.monotonic() + 30  # record lifetime is 4 s in this lab
    while workers[0].ready["peer_id"] in _peer_ids(lab, gates):
        assert time.monotonic() < deadline, "killed worker still listed after its records expired"
    restarted = lab.worker("w0", gates, profile_file)
    assert restarted.ready["peer_id"] == workers[0].ready["peer_id"]
