"""What holders that list different writers cost a lookup, in a young swarm (issue 43).

    .venv/bin/python benchmarks/swarm_young.py [--seeds 20] [--no-agreement]

The lab of `swarm_check.py --workers 30 --batch 10 --dht-mode reachable`, simulated: 31 servers (a gate
and 30 workers), the CPU (ONNX) tree placed in join order, each key's holders listing what their writers'
own walks sent them (`swarm_net.walk`, libp2p's FIND_NODE walk from the writer's id). Two views: "steady",
every writer walked over all 31 servers (or, in the node now, a writer's refreshes also go to the servers
of its table nearer the key than those it kept: `ClosestServers.nearer`); "grown", a worker of the second
batch walked when 21 served and kept the 20 it found (the node before `nearer`: a walk that found k
servers was reused for `REWALK_S`). Ten lookups of 20 and of all per seed. And each full key (20 providers
placed) as a placement reads it: full when holders on more than half of the networks list 20
(`node.p2p.shortlist.holding`, each server its own network, every one of the key's k closest answering),
against the union of the lists (the rule before issue 50's): where writers' views differ, a key must still
read full.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
from swarm_check import UNIT, simulated
from swarm_fleet import sharded_lookup
from swarm_net import Sizes, Swarm, kad_id, measure_sizes, walk

from node.p2p.shards import SHARD_CAP
from node.p2p.shortlist import AGREED, K, holding

BATCH = 10


def holders_of(swarm: Swarm, sizes: Sizes, ids: list[int], peers: list[str], members: list[str], key: int,
               grown: bool, seed: int) -> dict[int, frozenset[int]]:  # fmt: skip
    """Each server -> the writers whose walk chose it (the second batch over 21 servers when `grown`)."""
    early = Swarm.build(ids[: 1 + 2 * BATCH], 0, np.random.default_rng(seed), slim=True)
    lists: dict[int, set[int]] = {}
    for peer in members:
        view = early if grown and peers.index(peer) // BATCH == 1 else swarm
        for server in walk(view, sizes, kad_id(peer.encode()), key, None, 0).closest:
            lists.setdefault(server, set()).add(kad_id(peer.encode()))
    return {server: frozenset(w) for server, w in lists.items()}


def run(
    seeds: int, grown: bool, sizes: Sizes, agreed: int, full: list[tuple[bool, bool, int]] | None = None
) -> dict[str, tuple[float, float, float]]:
    """Per count (20, all): mean found, share of lookups short, mean KB. `full` gets each full key's
    (read full by the union, by its holders' networks, the shortest list among its k closest)."""
    rows: dict[str, list[tuple[int, int]]] = {"20": [], "all": []}
    for seed in range(seeds):
        peers = [f"w{seed}-{i}" for i in range(3 * BATCH)]
        fleet = simulated(peers)
        ids = [kad_id(p.encode()) for p in [f"g{seed}", *peers]]
        swarm = Swarm.build(ids, 0, np.random.default_rng(seed), slim=True)
        swarm.agreed = agreed
        swarm.short = True  # the rule it weighs (issue 43); a node walks past short agreement since issue 50
        for shard, members in fleet.members.items():
            if shard.unit == UNIT:
                key = kad_id(shard.dht_key)
                lists = swarm.lists[key] = holders_of(swarm, sizes, ids, peers, members, key, grown, seed)
                if full is not None and len(members) >= SHARD_CAP:
                    sizes_near = [len(lists.get(s, ())) for s in sorted(ids, key=lambda s: s ^ key)[:K]]
                    union = len(frozenset().union(*lists.values()))
                    at = holding(enumerate(sizes_near))
                    full.append((union >= SHARD_CAP, at >= SHARD_CAP, min(sizes_near)))
        for name, count in (("20", 20), ("all", None)):
            for _ in range(10):
                _, _, found, sent = sharded_lookup(swarm, fleet, sizes, UNIT, count)
                rows[name].append((found, sent))
    want = {"20": 20, "all": 3 * BATCH}
    return {
        name: (statistics.mean(f for f, _ in r), sum(f < want[name] for f, _ in r) / len(r),
               statistics.mean(b for _, b in r) / 1000)
        for name, r in rows.items()
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--no-agreement", action="store_true", help="walks to the k closest (no AGREED)")
    args = parser.parse_args()
    sizes = measure_sizes(addrs=1)
    agreed = 10**6 if args.no_agreement else AGREED  # 10**6: no walk ever ends on agreement
    for view in ("steady", "grown"):
        full: list[tuple[bool, bool, int]] = []
        for name, (found, short, kb) in run(args.seeds, view == "grown", sizes, agreed, full).items():
            print(
                f"{view:6} lookup of {name:3}: found {found:.2f} mean, {100 * short:.1f} % short, {kb:.1f} KB"
            )
        print(
            f"{view:6} full keys read full: by the union {sum(u for u, _, _ in full)} of {len(full)}, by "
            f"their holders' networks {sum(h for _, h, _ in full)} of {len(full)} (a holder's shortest "
            f"list {min(m for _, _, m in full)})"
        )


if __name__ == "__main__":
    main()
