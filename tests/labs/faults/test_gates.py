"""Issue 6: a gate killed and restarted; a relayed worker re-reserves and reappears, a second gate
keeps discovery working meanwhile. Issue 50: NAT'd workers hold slots at `RELAY_GATES` of their gates,
and a gate killed has its slots replaced at the others."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from kit.faults import Faults
from kit.fleet import FaultNet, Fleet
from kit.netns import H1, H2, H3
from kit.procs import Lab, Proc

from node.p2p.relay import RELAY_GATES, circuit_gate

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


def _circuit_gates(probe: Proc, expect: int) -> dict[str, set[str]]:
    found = probe.wait_event("found", 60)["peers"]
    assert len(found) == expect, found
    return {p["peer_id"]: {circuit_gate(a) for a in p["addrs"] if "/p2p-circuit" in a} for p in found}


@pytest.mark.netns
def test_natd_workers_hold_relay_gates_slots_and_replace_a_lost_gates(
    fnet: FaultNet, plab: Lab, faults: Faults
) -> None:
    """Three gates of two slots, two NAT'd workers listing all three: each holds RELAY_GATES (4 of 6
    slots, where a slot at every gate took all 6 and left no room); a gate killed, each worker that held
    a slot there takes one at the third gate (a gate holds 2, so there is room whatever the draws)."""
    fleet = Fleet.start(fnet, plab, faults, gates=0)
    for i in range(3):
        small = ["--max-reservations", "2"]
        gate = plab.gate(f"gate{i}", 60, listen=f"/ip4/{H1}/tcp/0", ns=fnet.h1, extra=small)
        fleet.gates.append(str(gate.ready["addrs"][0]))
    workers = fleet.start_workers(("w0", fnet.h3, H3), ("w1", fnet.h3, H3))
    held = {w.ready["peer_id"]: {circuit_gate(c) for c in w.ready["circuit_addrs"]} for w in workers}
    assert all(w.ready["reachability"] == "relayed" for w in workers)
    assert all(len(gates) == RELAY_GATES for gates in held.values()), held
    lost = sorted(held[workers[0].ready["peer_id"]])[0]
    faults.kill9(next(p for p in plab.procs if p.name == f"gate{fleet.gates.index(lost)}"))
    left = [g for g in fleet.gates if g != lost]
    for attempt in range(10):  # the worker notices within GATE_CHECK_S, then reserves and republishes
        now = _circuit_gates(_probe_at(fleet, left, f"probe{attempt}"), expect=2)
        if all(gates == set(left) for gates in now.values()):
            break

    def named(by_peer: dict[str, set[str]]) -> list[list[int]]:
        return [sorted(fleet.gates.index(g) for g in gates) for gates in by_peer.values()]

    killed = fleet.gates.index(lost)
    print(f"\ngates held {named(held)}; gate {killed} killed: {named(now)} (probe {attempt + 1})")
    assert all(gates == set(left) for gates in now.values()), (lost, now)


@pytest.mark.netns
def test_a_natd_worker_whose_gates_relays_are_full_takes_a_slot_at_a_spare(
    fnet: FaultNet, plab: Lab, faults: Faults
) -> None:
    """Four gates of one slot; three taken by NAT'd workers that list one gate each, the fourth down: a
    NAT'd worker listing all four joins the three full ones (GATE_LINKS) and gets no slot. The fourth
    back on its address, the worker exchanges a full gate for it and holds its slot there (a gate's
    relay filled, by strangers or by others, moves the workers that have spares, not strands them)."""
    fleet = Fleet.start(fnet, plab, faults, gates=0)
    one = ["--max-reservations", "1"]
    gates = [plab.gate(f"gate{i}", 60, listen=f"/ip4/{H1}/tcp/0", ns=fnet.h1, extra=one) for i in range(4)]
    fleet.gates = [str(g.ready["addrs"][0]) for g in gates]
    spare = fleet.gates[3]
    faults.kill9(gates[3])
    occupants = [fleet.worker(f"o{i}", fnet.h3, H3, gates=[fleet.gates[i]], wait=False) for i in range(3)]
    for i, occupant in enumerate(occupants):
        ready = occupant.wait_event("ready", 90)
        assert [circuit_gate(c) for c in ready["circuit_addrs"]] == [fleet.gates[i]], ready
    natted = fleet.worker("w", fnet.h3, H3).ready
    assert natted["circuit_addrs"] == [], natted  # every gate it joined is full
    port = int(spare.split("/tcp/")[1].split("/")[0])
    back = plab.gate("gate3", 60, listen=f"/ip4/{H1}/tcp/{port}", ns=fnet.h1, extra=one)
    assert str(back.ready["addrs"][0]) == spare
    held: set[str] = set()
    for attempt in range(30):  # the worker asks again after 1, 2, 4, 8 s ... (`backoff`)
        now = _circuit_gates(_probe_at(fleet, fleet.gates, f"probe{attempt}", expect=4), expect=4)
        held = now[natted["peer_id"]]
        if held:
            break
    print(f"\nthe NAT'd worker's relay slots after the spare came back: {held} (probe {attempt + 1})")
    assert held == {spare}


def _probe_at(fleet: Fleet, gates: list[str], name: str, expect: int = 2) -> Proc:
    args = [a for g in gates for a in ("--gate", g)]
    args += ["--listen", f"/ip4/{H2}/tcp/0", "--data-dir", str(fleet.lab.root / name)]
    args += ["--expect", str(expect)]
    return fleet.lab.start(name, [sys.executable, PROBE, *args, "--timeout", "30"], ns=fleet.net.h2)
