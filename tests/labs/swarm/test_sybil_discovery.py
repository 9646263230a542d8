"""Issue 50, scope 1: twenty Sybil keys announced first cannot deny a campaign its workers.

Real processes: gate 1 with twenty Sybil keys (tests/kit/sybils.py: real nodes of this code, placed
with the node's own `Dht.publish` one after another, so they fill the any-worker tree's root key)
and, after them, two honest `join` workers (they spill to level 1); gate 2 with two honest workers
alone (the control). A campaign with `devices: 2` (a lookup of 4 providers) runs under `submit`
against each: the control, the Sybils stalling (the stream opens, no answer), then gone (killed:
every dial refused while their records stay listed). Before this issue the Sybil runs ended exit 1,
0 found, both tasks Unschedulable ("22 peer(s) advertise any unit, but none answered"). Now each
finds the two honest workers and completes; the time to discovery (`discovered` event) of each
run is printed beside the control's (a figure, never asserted: tests/labs do not time).

Gate 3 holds twenty Sybils that put no advert in the DHT (`--no-advert`: provider records only, as a
foreign gate's workers have), half of them stalling and half answering junk (another key's advert,
signed but not by the peer asked: `--mode mixed`), then two honest workers. A reader must ask each
such provider itself: the lookup used to, waiting out each ask's 3 s before it returned (200 of them
held a 60 s look in `benchmarks/swarm_sybil.py`). Now the discovery probes them as any provider, each
holding a probe slot at most `PROBE_SLOT_S` or refused for its junk: the first run finds both honest
workers, and once the Sybils are killed every one of them is read through the discovery's own probe
(its "advertised but did not answer" line), not by the lookup.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from kit.campaignlab import ROOT, CampaignLab, submit_devices, submitter_id

SYBILS = 20
SCRIPT = ROOT / "tests" / "kit" / "sybils.py"


@pytest.fixture(scope="module")
def swarms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("sybils")
    lab = CampaignLab(root, record_ttl=300.0)  # no record expires within the test
    try:
        me = submitter_id(root / "submitter")
        attacked = lab.gate("gate1").ready["addrs"][0]
        control = lab.gate("gate2").ready["addrs"][0]
        unadvertised = lab.gate("gate3").ready["addrs"][0]
        argv = [sys.executable, str(SCRIPT), "--count", str(SYBILS), "--record-ttl", "300"]
        sybils = lab.start("sybils", [*argv, "--gate", attacked, "--data-dir", str(root / "sybils")])
        quiet = ["--no-advert", "--mode", "mixed"]  # no advert; half stall, half answer junk
        bare = lab.start("bare", [*argv, "--gate", unadvertised, "--data-dir", str(root / "bare"), *quiet])
        calm = [lab.real_worker(f"c{i}", [control], me, wait=False) for i in range(2)]
        minted = sybils.wait_event("ready", 180)
        minted_bare = bare.wait_event("ready", 180)
        honest = [lab.real_worker(f"h{i}", [attacked], me, wait=False) for i in range(2)]  # after them
        after_bare = [lab.real_worker(f"b{i}", [unadvertised], me, wait=False) for i in range(2)]
        ids = {
            "attacked": {p.wait_event("ready", 120)["peer_id"] for p in honest},
            "control": {p.wait_event("ready", 120)["peer_id"] for p in calm},
            "bare": {p.wait_event("ready", 120)["peer_id"] for p in after_bare},
        }
        gates = {"attacked": attacked, "control": control, "bare": unadvertised}
        yield {"lab": lab, "root": root, "gates": gates, "ids": ids, "sybils": sybils, "minted": minted,
               "bare": bare, "minted_bare": minted_bare}  # fmt: skip
    finally:
        lab.close()


def submit(swarms: dict[str, Any], which: str, name: str) -> tuple[int, float, set[str], str]:
    """`submit` of a `devices: 2` campaign on one gate: its exit code, the seconds to discovery, the
    peers its rows ran on, and its stderr."""
    done = submit_devices(swarms["root"], name, swarms["gates"][which])
    return done.code, done.seconds, done.ran, done.stderr


def stalling_then_gone(swarms: dict[str, Any], gate: str, sybils: str, minted: str) -> str:
    """The control, then `gate`'s campaign with its Sybils (process `sybils`) stalling, then killed:
    each run exit 0 with both honest workers; every Sybil read by the discovery's probe once (its
    "advertised but did not answer" line, the dial refused); the figures as one line."""
    figures: dict[str, float] = {}
    code, figures["control"], ran, err = submit(swarms, "control", f"control-{gate}")
    assert (code, ran) == (0, swarms["ids"]["control"]), err[-3000:]
    code, figures["stalling"], ran, err = submit(swarms, gate, f"stalling-{gate}")
    assert (code, ran) == (0, swarms["ids"][gate]), err[-3000:]
    swarms["lab"].kill(swarms[sybils])  # gone: their records stay listed, every dial is refused
    code, figures["gone"], ran, err = submit(swarms, gate, f"gone-{gate}")
    assert (code, ran) == (0, swarms["ids"][gate]), err[-3000:]
    read = [p for p in swarms[minted]["peer_ids"] if f"peer {p} advertised but did not answer" in err]
    assert len(read) == SYBILS  # they held the root: each read, refused, once
    return (
        "seconds to discovery "
        + ", ".join(f"{k} {v:.2f}" for k, v in figures.items())
        + f"; ratio stalling/control {figures['stalling'] / figures['control']:.2f}, "
        f"gone/control {figures['gone'] / figures['control']:.2f}"
    )


def test_twenty_sybils_announced_first_stalling_then_gone_leave_both_honest_workers_found(
    swarms: dict[str, Any],
) -> None:
    line = stalling_then_gone(swarms, "attacked", "sybils", "minted")
    print(f"\n{SYBILS} Sybils minted and placed in {swarms['minted']['seconds']} s; {line}")


def test_twenty_sybils_with_no_advert_stalling_or_junk_are_probed_and_leave_both_honest_workers_found(
    swarms: dict[str, Any],
) -> None:
    line = stalling_then_gone(swarms, "bare", "bare", "minted_bare")
    print(f"\n{SYBILS} Sybils with no advert (half stalling, half junk; the first run's figure); {line}")
