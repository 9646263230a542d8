"""A node in the swarm: host + DHT, connected to its gates; lookups of workers; reachability.

`open_node` yields a connected, bootstrapped `Node`. DHT results are hints: `fresh_profile` asks the
peer itself over Noise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal, final

import trio

from node.config import NodeConfig
from node.errors import NodeError, PeerUnreachable
from node.p2p.dht import Dht, select_record, validate_record
from node.p2p.host import Host, HostConfig, open_host
from node.p2p.kad import Kad, open_kad
from protocol import (
    DOMAIN_ADVERT,
    PROFILE,
    REACH,
    AdvertBody,
    ComputeUnit,
    Envelope,
    Load,
    ProfileGet,
    ProfileReply,
    ProtocolError,
    ReachGet,
    ReachReply,
)
from protocol.records import open_envelope

log = logging.getLogger(__name__)

Role = Literal["worker", "submitter", "gate"]


@dataclass(frozen=True)
class Peer:
    """A worker as the DHT shows it: its verified advert and how old that advert is."""

    peer_id: str
    advert: AdvertBody
    age_s: float
    envelope: Envelope

    def dial_addrs(self) -> tuple[str, ...]:
        """Direct addresses first, then circuit addresses through a relay."""
        return self.advert.addrs + self.advert.circuit_addrs


@final
class Node:
    """A running node: host, DHT and configuration.

    Attributes:
        host: our libp2p host.
        dht: adverts and capability providers.
        config: the node's configuration.
        gates: the gate addresses we connected to.
        kad: the kad-dht under `dht` (to bootstrap again after a gate comes back), if any.
    """

    def __init__(
        self, host: Host, dht: Dht, config: NodeConfig, gates: tuple[str, ...], kad: Kad | None = None
    ) -> None:
        self.host = host
        self.dht = dht
        self.config = config
        self.gates = gates
        self.kad = kad

    async def find_workers(
        self,
        unit: ComputeUnit | None = None,
        *,
        timeout: float = 5.0,
    ) -> list[Peer]:
        """Workers providing `unit` (None: any) with a verified, unexpired advert, newest first."""
        found: list[Peer] = []
        with trio.move_on_after(timeout):
            providers = await self.dht.providers(unit)
            async with trio.open_nursery() as nursery:
                for peer_id in providers:
                    nursery.start_soon(self._collect, peer_id, unit, found)
        return sorted(found, key=lambda p: p.peer_id)

    async def _collect(self, peer_id: str, unit: ComputeUnit | None, found: list[Peer]) -> None:
        now = time.time()
        advert = await self.dht.advert(peer_id, now)
        if advert is None:
            return
        envelope, body = advert
        if unit is not None and unit not in body.profile.usable_units():
            return
        found.append(Peer(peer_id, body, max(0.0, now - body.issued_at), envelope))

    async def fresh_profile(self, peer: Peer, timeout: float = 5.0) -> tuple[AdvertBody, Load]:
        """Ask the peer itself (`/sark/profile/1.0.0`) for its current signed advert and load."""
        channel = await self.host.open_channel(
            peer.peer_id, PROFILE, addrs=peer.dial_addrs(), timeout=timeout, read_timeout=timeout
        )
        async with channel:
            await channel.send(ProfileGet())
            reply = await channel.receive()
        if not isinstance(reply, ProfileReply):
            raise PeerUnreachable(peer.peer_id, f"answered {reply.kind} to profile_get")
        body = open_envelope(reply.advert, DOMAIN_ADVERT, AdvertBody, now=time.time(), signer=peer.peer_id)
        return body, reply.load


GATE_ROUNDS = 3
"""Rounds over the gates while none answers (a gate restarting, a network coming up), 1 s, 2 s apart."""


async def _connect_gates(host: Host, gates: tuple[str, ...]) -> tuple[str, ...]:
    """The gates that answered; while none has, every gate is tried again, `GATE_ROUNDS` rounds in all."""
    connected: list[str] = []
    for round_ in range(1, GATE_ROUNDS + 1):
        for addr in gates:
            try:
                await host.connect(addr, timeout=10.0)
                connected.append(addr)
            except NodeError as exc:
                log.warning("gate %s (round %d of %d): %s", addr, round_, GATE_ROUNDS, exc.detail)
        if connected or not gates or round_ == GATE_ROUNDS:
            break
        await trio.sleep(round_)
    return tuple(connected)


@asynccontextmanager
async def open_node(
    config: NodeConfig, *, role: Role, relay_allow: frozenset[str] | None = None
) -> AsyncIterator[Node]:
    """A host listening, connected to the configured gates, with a bootstrapped DHT.

    A gate relays for peers behind NAT: only for those in `relay_allow` when given (T16).

    Raises:
        ConfigError: bad key file or listen address.
        PeerUnreachable: gates were given and none answered.
    """
    host_config = HostConfig(
        key_file=config.key_file(), listen=config.listen, relay_hop=role == "gate", relay_allow=relay_allow
    )
    async with open_host(host_config) as host:
        gates = await _connect_gates(host, config.gates)
        if config.gates and not gates:
            raise PeerUnreachable(",".join(config.gates), "no gate answered")
        server = role == "gate" or config.dht_mode == "server"
        async with open_kad(
            host, "server" if server else "client", config.record_ttl_s, validate_record, select_record
        ) as kad:
            if gates:
                await kad.bootstrap([g.rsplit("/p2p/", 1)[-1] for g in gates])
            yield Node(host, Dht(kad), config, gates, kad)


async def check_reachability(node: Node, per_gate_s: float = 8.0) -> tuple[bool, str]:
    """Ask each gate to dial us back from a throwaway identity (P13: AutoNAT always says yes)."""
    details: list[str] = []
    for gate in node.gates:
        try:
            reply = await _ask_reach(node.host, gate, per_gate_s)
        except (NodeError, ProtocolError) as exc:
            details.append(f"{gate}: {exc}")
            continue
        if reply.reachable:
            return True, reply.addr or ""
        details.append(reply.detail)
    return False, "; ".join(details)


async def _ask_reach(host: Host, gate: str, seconds: float) -> ReachReply:
    gate_id = gate.rsplit("/p2p/", 1)[-1]
    channel = await host.open_channel(gate_id, REACH, addrs=(gate,), timeout=seconds, read_timeout=seconds)
    async with channel:
        await channel.send(ReachGet(addrs=tuple(host.addrs()[:16])))
        reply = await channel.receive()
    if not isinstance(reply, ReachReply):
        raise PeerUnreachable(gate_id, f"answered {reply.kind} to reach_get")
    return reply


__all__ = ["Node", "Peer", "Role", "check_reachability", "open_node"]
