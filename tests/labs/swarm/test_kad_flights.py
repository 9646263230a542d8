"""A kad request leaves whole in its first flight: multistream-select negotiated lazily (issue 50, scope 8).

Two real hosts of this code on loopback, the client reaching the DHT server only through a relay
(`tests/kit/delayrelay.py`) that holds every byte on the way back. With nothing heard from the server,
the client has already sent multistream's header, the protocol and the whole request: one round trip
a request (py-libp2p's `new_stream` sends the 20-byte header and waits for its echo, then the
protocol, then the request: three, which `benchmarks/conn_cost.py` measures side by side). A server
that refuses the protocol (`na`) ends the request with `LazyRefused`, never a hang.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from kit import owntime
from kit.delayrelay import DelayRelay
from libp2p.peer.id import ID
from libp2p.utils.varint import encode_uvarint

from node.config import NodeConfig
from node.p2p.kad import Kad
from node.p2p.kadwire import get_providers_request
from node.p2p.lazy import LazyRefused, open_lazily
from node.p2p.node import Node, open_node
from node.p2p.shards import Shard

LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)
REQUEST = get_providers_request(Shard(None, 0, 0).dht_key)


@asynccontextmanager
async def relayed(root: Path) -> AsyncIterator[tuple[Node, Node, Kad, ID, DelayRelay]]:
    """A DHT server, a client connected to it through a relay, the connection's first exchanges over."""
    async with (
        open_node(NodeConfig(data_dir=root / "server", listen=LOOPBACK), role="gate") as server,
        open_node(NodeConfig(data_dir=root / "client", listen=LOOPBACK), role="submitter") as me,
        trio.open_nursery() as nursery,
    ):
        port = int(server.host.addrs()[0].split("/tcp/")[1].split("/")[0])
        relay = DelayRelay(port)
        await nursery.start(relay.serve)
        await me.host.connect(f"/ip4/127.0.0.1/tcp/{relay.port}/p2p/{server.host.peer_id}")
        kad = me.kad or me.dht.kad
        assert kad is not None
        peer = ID.from_base58(server.host.peer_id)
        await kad.link.request(peer, REQUEST)  # identify and the connection's own first frames are over
        yield server, me, kad, peer, relay
        relay.release_back()
        await me.host.disconnect(server.host.peer_id)  # closed in order before the relay goes
        nursery.cancel_scope.cancel()


async def test_a_kad_request_reaches_the_server_before_anything_came_back(tmp_path: Path) -> None:
    async with relayed(tmp_path) as (server, _, kad, peer, relay):
        store = server.dht.kad.raw.provider_store
        asked, read = trio.Event(), store.get_providers

        def get_providers(key: bytes) -> Any:
            asked.set()  # the server's handler has the whole request
            return read(key)

        store.get_providers = get_providers
        relay.hold_back()
        answers: list[bytes] = []

        async def ask() -> None:
            answers.append(await kad.link.request(peer, REQUEST))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            with owntime.fail_after(20):  # with py-libp2p's new_stream the request waits for the echoes
                await asked.wait()
            assert not answers  # and multistream's echoes are held too: the request did not wait for them
            relay.release_back()
        assert answers[0]  # the server's answer to it


async def test_a_protocol_the_server_does_not_speak_is_refused_not_hung(tmp_path: Path) -> None:
    async with relayed(tmp_path) as (_, me, _, peer, _):
        raw: Any = me.host.raw
        first = encode_uvarint(len(REQUEST)) + REQUEST
        with owntime.fail_after(20), pytest.raises(LazyRefused, match=r"/sark/nothing/1\.0\.0"):
            await open_lazily(raw, peer, "/sark/nothing/1.0.0", first)
