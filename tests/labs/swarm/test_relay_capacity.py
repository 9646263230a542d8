"""A gate's relay capacity on real hosts on loopback (issue 50, scope 8): a gate holds `--max-reservations`
slots, and a worker refused one is told why, from the gate's own answer (py-libp2p's client reads every
refusal as `False`): the relay is full, or the gate relays only for its `--relay-allow` list. A NAT'd
worker holds slots at `RELAY_GATES` of its gates (`reserve_spread`), so workers listing the same gates
share them, where a slot at every gate left the last without."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
import trio
from kit import owntime
from kit.sybils import advert as signed_advert
from libp2p.relay.circuit_v2.pb.circuit_pb2 import HopMessage
from libp2p.relay.circuit_v2.protocol_buffer import StatusCode, to_proto_status

from gate import open_gate
from node.config import NodeConfig
from node.errors import PeerUnreachable, RelayFull
from node.p2p.host import Channel
from node.p2p.node import Node, Role, open_node
from node.p2p.relay import GATE_RESERVATIONS, RELAY_GATES, Reserved, circuit_gate, refusal, reserve_spread
from protocol import PROFILE, Load, ProfileReply

LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)


def config(root: Path, name: str, **fields: object) -> NodeConfig:
    return NodeConfig(data_dir=root / name, listen=LOOPBACK, record_ttl_s=60, **fields)  # type: ignore[arg-type]


@asynccontextmanager
async def nodes_at_a_gate(root: Path, slots: int, *roles: Role) -> AsyncIterator[tuple[str, list[Node]]]:
    """A gate of `slots` relay slots and a node of each role listing it: the gate's address, the nodes."""
    async with open_gate(config(root, "gate", max_reservations=slots)) as gate, AsyncExitStack() as stack:
        (addr,) = gate.host.addrs()[:1]
        nodes = [
            await stack.enter_async_context(open_node(config(root, f"n{i}", gates=(addr,)), role=role))
            for i, role in enumerate(roles)
        ]
        yield addr, nodes


async def test_a_full_relay_refuses_the_next_worker_and_says_it_is_full(tmp_path: Path) -> None:
    with owntime.fail_after(60):
        async with nodes_at_a_gate(tmp_path, 2, "worker", "worker", "worker") as (addr, (a, b, c)):
            for worker in (a, b):
                circuit = await worker.host.reserve_relay(addr)
                assert circuit.endswith(f"/p2p-circuit/p2p/{worker.host.peer_id}")
            with pytest.raises(PeerUnreachable) as refused:
                await c.host.reserve_relay(addr)
            assert "relay reservation refused: the gate's relay is full" in refused.value.why
            assert "(RESOURCE_LIMIT_EXCEEDED)" in refused.value.why
            await a.host.reserve_relay(addr)  # a worker that holds a slot renews it


async def test_dialling_a_circuit_takes_no_slot_at_the_gate(tmp_path: Path) -> None:
    """A submitter that dials a relayed worker leaves the gate's slots to the NAT'd: py-libp2p's client
    role reserved a slot at the relay before each circuit dial (held for the reservation's TTL, 600 s at
    our gates), so probes and submitters filled a gate's slots and a worker that lost its gate found no
    room."""
    with owntime.fail_after(60):
        async with nodes_at_a_gate(tmp_path, 2, "worker", "submitter", "worker") as (addr, (a, dialler, b)):
            circuit = await a.host.reserve_relay(addr)
            assert await dialler.host.connect(circuit) == a.host.peer_id
            assert dialler.host.is_relayed(a.host.peer_id)
            await b.host.reserve_relay(addr)  # the second slot is still free


async def test_a_slot_is_free_again_once_its_worker_hangs_up(tmp_path: Path) -> None:
    """A gate of one slot: a worker reserves it and leaves; the next worker gets it at once, not after
    the reservation's TTL (600 s) as py-libp2p's relay counted it."""
    with owntime.fail_after(60):
        async with open_gate(config(tmp_path, "gate", max_reservations=1)) as gate:
            (addr,) = gate.host.addrs()[:1]
            async with open_node(config(tmp_path, "gone", gates=(addr,)), role="worker") as gone:
                await gone.host.reserve_relay(addr)
            async with open_node(config(tmp_path, "next", gates=(addr,)), role="worker") as after:
                with trio.move_on_after(5):  # the gate notices the closed connection (a read at EOF)
                    while gate.host.is_connected(gone.host.peer_id):  # noqa: ASYNC110 (no event to wait on)
                        await trio.sleep(0.05)
                assert not gate.host.is_connected(gone.host.peer_id)
                circuit = await after.host.reserve_relay(addr)
                assert circuit.endswith(f"/p2p-circuit/p2p/{after.host.peer_id}")


async def test_a_worker_off_the_gates_relay_list_is_told_so(tmp_path: Path) -> None:
    with owntime.fail_after(60):
        async with open_gate(config(tmp_path, "gate"), relay_allow=frozenset({"12D3KooWnobody"})) as gate:
            (addr,) = gate.host.addrs()[:1]
            async with open_node(config(tmp_path, "w", gates=(addr,)), role="worker") as worker:
                with pytest.raises(PeerUnreachable) as refused:
                    await worker.host.reserve_relay(addr)
                why = refused.value.why
                assert "only for the peers on its `--relay-allow` list (PERMISSION_DENIED)" in why


async def _three_workers_reserve(root: Path, want: int) -> list[Reserved]:
    """Three gates of two slots, three workers listing all three reserve in turn, each at `want` gates."""
    async with AsyncExitStack() as stack:
        gates: list[Node] = []
        for i in range(3):
            gate = open_gate(config(root, f"g{i}", max_reservations=2))
            gates.append(await stack.enter_async_context(gate))
        addrs = tuple(g.host.addrs()[0] for g in gates)
        got: list[Reserved] = []
        for i in range(3):
            node = open_node(config(root, f"w{i}", gates=addrs), role="worker")
            worker = await stack.enter_async_context(node)
            got.append(await reserve_spread(addrs, (), worker.host.reserve_relay, random.Random(), want))
        return got


async def test_natd_workers_listing_the_same_gates_all_get_a_slot(tmp_path: Path) -> None:
    with owntime.fail_after(90):
        every = await _three_workers_reserve(tmp_path / "every", want=3)
        spread = await _three_workers_reserve(tmp_path / "spread", want=RELAY_GATES)
    print(f"\nslots held, a slot at every gate: {[len(r.circuits) for r in every]}; "
          f"at {RELAY_GATES}: {[len(r.circuits) for r in spread]}")  # fmt: skip
    assert [len(r.circuits) for r in every] == [3, 3, 0]  # the rule before: the third is unreachable
    assert all("the gate's relay is full" in why for _, why in every[2].refused)
    assert [len(r.circuits) for r in spread[:2]] == [RELAY_GATES, RELAY_GATES]
    assert 1 <= len(spread[2].circuits) <= RELAY_GATES  # 2 of 6 slots left: at one gate or two
    for r in spread:
        assert len({circuit_gate(c) for c in r.circuits}) == len(r.circuits)
        assert all("(RESOURCE_LIMIT_EXCEEDED)" in why for _, why in r.refused)


def test_a_refusal_read_from_nothing_or_junk_says_so_and_a_full_relay_is_its_own_error() -> None:
    assert refusal("G", b"").why == "relay reservation refused: no answer"
    assert refusal("G", b"\xff\xff\xff").why == "relay reservation refused: its answer could not be read"
    full = HopMessage(type=HopMessage.STATUS, status=to_proto_status(StatusCode.RESOURCE_LIMIT_EXCEEDED))
    body = full.SerializeToString()
    refused = refusal("G", bytes([len(body)]) + body)
    assert isinstance(refused, RelayFull)
    assert refused.peer_id == "G"
    assert refused.why.endswith("the gate's relay is full (every slot taken: `gate --max-reservations`) "
                                "(RESOURCE_LIMIT_EXCEEDED)")  # fmt: skip
    denied = HopMessage(type=HopMessage.STATUS, status=to_proto_status(StatusCode.PERMISSION_DENIED))
    body = denied.SerializeToString()
    assert not isinstance(refusal("G", bytes([len(body)]) + body), RelayFull)
    assert GATE_RESERVATIONS == 1024


async def test_a_relayed_workers_provider_record_carries_its_circuit_for_a_reader_at_another_gate(
    tmp_path: Path,
) -> None:
    """Where no server keeps a worker's advert (a foreign gate keeps no `/sark/` values), a submitter asks
    the provider itself at its provider record's addresses, and before these carried the worker's
    circuits it guessed circuits through its own gates: a reader listing another gate than the worker's
    relay found nothing to dial. Gate A relays for the worker; the reader lists gate B only."""
    with owntime.fail_after(90):
        async with open_gate(config(tmp_path, "a")) as gate_a:
            (a,) = gate_a.host.addrs()[:1]
            async with (
                open_gate(config(tmp_path, "b", gates=(a,))) as gate_b,
                open_node(config(tmp_path, "w", gates=(a,)), role="worker") as worker,
            ):
                (b,) = gate_b.host.addrs()[:1]
                circuit = await worker.host.reserve_relay(a)
                signed = signed_advert(worker, 300.0)

                async def profile(channel: Channel) -> None:
                    await channel.receive()
                    await channel.send(ProfileReply(advert=signed, load=Load()))
                    await channel.close()

                worker.host.set_handler(PROFILE, profile, deadline=10.0)  # as the worker's advertiser does
                await worker.dht.publish(signed, [], gates=worker.gates, circuits=(circuit,))
                key = worker.dht.placed[None].dht_key
                async with open_node(config(tmp_path, "r", gates=(b,)), role="submitter") as reader:
                    assert reader.dht.kad is not None
                    listed = (await reader.dht.kad.lookup_providers(key)).providers
                    assert circuit in listed[worker.host.peer_id], listed
                    assert all(g == b for g in reader.gates)  # its own guess goes through B alone
                    guessed = await reader._advert_from_peer(worker.host.peer_id, [])
                    assert guessed is None  # without the record's circuit: a guess through B misses
                    # its loopback address stands for a NAT'd worker's own, which nobody outside can dial
                    circuits = [addr for addr in listed[worker.host.peer_id] if "/p2p-circuit" in addr]
                    found = await reader._advert_from_peer(worker.host.peer_id, circuits)
                    assert found is not None
                    assert found[1].peer_id == worker.host.peer_id
                    assert reader.host.is_relayed(worker.host.peer_id)  # through A's circuit
