"""P34 on real hosts on loopback: a py-libp2p kad server drops, in silence, a peer's ADD_PROVIDERs past
its rate (10 in 10 s), and our provides wait their turn at each server so that every record is kept.

The paced case runs the server's and our pacer's window at 2 s (both read the same numbers from
py-libp2p: `_provider_rate_window`), so that it takes seconds, not the default 10 s window, and the
margin at 2 s: a record is lost only if the server handled the window's first message over 2 s later
than the eleventh, which no load on one event loop makes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from kit import owntime
from libp2p.custom_types import TProtocol
from libp2p.peer.id import ID

from gate import open_gate
from node.config import NodeConfig
from node.p2p.dht import advert_key
from node.p2p.kadlink import LONE_QUERY_S, QUERY_TIMEOUT_S
from node.p2p.kadwire import add_provider_request
from node.p2p.node import Node, open_node
from node.p2p.pacing import PROVIDES_PER_WINDOW, ProvidePacer
from protocol import KAD

LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)
KEYS = [bytes([i]) * 32 for i in range(PROVIDES_PER_WINDOW + 6)]  # a worker with 15 units: 16 keys


@asynccontextmanager
async def gate_and_worker(root: Path) -> AsyncIterator[tuple[Node, Node]]:
    async with open_gate(NodeConfig(data_dir=root / "gate", listen=LOOPBACK, record_ttl_s=60)) as gate:
        gates = tuple(gate.host.addrs())
        config = NodeConfig(data_dir=root / "w", gates=gates, listen=LOOPBACK, record_ttl_s=60)
        async with open_node(config, role="worker") as worker:
            yield gate, worker


async def settled(gate: Node, worker: Node, count: int) -> int:
    """The gate's count once it reached `count` (or after 5 s): fire-and-forget sends land later."""
    with trio.move_on_after(5):
        while kept(gate, worker) < count:  # noqa: ASYNC110 (the gate's store has no event to wait on)
            await trio.sleep(0.05)
    return kept(gate, worker)


def kept(gate: Node, worker: Node) -> int:
    """How many of KEYS the gate lists the worker under."""
    store, me = gate.dht.kad.raw.provider_store, ID.from_base58(worker.host.peer_id)
    return sum(any(p.peer_id == me for p in store.get_providers(key)) for key in KEYS)


async def test_a_libp2p_server_drops_a_peers_add_providers_past_its_rate_in_silence(tmp_path: Path) -> None:
    with owntime.fail_after(60):
        async with gate_and_worker(tmp_path) as (gate, worker):
            raw = gate.dht.kad.raw
            assert (raw._provider_rate_max, raw._provider_rate_window) == (PROVIDES_PER_WINDOW, 10.0)
            kad, to = worker.dht.kad, ID.from_base58(gate.host.peer_id)
            me, addrs = ID.from_base58(worker.host.peer_id), list(worker.host.raw.get_addrs())
            for key in KEYS:  # unpaced, one after another: each send "succeeds"
                await kad.link.send(to, add_provider_request(key, me, addrs), reply=False)
            await settled(gate, worker, PROVIDES_PER_WINDOW)
            await trio.sleep(0.5)  # the last ones have arrived too (and been dropped)
            assert kept(gate, worker) == PROVIDES_PER_WINDOW


async def test_our_provides_wait_their_turn_and_every_record_is_kept(tmp_path: Path) -> None:
    with owntime.fail_after(60):
        async with gate_and_worker(tmp_path) as (gate, worker):
            gate.dht.kad.raw._provider_rate_window = 2.0
            worker.dht.kad.pacer = ProvidePacer(PROVIDES_PER_WINDOW, 2.0, margin_s=2.0)
            start = trio.current_time()
            async with trio.open_nursery() as nursery:
                for key in KEYS:
                    nursery.start_soon(worker.dht.kad.provide, key)
            assert trio.current_time() - start >= 4.0  # the last six waited for the next window
            assert await settled(gate, worker, len(KEYS)) == len(KEYS)


async def test_a_server_that_stalls_a_lookup_is_named_as_a_failure(tmp_path: Path) -> None:
    """A hostile server accepts the GET_PROVIDERS stream and never answers. It is a failure of the
    lookup ("no answer within"), as a refusal is, so `peers` and `submit` can name it; the lookup
    used to read none answered and none failed as "try libp2p's own iterative lookup", which asked
    the same servers again under none of the walk's rules (23 s against one stalling gate here)."""
    async with gate_and_worker(tmp_path) as (gate, worker):
        asked: list[Any] = []

        async def stall(stream: Any) -> None:  # the hostile server's whole kad: read nothing, say nothing
            asked.append(stream)
            await trio.sleep_forever()

        gate.host._lp.set_stream_handler(TProtocol(KAD), stall)
        assert worker.dht.kad is not None
        started = trio.current_time()
        found = await worker.dht.kad.lookup_providers(KEYS[0])
        took = trio.current_time() - started
        assert len(asked) == 1  # one wait for the stalling server, no second lookup
        assert found.providers == {}
        assert found.answered == 0
        assert found.failures == {gate.host.peer_id: f"no answer within {LONE_QUERY_S:g} s"}
        assert took >= LONE_QUERY_S  # its whole wait (a trio deadline never fires early)


async def test_a_lone_server_slower_than_a_query_s_deadline_is_waited_for(tmp_path: Path) -> None:
    """A loaded machine's gate (load 12 on two cores: the suite at load 4) can answer after
    `QUERY_TIMEOUT_S`; with no other server answering, the lookup waits for it (up to `LONE_QUERY_S`)
    rather than returning nothing: `peers` exited 1 there once libp2p's own lookup no longer retried."""
    async with gate_and_worker(tmp_path) as (gate, worker):
        multiselect = gate.host._lp.multiselect
        honest = multiselect.handlers[TProtocol(KAD)]

        async def slow(stream: Any) -> None:  # the gate's own kad, after a wait past QUERY_TIMEOUT_S
            await trio.sleep(QUERY_TIMEOUT_S + 1.0)
            await honest(stream)

        assert worker.dht.kad is not None
        assert await worker.dht.kad.provide(KEYS[0])
        assert await settled(gate, worker, 1) == 1
        gate.host._lp.set_stream_handler(TProtocol(KAD), slow)
        found = await worker.dht.kad.lookup_providers(KEYS[0])
        assert set(found.providers) == {worker.host.peer_id}
        assert found.answered == 1
        assert found.failures == {}


async def test_a_server_that_stalls_an_advert_read_costs_one_wait_and_no_other_lookup(tmp_path: Path) -> None:
    """The same hostile server, asked for a worker's advert (GET_VALUE): `Kad.get` waits for it once
    (`LONE_QUERY_S`, none other answering) and returns what it holds; the advert then comes from the
    worker itself (its ask over `/sark/profile`). It used to read "none answered" as
    "try libp2p's own `get_value`", which walked the same stalling server again under none of the
    query's deadlines."""
    async with gate_and_worker(tmp_path) as (gate, worker):
        asked: list[Any] = []

        async def stall(stream: Any) -> None:
            asked.append(stream)
            await trio.sleep_forever()

        gate.host._lp.set_stream_handler(TProtocol(KAD), stall)
        assert worker.dht.kad is not None
        started = trio.current_time()
        values = await worker.dht.kad.get(advert_key(gate.host.peer_id))
        took = trio.current_time() - started
        assert len(asked) == 1  # one wait for the stalling server, no second lookup
        assert values == []
        assert took >= LONE_QUERY_S  # its whole wait (a trio deadline never fires early)
