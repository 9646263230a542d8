"""The gate role: DHT server and bootstrap, circuit relay v2 hop, and the reachability dial-back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from gate.reach import reach_handler
from node.config import NodeConfig
from node.p2p.host import HostConfig, open_host
from node.p2p.node import Node, open_node
from protocol import REACH

if TYPE_CHECKING:
    from trio_typing import TaskStatus


@asynccontextmanager
async def open_gate(config: NodeConfig, *, relay_allow: frozenset[str] | None = None) -> AsyncIterator[Node]:
    """A gate serving while the block runs: DHT server, relay hop and `/sark/reach/1.0.0`.

    `relay_allow` lists the peers that may reserve a relay slot (None: any peer; T16).
    """
    # P30: the probe listens on a port of its own: libp2p binds with SO_REUSEPORT, so on the gate's port
    # the kernel handed it a share of the gate's inbound connections (dials met the wrong peer id).
    probe_listen = [_any_port(a) for a in config.listen if a.startswith("/ip4/")] or ["/ip4/127.0.0.1/tcp/0"]
    async with (
        open_node(config, role="gate", relay_allow=relay_allow) as node,
        open_host(HostConfig(key_file=None, listen=tuple(probe_listen[:1]))) as probe,
    ):
        node.host.set_handler(REACH, reach_handler(probe), max_per_peer=2, deadline=15.0)
        yield node


def _any_port(addr: str) -> str:
    """`addr` with its TCP port replaced by 0 (any free port)."""
    parts = addr.split("/")
    if "tcp" in parts[:-1]:
        parts[parts.index("tcp") + 1] = "0"
    return "/".join(parts)


async def serve_gate(
    config: NodeConfig,
    *,
    relay_allow: frozenset[str] | None = None,
    task_status: TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a gate until cancelled; `task_status.started(addrs)` once it listens and serves."""
    async with open_gate(config, relay_allow=relay_allow) as node:
        task_status.started(node.host.addrs())
        await trio.sleep_forever()


__all__ = ["open_gate", "serve_gate"]
