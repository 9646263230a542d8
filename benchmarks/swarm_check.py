"""swarm_sim.py against real processes: a gate and N `sark-node join` workers on loopback (issue 43).

    .venv/bin/python benchmarks/swarm_check.py [--workers 100] [--batch 10]

Starts a gate and `--workers` real `join` processes (a fixed profile file: no device probe), `--batch`
at a time. Once every worker is ready, reads each sharded key of the any-worker tree and of the
CPU (ONNX) tree at the gate with a raw GET_PROVIDERS (the bytes of each answer as they arrive), and
compares, key by key, with the simulator: where `swarm_sim.Fleet` places the same peer ids (in the
order they became ready) and the answer size `swarm_sim.Sizes.answer` gives for that many
providers. Tolerances: providers per level equal within the joins' concurrency (a batch reads the
keys at once: a worker may land one level deeper than in the sequential simulation, at most
`--batch` per tree); answer bytes within 20 % of the simulator's message model (`measure_sizes`) with
one address per peer, as the lab's loopback workers have (the simulator's devices have two).
Writes benchmarks/out/swarm_check-<workers>.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import trio
from libp2p.custom_types import TProtocol
from libp2p.kad_dht.pb.kademlia_pb2 import Message
from libp2p.peer.id import ID
from libp2p.utils.varint import encode_uvarint, read_varint_prefixed_bytes_limited
from swarm_fleet import Fleet
from swarm_net import make_profile, measure_sizes  # also puts the repository on sys.path
from swarmlab import OUT, Lab

from node.config import NodeConfig
from node.p2p.node import open_node
from node.p2p.shards import MAX_LEVEL, Shard, next_keys
from protocol import KAD, ComputeUnit

UNIT = ComputeUnit.CPU_ONNX
TOLERANCE = 0.20


async def read_tree(gate: str, root: Path, unit: ComputeUnit | None) -> dict[Shard, tuple[int, int]]:
    """Every non-empty key of a unit's tree at the gate: shard -> (providers, answer bytes)."""
    config = NodeConfig(data_dir=root / "reader", gates=(gate,), listen=("/ip4/127.0.0.1/tcp/0",))
    out: dict[Shard, tuple[int, int]] = {}
    async with open_node(config, role="submitter") as node:
        host, gate_id = node.host.raw, ID.from_base58(gate.rsplit("/p2p/", 1)[-1])
        frontier: tuple[Shard, ...] = (Shard(unit, 0, 0),)
        while frontier:
            for shard in frontier:
                stream = await host.new_stream(gate_id, [TProtocol(KAD)])
                request = Message(
                    type=Message.MessageType.GET_PROVIDERS, key=shard.dht_key
                ).SerializeToString()
                await stream.write(encode_uvarint(len(request)) + request)
                raw = await read_varint_prefixed_bytes_limited(stream, 4 << 20)
                await stream.close()
                reply = Message()
                reply.ParseFromString(raw)
                out[shard] = (len(reply.providerPeers), len(raw) + len(encode_uvarint(len(raw))))
            frontier = next_keys({s: n for s, (n, _) in out.items()}, frontier)
            frontier = tuple(s for s in frontier if s.level <= MAX_LEVEL)
    return out


def simulated(peers: list[str]) -> Fleet:
    """The simulator's placement of these peers, in this order (every one a CPU (ONNX) worker)."""
    fleet = Fleet(len(peers), np.random.default_rng(0), NodeConfig())
    fleet.peers = peers
    for peer in peers:
        fleet.unit[peer] = UNIT
    fleet.place_in_order()
    return fleet


def compare(
    real: dict[Shard, tuple[int, int]], fleet: Fleet, unit: ComputeUnit | None, batch: int
) -> dict[str, object]:
    sizes = measure_sizes(addrs=1)  # the lab's workers listen on loopback only: one address each
    real_levels: Counter[int] = Counter()
    sim_levels: Counter[int] = Counter()
    for shard, (n, _) in real.items():
        real_levels[shard.level] += n
    for shard, n in fleet.listed.items():
        if shard.unit == unit:
            sim_levels[shard.level] += n
    moved = sum(abs(real_levels[lv] - sim_levels[lv]) for lv in set(real_levels) | set(sim_levels)) // 2
    ratios = [b / (sizes.answer(0, n) - sizes.stream) for n, b in real.values() if n]
    return {
        "providers_per_level_real": dict(sorted(real_levels.items())),
        "providers_per_level_sim": dict(sorted(sim_levels.items())),
        "workers_on_another_level": moved, "level_ok": moved <= batch,
        "max_per_key_real": max(n for n, _ in real.values()),
        "answer_bytes_real_over_sim_min": min(ratios), "answer_bytes_real_over_sim_max": max(ratios),
        "bytes_ok": all(abs(r - 1) <= TOLERANCE for r in ratios),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--batch", type=int, default=10)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="swarm-check-"))
    profile = root / "profile.json"
    profile.write_text(make_profile().model_dump_json())
    lab = Lab(root)
    try:
        gate = lab.gate().ready["addrs"][0]
        order: list[str] = []
        for first in range(0, args.workers, args.batch):
            procs = [
                lab.worker(f"w{i}", [gate], profile, wait=False) for i in range(first, first + args.batch)
            ]
            order += [p.wait_event("ready", 300)["peer_id"] for p in procs]
            print(f"{len(order)} workers ready", flush=True)
        fleet = simulated(order)
        report = {}
        for unit in (None, UNIT):
            real = trio.run(read_tree, gate, root, unit)
            report[unit.value if unit else "any"] = compare(real, fleet, unit, args.batch)
            print(json.dumps(report[unit.value if unit else "any"]))
    finally:
        lab.close()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"swarm_check-{args.workers}.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
