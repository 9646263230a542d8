"""Addresses on real hosts: a wildcard listen address announced as dialable ones (P29), a dead first
address that does not stop the dial to a live second one (P30), a gate whose probe keeps off its port."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import psutil
import pytest
import trio
from libp2p.peer.id import ID

from gate import open_gate
from node.config import NodeConfig
from node.errors import PeerTimeout
from node.p2p.addrs import local_interfaces
from node.p2p.dial import PER_ADDRESS_S
from node.p2p.host import Host, HostConfig, open_host
from node.p2p.wire import Channel
from protocol import ReachReply

LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)
ECHO = "/sark/test-echo/1.0.0"


async def _echo(channel: Channel) -> None:
    await channel.receive()
    await channel.send(ReachReply(reachable=True))
    await channel.close()


@asynccontextmanager
async def _mute_port() -> AsyncIterator[int]:
    """A TCP port on loopback that accepts connections and never says a word (a dead address)."""
    held: list[trio.SocketStream] = []

    async def hold(stream: trio.SocketStream) -> None:
        held.append(stream)
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, hold, 0, host="127.0.0.1"))
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()


async def test_a_wildcard_listener_announces_its_interface_addresses_loopback_last(tmp_path: Path) -> None:
    async with (
        open_host(HostConfig(key_file=None, listen=("/ip4/0.0.0.0/tcp/0",))) as server,
        open_host(HostConfig(key_file=None, listen=LOOPBACK)) as client,
    ):
        server.set_handler(ECHO, _echo)
        addrs = server.addrs()
        port = addrs[0].split("/")[4]
        expected = {str(i.ip) for i in local_interfaces() if i.version == 4 and not i.ip.is_link_local}
        assert {a.split("/")[2] for a in addrs} == expected
        assert all(a.split("/")[4] == port and a.endswith(f"/p2p/{server.peer_id}") for a in addrs)
        assert addrs[-1].startswith("/ip4/127.0.0.1/"), addrs
        channel = await client.open_channel(server.peer_id, ECHO, addrs=addrs, timeout=10, read_timeout=10)
        async with channel:
            await channel.send(ReachReply(reachable=True))
            assert isinstance(await channel.receive(), ReachReply)
        # identify hands the same addresses to the peers we meet (what provider records carry)
        seen = {str(a) for a in client.raw.get_peerstore().addrs(ID.from_base58(server.peer_id))}
        assert not any("/0.0.0.0/" in a for a in seen), seen


async def test_a_dead_first_address_does_not_stop_the_dial_to_a_live_second(
    host_pair: tuple[Host, Host],
) -> None:
    server, client = host_pair
    server.set_handler(ECHO, _echo)
    live = server.addrs()[0]
    async with _mute_port() as port:
        dead = f"/ip4/127.0.0.1/tcp/{port}/p2p/{server.peer_id}"
        # the whole deadline is 2 s more than one address's cap: the dead one must not take it all
        channel = await client.open_channel(
            server.peer_id, ECHO, addrs=[dead, live], timeout=PER_ADDRESS_S + 2, read_timeout=5
        )
        async with channel:
            await channel.send(ReachReply(reachable=True))
            assert isinstance(await channel.receive(), ReachReply)


async def test_a_peer_at_dead_addresses_only_times_out_naming_each(host_pair: tuple[Host, Host]) -> None:
    server, client = host_pair
    async with _mute_port() as one, _mute_port() as two:
        dead = [f"/ip4/127.0.0.1/tcp/{p}/p2p/{server.peer_id}" for p in (one, two)]
        with pytest.raises(PeerTimeout) as info:
            await client.connect(dead[0], timeout=0.5)
        assert "connecting within 0.5 s" in info.value.what
        with pytest.raises(PeerTimeout) as info:
            await client._ensure_connected(server.peer_id, dead, PER_ADDRESS_S + 1)
        assert f"{dead[0]}: no connection within {PER_ADDRESS_S:g} s" in info.value.what


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_the_gate_probe_listens_on_a_port_of_its_own(tmp_path: Path) -> None:
    # libp2p binds with SO_REUSEPORT: a probe on the gate's own port took a share of its connections
    port = _free_port()
    config = NodeConfig(data_dir=tmp_path / "gate", listen=(f"/ip4/0.0.0.0/tcp/{port}",))
    async with open_gate(config) as gate:
        mine = psutil.Process().net_connections(kind="tcp")
        on_port = [c for c in mine if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
        assert len(on_port) == 1, on_port
        addrs = gate.host.addrs()
        assert addrs
        assert not any("/0.0.0.0/" in a for a in addrs)
        async with open_host(HostConfig(key_file=None, listen=LOOPBACK)) as client:
            for _ in range(8):  # each a new connection: with a shared port some met the probe
                await client.connect(addrs[-1], timeout=5)
                await client.disconnect(gate.host.peer_id)
