"""Issue 50, scope 1: Sybils from five networks, announced first, on routed networks with addresses a
stranger on the internet has: the submitter reads their networks from the provider records (the /24
of each record's address, `discovery.provider_network`) and probes them last.

Real processes on a `RoutedNet` (tests/kit/routed.py) whose hosts hold global addresses, each on a /24
of its own: the gate, two honest `join` workers (20.0.1.11, 20.0.2.12) and five cheater networks
(45.0.0.10 ... 45.0.4.10), each running four Sybil keys (tests/kit/sybils.py: real nodes of this code,
placed with the node's own `Dht.publish` one after another). The gate keeps four records of one network
under one key (`node.p2p.places`), so the twenty fill the any-worker tree's root key, four of each
network, before the honest workers come (they spill to level 1). On loopback or private addresses
(every other lab) a provider's network is never read: many honest workers share an office's /24.

A campaign with `devices: 2` runs under `submit` from the gate's host, with the Sybils stalling, then
gone (killed: their records stay listed, every dial refused). Each run exits 0 with both honest workers
Complete; its log names each of the five cheater /24s suspect (crowded: four new providers of each in
the first look), never an honest worker's. Their providers are probed in the slots the honest
workers' probes do not wait for (`networks.ProbeSlots`); the seconds to discovery, and how many Sybils'
probes had ended before the campaign had its workers, are printed (figures, never asserted).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from kit.campaignlab import ROOT, submit_devices, submitter_id
from kit.netns import running
from kit.procs import SARK, Lab, Proc
from kit.routed import RoutedNet

NETWORKS = 5
PER_NETWORK = 4
SCRIPT = ROOT / "tests" / "kit" / "sybils.py"
HOSTS = {
    "gate": ("20.0.100.10", "20.0.100.1"),
    "w1": ("20.0.1.11", "20.0.1.1"),
    "w2": ("20.0.2.12", "20.0.2.1"),
    **{f"s{n}": (f"45.0.{n}.10", f"45.0.{n}.1") for n in range(NETWORKS)},
}
"""Each host's address and router leg, every one on a /24 of its own, every address global."""


@pytest.fixture(scope="module")
def swarm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("sybil-networks")
    for net in running(RoutedNet(hosts=HOSTS)):
        lab = Lab(root, record_ttl=300.0)  # no record expires within the test
        try:
            me = submitter_id(root / "submitter")
            listen = f"/ip4/{HOSTS['gate'][0]}/tcp/0"
            gate = str(lab.gate("gate", 60, listen=listen, ns=net.ns("gate")).ready["addrs"][0])
            sybils = [_sybils(lab, net, n, gate) for n in range(NETWORKS)]
            minted = [p.wait_event("ready", 180)["peer_ids"] for p in sybils]
            workers = [_worker(lab, net, name, gate, me) for name in ("w1", "w2")]  # after them
            honest = {p.wait_event("ready", 120)["peer_id"] for p in workers}
            yield {"lab": lab, "net": net, "root": root, "gate": gate, "honest": honest,
                   "sybils": sybils, "sybil_ids": [p for ids in minted for p in ids]}  # fmt: skip
        finally:
            lab.close()


def _sybils(lab: Lab, net: RoutedNet, n: int, gate: str) -> Proc:
    """Four Sybil keys on cheater network n, listening and dialling from its host's address."""
    argv = [sys.executable, str(SCRIPT), "--gate", gate, "--count", str(PER_NETWORK), "--record-ttl", "300"]
    argv += ["--data-dir", str(lab.root / f"s{n}"), "--bind", HOSTS[f"s{n}"][0]]
    return lab.start(f"s{n}", argv, ns=net.ns(f"s{n}"))


def _worker(lab: Lab, net: RoutedNet, name: str, gate: str, me: str) -> Proc:
    """An honest `join` worker on its host, the submitter's model fetched from the gate's /24."""
    args = ["join", "--listen", f"/ip4/{HOSTS[name][0]}/tcp/0", "--gate", gate, "--allow", me]
    args += ["--data-dir", str(lab.root / name), "--record-ttl", "300", "--no-calibrate", "--events"]
    args += ["--allow-http", "--allow-network", "20.0.100.0/24", "--heartbeat", "0.5", "--lease-ttl", "3"]
    return lab.start(name, [*SARK, *args], ns=net.ns(name))


def _suspect(stderr: str) -> set[str]:
    """The networks a run's log left suspect: said suspect, and not said to have answered after. On a
    busy machine an honest worker can answer after its probe held a slot `PROBE_SLOT_S`, and its
    network is suspect until it does (found at load 4: both honest /24s); the cheaters' never answer."""
    left: dict[str, bool] = {}
    for line in stderr.splitlines():
        if " is suspect for this round " in line or " answered: no longer suspect" in line:
            network = line.split("network ", 1)[1].split(" ", 1)[0]
            left[network] = " is suspect for this round " in line
    return {network for network, suspect in left.items() if suspect}


@pytest.mark.netns
@pytest.mark.timeout(600)  # a deadline on a loaded machine, not a speed
def test_sybils_of_five_networks_are_read_by_network_and_probed_last_stalling_then_gone(
    swarm: dict[str, Any],
) -> None:
    cheaters = {f"45.0.{n}.0/24" for n in range(NETWORKS)}
    figures: dict[str, float] = {}
    reads: dict[str, int] = {}
    for run in ("stalling", "gone"):
        if run == "gone":
            for proc in swarm["sybils"]:
                swarm["lab"].kill(proc)  # their records stay listed, every dial is refused
        done = submit_devices(swarm["root"], run, swarm["gate"], netns=swarm["net"].ns("gate"))
        assert (done.code, done.ran) == (0, swarm["honest"]), done.stderr[-3000:]
        assert _suspect(done.stderr) == cheaters, done.stderr[-3000:]  # the five, by their records
        figures[run] = done.seconds
        reads[run] = sum(f"peer {p} advertised but" in done.stderr for p in swarm["sybil_ids"])
    print(
        f"\nseconds to discovery: stalling {figures['stalling']:.2f}, gone {figures['gone']:.2f};"
        f" Sybils whose probe ended before the campaign had its workers: {reads}"
    )
