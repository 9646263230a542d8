"""The fleet of `swarm_sim.py` and its lookups: where the sharded scheme places each device, and the
node's lookups (today's one key at the gates, the sharded tree) over the simulated network.

Model (stated, not measured):
- Churn: 10 % of devices leave (and as many join) per hour; provider records of departed devices
  stay listed until their TTL (answer bytes, never recall).
- Per size, `RARE_COUNT` devices have a rare unit (GPU (ONNX)), the others one common unit (CPU (ONNX)).
- Each lookup is simulated alone (discrete events within it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from swarm_net import (
    BANDWIDTH_BPS,
    Sizes,
    Swarm,
    kad_id,
    walk,
    writers_lists,
)  # also puts the repository on sys.path

from node.config import NodeConfig
from node.p2p.dht import capability_dht_key
from node.p2p.kadlink import QUERY_TIMEOUT_S
from node.p2p.shards import SHARD_CAP, Shard, first_levels, is_full, next_keys, path_of
from node.p2p.shortlist import K
from protocol import ComputeUnit

CHURN_PER_HOUR = 0.10
RARE, COMMON, RARE_COUNT = ComputeUnit.GPU_ONNX, ComputeUnit.CPU_ONNX, 100


@dataclass
class Fleet:
    """Devices, their units, and where the sharded scheme placed each (the node's spillover rule)."""

    n: int
    rng: np.random.Generator
    config: NodeConfig
    peers: list[str] = field(default_factory=list)
    unit: dict[str, ComputeUnit] = field(default_factory=dict)
    listed: Counter[Shard] = field(default_factory=Counter)
    reads: list[int] = field(default_factory=list)
    placed: dict[str, Shard] = field(default_factory=dict)
    """Each device's key in the any-worker tree (`dht_mode = "auto"` reads its level)."""
    members: dict[Shard, list[str]] = field(default_factory=dict)
    """The devices each key lists."""

    def place(self) -> None:
        """Name the devices (the first `RARE_COUNT` have the rare unit) and place them in join order."""
        self.peers = [f"sim-{self.n}-{i}" for i in self.rng.permutation(self.n)]
        for i, peer in enumerate(self.peers):
            self.unit[peer] = RARE if i < RARE_COUNT else COMMON
        self.place_in_order()

    def place_in_order(self) -> None:
        """Each device in turn at the first key of its path not full, in each of its two trees."""
        for peer in self.peers:
            for unit in (None, self.unit[peer]):
                for depth, shard in enumerate(path_of(peer, unit)):
                    if not is_full(self.listed[shard], False):
                        self.listed[shard] += 1
                        self.members.setdefault(shard, []).append(peer)
                        self.reads.append(depth + 1)
                        if unit is None:
                            self.placed[peer] = shard
                        break

    def count(self, unit: ComputeUnit) -> int:
        return sum(1 for u in self.unit.values() if u == unit)


def stale_factor(config: NodeConfig) -> float:
    """Listed records per live provider: departed devices stay listed until their TTL."""
    return 1 + CHURN_PER_HOUR * config.record_ttl_s / 3600


def direct_ask(swarm: Swarm, sizes: Sizes, listed: int, enough: bool) -> tuple[float, float, int]:
    """The node's lookup of one key when its table holds every server (the gates): all at once, each
    answering every provider it lists. Returns when it has the devices (the first answer when that is
    enough, else the last), when the last answer came, bytes."""
    answer = sizes.answer(len(swarm.ids) - 1, listed, swarm.slim)
    request = sizes.request_slim if swarm.slim else sizes.key_request
    times = []
    sent = 0
    for gate in swarm.ids[~swarm.dead]:
        swarm.load[int(gate)] += request + answer
        took, connecting = swarm.trip(int(gate))
        times.append(took + answer * 8 / BANDWIDTH_BPS)
        sent += request + sizes.stream + answer + connecting
    return (min(times) if enough else max(times)), max(times), sent


def local_ask(swarm: Swarm, sizes: Sizes, start: int, key: int) -> tuple[float, int]:
    """An old key asked with `walk=False`: the k closest servers of our own table, at once; all answer
    empty here (no worker of before issue 43). Returns when the last answered (or timed out), bytes."""
    answer = sizes.answer(K, 0, swarm.slim)
    request = sizes.request_slim if swarm.slim else sizes.key_request
    times, sent = [], 0
    for server in swarm.table(start, key)[:K]:
        if swarm.is_dead(server):
            times.append(QUERY_TIMEOUT_S)
            continue
        swarm.load[server] += request + answer
        took, connecting = swarm.trip(server)
        times.append(took + answer * 8 / BANDWIDTH_BPS)
        sent += connecting
    return max(times, default=0.0), sent + (request + sizes.stream + answer) * len(times)


def sharded_lookup(
    swarm: Swarm, fleet: Fleet, sizes: Sizes, unit: ComputeUnit, count: int | None
) -> tuple[float, float, int, int]:
    """The node's lookup over the tree (`Dht.lookup`): first levels at once, then the children of full
    keys; the unit's old key too when asked for all or still short at the end of the tree (empty here:
    no worker of before issue 43).

    Returns:
        when the `want`-th device came in (want: `count`, or every device of the unit), when the
        lookup returned (its last round over), devices found, bytes.
    """
    start = int(swarm.rng.integers(0, 2**63)) * 2
    swarm.begin_lookup()
    asked: dict[Shard, int] = {}
    frontier, now, found, sent, arrivals = first_levels(unit, count), 0.0, 0, 0, []
    stale = stale_factor(fleet.config)
    old_read = False
    while True:
        wants: list[tuple[Shard | None, int]] = [(s, kad_id(s.dht_key)) for s in frontier]
        if not old_read and (count is None or (not frontier and found < count)):
            wants.append((None, kad_id(capability_dht_key(unit))))  # the old key: all, or short at the end
            old_read = True
        if not wants:
            break
        ends = []
        for shard, key in wants:
            listed = fleet.listed[shard] if shard else 0
            if swarm.direct:
                t, _, b = direct_ask(swarm, sizes, int(listed * stale), listed >= SHARD_CAP)
                reached, got, read = True, listed, listed
            elif shard is None:
                t, b = local_ask(swarm, sizes, start, key)
                reached, got, read = True, 0, 0
            else:  # holders list what their writers' own walks sent them: a key can be read short
                w = walk(swarm, sizes, start, key, held_lists(swarm, sizes, fleet, shard, key), 0)
                t, b, reached = w.t, w.bytes, w.found
                got = len(w.providers & {kad_id(p.encode()) for p in fleet.members.get(shard, [])})
                read = min(listed, len(w.providers))  # a full key read short: its subtree not read
            if shard and reached:
                asked[shard] = read
                found += got
                arrivals += [now + t] * got
            sent += b
            ends.append(t)
        now += max(ends)
        if count is not None and found >= count:
            break
        frontier = next_keys(asked, frontier)
    want = min(count or fleet.count(unit), fleet.count(unit))
    return sorted(arrivals)[want - 1] if len(arrivals) >= want else now, now, found, sent


def held_lists(swarm: Swarm, sizes: Sizes, fleet: Fleet, shard: Shard, key: int) -> dict[int, frozenset[int]]:
    """What each holder of a key lists: its writers' own walks chose them (`swarm_net.writers_lists`),
    departed writers' records too until their TTL (as many more as `stale_factor` says)."""
    if key not in swarm.lists:
        members = [kad_id(p.encode()) for p in fleet.members.get(shard, [])]
        stale = int(len(members) * (stale_factor(fleet.config) - 1))
        gone = [int(x) for x in swarm.rng.integers(0, 2**63, size=stale)]
        swarm.lists[key] = writers_lists(swarm, sizes, key, members + gone)
    return swarm.lists[key]


def today_lookup(
    swarm: Swarm, sizes: Sizes, listed: int, config: NodeConfig
) -> tuple[float, float, int, int]:
    """Today's lookup: every gate at once, each answering every provider of the unit's one key (the
    devices are in at the first answer; the lookup returns after the last)."""
    first, last, sent = direct_ask(swarm, sizes, int(listed * stale_factor(config)), True)
    return first, last, listed, sent


__all__ = [
    "CHURN_PER_HOUR", "COMMON", "RARE", "RARE_COUNT", "Fleet",
    "direct_ask", "local_ask", "sharded_lookup", "stale_factor", "today_lookup",
]  # fmt: skip
