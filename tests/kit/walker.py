"""The asker of the hostile-networks lab: a node of this code that walks to a key, inside a lab namespace.

    python tests/kit/walker.py --gate MULTIADDR --data-dir DIR --listen IP --key HEX --walks N
        [--servers S] [--looks L] [--all] [--discover]

It opens a node (client mode, as a submitter's) listening on `IP`, joins through the gate, learns the
servers until its routing table holds more than k (so a lookup walks), then walks to the key `N` times
under each rule (`before`: the rule before issue 50, `Kad._walk(short=True)`; `now`: the node's), then
runs `Kad.lookup_providers` at a shard key's count (what the node keeps of a key: its first
`SHARD_CAP`) and discovery's own lookup (`Dht.lookup(None, count=2)`), then that lookup `--looks` times
more, and with `--all` a lookup of every worker (`Dht.lookup(None)`: its providers and the keys it
read), and with `--discover` a submitter's discovery of 2 workers (`Discovery.initial`: its looks,
probes and second reads; the workers it confirmed, its walks and how many waited for every one of a
key's k closest). `--servers S`: learn S servers first instead (at most k: a small swarm's lookups ask
every server at once, no walk). It prints one line: `{"event": "walked", "table": T, "networks":
{server: network}, "walks": {rule: [[provider, ...], ...]}, "kept": [...], "looked": [...], "looks":
[[...], ...], "all": {"providers": [...], "keys": K, "answered": A, "failures": {server: why}} or
null, "discovered": {"workers": [...], "walks": W, "every": E} or null}` and exits. Its walks and
lookups count their own seconds, as discovery's (`run_delay`, `node.p2p.looktime`). Nothing
in the product reads this file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import trio

from node.config import NodeConfig
from node.p2p.kad import Kad
from node.p2p.looktime import machine_run_delay
from node.p2p.node import Node, open_node
from node.p2p.shards import SHARD_CAP
from node.p2p.shortlist import K
from node.submitter.discovery import Discovery, DiscoveryConfig


async def learn_servers(kad: Kad, key: bytes, at_least: int = K + 1, within: float = 60.0) -> None:
    """Ask for the servers closest to `key` until the routing table holds `at_least` (more than k: a
    lookup walks; with at most k it asks them all at once)."""
    with trio.fail_after(within):
        while kad.routing_table_size() < at_least:
            await kad.raw.peer_routing.find_closest_peers_network(key)
            await trio.sleep(0.2)


async def discover(node: Node, kad: Kad) -> dict[str, Any]:
    """A submitter's discovery of 2 workers (`Discovery.initial`, a look for 2, the default 5 s look):
    the workers it confirmed, its walks, and those that waited for every one of a key's k closest."""
    reads = {"walks": 0, "every": 0}
    trace: list[Any] = []
    plain = kad.lookup_providers

    async def counted(key: bytes, count: int = 200, **kw: Any) -> Any:
        reads["walks"] += 1
        reads["every"] += bool(kw.get("every"))
        began = trio.current_time()
        got = await plain(key, count, **kw)
        trace.append([key.hex()[:12], bool(kw.get("every")), round(began, 2), round(trio.current_time(), 2),
                      list(got.providers), got.answered, len(got.failures)])  # fmt: skip
        return got

    # the product has no hook for a look's walks: this asker wraps its own Kad's method for the run
    kad.lookup_providers = counted  # type: ignore[method-assign]
    try:
        # a look for 2 (`devices: 2` asks for twice that, `LOOKUP_SLACK`): in a swarm of 25 servers the
        # hostile ones are most of every key's holders, so every key reads full of their Sybils and a
        # look for 4 reads the whole tree past its deadline before it returns the 2 it found
        config = DiscoveryConfig(want=2, count=2)
        found = await Discovery(node, config).initial()
    finally:
        kad.lookup_providers = plain  # type: ignore[method-assign]
    return {"workers": [v.peer_id for v in found], **reads, "trace": trace}


async def main(args: argparse.Namespace) -> None:
    key = bytes.fromhex(args.key)
    config = NodeConfig(data_dir=args.data_dir, gates=(args.gate,), listen=(f"/ip4/{args.listen}/tcp/0",))
    async with open_node(config, role="submitter") as node:
        kad = node.kad or node.dht.kad
        await learn_servers(kad, key, args.servers)
        waited = machine_run_delay()  # discovery's: a look's seconds are its own (`node.p2p.looktime`)
        walks: dict[str, list[list[str]]] = {"before": [], "now": []}
        for rule, short in (("before", True), ("now", False)):
            for _ in range(args.walks):
                walked = await kad._walk(key, SHARD_CAP, short=short, run_delay=waited)
                walks[rule].append([p.to_base58() for p in walked.providers])
        kept = await kad.lookup_providers(key, SHARD_CAP, run_delay=waited)
        looked = await node.dht.lookup(None, count=2, run_delay=waited)
        looks = [
            list((await node.dht.lookup(None, count=2, run_delay=waited)).providers)
            for _ in range(args.looks)
        ]
        every = await node.dht.lookup(None, run_delay=waited) if args.all else None
        discovered = await discover(node, kad) if args.discover else None
        networks = {peer.to_base58(): where for peer, where in kad.link.networks.items()}
        whole = None
        if every is not None:
            whole = {"providers": list(every.providers), "keys": every.keys, "answered": every.answered,
                     "failures": every.failures}  # fmt: skip
        line = {"event": "walked", "table": kad.routing_table_size(), "networks": networks, "walks": walks,
                "kept": list(kept.providers), "looked": list(looked.providers), "looks": looks,
                "all": whole, "discovered": discovered}  # fmt: skip
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--gate", required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--listen", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--walks", type=int, default=24)
    parser.add_argument("--servers", type=int, default=K + 1, help="servers to learn first (> k: a walk)")
    parser.add_argument("--looks", type=int, default=0, help="discovery's lookups after the first")
    parser.add_argument("--all", action="store_true", help="then a lookup of every worker (`devices: all`)")
    parser.add_argument("--discover", action="store_true", help="then a submitter's discovery of 2 workers")
    trio.run(main, parser.parse_args())
