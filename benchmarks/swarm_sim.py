"""Discovery at 1,000 to 50,000 devices: today's scheme and the sharded one, side by side (issue 43).

    .venv/bin/python benchmarks/swarm_sim.py [--sizes 1000,5000,10000,50000] [--lookups 100] [--seed 1]
    .venv/bin/python benchmarks/swarm_sim.py --sybils [--sizes 10000] [--trials 20]   (issue 50)
    .venv/bin/python benchmarks/swarm_sim.py --relay [--sizes 10000]                  (issue 50)

A seeded, in-process simulation over the node's own code: the capability keys (`node.p2p.dht`,
`node.p2p.shards`: the tree, the spillover rule, the lookup's levels), the kad constants (k, the
direct query's deadline, `node.p2p.kad`), the record lifetime and refresh period (`NodeConfig`'s
defaults), and the byte size of every message (libp2p's kad protobuf `Message`, filled with a real
Ed25519 peer id, real multiaddrs and a real signed advert of the node's codec). Per size: 100 devices
have a rare unit (GPU (ONNX)), the others one common unit (CPU (ONNX)).

Model (stated, not measured):
- Kademlia and the walks: `swarm_net`'s model (k = 20, the node's alpha and walk state).
- Latency: each request's RTT drawn from a lognormal, median 80 ms, sigma 0.6 (p95 ~ 215 ms, a
  wide-area mix), one round trip a request, except `sharded_auto_conn` (and its alpha 3): the round
  trips and bytes measured on real hosts (`conn_cost.py`: 1.0 a request on an open connection, 4.4
  and 527 bytes more on a new one); answers also take their bytes at 20 Mbit/s. Servers do not queue
  (their load is counted, not fed back): this favours today's scheme, whose three gates answer every
  lookup.
- Churn: 10 % of devices leave (and as many join) per hour: routing entries of departed servers
  (the node's routing refresh, `ROUTING_REFRESH_S`) time out after the node's query deadline;
  provider records of departed devices stay listed until their TTL (answer bytes, never recall).
- NAT: 40 % of devices are behind NAT and cannot be servers. Three schemes: today's (the v1 keys,
  the 3 gates the only servers), sharded keys with the gates the only servers (`dht_mode = "client"`
  on every worker), and sharded keys under the default `dht_mode = "auto"` (`auto_servers`: the gates,
  and every reachable device placed at level 3 or deeper of the any-worker tree, so none below about
  140 devices).
- Each lookup is simulated alone (discrete events within it); upkeep from walks of sampled devices.
- Refreshes reuse the closest servers of the last walk (`node.p2p.closest`): a key walks about every
  100 minutes (`rewalk_every` of the refresh period), and once fewer than `MIN_KEPT` of its k servers
  are left (`rewalk_share`); a departed server costs a timed-out write until then.

`--sybils`: the same devices under `dht_mode = "auto"` at measured connection costs, a campaign's
discovery (`devices: N`, `submit --wait-peers N`) against Sybil keys placed first, with the servers'
places rule on or off (`SYBIL_CELLS`, `swarm_sybil`); `--relay`: the NAT'd devices that hold a gate's
relay slot (`swarm_sybil.relay_capacity`). Hostile DHT servers: `swarm_hostile.py` (one key's walks).

Modules: `swarm_net` (message sizes, ids, routing tables, walks), `swarm_fleet` (devices, placement,
lookups), `swarm_upkeep` (a device's upkeep per scheme), `swarm_sybil` (Sybils, discovery, relays),
this one (the runs and the table).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from swarm_fleet import CHURN_PER_HOUR, COMMON, RARE, RARE_COUNT, Fleet, sharded_lookup, today_lookup
from swarm_net import OUT, Sizes, Swarm, kad_id, measure_sizes
from swarm_sybil import (
    CIRCUITS,
    WAIT_S,
    Attack,
    Look,
    build_tree,
    gates_needed,
    relay_capacity,
    time_to,
)
from swarm_upkeep import GATES, NAT_SHARE, served, sharded_gates_upkeep, sharded_upkeep, today_upkeep

from node.config import NodeConfig
from node.p2p.gates import GATE_LINKS
from node.p2p.kadpatch import ROUTING_REFRESH_S
from node.p2p.places import PLACES_PER_NETWORK
from node.p2p.relay import GATE_RESERVATIONS, RELAY_GATES
from node.p2p.shards import Shard, large_swarm
from node.submitter.discovery import LOOKUP_SLACK, DiscoveryConfig


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


SCHEMES = (
    "today",
    "sharded_gates",
    "sharded_auto",
    "sharded_auto_conn",
    "sharded_auto_conn_alpha3",
    "sharded_auto_conn_every",
)
"""`sharded_auto_conn`: the default scheme again over the same devices, each request at the round
trips and bytes measured on real hosts (`conn_cost.py`: `OPEN_RTTS`, and `CONNECT_RTTS` and
`CONNECT_BYTES` more to a server the asker holds no connection to: a fresh submitter holds only its
gates'); the others at one round trip a request, the model before. `sharded_auto_conn_alpha3`: the
same with 3 requests of a walk in flight (the node's `ALPHA` before: 13 now), side by side;
`sharded_auto_conn_every`: the same with walks that wait for every one of a key's k closest
(`Shortlist`'s `every`): what no minority of hostile servers near a key can end, and its cost."""


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


def auto_servers(fleet: Fleet, rng: np.random.Generator) -> list[int]:
    """Who serves the DHT under `dht_mode = "auto"` (the default): the gates, and each reachable device
    (a dial-back reached it: not behind NAT) placed deep enough in the any-worker tree (`large_swarm`:
    more than about 140 devices). Below that threshold the gates alone; devices placed before the
    swarm grew past it stay clients (they decided at their first placement)."""
    devices = [
        kad_id(p.encode()) for p in fleet.peers if rng.random() >= NAT_SHARE and large_swarm(fleet.placed[p])
    ]
    return [kad_id(f"gate-{i}".encode()) for i in range(GATES)] + devices


def upkeep_of(name: str, swarm: Swarm, fleet: Fleet, sizes: Sizes, config: NodeConfig) -> dict[str, float]:
    """A device's upkeep under a scheme, in parts (bytes per hour): with more servers than k the keys'
    closest servers are walked for (`sharded_upkeep`), with k or fewer every server is asked."""
    if name == "today":
        return today_upkeep(sizes, fleet.n, config)
    if swarm.direct:
        return sharded_gates_upkeep(fleet, sizes, config, int((~swarm.dead).sum()))
    return sharded_upkeep(swarm, fleet, sizes, config, 30)


def run_size(
    n: int, lookups: int, seed: int, sizes: Sizes, config: NodeConfig
) -> dict[str, dict[str, float]]:
    """The three schemes at one fleet size, over the same devices."""
    rng = np.random.default_rng(seed + n)
    fleet = Fleet(n, rng, config)
    fleet.place()
    gate_ids = [kad_id(f"gate-{i}".encode()) for i in range(GATES)]
    auto = auto_servers(fleet, rng)
    stale = int((len(auto) - GATES) * CHURN_PER_HOUR * ROUTING_REFRESH_S / 3600)
    out: dict[str, dict[str, float]] = {}
    for name in SCHEMES:
        ours = name != "today"  # the node's messages now (slim), today's column is the node before
        auto_scheme = name.startswith("sharded_auto")
        servers = auto if auto_scheme else gate_ids
        swarm = Swarm.build(servers, stale if auto_scheme else 0, rng, slim=ours)
        swarm.gates, swarm.connections = frozenset(gate_ids), name.startswith("sharded_auto_conn")
        swarm.alpha = 3 if name.endswith("_alpha3") else swarm.alpha
        swarm.every = name.endswith("_every")
        out[name] = lookups_of(name, swarm, fleet, sizes, lookups)
        parts = upkeep_of(name, swarm, fleet, sizes, config)
        upkeep = sum(parts.values())
        out[name]["upkeep_bytes_per_device_hour"] = upkeep
        out[name].update({f"upkeep_{part}_bytes_per_device_hour": v for part, v in parts.items()})
        out[name]["served_bytes_per_server_hour"] = served(upkeep, n, len(servers))
        out[name]["serving_device_bytes_per_hour"] = upkeep + out[name]["served_bytes_per_server_hour"]
    return out


SYBIL_CELLS: tuple[tuple[str, Attack | None, int | None], ...] = (
    ("no Sybils", None, PLACES_PER_NETWORK),
    ("20 stall, rule off", Attack(20), None),
    ("20 stall, 1 /24", Attack(20), PLACES_PER_NETWORK),
    ("200 stall, rule off", Attack(200), None),
    ("200 stall, 1 /24", Attack(200), PLACES_PER_NETWORK),
    ("200 stall, 5 /24s", Attack(200, 5), PLACES_PER_NETWORK),
    ("200 stall, 20 /24s", Attack(200, 20), PLACES_PER_NETWORK),
    ("2,000 stall, 1 /24", Attack(2000), PLACES_PER_NETWORK),
    ("2,000 stall, 20 /24s", Attack(2000, 20), PLACES_PER_NETWORK),
    ("200 gone, rule off", Attack(200, 1, "gone"), None),
    ("200 junk, rule off", Attack(200, 1, "junk"), None),
    ("20 stall no advert, 1 /24", Attack(20, 1, "stall, no advert"), PLACES_PER_NETWORK),
    ("200 stall no advert, 5 /24s", Attack(200, 5, "stall, no advert"), PLACES_PER_NETWORK),
    ("200 stall no advert, rule off", Attack(200, 1, "stall, no advert"), None),
)
"""Sybil keys placed first (`swarm_sybil.Attack`: count, the cheater's /24s, behaviour) with the servers'
places rule (`PLACES_PER_NETWORK` records of a key per /24) or with it off."""
BEFORE_CELLS = ("no Sybils", "20 stall, 1 /24", "200 stall, 5 /24s", "20 stall no advert, 1 /24",
                "200 stall no advert, 5 /24s")  # fmt: skip
"""Cells run again as the discovery was before it read provider records alone (`Look.before`: each
advert fetched first, one with none asked by the lookup), side by side: "<cell>, before"."""
DEVICES = (2, 10, 100)
"""`devices: N` of a plain CPU (ONNX) job: a lookup of `LOOKUP_SLACK` x N providers (`lookup_count`)."""


def sybil_runs(
    n: int, trials: int, seed: int, sizes: Sizes, config: NodeConfig
) -> dict[str, dict[str, float]]:
    """Each cell x `devices: N`: the time to the N-th honest worker under `submit --wait-peers N` (a look
    of up to `WAIT_S`), p50 / p95 over `trials` discoveries (the same starts and round trips in every
    cell: trial t's generator), and the share found within the default look's 5 s."""
    rng = np.random.default_rng(seed + n)
    fleet = Fleet(n, rng, config)
    fleet.place()
    servers = auto_servers(fleet, rng)
    nat = frozenset(p for p in fleet.peers if rng.random() < NAT_SHARE)
    gates = frozenset(kad_id(f"gate-{i}".encode()) for i in range(GATES))
    holders: dict[int, set[int]] = {}
    swarm = Swarm.build(servers, 0, rng, slim=True)  # no departed servers: see `swarm_sybil`
    swarm.gates, swarm.connections = gates, True
    out: dict[str, dict[str, float]] = {}
    runs = [(label, attack, per_network, False) for label, attack, per_network in SYBIL_CELLS]
    runs += [(f"{label}, before", a, p, True) for label, a, p in SYBIL_CELLS if label in BEFORE_CELLS]
    for label, attack, per_network, before in runs:
        tree = build_tree(fleet.peers, attack, per_network)
        for devices in DEVICES:
            times, found = [], 0
            for t in range(trials):
                swarm.rng = np.random.default_rng([seed, t])
                swarm.begin_lookup()
                start = int(swarm.rng.integers(0, 2**63)) * 2
                behaviour = "stall" if attack is None else attack.behaviour
                wait = DiscoveryConfig(want=devices, timeout_s=WAIT_S)  # `submit --wait-peers N`
                look = Look(swarm, sizes, tree, behaviour, nat, start, wait, before, holders=holders)
                took, _ = time_to(look, LOOKUP_SLACK * devices, devices)
                found += took <= DiscoveryConfig().timeout_s
                times.append(took)
            out.setdefault(label, {}).update({
                f"{devices}_p50_s": pct(times, 50), f"{devices}_p95_s": pct(times, 95),
                f"{devices}_found_share": found / trials,
            })  # fmt: skip
        out[label]["sybils_in_first_key"] = float(sum(p in tree.sybils for p in tree.members[_root()]))
        print(f"{n:>6} {label}: " + json.dumps({k: round(v, 3) for k, v in out[label].items()}), flush=True)
    for label, cell in out.items():
        base = out["no Sybils, before" if label.endswith(", before") else "no Sybils"]
        for devices in DEVICES:
            for q in (50, 95):
                name = f"{devices}_p{q}"
                cell[f"{name}_ratio"] = cell[f"{name}_s"] / base[f"{name}_s"]
    return out


def _root() -> Shard:
    return Shard(None, 0, 0)


def relay_runs(n: int, seed: int) -> dict[str, dict[str, float]]:
    """NAT'd devices with a relay slot at `n` devices: every device listing every gate, or 1 or 2 of G
    drawn at random; gates of `GATE_RESERVATIONS` slots or of 64 (the issue's figure, where the slots bind
    before the connections); each row under the node's rules (connections to `GATE_LINKS` of a device's
    gates, a slot at `RELAY_GATES` of those), connections to every gate (the rule before), and a slot at
    every gate too (before issue 50), on the same draws; the gates needed for every NAT'd device to hold
    one (the node's rules)."""
    out: dict[str, dict[str, float]] = {}
    needed = {each: gates_needed(n, each, seed) for each in (0, 1, 2)}
    slots = GATE_RESERVATIONS
    rows = [(3, 0, slots), (11, 0, slots), (10, 0, 64), (needed[0], 0, slots), (needed[1], 1, slots),
            (needed[2], 2, slots)]  # fmt: skip
    rules = (
        (f"{GATE_LINKS} links, {RELAY_GATES} slots", GATE_LINKS, RELAY_GATES),
        (f"every gate linked, {RELAY_GATES} slots (before)", 0, RELAY_GATES),
        ("every gate linked and slotted (before issue 50)", 0, 0),
    )
    for gates, each, held in rows:
        for rule, links, relay_gates in rules:
            r = relay_capacity(n, gates, each or gates, np.random.default_rng(seed), slots_a_gate=held,
                               relay_gates=relay_gates, gate_links=links)  # fmt: skip
            out[f"{gates} gates of {held} slots, {each or 'all'} each, {rule}"] = {
                "nat": r.nat, "reserved": r.reserved, "refused_every_gate": r.refused_every_gate,
                "fullest_gate_connections": r.fullest_gate_connections,
                "fullest_gate_reservations": r.fullest_gate_reservations,
                **{f"reachable_at_{p}": float(v) for p, v in r.reachable.items()},
            }  # fmt: skip
    for each, gates in needed.items():
        out[f"gates needed, {each or 'all'} each"] = {"gates": float(gates)}
    return out


def attacks(args: argparse.Namespace, config: NodeConfig) -> None:
    """`--sybils` / `--relay`: their tables per size, and swarm_sim-sybils.json / swarm_sim-relay.json."""
    sizes = measure_sizes()
    results: dict[str, dict[str, dict[str, float]]] = {}
    for n in (int(s) for s in args.sizes.split(",")):
        began = time.monotonic()
        if args.sybils:
            results[str(n)] = sybil_runs(n, args.trials, args.seed, sizes, config)
            for label, r in results[str(n)].items():
                print(f"{n:>6} {label:>30} ({r['sybils_in_first_key']:.0f} in the root): " + "; ".join(
                    f"{d}: p50 {r[f'{d}_p50_s']:.2f} s ({r[f'{d}_p50_ratio']:.2f}x) p95 {r[f'{d}_p95_s']:.2f}"
                    f" ({r[f'{d}_p95_ratio']:.2f}x) found {100 * r[f'{d}_found_share']:.0f} %"
                    for d in DEVICES
                ))  # fmt: skip
        else:
            results[str(n)] = relay_runs(n, args.seed)
            for label, r in results[str(n)].items():
                print(f"{n:>6} {label}: " + ", ".join(f"{k} {v:.0f}" for k, v in r.items()))
            print(f"       ({CIRCUITS} circuits a reservation)")
        print(f"       ({time.monotonic() - began:.0f} s)", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    body = {"seed": args.seed, "trials": args.trials, "results": results}
    (OUT / f"swarm_sim-{'sybils' if args.sybils else 'relay'}.json").write_text(json.dumps(body, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,5000,10000,50000")
    parser.add_argument("--lookups", type=int, default=100, help="per kind and size (50,000: a quarter)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--record-ttl", type=float, help="NodeConfig.record_ttl_s (default: the node's)")
    parser.add_argument("--sybils", action="store_true", help="Sybil providers against discovery instead")
    parser.add_argument("--trials", type=int, default=20, help="discoveries per --sybils cell")
    parser.add_argument("--relay", action="store_true", help="the gates' relay capacity instead")
    args = parser.parse_args()
    config = NodeConfig() if args.record_ttl is None else NodeConfig(record_ttl_s=args.record_ttl)
    if args.sybils or args.relay:
        attacks(args, config)
        return
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
                f"{n:>6} {name:>24}: all {RARE_COUNT} rare found p50/p95 {r['rare_p50_s']:.2f}/"
                f"{r['rare_p95_s']:.2f} s (lookup over {r['rare_end_p95_s']:.2f}), recall min "
                f"{r['rare_recall_min']:.3f}; 100 common p50/p95 {r['common_p50_s']:.2f}/"
                f"{r['common_p95_s']:.2f} s; {r['bytes_per_lookup'] / 1e3:.1f} KB/lookup; upkeep "
                f"{r['upkeep_bytes_per_device_hour'] / 3600:.0f} B/s/device ("
                + ", ".join(
                    f"{k[7:-22]} {v / 3600:.0f}"
                    for k, v in r.items()
                    if k.endswith("_bytes_per_device_hour") and k != "upkeep_bytes_per_device_hour"
                )
                + f"); a server carries {r['served_bytes_per_server_hour'] / 3600:.0f} B/s of the others'"
                " upkeep"
                f" ({r['serving_device_bytes_per_hour'] / 3600:.0f} B/s in all with its own);"
                f" busiest server {100 * r['busiest_server_share']:.2f} % of {int(r['servers'])}"
            )
        print(f"       ({time.monotonic() - began:.0f} s)", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    name = "swarm_sim.json" if args.record_ttl is None else f"swarm_sim-ttl{args.record_ttl:.0f}.json"
    (OUT / name).write_text(
        json.dumps({"seed": args.seed, "sizes": sizes.__dict__, "results": results}, indent=1)
    )


__all__ = ["SCHEMES", "auto_servers", "lookups_of", "run_size"]


if __name__ == "__main__":
    main()
