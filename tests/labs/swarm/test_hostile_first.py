"""Issue 50, a small swarm's lookups, with real processes on real networks: a stranger's DHT server that
answers first with a full key of Sybils does not end a read of the key before its honest servers answer.

Routed /24s in namespaces (tests/kit/routed.py, one host each): a `sark-node gate`; two honest
networks, each one honest server of this code (tests/kit/dhtservers.py), the first with two honest
providers placing their records with the node's own `Dht.publish`; then one hostile server on a network
of its own that keeps no record it is sent and answers every GET_PROVIDERS at once with the same 20
Sybils (a full key's count); and a reader (tests/kit/walker.py) on a network of its own that knows the
four servers (at most k: its lookups ask every server at once, no walk) and runs discovery's lookup
(`Dht.lookup(None, count=2)`) `LOOKS` times. The honest networks answer 40 ms later than the hostile
one (the NFQUEUE delay shim on their egress, `kit.faults.Faults.delay`): the stranger chose to be
near the reader, and answers first.

Before, a small swarm's read of a key ended at the first `count` (20) distinct providers and kept them
in the order they came: the hostile answer alone, every time (on the rule before, 9 of 9 lookups kept
no honest provider). Now the asks end only when `count` providers are each listed by servers on more
networks than the servers still to answer (`Shortlist.vouched`, as the walk's count), and the
providers come in turns, one from each network that listed any (`Shortlist.ranked`): both honest
providers are in every lookup.

The cheater's view: the stranger runs a DHT server (any node may: `dht_mode = "server"`), chooses its
network's distance to the reader (near: it answers first) and its list (20 Sybils under every key). It
does not choose how many networks the honest servers answer from, and one network is one voice. What
this does not stop: strangers on more networks than the honest servers a reader knows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kit.faults import Faults
from kit.netns import running
from kit.routed import RoutedNet, SwarmLab, swarm_hosts

from node.p2p.shards import SHARD_CAP, Shard

ROOT_KEY = Shard(None, 0, 0).dht_key
HONEST_NETWORKS = 2
PROVIDERS = 2
LOOKS = 8
NEARER_MS = 40.0
"""How much later the honest networks' answers come than the stranger's."""
HOSTS = swarm_hosts(HONEST_NETWORKS, 1)
"""Each host on a /24 of its own: the gate, the reader, the honest networks `o*`, the hostile `x0`."""


@pytest.fixture(scope="module")
def net() -> Iterator[RoutedNet]:
    yield from running(RoutedNet(hosts=HOSTS))


@pytest.fixture(scope="module")
def looked(net: RoutedNet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    lab = SwarmLab(net, tmp_path_factory.mktemp("hostilefirst"))
    try:
        honest = [lab.servers(f"o{i}", f"o{i}", "--servers", "1") for i in range(HONEST_NETWORKS)]
        for proc in honest:
            proc.wait_event("ready", 180)
        placed = lab.servers("p0", "o0", "--providers", str(PROVIDERS)).wait_event("ready", 180)
        hostile = ["--hostile-near", ROOT_KEY.hex(), "--bits", "1", "--sybils", str(SHARD_CAP)]
        bad = lab.servers("x0", "x0", "--servers", "1", *hostile).wait_event("ready", 180)
        with Faults() as faults:
            for host in ("gate", *(f"o{i}" for i in range(HONEST_NETWORKS))):
                faults.delay(net.ns(host), NEARER_MS)
            small = ["--walks", "0", "--servers", str(HONEST_NETWORKS + 2), "--looks", str(LOOKS)]
            walked = lab.walker(ROOT_KEY, *small).wait_event("walked", 240)
        yield {**walked, "providers": placed["providers"], "sybils": bad["sybils"]}
    finally:
        lab.close()


def test_a_strangers_server_answering_first_with_sybils_ends_no_read_before_the_honest_servers(
    looked: dict[str, Any],
) -> None:
    honest, sybils = set(looked["providers"]), set(looked["sybils"])
    assert len(honest) == PROVIDERS
    assert len(sybils) == SHARD_CAP
    assert looked["table"] <= SHARD_CAP  # a small swarm's read: every server asked at once, no walk
    looks = [looked["looked"], *looked["looks"]]
    lost = sum(not honest <= set(look) for look in looks)
    print(f"\n{len(looks)} lookups, {looked['table']} servers known: {lost} without both honest providers")
    for look in looks:
        assert set(look) <= honest | sybils
    assert lost == 0
