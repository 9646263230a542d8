"""`/sark/reach/1.0.0`: dial a caller back from a throwaway identity and tell it whether that worked.

py-libp2p's AutoNAT server answers "reachable" for any address (it reuses the existing connection,
P13); a second host with its own identity has no connection to reuse. Only the caller's observed IP
is ever dialled, so the gate cannot be used to probe third parties.
"""

from __future__ import annotations

import logging
from typing import Final

from node.errors import NodeError
from node.p2p.host import Host
from node.p2p.wire import Channel, Handler
from protocol import ReachGet, ReachReply

log = logging.getLogger(__name__)

MAX_PROBES: Final = 4
PROBE_TIMEOUT_S: Final = 3.0


def dial_back_addrs(observed_ip: str, peer_id: str, claimed: tuple[str, ...]) -> list[str]:
    """The addresses to probe: each claimed TCP port, at the IP the caller really came from."""
    out: list[str] = []
    for addr in claimed:
        parts = addr.split("/")
        if "tcp" not in parts:
            continue
        port = parts[parts.index("tcp") + 1]
        candidate = f"/ip4/{observed_ip}/tcp/{port}/p2p/{peer_id}"
        if port.isdigit() and candidate not in out:
            out.append(candidate)
    return out[:MAX_PROBES]


def reach_handler(probe: Host) -> Handler:
    """The handler for `/sark/reach/1.0.0`, dialling back with `probe` (a second, throwaway host)."""

    async def handle(channel: Channel) -> None:
        request = await channel.receive()
        if not isinstance(request, ReachGet) or channel.remote_ip is None:
            await channel.reset()
            return
        await channel.send(await _probe(probe, channel.peer_id, channel.remote_ip, request.addrs))
        await channel.close()

    return handle


async def _probe(probe: Host, peer_id: str, ip: str, claimed: tuple[str, ...]) -> ReachReply:
    failures: list[str] = []
    for addr in dial_back_addrs(ip, peer_id, claimed):
        try:
            await probe.connect(addr, timeout=PROBE_TIMEOUT_S)
        except NodeError as exc:
            failures.append(f"{addr}: {exc.detail}"[:300])
            continue
        await probe.disconnect(peer_id)
        return ReachReply(reachable=True, addr=addr)
    return ReachReply(reachable=False, detail="; ".join(failures)[:1900] or "no tcp address to dial back")


__all__ = ["dial_back_addrs", "reach_handler"]
