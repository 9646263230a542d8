"""Hostile DHT servers ground near a shard key: walks that end early, before and after issue 50.

    .venv/bin/python benchmarks/swarm_hostile.py [--servers 300] [--lookups 500] [--seed 1] [--sybils 3]

A seeded, in-process simulation over the node's own walk state (`node.p2p.shortlist.Shortlist`, through
`swarm_net.walk`): `--servers` honest DHT servers with random ids, one shard key of the any-worker tree
(`Shard(None, 3, 5)`) with 20 honest providers (a full key) that wrote to the k closest servers their own
FIND_NODE walks found (`swarm_net.writers_lists`). M hostile servers (M = 0, 5, 10, 20) have ids ground
near the key (the keys are public strings: their places are known; a 64-bit id within 2**40 of the key's
is closer than any honest one), so they are the key's M closest servers; each drops the records it is sent
and lists the same 3 Sybils to every reader (`--sybils 20`: a full key's, the count a lookup asks of a
key), answers closer peers from its routing table as an honest one does, and answers at once
(`Swarm.instant`: its timing is its choice, and the quickest answers are those that agree first).
`--lookups` walks from random starts per rule and M, side by side in one run:

- before: the rule before issue 50 (`Swarm.short`): three holders listing the same providers, none
  listing more, end a walk short of its count;
- now: the node's rule (`node.p2p.walk`, `ALPHA` 13 in flight): no agreement ends a walk short of its
  count; it goes on to the k closest and then waits for the requests still within their hop, and
  for those within the walk's round trip even when three holders on distinct networks agree
  (`Swarm.network`): the M hostile servers on one network (ids are free, a network is not), every
  honest one on its own;
- now, M networks: the same, each hostile server on a network of its own (an attacker who holds M
  networks); and with 3 requests in flight (the node's `ALPHA` before), side by side;
- every, M networks: walks that wait for every one of the key's k closest within its hop, whatever the
  first answers say (`Swarm.every`, `Shortlist`'s `every`);
- look, M networks: what a submitter's discovery does (`node.p2p.lookup.Hints.unanswered`): the
  node's walk (the same draws as "now, M networks"), its first 20 probed, and when most of them did
  not answer (Sybils: none does), a second walk of the key that waits for every one of its k closest;
  lost when neither walk's first 20 holds an honest provider; its seconds are the first walk's, plus
  the probes' grace (`GRACE_S`) and the second walk's when it ran.

Per walk: how many of the 20 honest providers it found, whether it found none ("lost"), whether the
key read full (the union of the lists holds 20: its subtree is read next), requests and bytes.

Placement (`place, ...` rows, the node's rule, the same M and keys): a worker about to provide the key
reads it with `node.p2p.dht.EVERY_PROVIDER` (every holder's answer) and spills to the next level when
it reads full: before, when the union of the lists held 20 (with `--sybils 20` the hostile lists alone
do, under every key: the worker spills to the bottom of its tree and is listed nowhere); now, when
holders on more than half of the answering networks list 20 (`Shortlist.holds`,
`node.p2p.shortlist.holding`). The honest key of 20 shows the rule's cost where no one is hostile:
holders whose views differ (each lists what its writers' walks sent it) must still read full.

Read-back (`read-back, ...` rows, the same M and keys): one of the key's honest providers already placed
there when the hostile servers came, at its refresh whose walk is due (`node.p2p.dht.Dht._read_back`):
it reads the key from every holder and places again below it when the key reads full by its holders'
networks and holders on more than half of those networks do not list it (`ProviderLookup.ours`): the
share of read-backs that find it unlisted so, and that move it.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable, Hashable
from typing import Final

import numpy as np
from swarm_net import OUT, Sizes, Swarm, Walk, kad_id, measure_sizes, walk, writers_lists

from node.p2p.lookup import read_again
from node.p2p.shards import SHARD_CAP, Shard
from node.p2p.shortlist import ALPHA, holding
from node.submitter.discovery import GRACE_S

HOSTILE: Final = (0, 5, 10, 11, 15, 19, 20)
KEYS: Final = (SHARD_CAP, 7)
"""Honest providers of the key: a full one (its subtree read next), and one not full (a lookup reads
it to its end, and no hostile holder may shorten what it lists)."""
RULES: Final = (
    "before", "now", "now, M networks", "now, M networks, alpha 3", "every, M networks", "look, M networks"
)  # fmt: skip
PLACE_RULES: Final = ("place, now", "place, now, M networks")
READ_BACK_RULES: Final = ("read-back, now", "read-back, now, M networks")
EVERY: Final = 10**6
"""A placement's read: every provider (`node.p2p.dht.EVERY_PROVIDER`)."""
SYBILS: Final = 3
"""How many Sybils each hostile server lists (ids -1, -2, ...: never a server's id, never an honest
provider's); 20, a full key's, is the count a lookup asks of a key."""
GROUND: Final = 2**40
"""How near the key a ground id lands: 64-bit ids within 2**40 of the key's are closer than any honest
server of a few thousand (their nearest is about 2**64 / n away)."""


def run(
    servers: int, lookups: int, seed: int, sybils: int = SYBILS
) -> dict[str, dict[str, dict[str, float]]]:
    """Each key x rule x M: the walks' figures (the module's docstring), keyed "20/now" -> "5"."""
    sizes = measure_sizes()
    key = kad_id(Shard(None, 3, 5).dht_key)
    rng = np.random.default_rng(seed)
    honest = [int(x) for x in rng.integers(0, 2**63, size=servers, dtype=np.uint64) * np.uint64(2)]
    ground = [key ^ int(x) for x in rng.integers(1, GROUND, size=max(HOSTILE))]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for count in KEYS:
        providers = [int(x) | 1 for x in rng.integers(0, 2**63, size=count)]  # odd: never a server
        for m in HOSTILE:
            hostile = frozenset(ground[:m])
            swarm = Swarm.build(honest + sorted(hostile), 0, np.random.default_rng(seed + m), slim=True)
            lists = writers_lists(swarm, sizes, key, providers)  # the honest writers' records
            listed = frozenset(range(-sybils, 0))
            lists.update(dict.fromkeys(hostile, listed))  # dropped; every reader is sent the Sybils
            swarm.instant = hostile  # they choose their timing: at once, before any honest answer
            for rule in RULES:
                swarm.short = rule == "before"
                swarm.network = _one_network(hostile) if rule == "now" else None
                swarm.every = rule.startswith("every")
                swarm.alpha = 3 if rule.endswith("alpha 3") else ALPHA
                swarm.rng = np.random.default_rng(seed)  # the same starts and draws for every rule
                if rule.startswith("look"):
                    cell = _looks(swarm, sizes, key, lists, set(providers), lookups, seed)
                else:
                    cell = _walks(swarm, sizes, key, lists, set(providers), lookups)
                out.setdefault(f"{count}/{rule}", {})[str(m)] = cell
            for rule in PLACE_RULES:  # after the walks' cells: their draws are as before
                swarm.short, swarm.alpha, swarm.every = False, ALPHA, False
                swarm.network = _one_network(hostile) if rule == "place, now" else None
                swarm.rng = np.random.default_rng(seed)
                out.setdefault(f"{count}/{rule}", {})[str(m)] = _places(swarm, sizes, key, lists, lookups)
            for rule in READ_BACK_RULES:
                swarm.network = _one_network(hostile) if rule == "read-back, now" else None
                swarm.rng = np.random.default_rng(seed)
                cell = _read_backs(swarm, sizes, key, lists, providers[0], lookups)
                out.setdefault(f"{count}/{rule}", {})[str(m)] = cell
    return out


def _one_network(hostile: frozenset[int]) -> Callable[[int], Hashable]:
    """The hostile servers on one network, every honest one on its own."""
    return lambda server: "ground" if server in hostile else server


def _walks(
    swarm: Swarm, sizes: Sizes, key: int, lists: dict[int, frozenset[int]], honest: set[int], n: int
) -> dict[str, float]:
    found, lost, lost_kept, whole, short, asked, sent, took = [], 0, 0, 0, 0, [], [], []
    for _ in range(n):
        start = int(swarm.rng.integers(0, 2**63)) * 2
        w = walk(swarm, sizes, start, key, lists, 0)
        got = len(w.providers & honest)
        found.append(got)
        lost += got == 0
        lost_kept += not set(w.kept) & honest
        whole += got == len(honest)
        short += len(w.providers) < SHARD_CAP
        asked.append(w.asked)
        sent.append(w.bytes)
        took.append(w.t)
    return {
        "lost_share": lost / n,
        "lost_kept_share": lost_kept / n,
        "all_found_share": whole / n,
        "honest_found_mean": statistics.mean(found),
        "honest_found_min": float(min(found)),
        "read_not_full_share": short / n,
        "requests_mean": statistics.mean(asked),
        "kb_mean": statistics.mean(sent) / 1e3,
        "seconds_p50": float(np.percentile(took, 50)),
        "seconds_p95": float(np.percentile(took, 95)),
    }


def _looks(
    swarm: Swarm,
    sizes: Sizes,
    key: int,
    lists: dict[int, frozenset[int]],
    honest: set[int],
    n: int,
    seed: int,
) -> dict[str, float]:
    """The discovery's reads of the key (the module's docstring): the node's walk, then, when most of
    its first 20 did not answer their probes, a walk of every one of the k closest, drawn from a
    generator of its own (the first walks are those of "now, M networks")."""
    second = np.random.default_rng(seed + 1)
    lost, reread, asked, sent, took = 0, 0, [], [], []
    for _ in range(n):
        start = int(swarm.rng.integers(0, 2**63)) * 2
        w = walk(swarm, sizes, start, key, lists, 0)
        kept, t, requests, size = set(w.kept), w.t, w.asked, w.bytes
        if read_again(w.kept, lambda p: p not in honest):  # Sybils never answer a probe
            first, swarm.rng, swarm.every = swarm.rng, second, True
            again = walk(swarm, sizes, start, key, lists, 0)
            swarm.rng, swarm.every = first, False
            kept |= set(again.kept)
            t, requests, size = t + GRACE_S + again.t, requests + again.asked, size + again.bytes
            reread += 1
        lost += not kept & honest
        asked.append(requests)
        sent.append(size)
        took.append(t)
    return {
        "lost_share": lost / n,
        "lost_kept_share": lost / n,
        "reread_share": reread / n,
        "requests_mean": statistics.mean(asked),
        "kb_mean": statistics.mean(sent) / 1e3,
        "seconds_p50": float(np.percentile(took, 50)),
        "seconds_p95": float(np.percentile(took, 95)),
    }


def _places(
    swarm: Swarm, sizes: Sizes, key: int, lists: dict[int, frozenset[int]], n: int
) -> dict[str, float]:
    """A placement's reads of the key: how often it reads full by the union (before) and by its holders'
    networks (now), and what the holders say it holds."""
    walks = _every_provider(swarm, sizes, key, lists, n)
    holds = [w.holds for w in walks]
    return {
        "full_by_union_share": sum(len(w.providers) >= SHARD_CAP for w in walks) / n,
        "full_by_holders_share": sum(h >= SHARD_CAP for h in holds) / n,
        "holds_mean": statistics.mean(holds),
        "holds_min": float(min(holds)),
    } | _cost(walks)


def _read_backs(
    swarm: Swarm, sizes: Sizes, key: int, lists: dict[int, frozenset[int]], worker: int, n: int
) -> dict[str, float]:
    """A placed worker's read-backs of its key: how often holders on more than half of its networks do
    not list it, and how often it is moved below (the key full by most of them too). Every holder
    among the k closest that answered counts, one that holds no record of the key as listing nothing."""
    network = swarm.network or (lambda server: server)
    walks = _every_provider(swarm, sizes, key, lists, n)
    unlisted = [
        holding((network(p), int(worker not in lists.get(p, frozenset()))) for p in w.closest) > 0
        for w in walks
    ]
    return {
        "moved_share": sum(u and w.holds >= SHARD_CAP for u, w in zip(unlisted, walks, strict=True)) / n,
        "unlisted_share": sum(unlisted) / n,
    } | _cost(walks)


def _every_provider(
    swarm: Swarm, sizes: Sizes, key: int, lists: dict[int, frozenset[int]], n: int
) -> list[Walk]:
    """`n` reads of the key that wait for every holder (`EVERY`, a placement's or a read-back's), each
    from a random start."""
    return [walk(swarm, sizes, int(swarm.rng.integers(0, 2**63)) * 2, key, lists, 0, EVERY) for _ in range(n)]


def _cost(walks: list[Walk]) -> dict[str, float]:
    return {
        "requests_mean": statistics.mean(w.asked for w in walks),
        "kb_mean": statistics.mean(w.bytes for w in walks) / 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", type=int, default=300)
    parser.add_argument("--lookups", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sybils", type=int, default=SYBILS, help="Sybils each hostile server lists")
    args = parser.parse_args()
    results = run(args.servers, args.lookups, args.seed, args.sybils)
    print(f"{args.servers} honest servers, {args.lookups} walks per cell, {args.sybils} Sybils listed")
    for name, by_m in results.items():
        count, rule = name.split("/")
        for m, r in by_m.items():
            if rule.startswith("read-back"):
                print(
                    f"key of {count:>2}, {rule:>25}, M = {m:>2}: not listed by most of its holders' networks "
                    f"{100 * r['unlisted_share']:.1f} %, moved below {100 * r['moved_share']:.1f} %, "
                    f"{r['requests_mean']:.1f} requests, {r['kb_mean']:.1f} KB"
                )
                continue
            if rule.startswith("place"):
                print(
                    f"key of {count:>2}, {rule:>25}, M = {m:>2}: read full by the union (before) "
                    f"{100 * r['full_by_union_share']:.1f} %, by its holders' networks (now) "
                    f"{100 * r['full_by_holders_share']:.1f} %, holds mean {r['holds_mean']:.1f} (min "
                    f"{r['holds_min']:.0f}), {r['requests_mean']:.1f} requests, {r['kb_mean']:.1f} KB"
                )
                continue
            if rule.startswith("look"):
                print(
                    f"key of {count:>2}, {rule:>25}, M = {m:>2}: lost {100 * r['lost_share']:.1f} %, read "
                    f"again {100 * r['reread_share']:.1f} %, {r['requests_mean']:.1f} requests, "
                    f"{r['kb_mean']:.1f} KB, {r['seconds_p50']:.2f}/{r['seconds_p95']:.2f} s p50/p95"
                )
                continue
            print(
                f"key of {count:>2}, {rule:>25}, M = {m:>2}: lost {100 * r['lost_share']:.1f} % (of the 20 "
                f"kept {100 * r['lost_kept_share']:.1f} %), all found "
                f"{100 * r['all_found_share']:.1f} %, honest found mean {r['honest_found_mean']:.1f} (min "
                f"{r['honest_found_min']:.0f}), read not full {100 * r['read_not_full_share']:.1f} %, "
                f"{r['requests_mean']:.1f} requests, {r['kb_mean']:.1f} KB, "
                f"{r['seconds_p50']:.2f}/{r['seconds_p95']:.2f} s p50/p95"
            )
    OUT.mkdir(parents=True, exist_ok=True)
    body = {"servers": args.servers, "lookups": args.lookups, "seed": args.seed, "sybils": args.sybils}
    name = "swarm_hostile.json" if args.sybils == SYBILS else f"swarm_hostile_{args.sybils}.json"
    (OUT / name).write_text(json.dumps({**body, "results": results}, indent=1))


__all__ = ["HOSTILE", "KEYS", "PLACE_RULES", "READ_BACK_RULES", "RULES", "run"]


if __name__ == "__main__":
    main()
