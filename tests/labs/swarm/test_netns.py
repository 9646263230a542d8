"""Issue 4 acceptance 3 in the namespace lab: a worker behind NAT is relayed through the gate, one on the
bridge is direct, and a node outside reaches both with a `/sark/profile` round trip."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from kit.netns import H1, H2, H3, NetLab
from kit.procs import Lab

PROBE = str(Path(__file__).resolve().parents[2] / "kit" / "probe.py")


@pytest.mark.netns
def test_nat_worker_is_relayed_and_reached_through_the_gate(
    net: NetLab, lab: Lab, profile_file: Path
) -> None:
    gates = lab.gate(listen=f"/ip4/{H1}/tcp/0", ns=net.h1).ready["addrs"]
    direct = lab.worker("h2-worker", gates, profile_file, listen=f"/ip4/{H2}/tcp/0", ns=net.h2).ready
    natted = lab.worker("h3-worker", gates, profile_file, listen=f"/ip4/{H3}/tcp/0", ns=net.h3).ready

    assert direct["reachability"] == "direct"
    assert direct["circuit_addrs"] == []
    assert natted["reachability"] == "relayed"
    assert natted["circuit_addrs"] == [f"{gates[0]}/p2p-circuit/p2p/{natted['peer_id']}"]

    args = ["--gate", gates[0], "--listen", f"/ip4/{H2}/tcp/0", "--data-dir", str(lab.root / "probe")]
    probe = lab.start("probe", [sys.executable, PROBE, *args, "--expect", "2"], ns=net.h2)
    found = {p["peer_id"]: p for p in probe.wait_event("found", 60)["peers"]}
    assert set(found) == {direct["peer_id"], natted["peer_id"]}
    assert found[natted["peer_id"]]["reachability"] == "relayed"
    assert natted["circuit_addrs"][0] in found[natted["peer_id"]]["addrs"]

    trips = {e["peer_id"]: e for e in (probe.wait_event("profile", 60) for _ in range(2))}
    print(
        f"\n/sark/profile ms (first, second): relayed {trips[natted['peer_id']].get('ms')}, "
        f"direct {trips[direct['peer_id']].get('ms')}"
    )
    assert trips[natted["peer_id"]]["ok"], trips[natted["peer_id"]]
    assert trips[natted["peer_id"]]["relayed"], "the NAT'd worker was reached directly: the NAT leaks"
    assert trips[direct["peer_id"]]["ok"], trips[direct["peer_id"]]
    assert not trips[direct["peer_id"]]["relayed"]
    probe.wait_event("done", 30)
