"""`benchmarks/swarm_sybil.py`, the Sybil and relay parts of `swarm_sim.py` (issue 50), held to the node's
own rules: the places rule (`node.p2p.places.Places`) decides who a key keeps, the submitter's discovery
constants decide what a look does, the relay's and the gate's limits decide who holds a slot."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "benchmarks"))

import itertools

import swarm_net
import swarm_sybil
from swarm_sybil import Attack, Look, build_tree, gates_needed, relay_capacity, time_to

from node.p2p.gates import GATE_LINKS
from node.p2p.host import GATE_CONNECTIONS
from node.p2p.node import PROFILE_PROBE_S
from node.p2p.places import PLACES_PER_NETWORK
from node.p2p.relay import RELAY_GATES
from node.p2p.shards import SHARD_CAP, Shard
from node.submitter.discovery import GRACE_S, LOOKUP_SLACK, SILENT_FIRST_S, DiscoveryConfig

pytestmark = pytest.mark.heavy  # many CPU-seconds: handed out first (tests/conftest.py)

ROOT_KEY = Shard(None, 0, 0)
HONEST = [f"honest-{i}" for i in range(300)]


def sybils_in(tree: swarm_sybil.Tree, shard: Shard) -> int:
    return sum(p in tree.sybils for p in tree.members.get(shard, []))


def test_the_places_rule_leaves_one_network_its_share_of_each_key_and_the_rest_to_honest_devices() -> None:
    off = build_tree(HONEST, Attack(200), None)
    assert sybils_in(off, ROOT_KEY) == SHARD_CAP  # the rule off: the first keys are the Sybils'
    assert all(sybils_in(off, Shard(None, 2, i)) == SHARD_CAP for i in range(4))
    on = build_tree(HONEST, Attack(200), PLACES_PER_NETWORK)
    assert sybils_in(on, ROOT_KEY) == PLACES_PER_NETWORK
    assert len(on.members[ROOT_KEY]) == SHARD_CAP  # honest devices take the other places
    assert len(on.sybils) == 200  # every Sybil placed, PLACES_PER_NETWORK a key, deeper
    # where the rule ends: networks x their share fill a key
    spread = build_tree(HONEST, Attack(200, -(-SHARD_CAP // PLACES_PER_NETWORK)), PLACES_PER_NETWORK)
    assert sybils_in(spread, ROOT_KEY) == SHARD_CAP


@pytest.fixture(scope="module")
def sizes() -> swarm_net.Sizes:
    return swarm_net.measure_sizes()


def look(
    tree: swarm_sybil.Tree, sizes: swarm_net.Sizes, behaviour: str, want: int, before: bool = False
) -> Look:
    rng = np.random.default_rng(7)
    servers = [int(x) for x in rng.integers(0, 2**63, size=60, dtype=np.uint64) * np.uint64(2)]
    swarm = swarm_net.Swarm.build(servers, 0, rng, slim=True)
    swarm.connections = True
    swarm.begin_lookup()
    config = DiscoveryConfig(want=want, timeout_s=swarm_sybil.WAIT_S)
    return Look(swarm, sizes, tree, behaviour, frozenset(HONEST[::3]), servers[0], config, before)


@pytest.mark.parametrize("behaviour", swarm_sybil.BEHAVIOURS)
def test_a_look_reads_past_sybils_that_filled_the_first_keys_and_probes_each_once(
    sizes: swarm_net.Sizes, behaviour: str
) -> None:
    tree = build_tree(HONEST, Attack(200, 1, behaviour), None)
    run = look(tree, sizes, behaviour, want=2)
    took, found = time_to(run, LOOKUP_SLACK * 2, 2)
    assert took < swarm_sybil.WAIT_S
    assert found >= 2
    probes: dict[str, list[float]] = {}
    for provider, at in run.probed:
        probes.setdefault(provider, []).append(at)
    for times in probes.values():  # a silent provider is probed again only once its span ended
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert all(gap >= SILENT_FIRST_S for gap in gaps), gaps
    assert tree.sybils & set(probes)  # with an advert or without: each Sybil read is a live probe


def test_a_look_of_provider_records_alone_is_quicker_and_advert_less_sybils_cost_no_more(
    sizes: swarm_net.Sizes,
) -> None:
    """The node's discovery in the simulator: a look probes its providers as their records list them.
    Before, each advert was fetched from the DHT first (k servers awaited), and a provider with none
    was asked by the lookup itself, the look waiting out each ask's `PROFILE_PROBE_S`."""
    times: dict[tuple[str, bool], float] = {}
    for behaviour in ("stall", "stall, no advert"):
        for before in (False, True):
            tree = build_tree(HONEST, Attack(200, 1, behaviour), None)
            run = look(tree, sizes, behaviour, want=2, before=before)
            times[behaviour, before], _ = time_to(run, LOOKUP_SLACK * 2, 2)
    assert times["stall", False] < times["stall", True], times  # no advert fetch a look
    assert times["stall, no advert", False] <= times["stall", False] + GRACE_S, times
    assert times["stall, no advert", True] > times["stall", True] + PROFILE_PROBE_S, times


def test_a_silent_provider_is_read_again_once_its_span_ends_each_miss_doubling_it(
    sizes: swarm_net.Sizes,
) -> None:
    """`Discovery._silence` in the simulator: a Sybil that stalled is skipped for `SILENT_FIRST_S`,
    then read and probed again, then skipped twice as long."""
    tree = build_tree(HONEST, Attack(200, 1, "stall"), None)
    run = look(tree, sizes, "stall", want=len(HONEST) + 1)  # never met: the look lasts its 60 s
    time_to(run, LOOKUP_SLACK * 2, 2)
    first = next(p for p, _ in run.probed if p in tree.sybils)
    times = [at for p, at in run.probed if p == first]
    assert len(times) >= 3  # 0, then past 10 s, then past 10 + 20 s, within the 60 s look
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps[0] >= SILENT_FIRST_S, gaps
    assert gaps[1] >= 2 * SILENT_FIRST_S, gaps
    assert run.spans[first] == SILENT_FIRST_S * 2 ** (len(times) - 1)


def test_sybils_from_few_networks_cost_a_look_a_grace_at_most(sizes: swarm_net.Sizes) -> None:
    """200 stalling Sybils from one /24 with the places rule off, or from 5 with it on, fill levels 0-2:
    a look each past them, a grace each (more than 3 graces over the honest look), until a network
    crowded in a look, or whose providers did not answer, was suspect (`networks.Networks`): the
    next look digs past it at once (at 10,000 devices: 1.40x the honest look, 5.04x before)."""
    control, _ = time_to(look(build_tree(HONEST, None, None), sizes, "stall", 2), 4, 2)
    off, _ = time_to(look(build_tree(HONEST, Attack(200), None), sizes, "stall", 2), 4, 2)
    five, _ = time_to(look(build_tree(HONEST, Attack(200, 5), PLACES_PER_NETWORK), sizes, "stall", 2), 4, 2)
    assert off < control + 2 * GRACE_S, (off, control)
    assert five < control + 2 * GRACE_S, (five, control)


def test_every_gate_linked_by_every_device_adds_no_relay_slot_and_gate_links_of_them_do() -> None:
    """A device connected to every gate it lists (the rule before: `gate_links=0`): each gate meets the
    same first devices, and no number of gates takes one more. At `GATE_LINKS` of them, drawn at random,
    ten gates take more devices than three, and enough gates take every one."""
    n = 3 * GATE_CONNECTIONS
    three, ten = (relay_capacity(n, g, g, np.random.default_rng(1), gate_links=0) for g in (3, 10))
    assert three.reserved == ten.reserved  # each gate meets the same first devices
    assert three.refused_every_gate > 0
    three, ten = (relay_capacity(n, g, g, np.random.default_rng(1)) for g in (3, 10))
    assert ten.reserved > 2 * three.reserved
    assert ten.refused_every_gate < three.refused_every_gate
    gates = gates_needed(n, 0, 1)
    assert gates >= -(-2 * n * GATE_LINKS // GATE_CONNECTIONS) - 1  # GATE_LINKS a device, roughly
    every = relay_capacity(n, gates, gates, np.random.default_rng(1))
    assert every.reserved == every.nat


def test_a_slot_at_relay_gates_of_every_gate_listed_holds_gates_over_relay_gates_times_the_devices() -> None:
    """Where the gates' slots bind before their connections (64 slots, 1,000 devices listing 10 gates), the
    rule before issue 50 (a slot at every gate: 0) gives every gate's slots to the same first 64 NAT'd
    devices; the node's rule (`RELAY_GATES` of them, in a random order) about 10 / 2 times as many."""
    ten_gates = [relay_capacity(1000, 10, 10, np.random.default_rng(1), slots_a_gate=64, relay_gates=rule,
                                gate_links=0) for rule in (0, RELAY_GATES)]  # fmt: skip
    every, spread = ten_gates
    assert every.reserved == 64
    assert spread.reserved >= 10 * 64 // RELAY_GATES - 2 * RELAY_GATES  # each NAT'd one takes RELAY_GATES
    assert spread.fullest_gate_reservations == 64
    roomy = [relay_capacity(1000, 10, 10, np.random.default_rng(1), relay_gates=r, gate_links=0)
             for r in (0, RELAY_GATES)]  # fmt: skip
    assert roomy[0].reserved == roomy[1].reserved == roomy[1].nat  # slots to spare: the same devices held
    assert roomy[1].fullest_gate_reservations < roomy[0].fullest_gate_reservations / 3  # 2 of 10 each


def test_one_gate_a_device_spreads_the_slots_and_the_gates_needed_hold_every_nat_device() -> None:
    n = 3 * GATE_CONNECTIONS
    gates = gates_needed(n, 1, 1)
    assert gates >= -(-2 * n // GATE_CONNECTIONS)  # two connections a worker at each gate
    got = relay_capacity(n, gates, 1, np.random.default_rng(1))
    assert got.reserved == got.nat
    assert got.refused_every_gate == 0
    assert got.reachable[1] == got.nat
    assert got.reachable[2 * swarm_sybil.CIRCUITS] == 0  # one reservation: CIRCUITS at once
