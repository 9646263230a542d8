"""Issue 43, a worker's upkeep over real hosts on loopback: what a refresh sends, and what a server answers.

A refresh sends the same bytes whatever the fleet; its writes carry no signed peer record (py-libp2p
attaches one to every request, twice to an ADD_PROVIDER) and a server still keeps them; our advert
goes to at most `ADVERT_COPIES` servers, and libp2p does not republish it on its own; our servers'
answers list closer peers and providers by id and addresses, without their signed peer records.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from kit import owntime
from libp2p.custom_types import TProtocol
from libp2p.kad_dht.pb.kademlia_pb2 import Message
from libp2p.peer.id import ID
from libp2p.utils.varint import encode_uvarint, read_varint_prefixed_bytes_limited

from gate import open_gate
from labs.swarm.test_shards import advert  # one signed advert of a node, as the shards lab makes it
from node.config import NodeConfig
from node.p2p.closest import ClosestServers
from node.p2p.dht import advert_key
from node.p2p.kad import ADVERT_COPIES, Kad
from node.p2p.kadpatch import ROUTING_REFRESH_S, become_server
from node.p2p.kadwire import add_provider_request
from node.p2p.node import Node, open_node
from node.p2p.shards import Shard
from protocol import KAD, ComputeUnit

LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)
UNIT = ComputeUnit.CPU_ONNX


@asynccontextmanager
async def swarm(root: Path, workers: int) -> AsyncIterator[tuple[Node, list[Node]]]:
    """A gate and `workers` client-mode workers, each published once (one after the other)."""
    async with AsyncExitStack() as stack:
        gate = await stack.enter_async_context(open_gate(NodeConfig(data_dir=root / "gate", listen=LOOPBACK)))
        nodes: list[Node] = []
        for i in range(workers):
            config = NodeConfig(data_dir=root / f"w{i}", gates=tuple(gate.host.addrs()), listen=LOOPBACK)
            node = await stack.enter_async_context(open_node(config, role="worker"))
            await node.dht.publish(advert(node), [UNIT], gates=node.gates)
            nodes.append(node)
        yield gate, nodes


def _sent(kad: Kad) -> Counter[str]:
    """The kad requests a Kad sends (`KadLink.send`), by type, with their bytes; counted, nothing replaced."""
    sent: Counter[str] = Counter()
    send = kad.link.send

    async def counted(peer: ID, request: bytes, *, reply: bool) -> None:
        message = Message()
        message.ParseFromString(request)
        kind = Message.MessageType.Name(message.type)
        sent[kind] += 1
        sent[f"{kind} bytes"] += len(request)
        sent["signed records"] += message.HasField("senderRecord") + sum(
            p.HasField("signedRecord") for p in message.providerPeers
        )
        await send(peer, request, reply=reply)

    kad.link.send = counted  # type: ignore[method-assign]
    return sent


async def _refresh(node: Node) -> Counter[str]:
    assert node.kad is not None
    sent = _sent(node.kad)
    await node.dht.publish(advert(node), [UNIT], gates=node.gates)
    del node.kad.link.send  # back to the method
    return sent


async def test_a_refresh_sends_the_same_bytes_at_two_fleet_sizes_and_no_signed_record(tmp_path: Path) -> None:
    with owntime.fail_after(90):
        async with swarm(tmp_path / "small", 2) as (gate, workers):
            small = await _refresh(workers[0])
            held = gate.dht.kad.raw.provider_store
            key = workers[0].dht.placed[UNIT].dht_key
            assert workers[0].host.peer_id in {str(i.peer_id) for i in held.get_providers(key)}
        async with swarm(tmp_path / "large", 8) as (gate, workers):
            large = await _refresh(workers[0])
        # the bytes differ only by the worker's own key and address, never with the fleet
        assert small["ADD_PROVIDER"] == large["ADD_PROVIDER"] == 2  # any worker, its unit: one server
        assert small["PUT_VALUE"] == large["PUT_VALUE"] == 1
        assert abs(small["ADD_PROVIDER bytes"] - large["ADD_PROVIDER bytes"]) <= 8
        assert abs(small["PUT_VALUE bytes"] - large["PUT_VALUE bytes"]) <= 16
        assert small["signed records"] == large["signed records"] == 0


async def test_a_refresh_writes_to_servers_only_and_walks_once_among_client_workers(tmp_path: Path) -> None:
    with owntime.fail_after(90):
        async with swarm(tmp_path, 3) as (gate, workers):
            worker = workers[0]
            assert worker.kad is not None
            for other in workers[1:]:  # other workers (clients) in our peerstore and connected
                await worker.host.connect(other.host.addrs()[0], timeout=5.0)
            worker.kad.closest = ClosestServers()  # walk again, with the other workers known
            sent = [await _refresh(worker) for _ in range(3)]
            assert [s["ADD_PROVIDER"] + s["PUT_VALUE"] for s in sent] == [3, 3, 3]  # the gate only
            walked = {k: c for k, c in worker.kad.closest._known.items()}
            assert all(c.peers == (gate.host.peer_id,) for c in walked.values())
            assert all(c.reused == 2 for c in walked.values())  # walked once, then reused: no walk again


async def test_libp2p_does_not_republish_our_advert_on_its_own(tmp_path: Path) -> None:
    with owntime.fail_after(60):
        async with swarm(tmp_path, 1) as (_, workers):
            worker = workers[0]
            assert worker.kad is not None
            store = worker.kad.raw.value_store
            key = advert_key(worker.host.peer_id).encode()
            assert key in store.store  # we hold our advert
            assert key not in store.local_keys  # but libp2p does not count it as its own to republish
            stored: list[Any] = []
            store_at_peer = store._store_at_peer

            async def counted(*args: Any, **kwargs: Any) -> Any:
                stored.append(args)
                return await store_at_peer(*args, **kwargs)

            store._store_at_peer = counted
            await store._republish_records(worker.kad.raw.peer_routing)  # its maintenance loop's step
            assert stored == []


async def test_an_add_provider_without_a_signed_record_is_kept_and_is_smaller_than_libp2ps(
    tmp_path: Path,
) -> None:
    with owntime.fail_after(60):
        async with swarm(tmp_path, 1) as (gate, workers):
            worker = workers[0]
            assert worker.kad is not None
            dht = worker.kad.raw
            key = Shard(None, 5, 3).dht_key  # a key nobody provides yet
            ours = add_provider_request(key, dht.host.get_id(), list(dht.host.get_addrs()))
            assert await worker.kad.provide(key)
            store = gate.dht.kad.raw.provider_store
            for _ in range(200):  # ADD_PROVIDER is fire-and-forget (P9): poll the gate's store, under 10 s
                if worker.host.peer_id in {str(i.peer_id) for i in store.get_providers(key)}:
                    break
                await trio.sleep(0.05)
            assert worker.host.peer_id in {str(i.peer_id) for i in store.get_providers(key)}
            # libp2p's own message for the same key: our signed peer record as sender and as provider
            libp2p = Message(type=Message.MessageType.ADD_PROVIDER, key=key)
            record = dht.host.get_peerstore().get_local_record()
            assert record is not None
            envelope = record.marshal_envelope()
            libp2p.senderRecord = envelope
            entry = libp2p.providerPeers.add(id=dht.host.get_id().to_bytes(), signedRecord=envelope)
            entry.addrs.extend(a.to_bytes() for a in dht.host.get_addrs())
            assert libp2p.ByteSize() - len(ours) >= 2 * len(envelope)  # two records and their lengths


async def test_our_advert_goes_to_at_most_advert_copies_servers(tmp_path: Path) -> None:
    with owntime.fail_after(90):
        async with swarm(tmp_path, ADVERT_COPIES + 2) as (gate, workers):
            for node in workers:
                assert node.kad is not None
                await become_server(node.kad, lambda key: 20)
            await _admit(gate, workers)
            writer = workers[0]
            assert writer.kad is not None
            writer.kad.closest = ClosestServers()  # forget the walks of one server: walk again
            sent = await _refresh(writer)
            assert 0 < sent["PUT_VALUE"] <= ADVERT_COPIES
            assert sent["ADD_PROVIDER"] > ADVERT_COPIES  # provider records: every one of the k closest


async def test_our_servers_list_closer_peers_and_providers_without_signed_records(tmp_path: Path) -> None:
    with owntime.fail_after(60):
        async with swarm(tmp_path, 3) as (gate, workers):
            for node in workers[:2]:
                assert node.kad is not None
                await become_server(node.kad, lambda key: 20)
            await _admit(gate, workers[:2])
            asker = workers[2].host.raw
            server = ID.from_base58(gate.host.peer_id)
            answer = await _ask(asker, server, b"\x12\x20" + b"\x07" * 32, "FIND_NODE")
            assert {ID(p.id).to_base58() for p in answer.closerPeers} >= {w.host.peer_id for w in workers[:2]}
            assert all(p.addrs for p in answer.closerPeers)
            assert not any(p.HasField("signedRecord") for p in answer.closerPeers)
            held = await _ask(asker, server, Shard(None, 0, 0).dht_key)
            assert {ID(p.id).to_base58() for p in held.providerPeers} == {w.host.peer_id for w in workers}
            assert all(p.addrs for p in held.providerPeers)
            assert not any(p.HasField("signedRecord") for p in (*held.providerPeers, *held.closerPeers))
            assert workers[2].kad is not None  # a large swarm's lookup walks (node.p2p.walk) over these
            walked = await workers[2].kad._walk(Shard(None, 0, 0).dht_key, 20)
            assert {p.to_base58() for p in walked.providers} == {w.host.peer_id for w in workers}
            assert 1 <= walked.answered <= walked.asked  # stops at the count: others may be in flight
            assert not walked.failures


async def test_the_routing_refresh_walks_once_and_an_expired_provider_frees_its_place(tmp_path: Path) -> None:
    with owntime.fail_after(60):
        async with swarm(tmp_path, 2) as (gate, workers):
            first, second = workers
            assert first.kad is not None
            assert gate.kad is not None
            # libp2p's maintenance loop: our period, and one walk, for our own id (libp2p: one per bucket)
            assert importlib.import_module("libp2p.kad_dht.kad_dht").ROUTING_TABLE_REFRESH_INTERVAL == (
                ROUTING_REFRESH_S
            )
            routing = first.kad.raw.peer_routing
            walked: list[bytes] = []
            walk = routing.find_closest_peers_network

            async def counted(target: bytes, *args: Any, **kwargs: Any) -> Any:
                walked.append(target)
                return await walk(target, *args, **kwargs)

            routing.find_closest_peers_network = counted
            await first.kad.raw.refresh_routing_table()
            assert walked == [first.kad.raw.local_peer_id.to_bytes()]
            # a key with room for one provider: an expired record holds no place (the long TTL's)
            gate.kad.bound_providers(lambda key: 1)
            store, key = gate.kad.raw.provider_store, Shard(None, 9, 5).dht_key

            async def provide(node: Node) -> set[str]:
                assert node.kad is not None
                me, addrs = node.kad.raw.host.get_id(), node.kad.raw.host.get_addrs()
                await node.kad.link.send(
                    ID.from_base58(gate.host.peer_id), add_provider_request(key, me, addrs), reply=True
                )
                return {
                    str(i.peer_id) for i in store.get_providers(key)
                }  # the echo came: the gate took it or not

            assert await provide(first) == {first.host.peer_id}
            assert await provide(second) == {first.host.peer_id}  # full
            store.providers[key][first.host.peer_id].timestamp -= first.config.record_ttl_s + 1
            assert await provide(second) == {second.host.peer_id}


async def _admit(gate: Node, servers: list[Node]) -> None:
    """Wait until the gate's routing table holds these new servers (it admits a peer only once
    identify told it that the peer serves kad, P11)."""
    ids = [s.host.peer_id for s in servers]
    assert gate.kad is not None
    for _ in range(100):  # a poll, under 5 s: the identify push has no event to await
        await gate.kad.bootstrap(ids)
        if set(ids) <= set(gate.kad.routing_table_peers()):
            return
        await trio.sleep(0.05)
    raise AssertionError(f"the gate did not admit {ids}")


async def _ask(host: Any, server: ID, key: bytes, kind: str = "GET_PROVIDERS") -> Any:
    stream = await host.new_stream(server, [TProtocol(KAD)])
    request = Message(type=kind, key=key).SerializeToString()
    await stream.write(encode_uvarint(len(request)) + request)
    reply = Message()
    reply.ParseFromString(await read_varint_prefixed_bytes_limited(stream, 4 << 20))
    await stream.close()
    return reply


async def test_a_read_back_sends_our_record_again_to_each_server_that_lacks_it(tmp_path: Path) -> None:
    with owntime.fail_after(90):
        async with swarm(tmp_path, 3) as (gate, workers):
            for node in workers[:2]:
                assert node.kad is not None
                await become_server(node.kad, lambda key: 20)
            await _admit(gate, workers[:2])
            writer = workers[2]
            assert writer.kad is not None
            key, me = Shard(UNIT, 5, 1).dht_key, writer.host.raw.get_id()
            request = add_provider_request(key, me, list(writer.host.raw.get_addrs()))
            gate_id = ID.from_base58(gate.host.peer_id)
            await writer.kad.link.send(gate_id, request, reply=True)  # the gate alone
            sent_to: list[str] = []
            send = writer.kad.link.send

            async def spied(peer: ID, request: bytes, *, reply: bool) -> None:
                sent_to.append(peer.to_base58())
                await send(peer, request, reply=reply)

            writer.kad.link.send = spied  # type: ignore[method-assign]
            listed = (await writer.kad.provide_where_missing(key)).providers
            del writer.kad.link.send  # back to the method
            assert writer.host.peer_id in listed  # the gate lists us
            assert sorted(sent_to) == sorted(w.host.peer_id for w in workers[:2])  # the two that lacked us
            kept = writer.kad.closest.reuse(key)  # and our refreshes go to the servers the read-back met
            assert kept is not None
            assert {w.host.peer_id for w in workers[:2]} <= set(kept)
