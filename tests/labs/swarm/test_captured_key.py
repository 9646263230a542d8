"""Issue 50, scope 2, after placement, over real hosts on loopback: hostile DHT servers that take a key
after a worker placed there do not keep it captured.

Three DHT servers on three networks (each its own /24 of 127.0.0.0/8: a gate on 127.0.0.1, two servers
on 127.0.1.1 and 127.0.2.1) and a worker that places at the root key of both its trees. Then the two
servers turn hostile for those two keys alone, as servers ground near them would: they keep no record
of them and list `CAP` Sybils under them. Holders on two of the key's three networks now read it full
without the worker; the gate still lists it.

Before, a placed key was only provided again at each refresh and never read back: the worker stayed
under the captured keys (a reader's walk, which ends at a majority of the k closest, lost it for as
long as the hostile servers stayed: `benchmarks/notes/swarm_hostile.md`). Now the refresh whose walk is
due (`ClosestServers.due`) reads the key back (`Dht._read_back`): most of its holders' networks read it
full without us (`ProviderLookup.ours`), so the worker places again below it, where a reader descends.
A refresh before the capture, with its walk due too, stays, and so does one with a single server
hostile (one network of three): the rule moves nobody from a key that is not taken by most networks.

The cheater's view: the hostile servers choose their ids (near the keys: public strings), what they
list and keep, and when; not the networks of the honest holder beside them. One honest holder that
still lists the worker does not keep it under a key the others hold.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
from kit import owntime
from kit.sybils import advert
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from multiaddr import Multiaddr

from gate import open_gate
from node.config import NodeConfig
from node.p2p.closest import ClosestServers
from node.p2p.dht import Dht
from node.p2p.identity import SEED_BYTES, peer_id_of_seed
from node.p2p.node import Node, open_node
from node.p2p.shards import Shard
from protocol import ComputeUnit

CAP = 3
UNIT = ComputeUnit.CPU_ONNX
NETWORKS = ("127.0.1.1", "127.0.2.1")
"""The two servers beside the gate, each on a /24 of its own."""
NOWHERE = "/ip4/127.0.0.1/tcp/9"
"""The Sybils' address: the discard port, where nothing listens."""
ROOTS = {Shard(None, 0, 0).dht_key, Shard(UNIT, 0, 0).dht_key}
"""The keys the hostile servers take: the root of both the worker's trees."""


@dataclass
class Swarm:
    gate: Node
    servers: list[Node]
    worker: Node
    dht: Dht


@asynccontextmanager
async def swarm(root: Path) -> AsyncIterator[Swarm]:
    """The gate and two servers, each on its own network, then a worker placed with the node's own
    `Dht.publish` (a small bound, `CAP`), every refresh's walk due."""
    async with AsyncExitStack() as stack:
        loopback = ("/ip4/127.0.0.1/tcp/0",)
        gate = await stack.enter_async_context(open_gate(NodeConfig(data_dir=root / "gate", listen=loopback)))
        gates = tuple(gate.host.addrs())
        servers = []
        for i, ip in enumerate(NETWORKS):
            config = NodeConfig(
                data_dir=root / f"s{i}", gates=gates, listen=(f"/ip4/{ip}/tcp/0",), dht_mode="server"
            )
            servers.append(await stack.enter_async_context(open_node(config, role="worker")))
        config = NodeConfig(data_dir=root / "w", gates=gates, listen=loopback)
        worker = await stack.enter_async_context(open_node(config, role="worker"))
        dht = Dht(worker.kad or worker.dht.kad, cap=CAP)
        await dht.publish(advert(worker, 300.0), [UNIT], gates=worker.gates)
        dht.kad.closest = ClosestServers(rewalk_every=1)  # every refresh's walk due: one period each
        yield Swarm(gate, servers, worker, dht)


def take(server: Node, keys: set[bytes], sybils: list[Any]) -> None:
    """Hostile for `keys` alone, as a server ground near them: keep no record of them, list the Sybils."""
    store = server.dht.kad.raw.provider_store
    add, get = store.add_provider, store.get_providers
    store.add_provider = lambda key, info: None if key in keys else add(key, info)
    store.get_providers = lambda key: list(sybils) if key in keys else get(key)


def sybils(count: int) -> list[Any]:
    seeds = [hashlib.sha256(b"captured" + bytes([i])).digest()[:SEED_BYTES] for i in range(count)]
    return [PeerInfo(ID.from_base58(peer_id_of_seed(seed)), [Multiaddr(NOWHERE)]) for seed in seeds]


def levels(dht: Dht) -> dict[ComputeUnit | None, int]:
    return {unit: shard.level for unit, shard in dht.placed.items()}


async def test_a_key_taken_after_placement_is_left_at_the_refresh_whose_walk_is_due(tmp_path: Path) -> None:
    with owntime.fail_after(90):
        async with swarm(tmp_path) as lab:
            me = lab.worker.host.peer_id
            assert levels(lab.dht) == {None: 0, UNIT: 0}
            await lab.dht.publish(advert(lab.worker, 300.0), [UNIT], gates=lab.worker.gates)
            assert levels(lab.dht) == {None: 0, UNIT: 0}  # a key not taken: the read-back moves nobody
            take(lab.servers[0], ROOTS, sybils(CAP))  # one network of three: a minority
            await lab.dht.publish(advert(lab.worker, 300.0), [UNIT], gates=lab.worker.gates)
            assert levels(lab.dht) == {None: 0, UNIT: 0}
            take(lab.servers[1], ROOTS, sybils(CAP))  # two of three
            root = await lab.dht.kad.provide_where_missing(Shard(None, 0, 0).dht_key)
            assert me in root.providers  # the gate still lists the worker: the union keeps it
            assert (root.holds, root.ours) == (CAP, False)  # most of the holders' networks do not
            await lab.dht.publish(advert(lab.worker, 300.0), [UNIT], gates=lab.worker.gates)
            assert levels(lab.dht) == {None: 1, UNIT: 1}  # placed again below both taken roots
            store = lab.gate.dht.kad.raw.provider_store
            for unit in (None, UNIT):  # the honest holder lists it there
                key = lab.dht.placed[unit].dht_key
                while me not in {str(i.peer_id) for i in store.get_providers(key)}:  # noqa: ASYNC110 (ADD_PROVIDER is fire-and-forget)
                    await trio.sleep(0.05)
