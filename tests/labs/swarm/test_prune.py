"""Issue 50, scope 8: connections managed (P42). A worker or a submitter near its cap closes idle
connections, never its gates' nor one with a stream open; a gate, whose relay slots live on idle
connections, does not, and at its cap refuses as before.

py-libp2p 0.8.1 holds a hard cap in both directions ("Maximum connections limit reached") and prunes
only past its high mark, which the node had set to the cap itself: nothing was ever pruned, and each
walk of the DHT opens connections to about 30 servers. A node at its cap can dial no one. Now a node's
dial past `PRUNE_FROM` of its cap first closes idle connections down to `PRUNE_TO` (`Host.make_room`,
py-libp2p's own pruner: the oldest idle first, none younger than the grace, none protected, none with a
stream), and its gates are protected (`open_node`).

In-process hosts on loopback, a cap of 16 (pruning from 12 down to 8) and a grace of 0.2 s.
"""

from __future__ import annotations

import math
from contextlib import AsyncExitStack

import pytest
import trio
from kit import owntime
from kit.fixtures import LOOPBACK

from node.errors import NodeError, error_chain
from node.p2p.host import Host, HostConfig, open_host
from node.p2p.wire import Channel

CAP = 16
GRACE_S = 0.2
HOLD = "/sark-test/hold/1.0.0"


async def _hosts(stack: AsyncExitStack, count: int) -> list[Host]:
    return [
        await stack.enter_async_context(open_host(HostConfig(key_file=None, listen=LOOPBACK)))
        for _ in range(count)
    ]


async def test_a_node_near_its_cap_closes_idle_connections_and_keeps_its_gate_and_a_busy_stream() -> None:
    with owntime.fail_after(60):
        async with AsyncExitStack() as stack:
            config = HostConfig(key_file=None, listen=LOOPBACK, max_connections=CAP, prune_grace_s=GRACE_S)
            node = await stack.enter_async_context(open_host(config))
            gate, busy, *idle = await _hosts(stack, CAP + 1)
            release = trio.Event()

            async def hold(channel: Channel) -> None:
                await release.wait()

            busy.set_handler(HOLD, hold, deadline=math.inf)
            node.protect(gate.peer_id, "gate")
            await node.connect(gate.addrs()[0])
            stream = await node.open_channel(busy.peer_id, HOLD, addrs=busy.addrs())  # open: a task's
            for other in idle[:-1]:
                await node.connect(other.addrs()[0])
            await trio.sleep(2 * GRACE_S)  # every connection past the grace

            await node.connect(idle[-1].addrs()[0])  # room made first: its dial is not refused
            assert node.is_connected(idle[-1].peer_id)
            assert node.is_connected(gate.peer_id)  # protected
            assert node.is_connected(busy.peer_id)  # a stream open
            assert node.connection_count() <= CAP * 3 // 4 + 1  # past the mark, idle ones closed to half
            release.set()
            await stream.close()


async def test_a_gate_at_its_cap_keeps_every_connection_and_refuses_the_next_dial() -> None:
    """What every host did before P42: at its cap, idle or not, the next dial fails."""
    with owntime.fail_after(60):
        async with AsyncExitStack() as stack:
            config = HostConfig(
                key_file=None, listen=LOOPBACK, max_connections=CAP, prune_grace_s=GRACE_S, prune_idle=False
            )
            gate = await stack.enter_async_context(open_host(config))
            *held, late = await _hosts(stack, CAP + 1)
            for other in held:
                await gate.connect(other.addrs()[0])
            await trio.sleep(2 * GRACE_S)
            with pytest.raises(NodeError) as refused:
                await gate.connect(late.addrs()[0])
            assert any("Maximum connections limit reached" in str(e) for e in error_chain(refused.value))
            assert all(gate.is_connected(other.peer_id) for other in held)
