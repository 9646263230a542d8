"""Issue 4 acceptance 1 and 2 with real processes: a gate, three `join` workers and `peers` on loopback.

The third worker's profile claims a speed: it keeps a CPU challenge child waiting for the first
challenge (`Challenges.keep_spare`), started before its ready line. The two that claim nothing are
never challenged by an honest submitter and start no child at all (no spare, so no fork server: about
1 CPU-s of a worker's start, 59 MiB held idle; `node.worker.role`).
"""

from __future__ import annotations

import time
from pathlib import Path

from kit.cpubound import children
from kit.data import make_profile
from kit.procs import Lab

from protocol import Calibration


def _peer_ids(lab: Lab, gates: list[str]) -> set[str]:
    return {p["peer_id"] for p in lab.peers(gates)}


def test_peers_lists_three_workers_and_a_killed_one_expires(lab: Lab, profile_file: Path) -> None:
    gates = lab.gate().ready["addrs"]
    claiming = profile_file.with_name("claiming.json")
    calibration = Calibration(cpu_gflops=5.0, mem_bandwidth_gbs=5.0, seconds=1.0)
    claiming.write_text(make_profile().model_copy(update={"calibration": calibration}).model_dump_json())
    # w0 dies below: its adverts live 4 s. w1 and w2 keep the lab's 300 s, so their listing never
    # waits on a republish that a starved machine may run late (at 4 s each, it did: "no worker found")
    workers = [
        lab.worker(
            f"w{i}",
            gates,
            claiming if i == 2 else profile_file,
            wait=False,
            record_ttl=4.0 if i == 0 else None,
        )
        for i in range(3)
    ]
    for worker in workers:
        worker.ready = worker.wait_event("ready", 30)
    assert [bool(children(w.popen.pid)) for w in workers] == [False, False, True]  # the claim's spare
    ids = {w.ready["peer_id"] for w in workers}
    listed = lab.peers(gates)
    assert {p["peer_id"] for p in listed} == ids
    assert all(p["units"] == ["CPU (ONNX)"] and p["reachability"] == "direct" for p in listed)

    lab.kill(workers[0])
    deadline = time.monotonic() + 30  # its signed advert runs out 4 s after it was last signed
    while workers[0].ready["peer_id"] in _peer_ids(lab, gates):
        assert time.monotonic() < deadline, "killed worker still listed after its advert expired"
    restarted = lab.worker("w0", gates, profile_file)
    assert restarted.ready["peer_id"] == workers[0].ready["peer_id"]
