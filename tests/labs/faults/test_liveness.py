"""Issue 6: a worker killed, stopped, frozen or cut off mid-measurement, in the namespace lab.

Detected by the lease (missing heartbeats; EOF for kill -9), re-dispatched to the other worker,
exactly one accepted result, none lost, and the zombie's late result (after SIGCONT, thaw or heal)
rejected as stale.
"""

from __future__ import annotations

import pytest
from kit.faults import Faults
from kit.fleet import FAULTS, FaultNet, Fleet, run_fault
from kit.procs import Lab

DETECT_S = 10.0


# kill -9 in the default suite (the lease's EOF path and the redispatch every fault shares); SIGSTOP,
# freeze and partition (the missing-heartbeat path) in the lab tier: `pytest -m "netns or slow"`.
KINDS = [pytest.param(k, marks=() if k == "kill9" else pytest.mark.slow) for k in FAULTS]


@pytest.mark.netns
@pytest.mark.parametrize("kind", KINDS)
def test_fault_mid_measurement_is_detected_and_redispatched(
    kind: str, fnet: FaultNet, plab: Lab, faults: Faults
) -> None:
    fleet = Fleet.start(fnet, plab, faults)
    fleet.start_workers(("w-h2", fnet.h2, "10.77.0.12"), ("w-h4", fnet.h4, "10.77.0.14"))
    row = run_fault(fleet, kind)
    print(f"\n{row}")
    assert row["detection_s"] < DETECT_S
    assert row["new_peer"] != row["victim"]
    assert row["accepted"] == 1
    assert row["completed"] == 1
    assert row["lost"] == 0
    assert row["winner"] == row["new_peer"]
    assert row["stale_rejected"] == (0 if kind == "kill9" else 1)
    assert row["exit"] == 0
