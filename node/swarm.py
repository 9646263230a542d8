"""Composition of the swarm: a node (host + DHT), the worker's advertising loop, reachability, relay.

`open_node` yields a connected, bootstrapped `Node`; `serve_worker` advertises a device into it and
never returns. DHT results are hints: `fresh_profile` asks the peer itself over Noise.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, Literal, final

import trio

from node.config import NodeConfig
from node.dht import Dht, select_record, validate_record
from node.errors import NodeError, PeerUnreachable
from node.host import Host, HostConfig, open_host, peer_of
from node.kad import Kad, forget_failed_dials, open_kad
from node.wire import Channel, Handler
from protocol import (
    DOMAIN_ADVERT,
    PROFILE,
    REACH,
    AdvertBody,
    ComputeUnit,
    DeviceProfile,
    Envelope,
    Load,
    ProfileGet,
    ProfileReply,
    ProtocolError,
    ReachGet,
    ReachReply,
)
from protocol.records import open_envelope, seal

log = logging.getLogger(__name__)

Role = Literal["worker", "submitter", "gate"]

GATE_CHECK_S: Final = 2.0
"""How often a worker checks that its gates are still connected (issue 6: a restarted gate)."""


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


@dataclass(frozen=True)
class Advertised:
    """What `serve_worker` reports when its first advert is out."""

    peer_id: str
    addrs: tuple[str, ...]
    circuit_addrs: tuple[str, ...]
    reachability: Literal["direct", "relayed", "unknown"]


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
        try:
            await channel.send(ProfileGet())
            reply = await channel.receive()
        finally:
            await channel.close()
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
    try:
        await channel.send(ReachGet(addrs=tuple(host.addrs()[:16])))
        reply = await channel.receive()
    finally:
        await channel.close()
    if not isinstance(reply, ReachReply):
        raise PeerUnreachable(gate_id, f"answered {reply.kind} to reach_get")
    return reply


@final
class _Advertiser:
    """Signs our advert with a seq that grows across restarts (milliseconds since the epoch)."""

    def __init__(self, node: Node, profile: DeviceProfile, load: Callable[[], Load]) -> None:
        self._node = node
        self._profile = profile
        self._load = load
        self._seq = int(time.time() * 1000)
        self.addrs: tuple[str, ...] = ()
        self.circuit_addrs: tuple[str, ...] = ()
        self.reachability: Literal["direct", "relayed", "unknown"] = "unknown"
        self.current: Envelope | None = None

    def sign(self) -> Envelope:
        now = time.time()
        self._seq = max(self._seq + 1, int(now * 1000))
        body = AdvertBody(
            peer_id=self._node.host.peer_id,
            seq=self._seq,
            issued_at=now,
            expires_at=now + self._node.config.record_ttl_s,
            addrs=self.addrs,
            circuit_addrs=self.circuit_addrs,
            reachability=self.reachability,
            profile=self._profile,
            load=self._load(),
        )
        self.current = seal(body, DOMAIN_ADVERT, self._node.host.private_key)
        return self.current

    async def serve_profile(self, channel: Channel) -> None:
        await channel.receive()
        await channel.send(ProfileReply(advert=self.sign(), load=self._load()))
        await channel.close()


async def _place(node: Node, advertiser: _Advertiser) -> None:
    """Decide reachability; behind NAT, reserve a relay slot and advertise the circuit address."""
    advertiser.addrs = tuple(a for a in node.host.addrs() if "/ip4/0.0.0.0/" not in a)
    if not node.gates:
        return
    reachable, detail = await check_reachability(node)
    if reachable:
        advertiser.reachability = "direct"
        return
    log.info("not directly reachable (%s); reserving a relay slot", detail)
    circuits: list[str] = []
    for gate in node.gates:
        try:
            circuits.append(await node.host.reserve_relay(gate))
        except NodeError as exc:
            log.warning("relay reservation on %s failed: %s", gate, exc.detail)
    advertiser.circuit_addrs = tuple(circuits)
    advertiser.reachability = "relayed" if circuits else "unknown"


async def serve_worker(
    node: Node,
    profile: DeviceProfile,
    load: Callable[[], Load],
    *,
    handlers: Mapping[str, Handler] | None = None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Advertise this device and keep the advert fresh; serve `/sark/profile` and `handlers`. Never returns.

    `handlers` (e.g. `/sark/negotiate/1.0.0`) run with no overall deadline and the configured per-peer
    cap; they enforce their own read deadlines. `task_status.started(Advertised)` after the first advert.
    """
    advertiser = _Advertiser(node, profile, load)
    node.host.set_handler(PROFILE, advertiser.serve_profile, deadline=10.0)
    for protocol, handler in (handlers or {}).items():
        cap = node.config.max_streams_per_peer
        node.host.set_handler(protocol, handler, max_per_peer=cap, deadline=math.inf)
    await _place(node, advertiser)
    republish = trio.Event()

    def wake() -> None:
        republish.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_keep_gates, node, advertiser, wake)
        started = False
        while True:
            republish = trio.Event()
            try:
                await node.dht.publish(advertiser.sign(), profile.usable_units())
            except Exception:  # a task boundary: a failed announce is retried on the next tick
                log.warning("advert publish failed", exc_info=True)
            if not started:
                started = True
                a = advertiser
                task_status.started(Advertised(node.host.peer_id, a.addrs, a.circuit_addrs, a.reachability))
            with trio.move_on_after(node.config.reannounce_interval()):
                await republish.wait()


async def _keep_gates(node: Node, advertiser: _Advertiser, wake: Callable[[], None]) -> None:
    """Notice gates that went away, reconnect when they are back, reserve again, republish. Never returns.

    A gate that restarts forgets our relay reservation and its DHT copy of our advert: until we
    reserve and publish again, nobody can reach a relayed worker through it.
    """
    gates = node.config.gates
    down: set[str] = {g for g in gates if g not in node.gates}
    while True:
        await trio.sleep(GATE_CHECK_S)  # a timer: libp2p has no "connection closed" event we can await
        lost = {g for g in gates if g not in down and not node.host.is_connected(peer_of(g))}
        if lost:
            log.warning("lost gates %s", ", ".join(sorted(lost)))
            down |= lost
            advertiser.circuit_addrs = tuple(c for c in advertiser.circuit_addrs if _gate_of(c) not in down)
        back = bool(down) and await _rejoin(node, advertiser, down)
        if lost or back:  # one republish, after any reservation: never a relayed advert without its circuit
            wake()


async def _rejoin(node: Node, advertiser: _Advertiser, down: set[str]) -> bool:
    """Try the gates in `down` again; those that answer leave it. True if any came back."""
    back: list[str] = []
    for gate in sorted(down):
        forget_failed_dials(node.host, peer_of(gate))
        try:
            await node.host.connect(gate, timeout=5.0)
        except NodeError:
            continue  # still down: tried again on the next check
        log.warning("gate %s is back", gate)
        back.append(gate)
    for gate in back:
        down.discard(gate)
        if advertiser.reachability != "direct":
            try:
                circuit = await node.host.reserve_relay(gate)
            except NodeError as exc:
                log.warning("relay reservation on %s failed again: %s", gate, exc.detail)
                down.add(gate)
                continue
            if circuit not in advertiser.circuit_addrs:
                advertiser.circuit_addrs = (*advertiser.circuit_addrs, circuit)
            advertiser.reachability = "relayed"
    if back and node.kad is not None:
        try:
            await node.kad.bootstrap([peer_of(g) for g in back])
        except Exception:  # a task boundary: the next publish still reaches the gates we know
            log.warning("DHT bootstrap after a gate came back failed", exc_info=True)
    return bool(back)


def _gate_of(circuit: str) -> str:
    """The gate address a circuit address goes through."""
    return circuit.split("/p2p-circuit", 1)[0]


__all__ = ["Advertised", "Node", "Peer", "check_reachability", "open_node", "serve_worker"]
