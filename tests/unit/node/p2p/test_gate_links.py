"""A worker's gate connections (node/p2p/gates.py `connect_gates`, `Links`, issue 50): at most
`GATE_LINKS` of the gates it lists, tried in a random order, a full or silent gate passed over for the
next (and named, in one line, as full), a gate lost later replaced by a spare; a command connects to
every gate. Gates here are a dialler that records the order (the lab with real hosts and a full gate:
tests/labs/swarm/test_gate_limit.py)."""

from __future__ import annotations

import logging
import random

import pytest

from node.errors import ClosedAtHandshake, PeerTimeout
from node.p2p.gates import BACKOFF_S, GATE_LINKS, Links, connect_gates
from node.p2p.relay import RELAY_GATES

GATES = tuple(f"/ip4/10.0.0.{i}/tcp/4001/p2p/gate{i}" for i in range(11))
FULL = "closed it before the handshake (a libp2p host at its connection limit does so: a full gate"


class Dialler:
    """Gates as a worker's host meets them: `full` close at the handshake, `silent` time out."""

    def __init__(self, full: frozenset[str] = frozenset(), silent: frozenset[str] = frozenset()) -> None:
        self.full, self.silent = set(full), set(silent)
        self.tried: list[str] = []

    async def connect(self, addr: str, timeout: float = 10.0) -> str:
        self.tried.append(addr)
        if addr in self.full:
            raise ClosedAtHandshake(addr.rsplit("/", 1)[-1], addr)
        if addr in self.silent:
            raise PeerTimeout(addr, "connect")
        return addr

    async def connect_one(self, gate: str) -> None:
        await self.connect(gate)


def drawn(seed: int, gates: tuple[str, ...] = GATES) -> list[str]:
    order = list(gates)
    random.Random(seed).shuffle(order)
    return order


async def test_a_worker_holds_gate_links_of_its_gates_in_the_order_its_draw_gives() -> None:
    assert RELAY_GATES <= GATE_LINKS < len(GATES)
    firsts = set()
    for seed in range(40):
        dialler = Dialler()
        held = await connect_gates(dialler, GATES, patient=True, rng=random.Random(seed))
        assert list(held) == drawn(seed)[:GATE_LINKS]
        assert dialler.tried == list(held)  # no gate past GATE_LINKS dialled: the others are spares
        firsts.add(held[0])
    assert firsts == set(GATES)  # each gate comes first for some draws


async def test_a_full_or_silent_gate_is_passed_over_for_the_next_and_a_full_one_named_in_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    order = drawn(3)
    full, silent = order[0], order[2]
    dialler = Dialler(full=frozenset({full}), silent=frozenset({silent}))
    with caplog.at_level(logging.INFO, logger="node.p2p.gates"):
        held = await connect_gates(dialler, GATES, patient=True, rng=random.Random(3))
    assert list(held) == [order[1], *order[3 : 2 + GATE_LINKS]]
    assert dialler.tried == order[: 2 + GATE_LINKS]
    lines = [r.getMessage() for r in caplog.records if "not joined" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"joined {GATE_LINKS} of {len(GATES)} gates; not joined: {full}: it took")
    assert FULL in lines[0]
    assert f"{silent}: " in lines[0]
    assert caplog.records[-1].levelno == logging.WARNING


async def test_a_command_connects_to_every_gate_in_the_order_given() -> None:
    dialler = Dialler(full=frozenset({GATES[4]}))
    held = await connect_gates(dialler, GATES, patient=False)
    assert dialler.tried == list(GATES)
    assert list(held) == [g for g in GATES if g != GATES[4]]


async def test_a_lost_gate_is_replaced_by_the_next_spare_and_tried_again_last() -> None:
    held = drawn(5)[:GATE_LINKS]
    links = Links(GATES, held, random.Random(9))
    spares = drawn(9, tuple(g for g in GATES if g not in held))
    assert links.spares == spares
    assert not links.due(0.0)  # holding GATE_LINKS: no spare dialled
    full = frozenset({spares[0]})
    dialler = Dialler(full=full)
    lost = links.lose([held[1]])
    assert lost == [held[1]]
    assert links.due(0.0)
    joined, causes = await links.fill(dialler.connect_one, 0.0)
    assert joined == [spares[1]]  # the full spare passed over, the next joined
    assert dialler.tried == spares[:2]
    assert len(causes) == 1
    assert causes[0].startswith(f"{spares[0]}: ")
    assert FULL in causes[0]
    assert links.held == [held[0], held[2], spares[1]]
    assert links.spares == [*spares[2:], held[1], spares[0]]  # the lost gate and the full one last
    assert not links.due(0.0)


async def test_a_gate_whose_relay_is_full_is_swapped_for_the_first_spare_not_passed_that_answers() -> None:
    held = drawn(5)[:GATE_LINKS]
    links = Links(GATES, held, random.Random(9))
    spares = drawn(9, tuple(g for g in GATES if g not in held))
    dialler = Dialler(silent=frozenset({spares[1]}))
    joined = await links.swap(held[0], dialler.connect_one, passed={spares[0]})  # found full lately
    assert joined == spares[2]  # spares[0] passed over, spares[1] silent, spares[2] answered
    assert dialler.tried == spares[1:3]
    assert links.held == [spares[2], held[1], held[2]]  # in the full gate's place
    assert links.spares == [spares[0], *spares[3:], spares[1], held[0]]  # the silent and the full last
    assert not links.short()
    nobody = Dialler(silent=frozenset(GATES))
    assert await links.swap(held[1], nobody.connect_one, passed=set(GATES) - {spares[3]}) is None
    assert links.held == [spares[2], held[1], held[2]]  # no spare answered: the full gate is kept
    assert nobody.tried == [spares[3]]


async def test_while_short_the_spares_are_tried_again_after_a_backoff_and_a_loss_at_once() -> None:
    gates = GATES[:4]
    links = Links(gates, gates[:1], random.Random(1))
    dialler = Dialler(full=frozenset(gates[1:]))  # every spare full: the worker holds one gate
    assert links.failed_fills == 1  # the round that joined it tried them
    now = 0.0
    for fills, pause in enumerate((*BACKOFF_S[1:], BACKOFF_S[-1]), start=2):
        assert links.due(now)
        joined, causes = await links.fill(dialler.connect_one, now)
        assert joined == []
        assert len(causes) == 3
        assert links.failed_fills == fills
        assert not links.due(now + pause - 0.01)  # a full gate is not dialled every check
        now += pause
    dialler.full.clear()
    links.lose([gates[0]])
    assert links.failed_fills == 0  # a failure after a loss is said again (`node.worker.advertising`)
    assert links.due(now - 1.0)  # a gate lost: its replacement is tried at once
    joined, _ = await links.fill(dialler.connect_one, now)
    assert len(joined) == GATE_LINKS
    assert gates[0] not in joined
    assert links.spares == [gates[0]]


async def test_two_addresses_of_one_gate_are_one_link() -> None:
    both = (*GATES[:4], *(g.replace("/ip4/10.0.0.", "/ip4/10.1.0.") for g in GATES[:4]))  # 4 gates, 2 each
    for seed in range(20):
        dialler = Dialler()
        held = await connect_gates(dialler, both, patient=True, rng=random.Random(seed))
        peers = {h.rsplit("/", 1)[-1] for h in held}
        assert len(peers) == GATE_LINKS
        assert {t.rsplit("/", 1)[-1] for t in dialler.tried} == peers  # the fourth gate never dialled
        links = Links(both, held, random.Random(seed))
        assert not links.short()
        links.lose([h for h in held if h.endswith(f"/{next(iter(peers))}")])
        assert links.short()
        await links.fill(Dialler().connect_one, 0.0)
        assert len({h.rsplit("/", 1)[-1] for h in links.held}) == GATE_LINKS
