"""node.kad and node.dht over real hosts on loopback: lookups, the P11/P23 fixes, and T4 on put and on get."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import trio
from kit import owntime
from kit.data import make_profile
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.custom_types import TProtocol
from libp2p.kad_dht.common import MAX_DHT_MESSAGE_SIZE
from libp2p.peer.id import ID
from libp2p.utils.varint import encode_uvarint, read_varint_prefixed_bytes_limited

from gate import open_gate
from node.config import NodeConfig
from node.p2p.dht import ADVERT_MAX_BYTES, advert_key
from node.p2p.identity import identity_peer_id
from node.p2p.kadpatch import EVICT_AFTER_S
from node.p2p.kadwire import get_providers_request
from node.p2p.node import Node, open_node
from node.worker.advertising import serve_worker
from protocol import DOMAIN_ADVERT, KAD, AdvertBody, Load
from protocol.codec import pack_body
from protocol.records import seal

LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)


@dataclass
class Swarm:
    gate: Node
    workers: list[Node]
    root: Path

    def config(self, name: str, gates: tuple[str, ...] | None = None) -> NodeConfig:
        addrs = tuple(self.gate.host.addrs()) if gates is None else gates
        return NodeConfig(data_dir=self.root / name, gates=addrs, listen=LOOPBACK, record_ttl_s=60)


@asynccontextmanager
async def swarm(root: Path, workers: int) -> AsyncIterator[Swarm]:
    """A gate and `workers` advertising workers (client-mode DHT), all in this process."""
    async with AsyncExitStack() as stack:
        gate = await stack.enter_async_context(
            open_gate(NodeConfig(data_dir=root / "gate", listen=LOOPBACK, record_ttl_s=60))
        )
        lab = Swarm(gate, [], root)
        nursery = await stack.enter_async_context(trio.open_nursery())
        for i in range(workers):
            node = await stack.enter_async_context(open_node(lab.config(f"w{i}"), role="worker"))
            await nursery.start(partial(serve_worker, node, make_profile(f"w{i}"), Load))
            lab.workers.append(node)
        yield lab
        nursery.cancel_scope.cancel()


def _advert(seed: bytes, peer: str, *, seq: int, lifetime: float = 60.0, name: str = "d") -> bytes:
    now = time.time()
    profile = make_profile("d").with_(device_name=name)  # with_ does not validate: an oversized name stays
    body = AdvertBody(peer_id=peer, seq=seq, issued_at=now - 1, expires_at=now + lifetime, profile=profile)
    return pack_body(seal(body, DOMAIN_ADVERT, seed))


async def _put_raw(node: Node, at: Node, key: str, value: bytes) -> None:
    """A PUT_VALUE sent as an attacker would: no local validation on the way out."""
    store = node.dht.kad.raw.value_store
    await store._store_at_peer(ID.from_base58(at.host.peer_id), key.encode(), value)


async def test_a_fresh_node_finds_every_worker_by_asking_only_the_gate(tmp_path: Path) -> None:
    with owntime.fail_after(60):
        async with swarm(tmp_path, 6) as lab, open_node(lab.config("fresh"), role="submitter") as fresh:
            found = (await fresh.look(timeout=10)).peers
            assert {p.peer_id for p in found} == {w.host.peer_id for w in lab.workers}
            # P11: client-mode workers stay out of the gate's table, so nobody is told to dial them.
            gate_table = set(lab.gate.dht.kad.routing_table_peers())
            assert gate_table.isdisjoint(w.host.peer_id for w in lab.workers)
            assert not any(fresh.host.is_connected(w.host.peer_id) for w in lab.workers)


async def test_a_kad_server_answers_more_than_twelve_requests_at_once(tmp_path: Path) -> None:
    # P23: libp2p's kad server resets every inbound kad stream past 12 in flight, host-wide.
    with owntime.fail_after(60):
        async with swarm(tmp_path, 1) as lab, open_node(lab.config("client"), role="submitter") as client:
            key = advert_key(lab.workers[0].host.peer_id).encode()
            gate = ID.from_base58(lab.gate.host.peer_id)
            answers: list[bytes | None] = []

            async def ask() -> None:
                answers.append(await client.dht.kad.raw.value_store._get_from_peer(gate, key))

            async with trio.open_nursery() as nursery:
                for _ in range(40):
                    nursery.start_soon(ask)
            assert len(answers) == 40
            assert all(answers)


async def test_forged_expired_oversized_and_older_adverts_are_refused_on_put(tmp_path: Path) -> None:
    with owntime.fail_after(60):
        async with swarm(tmp_path, 1) as lab, open_node(lab.config("attacker"), role="submitter") as attacker:
            victim = lab.workers[0].host
            key = advert_key(victim.peer_id)
            held = await lab.gate.dht.kad.get_local(key)
            assert held is not None
            forged = _advert(attacker.host.private_key, victim.peer_id, seq=2**40)
            older = _advert(victim.private_key, victim.peer_id, seq=1)
            for value in (forged, older):
                await _put_raw(attacker, lab.gate, key, value)
                assert await lab.gate.dht.kad.get_local(key) == held
            own = advert_key(attacker.host.peer_id)
            seed = attacker.host.private_key
            expired = _advert(seed, attacker.host.peer_id, seq=5, lifetime=-10)
            oversized = _advert(seed, attacker.host.peer_id, seq=6, name="x" * ADVERT_MAX_BYTES)
            for value in (expired, oversized):
                await _put_raw(attacker, lab.gate, own, value)
                assert await lab.gate.dht.kad.get_local(own) is None
            got = await attacker.dht.advert(victim.peer_id, time.time())
            assert got is not None
            assert pack_body(got[0]) == held


async def test_invalid_values_a_server_hands_out_are_not_selected_on_get(tmp_path: Path) -> None:
    with owntime.fail_after(60):
        async with (
            swarm(tmp_path, 1) as lab,
            open_gate(lab.config("rogue")) as rogue,
            open_node(
                lab.config("reader", (*lab.gate.host.addrs(), *rogue.host.addrs())), role="submitter"
            ) as reader,
        ):
            victim = lab.workers[0].host
            attacker_seed = create_new_key_pair().private_key.to_bytes()
            stuffed = rogue.dht.kad.raw.value_store  # the rogue skips validation for its own store
            stuffed.put(
                advert_key(victim.peer_id).encode(), _advert(attacker_seed, victim.peer_id, seq=2**40)
            )
            honest = await lab.gate.dht.kad.get_local(advert_key(victim.peer_id))
            got = await reader.dht.advert(victim.peer_id, time.time())
            assert got is not None
            assert pack_body(got[0]) == honest

            ghost_seed = create_new_key_pair().private_key.to_bytes()
            ghost = str(ID.from_pubkey(create_new_key_pair(ghost_seed).public_key))
            for seq, lifetime in ((1, -10), (2, 7200)):  # expired, then living past the 1 h cap
                stuffed.put(
                    advert_key(ghost).encode(), _advert(ghost_seed, ghost, seq=seq, lifetime=lifetime)
                )
                assert await reader.dht.advert(ghost, time.time()) is None


async def test_a_gate_that_comes_up_late_is_still_joined(tmp_path: Path) -> None:
    """A node started while its gate is down (restarting) tries again (`node/p2p/gates.py` backoff),
    and libp2p's negative dial cache does not refuse the later rounds (P26)."""
    with socket.socket() as s:  # a free port for the gate to come up on later
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gate_config = NodeConfig(data_dir=tmp_path / "gate", listen=(f"/ip4/127.0.0.1/tcp/{port}",))
    gate_addr = f"/ip4/127.0.0.1/tcp/{port}/p2p/{identity_peer_id(gate_config.key_file())}"

    async def late_gate(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep(2.0)  # the node's first rounds find nobody
        async with open_gate(gate_config):
            await trio.sleep_forever()

    with owntime.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(late_gate)
            config = NodeConfig(data_dir=tmp_path / "n", gates=(gate_addr,), listen=LOOPBACK)
            async with open_node(config, role="worker") as node:
                assert node.gates == (gate_addr,)
                assert node.host.is_connected(gate_addr.rsplit("/p2p/", 1)[1])
            nursery.cancel_scope.cancel()


async def test_a_strangers_paced_kad_streams_cannot_hold_every_token(tmp_path: Path) -> None:
    """Issue 50: a kad stream that asks again within each `FIRST_FRAME_S` is not silent, and libp2p
    reset every stream past the server's tokens: a stranger's paced streams, as many as the tokens,
    denied the server to every walk. Now a stream that finds every token taken ends the one held
    longest once it is past `EVICT_AFTER_S`. The gate's tokens are lowered to 3 for the lab; three
    streams of a stranger each ask every second; past the age, an honest GET_PROVIDERS is answered
    and one of the stranger's streams is the one ended."""
    with owntime.fail_after(60):
        async with (
            swarm(tmp_path, 1) as lab,
            open_node(lab.config("stranger"), role="submitter") as stranger,
            open_node(lab.config("client"), role="submitter") as client,
        ):
            lab.gate.dht.kad.raw._inbound_limiter = limiter = trio.CapacityLimiter(3)
            gate = ID.from_base58(lab.gate.host.peer_id)
            key = advert_key(lab.workers[0].host.peer_id).encode()
            ask = get_providers_request(key)
            ended: list[str] = []
            one_ended = trio.Event()

            async def hold(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                stream = await stranger.host.raw.new_stream(gate, [TProtocol(KAD)])
                try:
                    while True:
                        await stream.write(encode_uvarint(len(ask)) + ask)
                        await read_varint_prefixed_bytes_limited(stream, MAX_DHT_MESSAGE_SIZE)
                        task_status.started()
                        task_status = trio.TASK_STATUS_IGNORED
                        await trio.sleep(1.0)  # well within FIRST_FRAME_S: never silent
                except Exception as exc:  # libp2p's stream errors: the server ended it
                    ended.append(type(exc).__name__)
                    one_ended.set()

            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    await nursery.start(hold)
                assert limiter.borrowed_tokens == 3
                await trio.sleep(EVICT_AFTER_S + 1)
                assert not ended  # paced: none of them was silent
                await client.dht.kad.link.get_providers(gate, key)  # raised when it was reset
                with trio.fail_after(10):
                    await one_ended.wait()
                nursery.cancel_scope.cancel()
            assert len(ended) == 1
