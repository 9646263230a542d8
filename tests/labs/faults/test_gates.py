"""Issue 6: a gate killed and restarted; a relayed worker re-reserves and reappears, a second gate
keeps discovery working meanwhile."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from kit.faults import Faults
from kit.fleet import FaultNet, Fleet
from kit.netns import H2, H3
from kit.procs import Lab, Proc

PROBE = str(Path(__file__).resolve().parents[2] / "kit" / "probe.py")


def _probe(fleet: Fleet, gate: str, name: str) -> Proc:
    args = ["--gate", gate, "--listen", f"/ip4/{H2}/tcp/0", "--data-dir", str(fleet.lab.root / name)]
    return fleet.lab.start(
        name, [sys.executable, PROBE, *args, "--expect", "1", "--timeout", "30"], ns=fleet.net.h2
    )


def _reached(probe: Proc, peer_id: str) -> dict[str, Any]:
    found = [p["peer_id"] for p in probe.wait_event("found", 60)["peers"]]
    assert found == [peer_id]
    trip = probe.wait_event("profile", 60)
    assert trip["ok"], trip
    assert trip["relayed"], "the NAT'd worker was reached directly"
    return trip


@pytest.mark.netns
def test_gate_restart_relayed_worker_reserves_again_second_gate_keeps_discovery(
    fnet: FaultNet, plab: Lab, faults: Faults
) -> None:
    fleet = Fleet.start(fnet, plab, faults, gates=2)
    first, second = fleet.gates
    natted = fleet.worker("w-h3", fnet.h3, H3).ready
    assert natted["reachability"] == "relayed"
    assert len(natted["circuit_addrs"]) == 2

    gate0 = next(p for p in plab.procs if p.name == "gate0")
    faults.kill9(gate0)
    _reached(_probe(fleet, second, "probe-during"), natted["peer_id"])  # discovery and relay via gate 2

    port = int(first.split("/tcp/")[1].split("/")[0])
    assert fleet.start_gate("gate0", port) == first  # same identity, same address
    gate1 = next(p for p in plab.procs if p.name == "gate1")
    faults.kill9(gate1)  # from here only the restarted gate can find and relay the worker
    trip = _reached(_probe(fleet, first, "probe-after"), natted["peer_id"])
    print(f"\nrelayed /sark/profile ms through the restarted gate: {trip['ms']}")
