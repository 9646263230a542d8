"""swarm_sim.py against real processes: a gate and N `sark-node join` workers on loopback (issue 43).

    .venv/bin/python benchmarks/swarm_check.py [--workers 100] [--batch 10] [--window 300] [--record-ttl S]
        [--dht-mode reachable]

With `--dht-mode reachable` every worker a dial-back reached serves the DHT: with more than k servers
a key's records are at its closest servers, the trees are read by the node's lookup (its walk, no
answer bytes), a lookup's hops (requests per key) are compared with the simulator's walks over the
same servers, and a worker's upkeep with a serving device's whole kad traffic (its own and what it
carries of the others'). Tolerance for hops: 30 %.

Starts a gate and `--workers` real `join` processes (a fixed profile file: no device probe; the
node's default record TTL), `--batch` at a time, and compares with the simulator (`swarm_fleet`,
`swarm_net`, `swarm_upkeep`) on what both can measure:

- placement: once every worker is ready, each sharded key of the any-worker and CPU (ONNX) trees is
  read at the gate with a raw GET_PROVIDERS, against where `Fleet` places the same peer ids (in the
  order they became ready). Tolerance: providers per level equal within the joins' concurrency (a
  batch reads the keys at once: at most `--batch` workers per tree on another level).
- answer bytes: each key's answer as it arrives against `Sizes.answer` for that many providers, as our
  gate lists them (no signed peer records), one address per peer (the lab's loopback workers have
  one). Tolerance 20 %.
- lookups: a submitter's `Dht.lookup` of 20 workers, of 2 x the fleet's (more than there are) and of
  all: keys asked, requests per key (hops: with the gate the only server a key is one request, never a
  walk) and the lookup's bytes on the wire (the reader's TCP sockets, `ss`) against `sharded_lookup`
  over a one-gate swarm. Tolerance: keys and requests equal; bytes within 25 % (the wire adds TCP-level
  framing the model's per-stream constant only estimates).
- stream overhead: a request's stream beyond its messages (`calibrate`), against the simulator's
  `STREAM_BYTES` (set from this measurement).
- upkeep: every worker's TCP bytes sent and received (`ss`, loopback) over `--window` seconds after the
  joins, per worker per second, against `sharded_gates_upkeep` at one gate (the refresh writes at the
  node's period with its jitter, libp2p's routing refresh; no churn in the lab: no join reads).
  Tolerance 30 % (the model counts kad only; identify and the host's own traffic ride the same
  sockets).

Writes benchmarks/out/swarm_check-<workers>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import trio
from libp2p.custom_types import TProtocol
from libp2p.kad_dht.pb.kademlia_pb2 import Message
from libp2p.peer.id import ID
from libp2p.utils.varint import encode_uvarint, read_varint_prefixed_bytes_limited
from swarm_fleet import Fleet, held_lists, sharded_lookup
from swarm_net import (  # also puts the repository on sys.path
    Sizes,
    Swarm,
    kad_id,
    make_profile,
    measure_sizes,
    walk,
)
from swarm_upkeep import served, sharded_gates_upkeep, sharded_upkeep
from swarmlab import OUT, Lab

from node.config import NodeConfig
from node.p2p.dht import Dht, capability_dht_key
from node.p2p.kadwire import add_provider_request, get_providers_request
from node.p2p.node import open_node
from node.p2p.shards import MAX_LEVEL, SHARD_CAP, Shard, first_levels, next_keys, path_of
from node.p2p.shortlist import K
from protocol import KAD, ComputeUnit

UNIT = ComputeUnit.CPU_ONNX
TOLERANCE = {"answer_bytes": 0.20, "lookup_bytes": 0.25, "hops": 0.30, "upkeep": 0.30}


def socket_bytes(pids: set[int], sockets: Counter[int] | None = None) -> dict[int, int]:
    """Bytes sent and received on each process's established TCP sockets (`ss -tinp`); `sockets`, if
    given, counts each process's sockets."""
    out = subprocess.run(["ss", "-tinpH", "state", "established"], capture_output=True, text=True).stdout
    total: Counter[int] = Counter()
    owner: int | None = None
    for line in out.splitlines():
        if not line.startswith((" ", "\t")):
            found = re.search(r"pid=(\d+)", line)
            owner = int(found.group(1)) if found and int(found.group(1)) in pids else None
            if owner is not None and sockets is not None:
                sockets[owner] += 1
        elif owner is not None:
            for field in ("bytes_sent", "bytes_received"):
                value = re.search(rf"\b{field}:(\d+)", line)
                total[owner] += int(value.group(1)) if value else 0
    return dict(total)


async def read_tree(
    node: Any, gate: str, unit: ComputeUnit | None, walk: bool
) -> dict[Shard, tuple[int, int]]:
    """Every non-empty key of a unit's tree at the gate: shard -> (providers, answer bytes); with `walk`
    (workers serve: a key's records are at its closest servers) by the node's lookup, bytes not read."""
    out: dict[Shard, tuple[int, int]] = {}
    host, gate_id = node.host.raw, ID.from_base58(gate.rsplit("/p2p/", 1)[-1])
    frontier: tuple[Shard, ...] = (Shard(unit, 0, 0),)
    while frontier:
        for shard in frontier:
            if walk:
                out[shard] = (len((await node.kad.lookup_providers(shard.dht_key, SHARD_CAP)).providers), 0)
                continue
            stream = await host.new_stream(gate_id, [TProtocol(KAD)])
            request = Message(type=Message.MessageType.GET_PROVIDERS, key=shard.dht_key).SerializeToString()
            await stream.write(encode_uvarint(len(request)) + request)
            raw = await read_varint_prefixed_bytes_limited(stream, 4 << 20)
            await stream.close()
            reply = Message()
            reply.ParseFromString(raw)
            out[shard] = (len(reply.providerPeers), len(raw) + len(encode_uvarint(len(raw))))
        frontier = next_keys({s: n for s, (n, _) in out.items()}, frontier)
        frontier = tuple(s for s in frontier if s.level <= MAX_LEVEL)
    return out


async def lookups(node: Any, counts: list[int | None]) -> list[dict[str, float]]:
    """A submitter's `Dht.lookup` of each count: keys, requests (GET_PROVIDERS sent), found, wire bytes."""
    dht, kad = Dht(node.kad), node.kad
    requests = [0]
    ask = kad.link.request

    async def counted(peer: ID, request: bytes) -> Any:
        requests[0] += 1
        return await ask(peer, request)

    kad.link.request = counted
    out: list[dict[str, float]] = []
    for count in counts:
        requests[0] = 0
        before = socket_bytes({os.getpid()}).get(os.getpid(), 0)
        found = await dht.lookup(UNIT, count)
        wire = socket_bytes({os.getpid()}).get(os.getpid(), 0) - before
        out.append({"count": count or 0, "keys": found.keys, "requests": requests[0],
                    "found": len(found.providers), "bytes": wire})  # fmt: skip
    return out


Trees = dict[ComputeUnit | None, dict[Shard, tuple[int, int]]]


async def calibrate(node: Any, gate: str, rounds: int = 40) -> dict[str, float]:
    """A request's stream on the wire beyond its messages (`swarm_net.STREAM_BYTES`): `rounds` empty
    GET_PROVIDERS and slim ADD_PROVIDERs at the gate, the reader's TCP bytes by `ss`, less the messages."""
    kad, gate_id, me = node.kad, ID.from_base58(gate.rsplit("/p2p/", 1)[-1]), os.getpid()
    dht = kad.raw
    sizes = measure_sizes(addrs=1)
    out: dict[str, float] = {}
    for name, messages in (("get_providers", sizes.request_slim),
                           ("add_provider", sizes.provide_slim + sizes.provide_echo)):  # fmt: skip
        before, answers = socket_bytes({me}).get(me, 0), 0
        for i in range(rounds):
            key = Shard(None, MAX_LEVEL, i).dht_key  # keys nobody provides
            if name == "get_providers":  # the answer as it came: closer peers too, once workers serve
                reply = await kad.link.request(gate_id, get_providers_request(key))
                answers += len(reply) + len(encode_uvarint(len(reply)))
            else:
                request = add_provider_request(key, dht.host.get_id(), list(dht.host.get_addrs()))
                await kad.link.send(gate_id, request, reply=True)
        wire = (socket_bytes({me}).get(me, 0) - before) / rounds
        out[f"{name}_stream_bytes"] = wire - messages - answers / rounds
    return out


async def read_all(
    gate: str, root: Path, counts: list[int | None]
) -> tuple[Trees, list[dict[str, float]], dict[str, float], int]:
    """The trees, the lookups and the stream overhead, read by a fresh submitter; and its table's size."""
    config = NodeConfig(data_dir=root / "reader", gates=(gate,), listen=("/ip4/127.0.0.1/tcp/0",))
    async with open_node(config, role="submitter") as node:
        assert node.kad is not None
        table = node.kad.routing_table_size()
        trees = {u: await read_tree(node, gate, u, table > K) for u in (None, UNIT)}
        return trees, await lookups(node, counts), await calibrate(node, gate), table


def simulated(peers: list[str]) -> Fleet:
    """The simulator's placement of these peers, in this order (every one a CPU (ONNX) worker)."""
    fleet = Fleet(len(peers), np.random.default_rng(0), NodeConfig())
    fleet.peers = peers
    for peer in peers:
        fleet.unit[peer] = UNIT
    fleet.place_in_order()
    return fleet


def compare_tree(
    real: dict[Shard, tuple[int, int]], fleet: Fleet, unit: ComputeUnit | None, batch: int, sizes: Sizes
) -> dict[str, object]:
    real_levels: Counter[int] = Counter()
    sim_levels: Counter[int] = Counter()
    for shard, (n, _) in real.items():
        real_levels[shard.level] += n
    for shard, n in fleet.listed.items():
        if shard.unit == unit:
            sim_levels[shard.level] += n
    moved = sum(abs(real_levels[lv] - sim_levels[lv]) for lv in set(real_levels) | set(sim_levels)) // 2
    ratios = [b / sizes.answer(0, n, slim=True) for n, b in real.values() if n and b] or [
        1.0
    ]  # walked: unread
    return {
        "providers_per_level_real": dict(sorted(real_levels.items())),
        "providers_per_level_sim": dict(sorted(sim_levels.items())),
        "workers_on_another_level": moved, "level_ok": moved <= batch,
        "max_per_key_real": max(n for n, _ in real.values()),
        "answer_bytes_real_over_sim_min": min(ratios), "answer_bytes_real_over_sim_max": max(ratios),
        "bytes_ok": all(abs(r - 1) <= TOLERANCE["answer_bytes"] for r in ratios),
    }  # fmt: skip


def as_read(fleet: Fleet, tree: dict[Shard, tuple[int, int]]) -> Fleet:
    """The fleet with the unit's tree as the gate holds it. Ten workers of a batch join at once, so
    which key of a level each one took can differ from the join order the simulator replays (the tree
    check allows one batch); a lookup is compared over the placement it really read."""
    placed = Counter({s: n for s, n in fleet.listed.items() if s.unit != UNIT})
    placed.update({s: n for s, (n, _) in tree.items()})
    members: dict[Shard, list[str]] = {}
    taken: set[tuple[ComputeUnit | None, str]] = set()
    for shard in sorted(placed, key=lambda s: s.level):  # who is at each key: in join order, down the paths
        on_path = [p for p in fleet.peers if (shard.unit, p) not in taken]
        members[shard] = [p for p in on_path if path_of(p, shard.unit)[shard.level] == shard][: placed[shard]]
        taken.update((shard.unit, p) for p in members[shard])
    return Fleet(fleet.n, fleet.rng, fleet.config, fleet.peers, fleet.unit, placed, members=members)


def compare_lookups(
    real: list[dict[str, float]], fleet: Fleet, sizes: Sizes, servers: list[str]
) -> list[dict[str, Any]]:
    """Each real lookup against `sharded_lookup` over the same servers: with the gate alone one request
    a key; with more than k servers a walk a key (hops: requests per key, `sim_hops`)."""
    out = []
    swarm = Swarm.build([kad_id(p.encode()) for p in servers], 0, np.random.default_rng(0), slim=True)
    for row in real:
        count = int(row["count"]) or None
        sent = statistics.mean(sharded_lookup(swarm, fleet, sizes, UNIT, count)[3] for _ in range(20))
        keys = _sim_keys(fleet, count)
        hops = sim_hops(swarm, fleet, sizes, count)
        ratio, real_hops = row["bytes"] / sent, row["requests"] / row["keys"]
        ok = (
            row["keys"] == keys
            and abs(real_hops / hops - 1) <= TOLERANCE["hops"]
            and abs(ratio - 1) <= TOLERANCE["lookup_bytes"]
        )
        sim = {"sim_keys": keys, "sim_bytes": sent, "bytes_real_over_sim": ratio, "hops_real": real_hops,
               "hops_sim": hops}  # fmt: skip
        out.append({**row, **sim, "ok": ok})
    return out


def sim_hops(swarm: Swarm, fleet: Fleet, sizes: Sizes, count: int | None) -> float:
    """Requests a key in the simulator, counted as the node's lookup sends them (the real figure is its
    `_request` calls over its keys): 1 with k or fewer servers (all asked: the lab's gate alone), else
    a walk to each key the lookup reads (`_sim_read`) and, when it reads the unit's old key, the k
    closest servers of its table asked at once (`local_ask`); the mean of 20 lookups from random starts.
    Before, the old key's requests were left out and only the first levels walked."""
    if swarm.direct:
        return float(len(swarm.ids))
    shards, old = _sim_read(fleet, count)
    old_key = kad_id(capability_dht_key(UNIT))
    per_key = []
    for _ in range(20):
        start = int(swarm.rng.integers(0, 2**63)) * 2
        asked = len(swarm.table(start, old_key)[:K]) if old else 0
        for shard in shards:
            key = kad_id(shard.dht_key)  # holders list what their writers' own walks sent them
            asked += walk(swarm, sizes, start, key, held_lists(swarm, sizes, fleet, shard, key), 0).asked
        per_key.append(asked / (len(shards) + old))
    return statistics.mean(per_key)


def _sim_read(fleet: Fleet, count: int | None) -> tuple[list[Shard], bool]:
    """The keys the node's lookup reads over the simulated placement (the tree's levels as `Dht.lookup`
    reads them), and whether it reads the unit's old key (asked for all, or still short at the end)."""
    asked: dict[Shard, int] = {}
    frontier, found, read = first_levels(UNIT, count), 0, list[Shard]()
    while frontier and (count is None or found < count):
        read += frontier
        asked.update((s, fleet.listed[s]) for s in frontier)
        found += sum(fleet.listed[s] for s in frontier)
        frontier = next_keys(asked, frontier)
    return read, count is None or found < count


def _sim_keys(fleet: Fleet, count: int | None) -> int:
    """How many keys the node's lookup asks over the simulated placement, the old key included."""
    read, old = _sim_read(fleet, count)
    return len(read) + old


def upkeep(
    pids: set[int], window: float, fleet: Fleet, config: NodeConfig, servers: list[str]
) -> dict[str, float]:
    """Real bytes per worker per second over `window` against the model's, less the join reads (the lab
    has no churn): at one gate, a worker's writes and routing refresh; with the workers serving, a
    serving device's whole kad traffic (`sharded_upkeep` over the same servers, and what a server
    carries of the others')."""
    before = socket_bytes(pids)
    time.sleep(window)  # the measurement window itself: the workers refresh on their own timers
    sockets: Counter[int] = Counter()
    after = socket_bytes(pids, sockets)
    per_worker = [(after.get(p, 0) - before.get(p, 0)) / window for p in pids]
    sizes = measure_sizes(addrs=1)
    if len(servers) > K:
        swarm = Swarm.build([kad_id(p.encode()) for p in servers], 0, np.random.default_rng(0), slim=True)
        parts = sharded_upkeep(swarm, fleet, sizes, config, 30)
        own = sum(v for k, v in parts.items() if k != "joins")
        model = (own + served(own, fleet.n, len(servers))) / 3600
    else:
        parts = sharded_gates_upkeep(fleet, sizes, config, gates=1)
        model = (parts["writes"] + parts["routing"]) / 3600
    real = statistics.mean(per_worker)
    return {"real_bytes_per_worker_s_mean": real, "real_p50": statistics.median(per_worker),
            "real_min": min(per_worker), "real_max": max(per_worker), "sim_bytes_per_worker_s": model,
            "real_over_sim": real / model, "ok": abs(real / model - 1) <= TOLERANCE["upkeep"],
            "window_s": window, "sockets_per_worker_mean": statistics.mean(sockets[p] for p in pids),
            "sockets_per_worker_max": max(sockets[p] for p in pids)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--window", type=float, default=300.0, help="upkeep window, seconds")
    parser.add_argument("--record-ttl", type=float, help="the workers' record TTL (default: the node's)")
    parser.add_argument("--dht-mode", help="the workers' dht_mode (SARK_DHT_MODE; default: the node's)")
    args = parser.parse_args()
    if args.dht_mode:
        os.environ["SARK_DHT_MODE"] = args.dht_mode  # the workers' environment (`Lab` passes it on)
    config = NodeConfig() if args.record_ttl is None else NodeConfig(record_ttl_s=args.record_ttl)
    root = Path(tempfile.mkdtemp(prefix="swarm-check-"))
    profile = root / "profile.json"
    profile.write_text(make_profile().model_dump_json())
    lab = Lab(root, record_ttl=config.record_ttl_s)
    began = time.monotonic()
    try:
        gate = lab.gate().ready["addrs"][0]
        order: list[str] = []
        serving: list[str] = [gate.rsplit("/p2p/", 1)[-1]]  # the gate, and the workers that serve
        procs = []
        for first in range(0, args.workers, args.batch):
            batch = [
                lab.worker(f"w{i}", [gate], profile, wait=False) for i in range(first, first + args.batch)
            ]
            ready = [p.wait_event("ready", 300) for p in batch]
            order += [r["peer_id"] for r in ready]
            serving += [r["peer_id"] for r in ready if r["reachability"] == "direct" and args.dht_mode]
            procs += batch
            print(f"{len(order)} workers ready ({time.monotonic() - began:.0f} s)", flush=True)
        fleet = simulated(order)
        sizes = measure_sizes(addrs=1)  # the lab's workers listen on loopback only: one address each
        counts = [SHARD_CAP, 2 * args.workers, None]
        trees, real_lookups, stream, table = trio.run(read_all, gate, root, counts)
        report: dict[str, Any] = {
            (u.value if u else "any"): compare_tree(t, fleet, u, args.batch, sizes) for u, t in trees.items()
        }
        report["servers"], report["reader_routing_table"] = len(serving), table
        report["lookups"] = compare_lookups(real_lookups, as_read(fleet, trees[UNIT]), sizes, serving)
        report["stream_bytes_real"] = stream
        report["stream_bytes_sim"] = sizes.stream
        print(json.dumps(report, indent=1), flush=True)
        report["upkeep"] = upkeep({p.popen.pid for p in procs}, args.window, fleet, config, serving)
        print(json.dumps(report["upkeep"]), flush=True)
        report["tolerance"] = TOLERANCE
        report["record_ttl_s"] = config.record_ttl_s
    finally:
        lab.close()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"swarm_check-{args.workers}.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
