"""Sybil providers in `swarm_sim.py`'s tree, the submitter's discovery over them, and the gates' relay
capacity (issue 50): `swarm_sim.py --sybils` and `--relay` run these.

The any-worker tree (`node.p2p.shards`) with a cheater's Sybil keys placed first, level by level, each
record admitted or refused by the servers' places rule (`node.p2p.places.Places`, the node's own class:
at most `PLACES_PER_NETWORK` records of a key from one /24) or with the rule off; the honest devices
then place by the node's spillover rule (`path_of`, `is_full`), each from its own /24. A campaign's
`Discovery.initial` (`node.submitter.discovery`: `DiscoveryConfig`'s defaults, a 5 s look) is run as
events over that tree, mirroring the code and taking its constants from it:

- a round's looks (`Dht.lookup`): `first_levels` for the count plus what the look skips, the children
  of full keys (`next_keys`), `below_gaps` on a later look (`GAP_LEVELS`); every key a walk of
  `swarm_net` (the node's `Shortlist` and `ALPHA`, measured connection costs); a look's providers
  go to the probe as their records list them (`Node.find_providers`: the probe is the ask for the
  advert; `Look.before`: each advert fetched first, `Kad.get`'s k closest servers all awaited);
- each new provider probed live, `PROBE_SLOTS` at once, a slot held at most `PROBE_SLOT_S`, a probe's
  deadline `probe_timeout_s` (3 s); a provider that failed is skipped by every later look while it is
  silent (`SILENT_FIRST_S`, 10 s, longer than the 5 s look, doubled by each miss in a row up to
  `SILENT_FOR_S`: a `--wait-peers` look of 60 s reads it again), and so is one still under probe;
- a look waits `GRACE_S` for its probes, then looks again past them until `count / LOOKUP_SLACK` answered;
  a network one of whose providers missed the grace, or that a look lists 4 new providers of, with
  none answered, is suspect for the round (`networks.Networks`): a later look counts its providers no more,
  reads `DIG_SUSPECT` levels at once (`Hints.discount`, `dig`), and probes them after the
  others; probes dial one of each network's in turn (`by_network`; an honest device's network is
  its own /24, a NAT'd one's too: a record through a gate names the gate's, not modelled);
  `initial` ends 1 s (`settle_s`) after its last new worker, or at 5 s.

Sybils: "stall" (advert in the DHT, the probe's stream opens and nothing comes: the lab's), "gone"
(advert in the DHT until its TTL, every dial refused at once: the lab's killed Sybils), "junk" (answers
another key's advert: refused after one exchange), "stall, no advert" (no advert put: its probe, the
ask for its advert, stalls as a "stall" one's does). `Look.before` runs the discovery as it was before
it read provider records alone: each provider's advert fetched from the DHT first, one with none asked
by the lookup itself and awaited (`collect`). Honest probes: a direct device at `OPEN_RTTS +
CONNECT_RTTS` round trips, a NAT'd one (`NAT_SHARE`) through a gate: two legs.
Not modelled: departed servers in the routing table (their 3 s deadline would hold honest looks too and
hide the Sybils' cost in the ratio), servers' queues, CPU.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

import numpy as np
from swarm_fleet import local_ask
from swarm_net import CONNECT_RTTS, OPEN_RTTS, Sizes, Swarm, kad_id, rtt, walk
from swarm_upkeep import NAT_SHARE

from node.p2p.dht import capability_dht_key
from node.p2p.gates import GATE_LINKS
from node.p2p.host import GATE_CONNECTIONS
from node.p2p.kadlink import QUERY_TIMEOUT_S
from node.p2p.lookup import read_again
from node.p2p.node import PROFILE_PROBE_S, PROFILE_PROBES_AT_ONCE
from node.p2p.places import PLACES_PER_NETWORK, Places
from node.p2p.relay import GATE_RESERVATIONS, RELAY_GATES, relay_limits
from node.p2p.shards import (
    DIG_KEYS,
    MAX_LEVEL,
    SHARD_CAP,
    Shard,
    below,
    below_gaps,
    first_levels,
    next_levels,
    path_of,
)
from node.p2p.shortlist import K
from node.submitter.discovery import (
    DIG_SUSPECT,
    GAP_LEVELS,
    GRACE_S,
    LOOKUP_SLACK,
    SILENT_FIRST_S,
    SILENT_FOR_S,
    DiscoveryConfig,
    silent_span,
)
from node.submitter.networks import PROBE_SLOT_S, PROBE_SLOTS, Networks, by_network

BEHAVIOURS: Final = ("stall", "gone", "junk", "stall, no advert")
ROUND_GAP_S: Final = 0.2
"""`Discovery.initial`'s sleep between two rounds."""
CIRCUITS: Final = relay_limits().max_circuit_conns
"""Circuits at once through one reservation (py-libp2p counts them per reserved peer)."""
WAIT_S: Final = 60.0
"""`submit --wait-peers N`'s look (`node.cli.campaign.WAIT_S`): `initial` waits for N workers."""
assert DiscoveryConfig().timeout_s < SILENT_FIRST_S  # a silent provider is skipped for the whole look


@dataclass(frozen=True)
class Attack:
    """`sybils` keys on `networks` /24s, placed first, each behaving as `behaviour` (`BEHAVIOURS`)."""

    sybils: int
    networks: int = 1
    behaviour: str = "stall"


def sybil_address(network: int, host: int) -> str:
    """A cheater's address on its `network`-th /24 (global addresses: the places rule counts them)."""
    return f"45.{network // 256 % 256}.{network % 256}.{1 + host % 254}"


def honest_address(index: int) -> str:
    """An honest device's address: each on a /24 of its own."""
    return f"20.{index // 256 % 256}.{index % 256}.1"


def _level_order() -> Iterator[Shard]:
    for level in range(MAX_LEVEL + 1):
        for index in range(2**level):
            yield Shard(None, level, index)


@dataclass
class Tree:
    """The any-worker tree's keys -> their providers in join order, and which providers are Sybils."""

    places: Places | None
    members: dict[Shard, list[str]] = field(default_factory=dict)
    sybils: set[str] = field(default_factory=set)
    addrs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Each provider kept -> the addresses its record lists (its network: `discovery.provider_network`)."""

    def admit(self, shard: Shard, provider: str, address: str) -> bool:
        """Does the key keep `provider`'s record: not full, and (rule on) its network's share not used."""
        held = self.members.setdefault(shard, [])
        if len(held) >= SHARD_CAP:
            return False
        if self.places is not None and not self.places.admit(shard.dht_key, provider, address, held):
            return False
        held.append(provider)
        self.addrs[provider] = (f"/ip4/{address}/tcp/4001",)
        return True

    def place_sybils(self, attack: Attack) -> None:
        """A cheater who knows the rule: each key of the tree in level order (the keys a look reads
        first) gets Sybils from each of its networks in turn until the key is full or every network's
        share of it is used; then the next key."""
        left, n = attack.sybils, 0
        for shard in _level_order():
            blocked: set[int] = set()
            while left and len(blocked) < attack.networks and len(self.members.get(shard, ())) < SHARD_CAP:
                network = n % attack.networks
                n += 1
                if network in blocked:
                    continue
                name = f"sybil-{attack.sybils - left}"
                if self.admit(shard, name, sybil_address(network, n)):
                    self.sybils.add(name)
                    left -= 1
                else:
                    blocked.add(network)
            if not left:
                return

    def place_honest(self, peers: list[str]) -> None:
        """Each device in join order at the first key of its path that keeps it (`path_of`)."""
        for i, peer in enumerate(peers):
            for shard in path_of(peer, None):
                if self.admit(shard, peer, honest_address(i)):
                    break


def build_tree(peers: list[str], attack: Attack | None, per_network: int | None) -> Tree:
    """The tree with `attack`'s Sybils first (None: none), then `peers`; `per_network` None: rule off."""
    tree = Tree(None if per_network is None else Places(per_network, exempt_local=False))
    if attack is not None:
        tree.place_sybils(attack)
    tree.place_honest(peers)
    return tree


@dataclass
class Look:
    """One discovery run's state: the network, the tree, the probe slots, what answered when."""

    swarm: Swarm
    sizes: Sizes
    tree: Tree
    behaviour: str
    nat: frozenset[str]
    start: int
    config: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    before: bool = False
    """The discovery before it read provider records alone: adverts fetched first (`collect`)."""
    slots: list[float] = field(default_factory=lambda: [0.0] * PROBE_SLOTS)
    probed: list[tuple[str, float]] = field(default_factory=list)
    """Every live probe, in order: the provider and when it began (once a span: twice, listed twice)."""
    seen: set[str] = field(default_factory=set)
    """Every provider a look collected: confirmed, under probe or silent (a later look skips it)."""
    spans: dict[str, float] = field(default_factory=dict)
    """Providers that did not answer -> how long they are silent from their `done_at`
    (`Discovery._silence`: `SILENT_FIRST_S`, doubled by each miss in a row, at most `SILENT_FOR_S`)."""
    answers: dict[str, float] = field(default_factory=dict)
    """Honest providers -> when their live profile came."""
    done_at: dict[str, float] = field(default_factory=dict)
    holders: dict[int, set[int]] = field(default_factory=dict)
    networks: Networks = field(default_factory=Networks)
    """This round's word on its providers' networks: the discovery's own (`networks.Networks`)."""
    verdicts: list[tuple[float, str, bool]] = field(default_factory=list)
    """Probes' words on their networks not yet given: (when, provider, heard), `Discovery._confirm`:
    a miss once a probe held its slot `PROBE_SLOT_S` unanswered (or ended so), heard when it answers."""

    missed: set[str] = field(default_factory=set)
    """Providers a probe's word called unanswered (`Discovery`'s `unanswered`, with the silent ones): a
    look reads a key most of whose providers are such once more, by a walk of every holder."""
    pending: list[tuple[str, float]] = field(default_factory=list)
    """Suspect networks' providers waiting for a slot behind every other probe (`networks.ProbeSlots`),
    and since when: each takes the first slot free once no other probe waits."""

    def drain(self, until: float) -> None:
        """Start the suspect networks' probes that a slot takes by `until` (the others booked first)."""
        while self.pending and max(min(self.slots), self.pending[0][1]) <= until:
            provider, since = self.pending.pop(0)
            self.probe(provider, since)

    def judge(self, now: float) -> None:
        """Give the round's networks every probe's word due by `now`."""
        self.drain(now)
        due = [v for v in self.verdicts if v[0] <= now]
        self.verdicts = [v for v in self.verdicts if v[0] > now]
        for _, provider, heard in sorted(due):
            (self.networks.hear if heard else self.networks.miss)(provider)
            if not heard:
                self.missed.add(provider)

    def skip(self, now: float) -> set[str]:
        """What a look at `now` skips (`Discovery.silent` and the known): every provider collected,
        less those silent whose span has ended."""
        back = {p for p, span in self.spans.items() if self.done_at[p] + span <= now}
        return (self.seen - back) | {p for p, _ in self.pending}  # and those waiting for a slot

    def miss(self, provider: str, first_s: float = SILENT_FIRST_S) -> None:
        """`Discovery._silence`: a provider that did not answer is silent for its next span."""
        self.spans[provider] = silent_span(self.spans.get(provider), first_s)

    def lookup(self, count: int, gaps: int, now: float = 0.0) -> tuple[list[str], float]:
        """`Dht.lookup` at `now` past what it skips (the caller's known and silent): the providers and
        the seconds."""
        skip = self.skip(now)
        found: set[str] = set()
        asked: dict[Shard, int] = {}
        frontier, took, old = first_levels(None, count + len(skip)), 0.0, False
        dig = DIG_SUSPECT if self.networks.suspect else 1  # `Discovery._round`'s `dig`
        frontier += below(frontier, dig - 1, asked, DIG_KEYS - len(frontier))

        def counted() -> int:  # `Hints.discount`: a suspect network's providers are not counted
            return sum(1 for p in found - skip if not self.networks.discounted(self.tree.addrs[p]))

        def useless(p: str) -> bool:  # `Hints.unanswered` (no answer by `now`) or discounted
            unanswered = p in self.missed and self.answers.get(p, math.inf) > now
            return unanswered or self.networks.discounted(self.tree.addrs[p])

        again: list[Shard] = []
        reread: set[Shard] = set()
        while True:
            short = counted() < count
            old_key = not old and not frontier and short
            if not frontier and not old_key and not again:
                break
            walks: list[tuple[float, list[str]]] = []
            for shard, every in [*((s, False) for s in frontier), *((s, True) for s in again)]:
                listed = self.tree.members.get(shard, [])
                key = kad_id(shard.dht_key)
                if key not in self.holders:
                    self.holders[key] = self.swarm.holders(key)
                holders = self.holders[key]
                self.swarm.every = every  # `Dht.lookup`'s second read: a walk of every one of the k closest
                walks.append((walk(self.swarm, self.sizes, self.start, key, holders, len(listed)).t, listed))
                self.swarm.every = False
                asked[shard] = len(listed)
            if old_key:  # the old `v1` key, at the servers we know (no worker of before issue 43)
                old = True
                v1 = kad_id(capability_dht_key(None))
                walks.append((local_ask(self.swarm, self.sizes, self.start, v1)[0], []))
            step: set[str] = set()
            last = 0.0
            for at, listed in sorted(walks, key=lambda w: w[0]):  # `lookup._ask_keys`: ends once enough
                step.update(listed)
                found.update(listed)
                last = at
                if counted() >= count:
                    break
            took += last
            if counted() >= count:
                break
            again = [  # `node.p2p.lookup._Reading.again`
                s for s in frontier if s not in reread and read_again(self.tree.members.get(s, []), useless)
            ]
            reread.update(again)
            fresh = [self.networks.discounted(self.tree.addrs[p]) for p in step - skip]
            dig = 2 * dig if fresh and all(fresh) else 1  # `Dht.lookup`: past a level it did not count
            frontier = next_levels(asked, frontier, dig)
            if not frontier and gaps > 0:
                frontier, gaps = below_gaps(asked), gaps - 1
        return sorted(found - skip, key=lambda p: kad_id(p.encode())), took  # peer-id order

    def advert_s(self, provider: str) -> float:
        """`Kad.get` of a provider's advert: the k closest servers of the table to its key, every one
        asked and awaited (k servers drawn at random: a random key's closest, each a connection or not)."""
        del provider  # its key is a hash: its closest servers are as good as random ones
        picks = self.swarm.rng.integers(0, len(self.swarm.ids), size=K)
        swarm = self.swarm
        trips = [QUERY_TIMEOUT_S if swarm.dead[i] else swarm.trip(int(swarm.ids[i]))[0] for i in picks]
        return max(trips)

    def collect(self, providers: list[str], now: float, until: float) -> tuple[list[str], float]:
        """What the discovery probes of a look's providers, and when: every one at once
        (`Node.find_providers`: provider records alone). `before`: `find_workers` as the discovery
        had it, each provider's advert fetched from the DHT first (`advert_s`), one with none asked by
        the lookup itself (`PROFILE_PROBES_AT_ONCE` at once, `PROFILE_PROBE_S` each, silent for
        `SILENT_FOR_S` at once, never probed), returning when the last fetch or ask had ended."""
        if not self.before:
            return list(providers), now
        asks = [0.0] * PROFILE_PROBES_AT_ONCE
        probed, ends = [], [now]
        for p in providers:
            t = now + self.advert_s(p)
            if p in self.tree.sybils and self.behaviour == "stall, no advert":
                i = int(np.argmin(asks))
                asks[i] = max(asks[i], t) + rtt(self.swarm) * CONNECT_RTTS + PROFILE_PROBE_S
                t = asks[i]
                self.done_at[p] = t
                self.miss(p, SILENT_FOR_S)
            else:
                probed.append(p)
            ends.append(t)
        return probed, min(max(ends), until)

    def probe(self, provider: str, now: float) -> float:
        """`Discovery._confirm`: wait for a slot, dial and ask; when the probe is over (answered or not)."""
        i = int(np.argmin(self.slots))
        begin = max(now, self.slots[i])
        self.probed.append((provider, begin))
        trip = rtt(self.swarm) * (OPEN_RTTS + CONNECT_RTTS)
        if provider in self.tree.sybils:
            stall = self.config.probe_timeout_s  # with an advert or without: the probe's deadline
            over = begin + {"stall": stall, "stall, no advert": stall, "gone": rtt(self.swarm)}.get(
                self.behaviour, trip
            )
            self.miss(provider)
            self.verdicts.append((min(over, begin + PROBE_SLOT_S), provider, False))
        else:
            if provider in self.nat:  # through a gate's circuit: two legs
                trip += rtt(self.swarm) * (OPEN_RTTS + CONNECT_RTTS)
            over = begin + trip
            self.answers[provider] = over
            if over > begin + PROBE_SLOT_S:
                self.verdicts.append((begin + PROBE_SLOT_S, provider, False))
            self.verdicts.append((over, provider, True))
        self.slots[i] = min(over, begin + PROBE_SLOT_S)
        self.done_at[provider] = over
        return over

    def confirmed(self, at: float) -> int:
        self.drain(at)
        return sum(1 for t in self.answers.values() if t <= at)

    def round(self, now: float, count: int, until: float | None) -> float:
        """`Discovery._round`: looks until `count / LOOKUP_SLACK` fresh answers; when it returned."""
        deadline = now + self.config.timeout_s
        deadline = deadline if until is None else min(deadline, until)
        need, before, looks = -(-count // LOOKUP_SLACK), self.confirmed(now), 0
        self.networks, self.verdicts = Networks(), []
        self.drain(now)
        while now < deadline:
            self.judge(now)
            providers, took = self.lookup(count, GAP_LEVELS if looks else 0, now)
            now = min(now + took, deadline)
            new, now = self.collect(providers, now, deadline)
            self.seen.update(providers)
            looks += 1
            if not new and looks > 1:
                break
            if not new:
                continue
            first, later = (
                [p for p, _ in by_network(side)]
                for side in self.networks.split([(p, self.tree.addrs[p]) for p in new])
            )  # the order the probes dial in (`Discovery._waves`)
            self.drain(now)
            ends = [self.probe(p, now) for p in first]
            if first:  # suspect providers alone: probed, and no grace waited for them
                wave = [min(t for t, q, _ in self.verdicts if q == p) for p in first[:PROBE_SLOTS]]
                now = min(max(min(max(ends), now + GRACE_S), *wave), deadline)  # and the first wave's word
            self.judge(now)
            self.pending += [(p, now) for p in later]  # after the others' grace, behind their probes
            if self.confirmed(now) - before >= need:
                break
        return now


def discover(look: Look, count: int) -> float:
    """`Discovery.initial`: rounds until `want` workers answered (None: until `settle_s` without a new
    one), or the look's timeout; when it ended (probes still out are cancelled then)."""
    config = look.config
    now, stable = 0.0, 0.0
    while True:
        seen = look.confirmed(now)
        until = stable + config.settle_s if seen and config.want is None else None
        now = look.round(now, count, until)
        got = look.confirmed(now)
        stable = now if got > seen else stable
        if now >= config.timeout_s or (config.want is not None and got >= config.want):
            return now
        if config.want is None and got and now - stable >= config.settle_s:
            return now
        now += ROUND_GAP_S


def time_to(look: Look, count: int, devices: int) -> tuple[float, int]:
    """Seconds to the `devices`-th honest answer (inf if `initial` ended first) and honest found."""
    end = discover(look, count)
    times = sorted(t for t in look.answers.values() if t <= end)
    return (times[devices - 1] if len(times) >= devices else math.inf), len(times)


@dataclass(frozen=True)
class Relay:
    """What `relay_capacity` found: NAT'd devices, those with a reservation, reachable at a peak."""

    nat: int
    reserved: int
    refused_every_gate: int
    reachable: dict[int, int]
    """Concurrent submitters per device -> NAT'd devices that many circuits reach (`CIRCUITS` each)."""
    fullest_gate_connections: int
    fullest_gate_reservations: int


def relay_capacity(
    n: int, gates: int, per_device: int, rng: np.random.Generator, conns_per_worker: int = 2,
    peaks: tuple[int, ...] = (1, 16, 32), slots_a_gate: int = GATE_RESERVATIONS,
    relay_gates: int = RELAY_GATES, gate_links: int = GATE_LINKS,
) -> Relay:  # fmt: skip
    """Devices join in order; each lists `per_device` gates drawn at random (all: every gate) and
    connects to `gate_links` of them tried in a random order, the next when one is full
    (`node.p2p.gates.connect_gates`, `GATE_LINKS`; 0: to every one, the rule before), holding
    `conns_per_worker` of a gate's `GATE_CONNECTIONS` (`node.p2p.host`: "one or two"); a NAT'd one
    (`NAT_SHARE`) tries the gates it is connected to in a random order and holds a slot at
    `relay_gates` of them (`node.p2p.relay.reserve_spread`, `RELAY_GATES`; 0: at every one, the rule
    before issue 50), the next when one is full; `slots_a_gate` (`GATE_RESERVATIONS`) a gate, a
    reservation carrying `CIRCUITS` circuits at once. The devices NAT'd and their draws are the same
    whatever the rules (each rule's order from a stream of its own)."""
    conns = np.zeros(gates, dtype=int)
    slots = np.zeros(gates, dtype=int)
    held: list[int] = []
    refused = 0
    seed = int(rng.integers(1 << 62))
    orders = np.random.default_rng(seed)  # the gates' order apart: the same devices NAT'd
    links = np.random.default_rng(seed + 1)
    for _ in range(n):
        mine = range(gates) if per_device >= gates else rng.choice(gates, per_device, replace=False)
        natd = rng.random() < NAT_SHARE
        tried = links.permutation(list(mine))
        want = gate_links or len(tried)
        connected: list[int] = []
        for g in tried:  # a full gate closes the connection before its handshake: the next is tried
            if len(connected) < want and conns[g] + conns_per_worker <= GATE_CONNECTIONS:
                conns[g] += conns_per_worker
                connected.append(int(g))
        refused += not connected
        if not natd:
            continue
        got, wanted = 0, relay_gates or len(connected)
        for g in orders.permutation(connected) if connected else ():
            if got == wanted:
                break
            if slots[g] < slots_a_gate:
                slots[g] += 1
                got += 1
        held.append(got)
    reach = {p: sum(1 for h in held if h * CIRCUITS >= p) for p in peaks}
    return Relay(len(held), sum(1 for h in held if h), refused, reach, int(conns.max()), int(slots.max()))


def gates_needed(n: int, per_device: int, seed: int, share: float = 1.0) -> int:
    """The fewest gates at which `share` of the NAT'd devices hold a reservation under the node's rules,
    each device listing `per_device` gates (0: every gate); each count tried with `seed`'s draws; -1
    past 10 `n`."""
    gates = max(per_device, 1, -(-2 * n // GATE_CONNECTIONS))  # each worker's 2 connections, a gate at least
    while gates < 10 * n:
        got = relay_capacity(n, gates, per_device or gates, np.random.default_rng(seed))
        if got.reserved >= share * got.nat:
            return gates
        gates += 1
    return -1


__all__ = [
    "BEHAVIOURS", "CIRCUITS", "PLACES_PER_NETWORK", "WAIT_S", "Attack", "Look", "Relay", "Tree",
    "build_tree", "discover", "gates_needed", "honest_address", "relay_capacity", "sybil_address", "time_to",
]  # fmt: skip
