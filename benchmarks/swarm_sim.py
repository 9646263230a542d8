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
- Refreshes reuse the closest servers of the last walk (`node.p2p.closest`): a key walks at every
  `REWALK_EVERY`-th announcement, and once fewer than `MIN_KEPT` of its k servers are left
  (`rewalk_share`); a departed server costs a timed-out write until then.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import math
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "tests" / "node"))  # last: only for conftest_data, never shadowing a package

from conftest_data import make_profile  # type: ignore[import-not-found,unused-ignore]  # noqa: E402  (the lab's profile)
from libp2p.crypto.ed25519 import create_new_key_pair  # noqa: E402
from libp2p.kad_dht.kad_dht import ROUTING_TABLE_REFRESH_INTERVAL  # noqa: E402
from libp2p.kad_dht.pb.kademlia_pb2 import Message  # noqa: E402
from libp2p.peer.id import ID  # noqa: E402
from libp2p.peer.peerstore import create_signed_peer_record  # noqa: E402
from multiaddr import Multiaddr  # noqa: E402

from node.config import NodeConfig  # noqa: E402
from node.p2p.closest import MIN_KEPT, REWALK_EVERY  # noqa: E402
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


def measure_sizes(addrs: int = 2) -> Sizes:
    """Serialize real messages as py-libp2p 0.8.1 fills them: a real peer id, `addrs` multiaddrs (with the
    `/p2p/` suffix its peerstore keeps), the signed peer record it attaches to every peer entry
    (`signedRecord`) and to every request and answer (`senderRecord`), a signed advert of a lab profile."""
    pair = create_new_key_pair()
    pid = ID.from_pubkey(pair.public_key)
    ips = ("203.0.113.7", "10.0.0.7", "192.168.1.7", "172.16.0.7")[:addrs]
    maddrs = [Multiaddr(f"/ip4/{ip}/tcp/40123/p2p/{pid}") for ip in ips]
    record = create_signed_peer_record(pid, maddrs, pair.private_key).marshal_envelope()
    entry = Message.Peer(id=pid.to_bytes(), addrs=[a.to_bytes() for a in maddrs], signedRecord=record)
    peer = Message(closerPeers=[entry]).ByteSize()
    key = capability_dht_key(None)
    request = Message(type=Message.MessageType.GET_PROVIDERS, key=key, senderRecord=record).ByteSize() + 2
    seed = pair.private_key.to_bytes()[:32]
    signer = peer_id_from_public_key(public_key_of(seed))
    body = AdvertBody(peer_id=signer, seq=1, issued_at=0.0, expires_at=300.0, profile=make_profile())
    value = pack_body(seal(body, DOMAIN_ADVERT, seed))
    put = Message(type=Message.MessageType.PUT_VALUE, key=advert_key(signer).encode(), senderRecord=record)
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
    direct: bool
    load: Counter[int] = field(default_factory=Counter)

    @classmethod
    def build(cls, live: list[int], stale: int, rng: np.random.Generator) -> Swarm:
        departed = rng.integers(0, 2**63, size=stale, dtype=np.uint64) * np.uint64(2)
        ids = np.concatenate([np.array(live, dtype=np.uint64), departed])
        order = np.argsort(ids)
        dead = np.concatenate([np.zeros(len(live), bool), np.ones(stale, bool)])
        return cls(ids[order], dead[order], rng, direct=len(live) <= K)

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
    config: NodeConfig
    peers: list[str] = field(default_factory=list)
    unit: dict[str, ComputeUnit] = field(default_factory=dict)
    listed: Counter[Shard] = field(default_factory=Counter)
    reads: list[int] = field(default_factory=list)

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
                        self.reads.append(depth + 1)
                        break

    def count(self, unit: ComputeUnit) -> int:
        return sum(1 for u in self.unit.values() if u == unit)


def stale_factor(config: NodeConfig) -> float:
    """Listed records per live provider: departed devices stay listed until their TTL."""
    return 1 + CHURN_PER_HOUR * config.record_ttl_s / 3600


def rtt(swarm: Swarm) -> float:
    return float(swarm.rng.lognormal(np.log(RTT_MEDIAN_S), RTT_SIGMA))


def direct_ask(swarm: Swarm, sizes: Sizes, listed: int, enough: bool) -> tuple[float, float, int]:
    """The node's lookup of one key when its table holds every server (the gates): all at once, each
    answering every provider it lists. Returns when it has the devices (the first answer when that is
    enough, else the last), when the last answer came, bytes."""
    answer = sizes.answer(len(swarm.ids) - 1, listed)
    times = []
    for gate in swarm.ids[~swarm.dead]:
        swarm.load[int(gate)] += sizes.key_request + answer
        times.append(rtt(swarm) + answer * 8 / BANDWIDTH_BPS)
    sent = (sizes.key_request + sizes.stream + answer) * len(times)
    return (min(times) if enough else max(times)), max(times), sent


def local_ask(swarm: Swarm, sizes: Sizes, start: int, key: int) -> tuple[float, int]:
    """An old key asked with `walk=False`: the k closest servers of our own table, at once; all answer
    empty here (no worker of before issue 43). Returns when the last answered (or timed out), bytes."""
    answer = sizes.answer(K, 0)
    times = []
    for server in swarm.table(start, key)[:K]:
        if swarm.is_dead(server):
            times.append(QUERY_TIMEOUT_S)
            continue
        swarm.load[server] += sizes.key_request + answer
        times.append(rtt(swarm) + answer * 8 / BANDWIDTH_BPS)
    return max(times, default=0.0), (sizes.key_request + sizes.stream + answer) * len(times)


def sharded_lookup(
    swarm: Swarm, fleet: Fleet, sizes: Sizes, unit: ComputeUnit, count: int | None
) -> tuple[float, float, int, int]:
    """The node's lookup over the tree (`Dht.lookup`): first levels at once, then the children of full
    keys; asked for all, the unit's old key too (empty here: no worker of before issue 43).

    Returns:
        when the `want`-th device came in (want: `count`, or every device of the unit), when the
        lookup returned (its last round over), devices found, bytes.
    """
    start = int(swarm.rng.integers(0, 2**63)) * 2
    asked: dict[Shard, int] = {}
    frontier, now, found, sent, arrivals = first_levels(unit, count), 0.0, 0, 0, []
    stale = stale_factor(fleet.config)
    old = [kad_id(capability_dht_key(unit))] if count is None else []
    while frontier and (count is None or found < count):
        ends = []
        for shard, key in [*((s, kad_id(s.dht_key)) for s in frontier), *((None, k) for k in old)]:
            listed = fleet.listed[shard] if shard else 0
            if swarm.direct:
                t, _, b = direct_ask(swarm, sizes, int(listed * stale), listed >= SHARD_CAP)
                reached = True
            elif shard is None:
                t, b = local_ask(swarm, sizes, start, key)
                reached = True
            else:
                w = walk(
                    swarm, sizes, start, key, swarm.holders(key) if listed else set(), int(listed * stale)
                )
                t, b, reached = w.t, w.bytes, w.found
            if shard and reached:
                asked[shard] = listed
                found += listed
                arrivals += [now + t] * listed
            sent += b
            ends.append(t)
        now, old = now + max(ends), []
        frontier = next_keys(asked, frontier)
    want = min(count or fleet.count(unit), fleet.count(unit))
    return sorted(arrivals)[want - 1] if len(arrivals) >= want else now, now, found, sent


def today_lookup(
    swarm: Swarm, sizes: Sizes, listed: int, config: NodeConfig
) -> tuple[float, float, int, int]:
    """Today's lookup: every gate at once, each answering every provider of the unit's one key (the
    devices are in at the first answer; the lookup returns after the last)."""
    first, last, sent = direct_ask(swarm, sizes, int(listed * stale_factor(config)), True)
    return first, last, listed, sent


def gate_writes(sizes: Sizes, walk_share: float = 1.0) -> float:
    """A refresh's writes when the gates are the only servers: a FIND_NODE at each gate (for
    `walk_share` of the refreshes), then the advert and one ADD_PROVIDER per key (any worker, the
    device's unit) at each."""
    walks = 3 * GATES * (2 * sizes.key_request + 2 * sizes.stream + sizes.answer(GATES, 0))
    return walk_share * walks + GATES * (
        sizes.advert + 2 * (sizes.key_request + sizes.peer) + 3 * sizes.stream
    )


def today_upkeep(sizes: Sizes, n: int, config: NodeConfig) -> float:
    """Bytes per device per hour, today: the writes, then the read-backs (`find_providers` of both keys
    at every gate, and the any-worker key at each gate once more), every refresh."""
    stale = stale_factor(config)
    unit_share = n - RARE_COUNT  # a common-unit device, the many
    reads = GATES * (2 * sizes.answer(0, int(n * stale)) + sizes.answer(0, int(unit_share * stale)))
    reads += 3 * GATES * (sizes.key_request + sizes.stream)
    return (gate_writes(sizes) + reads) * 3600 / config.reannounce_interval()


def sharded_gates_upkeep(fleet: Fleet, sizes: Sizes, config: NodeConfig) -> float:
    """Bytes per device per hour, sharded keys on the gates: the writes (walks reused, `rewalk_share`),
    no read-back; a joining
    device's placement reads (one key per level, at every gate), spread over the hour by the churn."""
    read = GATES * (sizes.key_request + sizes.stream + sizes.answer(GATES, SHARD_CAP))
    joins = CHURN_PER_HOUR * 2 * statistics.mean(fleet.reads) * read
    return gate_writes(sizes, rewalk_share(config)) * 3600 / config.reannounce_interval() + joins


def rewalk_share(config: NodeConfig) -> float:
    """The share of announcements of a key that walk (`node.p2p.closest`): every `REWALK_EVERY`-th, and
    the next one after fewer than `MIN_KEPT` of its k servers are left (churn over the reuse window:
    binomial, k servers each gone with the churn's probability)."""
    gone = min(1.0, CHURN_PER_HOUR * REWALK_EVERY * config.reannounce_interval() / 3600)
    too_few = sum(math.comb(K, j) * gone**j * (1 - gone) ** (K - j) for j in range(K - MIN_KEPT + 1, K + 1))
    return min(1.0, 1 / REWALK_EVERY + too_few)


def sharded_upkeep(swarm: Swarm, fleet: Fleet, sizes: Sizes, config: NodeConfig, samples: int) -> float:
    """Bytes per device per hour, sharded keys on every reachable device: per refresh k writes for the
    advert and each of its two keys (no read-back) at the closest servers found by the last walk, and a
    walk for `rewalk_share` of them; a server's routing refresh (a walk every 600 s); the joins'
    placement reads (a walk per level), spread over the hour by the churn."""
    per_refresh, walks = [], []
    for peer in fleet.peers[:: max(1, fleet.n // samples)][:samples]:
        me, total = kad_id(peer.encode()), 0.0
        provide = sizes.key_request + sizes.peer
        shards = (path_of(peer, None)[0], path_of(peer, fleet.unit[peer])[0])
        keys = (advert_key(peer).encode(), *(s.dht_key for s in shards))
        for key, write in zip(keys, (sizes.advert, provide, provide), strict=True):
            walks.append(walk(swarm, sizes, me, kad_id(key), None, 0).bytes)
            total += rewalk_share(config) * walks[-1] + K * (write + sizes.stream)
        per_refresh.append(total)
    refresh = statistics.mean(per_refresh) * 3600 / config.reannounce_interval()
    routing = (1 - NAT_SHARE) * statistics.mean(walks) * 3600 / ROUTING_TABLE_REFRESH_INTERVAL
    joins = CHURN_PER_HOUR * 2 * statistics.mean(fleet.reads) * statistics.mean(walks)
    return refresh + routing + joins


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


SCHEMES = ("today", "sharded_gates", "sharded_servers")


def lookups_of(name: str, swarm: Swarm, fleet: Fleet, sizes: Sizes, lookups: int) -> dict[str, float]:
    """`lookups` of each kind: every device of the rare unit, and 100 of the common one."""
    found_t: dict[str, list[float]] = {"rare": [], "common": [], "rare_end": [], "common_end": []}
    recall, sent = [], []
    for _ in range(lookups):
        for kind, unit, count in (("rare", RARE, None), ("common", COMMON, RARE_COUNT)):
            if name == "today":
                t, end, found, b = today_lookup(swarm, sizes, fleet.count(unit), fleet.config)
            else:
                t, end, found, b = sharded_lookup(swarm, fleet, sizes, unit, count)
            found_t[kind].append(t)
            found_t[f"{kind}_end"].append(end)
            sent.append(b)
            if kind == "rare":
                recall.append(min(found, fleet.count(RARE)) / fleet.count(RARE))
    total = sum(swarm.load.values())
    return {
        **{f"{k}_p{q}_s": pct(v, q) for k, v in found_t.items() for q in (50, 95)},
        "rare_recall_min": min(recall), "rare_recall_mean": statistics.mean(recall),
        "bytes_per_lookup": statistics.mean(sent),
        "busiest_server_share": max(swarm.load.values()) / total if total else 0.0,
        "servers": float(int((~swarm.dead).sum())), "lookups": float(lookups),
    }  # fmt: skip


def run_size(
    n: int, lookups: int, seed: int, sizes: Sizes, config: NodeConfig
) -> dict[str, dict[str, float]]:
    """The three schemes at one fleet size, over the same devices."""
    rng = np.random.default_rng(seed + n)
    fleet = Fleet(n, rng, config)
    fleet.place()
    reachable = [kad_id(p.encode()) for p in fleet.peers if rng.random() >= NAT_SHARE]
    stale = int(len(reachable) * CHURN_PER_HOUR * ROUTING_TABLE_REFRESH_INTERVAL / 3600)
    gate_ids = [kad_id(f"gate-{i}".encode()) for i in range(GATES)]
    out: dict[str, dict[str, float]] = {}
    for name in SCHEMES:
        swarm = (
            Swarm.build(reachable, stale, rng) if name == "sharded_servers" else Swarm.build(gate_ids, 0, rng)
        )
        out[name] = lookups_of(name, swarm, fleet, sizes, lookups)
        upkeep = {
            "today": lambda: today_upkeep(sizes, n, config),
            "sharded_gates": lambda: sharded_gates_upkeep(fleet, sizes, config),
            "sharded_servers": lambda: sharded_upkeep(swarm, fleet, sizes, config, 30),  # noqa: B023
        }[name]()
        out[name]["upkeep_bytes_per_device_hour"] = upkeep
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,5000,10000,50000")
    parser.add_argument("--lookups", type=int, default=100, help="per kind and size (50,000: a quarter)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--record-ttl", type=float, help="NodeConfig.record_ttl_s (default: the node's)")
    args = parser.parse_args()
    config = NodeConfig() if args.record_ttl is None else NodeConfig(record_ttl_s=args.record_ttl)
    print(f"record TTL {config.record_ttl_s:.0f} s, refresh every {config.reannounce_interval():.0f} s")
    sizes = measure_sizes()
    print(f"message sizes: {sizes}")
    results: dict[str, dict[str, dict[str, float]]] = {}
    for n in (int(s) for s in args.sizes.split(",")):
        began = time.monotonic()
        lookups = args.lookups if n < 50_000 else max(1, args.lookups // 4)
        results[str(n)] = run_size(n, lookups, args.seed, sizes, config)
        for name, r in results[str(n)].items():
            print(
                f"{n:>6} {name:>15}: all {RARE_COUNT} rare found p50/p95 {r['rare_p50_s']:.2f}/"
                f"{r['rare_p95_s']:.2f} s (lookup over {r['rare_end_p95_s']:.2f}), recall min "
                f"{r['rare_recall_min']:.3f}; 100 common p50/p95 {r['common_p50_s']:.2f}/"
                f"{r['common_p95_s']:.2f} s; {r['bytes_per_lookup'] / 1e3:.1f} KB/lookup; upkeep "
                f"{r['upkeep_bytes_per_device_hour'] / 3600:.0f} B/s/device; busiest server "
                f"{100 * r['busiest_server_share']:.2f} % of {int(r['servers'])}"
            )
        print(f"       ({time.monotonic() - began:.0f} s)", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    name = "swarm_sim.json" if args.record_ttl is None else f"swarm_sim-ttl{args.record_ttl:.0f}.json"
    (OUT / name).write_text(
        json.dumps({"seed": args.seed, "sizes": sizes.__dict__, "results": results}, indent=1)
    )


__all__ = ["Fleet", "Sizes", "make_profile", "measure_sizes", "run_size"]


if __name__ == "__main__":
    main()
