"""A NAT'd worker's relay slots (node/p2p/relay.py `reserve_spread`, issue 50): at `RELAY_GATES` of its
gates, tried in a random order, the next gate when one refuses or fails, the slots it holds kept; and
what that does to a gate's slots when every device lists the same gates (the lab beside it:
tests/labs/swarm/test_relay_capacity.py)."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

from node.errors import PeerTimeout, PeerUnreachable
from node.p2p.relay import RELAY_GATES, circuit_gate, reserve_spread, short_of_slots

GATES = tuple(f"/ip4/10.0.0.{i}/tcp/4001/p2p/gate{i}" for i in range(6))
FULL = "relay reservation refused: the gate's relay is full (RESOURCE_LIMIT_EXCEEDED)"


class Gates:
    """Gates with a few slots each, as a worker's `Host.reserve_relay` meets them: it records the order."""

    def __init__(
        self, slots: int, refusing: frozenset[str] = frozenset(), silent: frozenset[str] = frozenset()
    ) -> None:
        self.slots = {g: slots for g in GATES}
        self.refusing, self.silent = refusing, silent
        self.tried: list[str] = []

    def worker(self, name: str) -> Callable[[str], Awaitable[str]]:
        async def reserve(gate: str) -> str:
            self.tried.append(gate)
            if gate in self.silent:
                raise PeerTimeout(gate, "relay reservation")
            if gate in self.refusing or self.slots[gate] == 0:
                raise PeerUnreachable(gate, FULL)
            self.slots[gate] -= 1
            return f"{gate}/p2p-circuit/p2p/{name}"

        return reserve


async def test_a_worker_holds_relay_gates_slots_tried_in_the_order_its_draw_gives() -> None:
    gates = Gates(slots=4)
    got = await reserve_spread(GATES, (), gates.worker("w"), random.Random(7))
    assert RELAY_GATES == 2
    assert len(got.circuits) == RELAY_GATES
    assert got.refused == ()
    order = list(GATES)
    random.Random(7).shuffle(order)
    assert gates.tried == order[:RELAY_GATES]  # stops once it holds RELAY_GATES: no slot more taken
    assert [circuit_gate(c) for c in got.circuits] == order[:RELAY_GATES]


async def test_the_order_is_random_each_gate_comes_first_for_some_draws() -> None:
    firsts: set[str] = set()
    for seed in range(60):
        gates = Gates(slots=100)
        await reserve_spread(GATES, (), gates.worker("w"), random.Random(seed))
        firsts.add(gates.tried[0])
    assert firsts == set(GATES)  # listed first is no more likely to be taken: the gates share the load


async def test_a_full_refusing_or_silent_gate_is_stepped_over_and_said() -> None:
    refusing, silent = frozenset(GATES[:2]), frozenset(GATES[2:4])
    for seed in range(20):
        gates = Gates(slots=1, refusing=refusing, silent=silent)
        got = await reserve_spread(GATES, (), gates.worker("w"), random.Random(seed))
        assert sorted(circuit_gate(c) for c in got.circuits) == sorted(GATES[4:])  # the only two that serve
        assert {g for g, _ in got.refused} == set(gates.tried) - set(GATES[4:])
        assert all(FULL in why for g, why in got.refused if g in refusing)
        assert all("timed out" in why or "relay reservation" in why for g, why in got.refused if g in silent)


async def test_every_gate_refusing_leaves_no_circuit_and_names_each_gate_once() -> None:
    gates = Gates(slots=0)
    got = await reserve_spread(GATES, (), gates.worker("w"), random.Random(1))
    assert got.circuits == ()
    assert sorted(g for g, _ in got.refused) == sorted(GATES) == sorted(gates.tried)


async def test_slots_held_are_kept_and_only_the_missing_ones_reserved() -> None:
    gates = Gates(slots=4)
    held = (f"{GATES[3]}/p2p-circuit/p2p/w",)
    got = await reserve_spread((*GATES, GATES[0]), held, gates.worker("w"), random.Random(3))
    assert got.circuits[0] == held[0]
    assert len(got.circuits) == RELAY_GATES
    assert len(gates.tried) == 1
    assert gates.tried[0] != GATES[3]
    full = await reserve_spread(GATES, got.circuits, gates.worker("w"), random.Random(3))
    assert full.circuits == got.circuits
    assert len(gates.tried) == 1


async def test_devices_listing_the_same_gates_all_get_slots_where_every_gate_left_some_without() -> None:
    """Three gates of two slots, three NAT'd devices listing all three (the lab's shape): a slot at every
    gate gives the first two devices all six and the third none; at RELAY_GATES of them, whatever the
    draws, each holds one at least (two are taken by each of the first two, and 2 of 6 slots remain)."""
    three = GATES[:3]
    for seed in range(20):
        every, spread = Gates(slots=2), Gates(slots=2)
        before = [
            await reserve_spread(three, (), every.worker(f"w{i}"), random.Random(seed + i), 3)
            for i in range(3)
        ]
        after = [
            await reserve_spread(three, (), spread.worker(f"w{i}"), random.Random(seed + i)) for i in range(3)
        ]
        assert [len(r.circuits) for r in before] == [3, 3, 0]
        assert [len(r.circuits) for r in after][:2] == [RELAY_GATES, RELAY_GATES]
        assert 1 <= len(after[2].circuits) <= RELAY_GATES


def test_short_of_slots_wants_what_the_gates_can_give() -> None:
    one, two = "/ip4/10.0.0.1/tcp/1/p2p/G1", "/ip4/10.0.0.2/tcp/1/p2p/G2"
    circuit = f"{one}/p2p-circuit/p2p/W"
    assert not short_of_slots([circuit], [one])  # one gate: one slot is all it can give
    assert not short_of_slots([circuit], [one, one])  # one gate listed twice is still one
    assert short_of_slots([circuit], [one, two])  # RELAY_GATES of two gates
    assert short_of_slots([], [one])
    assert not short_of_slots([], [])  # no gate: nothing to ask
    assert RELAY_GATES == 2
