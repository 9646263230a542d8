"""A device's upkeep in `swarm_sim.py`: the bytes of keeping its advert and provider records listed.

Per scheme: today's (every refresh walks and reads its keys back at the gates), sharded keys on the
gates, sharded keys on every reachable device (refreshes to the closest servers of the last walk,
`node.p2p.closest`; a server's routing refresh; the joins' placement reads spread by the churn).
"""

from __future__ import annotations

import math
import statistics

from swarm_fleet import CHURN_PER_HOUR, RARE_COUNT, Fleet, stale_factor
from swarm_net import Sizes, Swarm, kad_id, walk

from node.config import NodeConfig
from node.p2p.closest import MIN_KEPT, rewalk_every
from node.p2p.dht import advert_key
from node.p2p.kad import ADVERT_COPIES
from node.p2p.kadpatch import ROUTING_REFRESH_S
from node.p2p.shards import SHARD_CAP, path_of
from node.p2p.shortlist import K
from node.worker.advertising import REANNOUNCE_JITTER

NAT_SHARE = 0.40
GATES = 3


def refreshes_per_hour(config: NodeConfig) -> float:
    """A worker's announcements an hour: each after the period less a uniform share of up to
    `REANNOUNCE_JITTER` of it (`node.worker.advertising`), so on average the period x (1 - jitter / 2)."""
    return 3600 / (config.reannounce_interval() * (1 - REANNOUNCE_JITTER / 2))


def gate_writes(sizes: Sizes, walk_share: float = 1.0, slim: bool = True, gates: int = GATES) -> float:
    """A refresh's writes when the gates are the only servers: a FIND_NODE at each gate (for
    `walk_share` of the refreshes), then the advert and one ADD_PROVIDER per key (any worker, the
    device's unit) at each, with the servers' echoes (`slim`: the node's messages now, else libp2p's)."""
    walks = 3 * gates * (sizes.key_request + sizes.stream + sizes.answer(gates - 1, 0, slim))
    put, provide = sizes.write(slim)
    return walk_share * walks + min(gates, ADVERT_COPIES) * put + gates * 2 * provide


def today_upkeep(sizes: Sizes, n: int, config: NodeConfig) -> dict[str, float]:
    """Bytes per device per hour, today: the writes, then the read-backs (`find_providers` of both keys
    at every gate, and the any-worker key at each gate once more), every refresh."""
    stale = stale_factor(config)
    unit_share = n - RARE_COUNT  # a common-unit device, the many
    reads = GATES * (2 * sizes.answer(0, int(n * stale)) + sizes.answer(0, int(unit_share * stale)))
    reads += 3 * GATES * (sizes.key_request + sizes.stream)
    per_hour = refreshes_per_hour(config)
    return {"writes": gate_writes(sizes, slim=False) * per_hour, "read_backs": reads * per_hour}


def sharded_gates_upkeep(
    fleet: Fleet, sizes: Sizes, config: NodeConfig, gates: int = GATES
) -> dict[str, float]:
    """Bytes per device per hour, sharded keys on the gates: the writes (walks reused, `rewalk_share`),
    no read-back; the routing refresh (a FIND_NODE at each gate every `ROUTING_REFRESH_S`); a joining device's
    placement reads (one key per level, at every gate), spread over the hour by the churn."""
    read = gates * (sizes.request_slim + sizes.stream + sizes.answer(gates - 1, SHARD_CAP, True))
    joins = CHURN_PER_HOUR * 2 * statistics.mean(fleet.reads) * read
    writes = gate_writes(sizes, rewalk_share(config), gates=gates) * refreshes_per_hour(config)
    routing = gates * (sizes.key_request + sizes.stream + sizes.answer(gates - 1, 0, True))
    return {"writes": writes, "routing": routing * 3600 / ROUTING_REFRESH_S, "joins": joins}


def rewalk_share(config: NodeConfig) -> float:
    """The share of announcements of a key that walk (`node.p2p.closest`): every `rewalk_every`-th of the
    node's refresh period (about every 100 minutes), and the next one after fewer than `MIN_KEPT` of its
    k servers are left (churn over the reuse window: binomial, k servers each gone with the churn's
    probability)."""
    every = rewalk_every(config.reannounce_interval())
    gone = min(1.0, CHURN_PER_HOUR * every * config.reannounce_interval() / 3600)
    too_few = sum(math.comb(K, j) * gone**j * (1 - gone) ** (K - j) for j in range(K - MIN_KEPT + 1, K + 1))
    return min(1.0, 1 / every + too_few)


def sharded_upkeep(
    swarm: Swarm, fleet: Fleet, sizes: Sizes, config: NodeConfig, samples: int
) -> dict[str, float]:
    """Bytes per device per hour, sharded keys on every reachable device, in parts: per refresh the
    advert at `ADVERT_COPIES` and each of its two keys at k of the closest servers found by the last
    walk (no read-back), with the servers' echoes; a walk for `rewalk_share` of them (a key's is its
    read-back, `Dht._read_back`: a walk to the k closest, as the joins' read-back); libp2p's routing
    refresh (the node's: one walk for its own id every `ROUTING_REFRESH_S`, on clients too; libp2p's
    walked for every non-empty bucket too); the joins' placement reads (a walk per level, and one
    more to the k closest for the read-back), spread by the churn. libp2p's own republish of our
    advert is off (`Kad.put`)."""
    walks: list[int] = []
    for peer in fleet.peers[:: max(1, fleet.n // samples)][:samples]:
        shards = (path_of(peer, None)[0], path_of(peer, fleet.unit[peer])[0])
        for key in (advert_key(peer).encode(), *(s.dht_key for s in shards)):
            walks.append(walk(swarm, sizes, kad_id(peer.encode()), kad_id(key), None, 0).bytes)
    per_hour = refreshes_per_hour(config)
    put, provide = sizes.write(swarm.slim)
    walk_bytes = statistics.mean(walks)
    return {
        "advert": ADVERT_COPIES * put * per_hour,
        "providers": 2 * K * provide * per_hour,
        "rewalks": 3 * rewalk_share(config) * walk_bytes * per_hour,
        "routing": walk_bytes * 3600 / ROUTING_REFRESH_S,  # every device, clients too
        # a walk per level read down, and the read-back's walk to the k closest (`provide_where_missing`)
        "joins": CHURN_PER_HOUR * 2 * (statistics.mean(fleet.reads) + 1) * walk_bytes,
    }


def served(upkeep: float, devices: int, servers: int) -> float:
    """What one server carries of the others' upkeep (each exchange has a server at its other end),
    spread evenly over the servers: bytes per server per hour."""
    return upkeep * devices / servers


__all__ = [
    "GATES", "NAT_SHARE", "gate_writes", "refreshes_per_hour", "rewalk_share", "served",
    "sharded_gates_upkeep", "sharded_upkeep", "today_upkeep",
]  # fmt: skip
