"""Issue 22: a worker that no submitter can dial says so at `join`, never "direct" with nothing to dial.

h1 runs a gate that relays for nobody else; the worker on h2 listens on loopback only, so the gate's
dial-back at its LAN address fails and no relay circuit stands in for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kit.netns import H1, NetLab
from kit.procs import SARK, Lab


@pytest.mark.netns
def test_a_worker_no_submitter_can_dial_warns_at_join(net: NetLab, lab: Lab, profile_file: Path) -> None:
    argv = ["gate", "--listen", f"/ip4/{H1}/tcp/0", "--data-dir", str(lab.root / "gate"), "--events"]
    gate = lab.start("gate", [*SARK, *argv, "--relay-allow", "12D3KooWsomeoneelse"], ns=net.h1)
    gates = gate.wait_event("ready", 30)["addrs"]

    ready = lab.worker("h2-worker", gates, profile_file, listen="/ip4/127.0.0.1/tcp/0", ns=net.h2).ready

    assert ready["reachability"] != "direct", ready
    assert ready["circuit_addrs"] == []
    assert all(a.startswith("/ip4/127.0.0.1/") for a in ready["addrs"]), ready
    said = (lab.root / "h2-worker.stderr").read_text()
    assert "warning: no submitter can dial this worker: it advertises only loopback addresses" in said, said
