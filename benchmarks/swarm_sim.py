"""Discovery at 1,000 to 50,000 devices: today's scheme and the sharded one, side by side (issue 43).

    .venv/bin/python benchmarks/swarm_sim.py [--sizes 1000,5000,10000,50000] [--lookups 100] [--seed 1]

A seeded, in-process simulation over the node's own code: the capability keys (`node.p2p.dht`,
`node.p2p.shards`: the tree, the spillover rule, the lookup's levels), the kad constants (k, the
direct query's deadline, `node.p2p.kad`), the record lifetime and refresh period (`NodeConfig`'s
defaults), and the byte size of every message (libp2p's kad protobuf `Message`, filled with a real
Ed25519 peer id, real multiaddrs and a real signed advert of the node's codec). Per size: 100 devices
have a rare unit (GPU (ONNX)), the others one common unit (CPU (ONNX)).

Model (stated, not measured):
- Kademlia: 64-bit XOR ids (sha256 of peer id or key), k = 20, alpha = 3 (the issue's; py-libp2p
  uses 10), each routing-table bucket holds k servers drawn at random from its id range; iterative
  lookups, alpha requests in flight, a GET_PROVIDERS walk of a key ends at its first holder.
- Latency: each request's RTT drawn from a lognormal, median 80 ms, sigma 0.6 (p95 ~ 215 ms, a
  wide-area mix); answers also take their bytes at 20 Mbit/s. Servers do not queue (their load is
  counted, not fed back): this favours today's scheme, whose three gates answer every lookup.
- Churn: 10 % of devices leave (and as many join) per hour: routing entries of departed servers
  (refresh every 600 s, libp2p's) time out after the node's query deadline; provider records of
  departed devices stay listed until their TTL (answer bytes, never recall).
- NAT: 40 % of devices are behind NAT and cannot be servers. Today's scheme: the 3 gates are the
  only servers (the default); the new one: every reachable device is a server.
- Each lookup is simulated alone (discrete events within it); upkeep from walks of sampled devices.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "node")]

from conftest_data import make_profile  # type: ignore[import-not-found]  # noqa: E402  (the lab's profile)
from libp2p.crypto.ed25519 import create_new_key_pair  # noqa: E402
from libp2p.kad_dht.kad_dht import ROUTING_TABLE_REFRESH_INTERVAL  # noqa: E402
from libp2p.kad_dht.pb.kademlia_pb2 import Message  # noqa: E402
from libp2p.peer.id import ID  # noqa: E402
from multiaddr import Multiaddr  # noqa: E402

from node.config import NodeConfig  # noqa: E402
from node.p2p.dht import advert_key, capability_dht_key  # noqa: E402
from node.p2p.kad import QUERY_TIMEOUT_S, K  # noqa: E402
from node.p2p.shards import SHARD_CAP, Shard, first_levels, is_full, next_keys, path_of  # noqa: E402
from protocol import DOMAIN_ADVERT, AdvertBody, ComputeUnit, seal  # noqa: E402
from protocol.codec import pack_body  # noqa: E402
from protocol.records import peer_id_from_public_key, public_key_of  # noqa: E402

ALPHA = 3
RTT_MEDIAN_S, RTT_SIGMA = 0.080, 0.6
BANDWIDTH_BPS = 20e6
CHURN_PER_HOUR = 0.10
NAT_SHARE = 0.40
GATES = 3
RARE, COMMON, RARE_COUNT = ComputeUnit.GPU_ONNX, ComputeUnit.CPU_ONNX, 100
OUT = ROOT / "benchmarks" / "out"


@dataclass(frozen=True)
class Sizes:
    """Bytes on the wire of each kad message, from libp2p's protobuf and the node's records."""

    peer: int  # one peer entry (id + 2 addrs) in closerPeers/providerPeers
    key_request: int  # a request that carries only a key
    advert: int  # a PUT_VALUE of our signed advert
    stream: int  # opening a stream per request: multistream-select, yamux, noise frames

    def answer(self, closer: int, providers: int) -> int:
        return self.key_request + (closer + providers) * self.peer + self.stream


def measure_sizes() -> Sizes:
    """Serialize real messages: a real peer id, two multiaddrs, a signed advert of a lab profile."""
    pair = create_new_key_pair()
    pid = ID.from_pubkey(pair.public_key)
    addrs = [
        Multiaddr("/ip4/203.0.113.7/tcp/40123").to_bytes(),
        Multiaddr("/ip4/10.0.0.7/tcp/40123").to_bytes(),
    ]
    entry = Message.Peer(id=pid.to_bytes(), addrs=addrs)
    peer = Message(closerPeers=[entry]).ByteSize()
    key = capability_dht_key(None)
    request = Message(type=Message.MessageType.GET_PROVIDERS, key=key).ByteSize() + 2
    seed = pair.private_key.to_bytes()[:32]
    signer = peer_id_from_public_key(public_key_of(seed))
    body = AdvertBody(peer_id=signer, seq=1, issued_at=0.0, expires_at=300.0, profile=make_profile())
    value = pack_body(seal(body, DOMAIN_ADVERT, seed))
    put = Message(type=Message.MessageType.PUT_VALUE, key=advert_key(signer).encode())
    put.record.key, put.record.value = advert_key(signer).encode(), value
    # per stream: "/multistream/1.0.0\n" and "/sark/kad/1.0.0\n" each way (varint-prefixed),
    # yamux SYN/data/FIN headers (12 B) both ways, a noise frame (2 B length + 16 B tag) per write.
    stream = 2 * (20 + 17) + 6 * 12 + 6 * 18
    return Sizes(peer=peer, key_request=request, advert=put.ByteSize(), stream=stream)


def kad_id(data: bytes) -> int:
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


@dataclass
class Swarm:
    """Servers (sorted 64-bit ids, a dead flag for departed ones) and the lookup traffic per server."""

    ids: np.ndarray
    dead: np.ndarray
    rng: np.random.Generator
    load: Counter[int] = field(default_factory=Counter)

    @classmethod
    def build(cls, live: list[int], stale: int, rng: np.random.Generator) -> Swarm:
        departed = rng.integers(0, 2**63, size=stale, dtype=np.uint64) * np.uint64(2)
        ids = np.concatenate([np.array(live, dtype=np.uint64), departed])
        order = np.argsort(ids)
        dead = np.concatenate([np.zeros(len(live), bool), np.ones(stale, bool)])
        return cls(ids[order], dead[order], rng)

    def holders(self, key_id: int) -> set[int]:
        """The k live servers closest to a key: where its records are."""
        alive = self.ids[~self.dead]
        near = np.argpartition(alive ^ np.uint64(key_id), min(K, len(alive) - 1))[:K]
        return {int(x) for x in alive[near]}

    def table(self, owner: int, target: int) -> list[int]:
        """The k entries of `owner`'s routing table closest to `target` (its bucket, filled at random)."""
        cpl = 64 - (owner ^ target).bit_length() if owner != target else 63
        span = 63 - min(cpl, 63)
        out: list[int] = []
        for prefix in (target >> span, owner >> span):  # the target's bucket, then deeper ones
            lo = int(np.searchsorted(self.ids, np.uint64(prefix << span), "left"))
            hi = int(np.searchsorted(self.ids, np.uint64(((prefix + 1) << span) - 1), "right"))
            pool = self.ids[lo:hi]
            rng = np.random.default_rng((owner ^ (prefix << 1)) & (2**63 - 1))
            pick = pool if len(pool) <= K else pool[rng.choice(len(pool), K, replace=False)]
            out.extend(int(x) for x in pick if int(x) != owner)
            if len(out) >= K:
                break
        return out[: 2 * K]

    def is_dead(self, server: int) -> bool:
        i = int(np.searchsorted(self.ids, np.uint64(server)))
        return bool(self.dead[i])


@dataclass(frozen=True)
class Walk:
    """One iterative lookup: when it ended, whether it reached a holder, its bytes, the k closest."""

    t: float
    found: bool
    bytes: int
    closest: tuple[int, ...]


def walk(swarm: Swarm, sizes: Sizes, start: int, target: int, holders: set[int] | None, n: int) -> Walk:
    """Iterative Kademlia lookup from `start`; a GET_PROVIDERS walk (`holders`) ends at a holder."""
    short = {p: p ^ target for p in swarm.table(start, target)}
    asked: set[int] = set()
    flight: list[tuple[float, int]] = []
    now, sent = 0.0, 0
    while True:
        ranked = sorted(short, key=short.__getitem__)[:K]
        for peer in [p for p in ranked if p not in asked][: ALPHA - len(flight)]:
            asked.add(peer)
            rtt = (
                QUERY_TIMEOUT_S
                if swarm.is_dead(peer)
                else float(swarm.rng.lognormal(np.log(RTT_MEDIAN_S), RTT_SIGMA))
            )
            heapq.heappush(flight, (now + rtt, peer))
        if not flight:
            return Walk(now, False, sent, tuple(ranked))
        now, peer = heapq.heappop(flight)
        if swarm.is_dead(peer):
            continue
        held = holders is not None and peer in holders
        answer = sizes.answer(K, n if held else 0)
        now += answer * 8 / BANDWIDTH_BPS
        sent += sizes.key_request + sizes.stream + answer
        swarm.load[peer] += sizes.key_request + answer
        if held:
            return Walk(now, True, sent, tuple(ranked))
        for p in swarm.table(peer, target):
            short.setdefault(p, p ^ target)


@dataclass
class Fleet:
    """Devices, their units, and where the sharded scheme placed each (the node's spillover rule)."""

    n: int
    rng: np.random.Generator
    peers: list[str] = field(default_factory=list)
    unit: dict[str, ComputeUnit] = field(default_factory=dict)
    listed: Counter[Shard] = field(default_factory=Counter)
    reads: list[int] = field(default_factory=list)

    def place(self) -> None:
        self.peers = [f"sim-{self.n}-{i}" for i in self.rng.permutation(self.n)]
        for i, peer in enumerate(self.peers):
            self.unit[peer] = RARE if i < RARE_COUNT else COMMON
        for peer in self.peers:
            for unit in (None, self.unit[peer]):
                for depth, shard in enumerate(path_of(peer, unit)):
                    if not is_full(self.listed[shard], False):
                        self.listed[shard] += 1
                        self.reads.append(depth + 1)
                        break

    def count(self, unit: ComputeUnit) -> int:
        return sum(1 for u in self.unit.values() if u == unit)


def stale_factor(config: NodeConfig) -> float:
    """Listed records per live provider: departed devices stay listed until their TTL."""
    return 1 + CHURN_PER_HOUR * config.record_ttl_s / 3600


def sharded_lookup(
    swarm: Swarm, fleet: Fleet, sizes: Sizes, unit: ComputeUnit, count: int | None
) -> tuple[float, int, int]:
    """The node's lookup over the tree: first levels at once, then the children of full keys."""
    start = int(swarm.rng.integers(0, 2**63)) * 2
    asked: dict[Shard, int] = {}
    frontier, now, found, sent = first_levels(unit, count), 0.0, 0, 0
    stale = stale_factor(NodeConfig())
    while frontier and (count is None or found < count):
        ends = []
        for shard in frontier:
            listed = fleet.listed[shard]
            key = kad_id(shard.dht_key)
            w = walk(swarm, sizes, start, key, swarm.holders(key) if listed else set(), int(listed * stale))
            asked[shard] = listed if w.found else 0
            found += asked[shard]
            sent += w.bytes
            ends.append(w.t)
        now += max(ends)
        frontier = next_keys(asked, frontier)
    return now, found, sent


def today_lookup(swarm: Swarm, sizes: Sizes, listed: int) -> tuple[float, int, int]:
    """Today's lookup: every gate at once, each answering every provider of the key."""
    answer = sizes.answer(0, int(listed * stale_factor(NodeConfig())))
    times = []
    for gate in swarm.ids[~swarm.dead]:
        swarm.load[int(gate)] += sizes.key_request + answer
        times.append(float(swarm.rng.lognormal(np.log(RTT_MEDIAN_S), RTT_SIGMA)) + answer * 8 / BANDWIDTH_BPS)
    return min(times), listed, (sizes.key_request + sizes.stream + answer) * len(times)


def today_upkeep(sizes: Sizes, n: int, config: NodeConfig) -> float:
    """Bytes per device per hour, today: advert + 2 provides at every gate, then the read-backs
    (`find_providers` of both keys at every gate, and the any-worker key at each gate once more)."""
    stale = stale_factor(config)
    walks = 3 * GATES * (2 * sizes.key_request + 2 * sizes.stream + sizes.answer(GATES, 0))
    writes = GATES * (sizes.advert + 2 * (sizes.key_request + sizes.peer) + 3 * sizes.stream)
    unit_share = n - RARE_COUNT  # a common-unit device, the many
    reads = GATES * (2 * sizes.answer(0, int(n * stale)) + sizes.answer(0, int(unit_share * stale)))
    reads += 3 * GATES * (sizes.key_request + sizes.stream)
    return (walks + writes + reads) * 3600 / config.reannounce_interval()


def sharded_upkeep(swarm: Swarm, fleet: Fleet, sizes: Sizes, config: NodeConfig, samples: int) -> float:
    """Bytes per device per hour, sharded: per refresh a walk and k writes for the advert and each of its
    two keys (no read-back); a server's routing refresh; the joins' placement reads, spread over the hour."""
    per_refresh = []
    for peer in fleet.peers[:: max(1, fleet.n // samples)][:samples]:
        me, total = kad_id(peer.encode()), 0
        provide = sizes.key_request + sizes.peer
        shards = (path_of(peer, None)[0], path_of(peer, fleet.unit[peer])[0])
        keys = (advert_key(peer).encode(), *(s.dht_key for s in shards))
        for key, write in zip(keys, (sizes.advert, provide, provide), strict=True):
            total += walk(swarm, sizes, me, kad_id(key), None, 0).bytes + K * (write + sizes.stream)
        per_refresh.append(total)
    refresh = statistics.mean(per_refresh) * 3600 / config.reannounce_interval()
    routing = (1 - NAT_SHARE) * statistics.mean(per_refresh) / 3 * 3600 / ROUTING_TABLE_REFRESH_INTERVAL
    get = sizes.key_request + sizes.stream + sizes.answer(K, SHARD_CAP)
    joins = CHURN_PER_HOUR * statistics.mean(fleet.reads) * 2 * 4 * get  # ~4 hops a read, 2 keys a join
    return refresh + routing + joins


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def run_size(n: int, lookups: int, seed: int, sizes: Sizes) -> dict[str, dict[str, float]]:
    """Both schemes at one fleet size."""
    rng = np.random.default_rng(seed + n)
    config = NodeConfig()
    fleet = Fleet(n, rng)
    fleet.place()
    reachable = [kad_id(p.encode()) for p in fleet.peers if rng.random() >= NAT_SHARE]
    stale = int(len(reachable) * CHURN_PER_HOUR * ROUTING_TABLE_REFRESH_INTERVAL / 3600)
    new = Swarm.build(reachable, stale, rng)
    gates = Swarm.build([kad_id(f"gate-{i}".encode()) for i in range(GATES)], 0, rng)
    out: dict[str, dict[str, float]] = {}
    for name, swarm in (("today", gates), ("sharded", new)):
        rare_t, rare_recall, common_t, bytes_ = [], [], [], []
        for _ in range(lookups):
            if name == "today":
                t, found, b = today_lookup(swarm, sizes, fleet.count(RARE))
                t2, _, b2 = today_lookup(swarm, sizes, fleet.count(COMMON))
            else:
                t, found, b = sharded_lookup(swarm, fleet, sizes, RARE, None)
                t2, _, b2 = sharded_lookup(swarm, fleet, sizes, COMMON, RARE_COUNT)
            rare_t.append(t)
            rare_recall.append(min(found, RARE_COUNT) / RARE_COUNT)
            common_t.append(t2)
            bytes_ += [b, b2]
        upkeep = (
            today_upkeep(sizes, n, config)
            if name == "today"
            else sharded_upkeep(swarm, fleet, sizes, config, 30)
        )
        total = sum(swarm.load.values())
        out[name] = {
            "rare_all_p50_s": pct(rare_t, 50), "rare_all_p95_s": pct(rare_t, 95),
            "rare_recall_min": min(rare_recall), "rare_recall_mean": statistics.mean(rare_recall),
            "common_100_p50_s": pct(common_t, 50), "common_100_p95_s": pct(common_t, 95),
            "bytes_per_lookup": statistics.mean(bytes_), "upkeep_bytes_per_device_hour": upkeep,
            "busiest_server_share": max(swarm.load.values()) / total if total else 0.0,
            "servers": float(int((~swarm.dead).sum())), "lookups": float(lookups),
        }  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,5000,10000,50000")
    parser.add_argument("--lookups", type=int, default=100, help="per kind and size (50,000: a quarter)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sizes = measure_sizes()
    print(f"message sizes: {sizes}")
    results: dict[str, dict[str, dict[str, float]]] = {}
    for n in (int(s) for s in args.sizes.split(",")):
        began = time.monotonic()
        lookups = args.lookups if n < 50_000 else max(1, args.lookups // 4)
        results[str(n)] = run_size(n, lookups, args.seed, sizes)
        for name, r in results[str(n)].items():
            print(
                f"{n:>6} {name:>8}: rare all p50/p95 {r['rare_all_p50_s']:.2f}/{r['rare_all_p95_s']:.2f} s "
                f"recall min {r['rare_recall_min']:.3f}; 100 common p50/p95 {r['common_100_p50_s']:.2f}/"
                f"{r['common_100_p95_s']:.2f} s; {r['bytes_per_lookup'] / 1e3:.1f} KB/lookup; upkeep "
                f"{r['upkeep_bytes_per_device_hour'] / 3600:.1f} B/s/device; busiest server "
                f"{100 * r['busiest_server_share']:.2f} % of {int(r['servers'])} servers; "
                f"{int(r['lookups'])} lookups of each kind"
            )
        print(f"       ({time.monotonic() - began:.0f} s)", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "swarm_sim.json").write_text(
        json.dumps({"seed": args.seed, "sizes": sizes.__dict__, "results": results}, indent=1)
    )


if __name__ == "__main__":
    main()
