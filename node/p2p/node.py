"""A node in the swarm: host + DHT, connected to its gates; lookups of workers; reachability.

`open_node` yields a connected, bootstrapped `Node`. DHT results are hints: `fresh_profile` asks the
peer itself over Noise.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final, Literal, final

import trio

from node.config import NodeConfig
from node.errors import ConfigError, NodeError, PeerUnreachable
from node.p2p.addrs import peer_of
from node.p2p.closest import ClosestServers, rewalk_every
from node.p2p.dht import Dht, provider_bound, select_record, validate_record
from node.p2p.gates import connect_gates
from node.p2p.host import GATE_CONNECTIONS, NODE_CONNECTIONS, Host, HostConfig, open_host
from node.p2p.kad import Kad, ProviderLookup
from node.p2p.kadpatch import open_kad
from node.p2p.looktime import no_delay, within
from node.p2p.lookup import Hints
from node.p2p.places import places_for
from node.p2p.reach import ReachVerdict, dial_back_verdict
from node.p2p.relay import GATE_RESERVATIONS
from protocol import (
    DOMAIN_ADVERT,
    PROFILE,
    AdvertBody,
    ComputeUnit,
    Envelope,
    Load,
    ProfileGet,
    ProfileReply,
    ProtocolError,
)
from protocol.records import open_envelope

log = logging.getLogger(__name__)

Role = Literal["worker", "submitter", "gate"]

PROFILE_PROBES_AT_ONCE: Final = 16
"""`/sark/profile` requests in flight at once when a lookup asks providers for their adverts."""
PROFILE_PROBE_S: Final = 3.0
"""Deadline of one such request."""
SEEN_FROM_DHT: Final = 4
"""A provider record's first addresses taken as where the DHT saw the peer."""
HELPERS: Final = 20
"""Providers of the any-worker key a reachability check may ask for a dial-back (a lookup's count)."""


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
class Look:
    """One look for workers (`Node.look`): those found, and the lookup they came from, so that an
    empty look is explained by what it met (`node.p2p.survey.explain`), not by another lookup at
    another moment that may find what this one did not.

    Attributes:
        peers: the workers found, sorted by peer id.
        lookup: the provider lookup (None: it did not end within the deadline).
        ended: every provider's advert was read or asked for before the deadline.
        timeout_s: the deadline of the look.
    """

    peers: list[Peer]
    lookup: ProviderLookup | None
    ended: bool
    timeout_s: float


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

    async def look(
        self,
        unit: ComputeUnit | None = None,
        *,
        timeout: float = 5.0,
        count: int | None = None,
        known: frozenset[str] = frozenset(),
        skip: frozenset[str] = frozenset(),
        past_gaps: int = 0,
    ) -> Look:
        """Workers providing `unit` (None: any) with a verified, unexpired advert, sorted by peer id
        (`peers`' listing: what the DHT says of each, without a live probe), with the lookup they
        came from.

        The lookup stops once it has `count` providers not in `known` (None: every one): a later look
        for more reads past the workers a caller knows (`Dht.lookup`). Providers in `skip` are neither
        counted nor read. `past_gaps`: levels read on below keys that are not full while short.

        The advert comes from the DHT where a server keeps it (a cache). A foreign gate stores provider
        records but no `/sark/` values, so a provider may have none there: it is asked itself over
        `/sark/profile` at `ask_addrs`, `PROFILE_PROBES_AT_ONCE` at a time, each for up to
        `PROFILE_PROBE_S`, and the lookup returns when the last has answered or not.
        """
        found: list[Peer] = []
        lookup: ProviderLookup | None = None
        with trio.move_on_after(timeout) as deadline:
            lookup = await self.dht.lookup(unit, count, Hints(known | skip, past_gaps=past_gaps))
            probes = trio.CapacityLimiter(PROFILE_PROBES_AT_ONCE)
            async with trio.open_nursery() as nursery:
                for peer_id, addrs in lookup.providers.items():
                    if peer_id not in skip:
                        nursery.start_soon(self._collect, peer_id, addrs, unit, found, probes)
        peers = sorted(found, key=lambda p: p.peer_id)
        return Look(peers, lookup, not deadline.cancelled_caught, timeout)

    async def find_providers(
        self,
        *,
        timeout: float = 5.0,
        count: int | None = None,
        known: frozenset[str] = frozenset(),
        skip: frozenset[str] = frozenset(),
        past_gaps: int = 0,
        discount: Callable[[Sequence[str]], bool] | None = None,
        dig: int = 1,
        unanswered: frozenset[str] = frozenset(),
        run_delay: Callable[[], float] = no_delay,
    ) -> dict[str, tuple[str, ...]]:
        """The any-worker tree's providers from their provider records alone, each with where to ask it
        (`ask_addrs`), sorted by peer id: no advert is fetched, for the caller asks each provider itself
        (`submit`'s discovery: its live probe over `/sark/profile` returns the signed advert).

        `count`, `known`, `skip` and `past_gaps` as `look` reads them; `discount`, `dig` and `unanswered` as
        `node.p2p.lookup.Hints` says. The records carry what an advert's addresses would (a host's own
        addresses, the dial-back's included, then a relayed worker's circuits: `Kad._announced`), so a
        `Kad.get` of each provider's advert (k servers asked and awaited, 400 requests for a key's 20
        providers) would add seconds to every look and nothing the probe does not bring
        (`benchmarks/swarm_sybil.py`: 2.4-4.1 s of every look at 10,000 devices, three quarters of it; issue
        50). `run_delay`: the look's (`node.p2p.looktime`): `timeout` and the walks' waits are then its own
        seconds. A lookup cut by `timeout` returns the providers its walks had listed by then (before, none: a
        look that had found live workers and read on for more lost them at its deadline).
        """
        found: dict[str, tuple[str, ...]] = {}
        gathered: dict[str, list[str]] = {}  # as each walk answers: a lookup cut by `timeout` keeps them

        async def read() -> None:
            hints = Hints(known | skip, discount, unanswered, dig, past_gaps)
            await self.dht.lookup(None, count, hints, into=gathered, run_delay=run_delay)

        await within(timeout, run_delay, read)  # `timeout` of the look's own seconds
        for peer_id, addrs in gathered.items():
            if peer_id not in skip and peer_id != self.host.peer_id:
                self.host.sightings.saw(peer_id, *addrs[:SEEN_FROM_DHT])  # the DHT's view: dialled first
                found[peer_id] = self.ask_addrs(peer_id, addrs)
        return dict(sorted(found.items()))

    async def _collect(
        self,
        peer_id: str,
        addrs: list[str],
        unit: ComputeUnit | None,
        found: list[Peer],
        probes: trio.CapacityLimiter,
    ) -> None:
        now = time.time()
        self.host.sightings.saw(peer_id, *addrs[:SEEN_FROM_DHT])  # the DHT's view: dialled first
        advert = await self.dht.advert(peer_id, now)
        if advert is None and peer_id != self.host.peer_id:
            async with probes:
                advert = await self._advert_from_peer(peer_id, addrs)
        if advert is None:
            return
        envelope, body = advert
        if unit is not None and unit not in body.profile.usable_units():
            return
        found.append(Peer(peer_id, body, max(0.0, now - body.issued_at), envelope))

    def ask_addrs(self, peer_id: str, addrs: Sequence[str]) -> tuple[str, ...]:
        """Where to ask a provider for its advert: its provider record's addresses (a relayed worker's
        carry its circuits: `Kad.circuits`), then through each of our gates as a relay (a record written
        before, or by another implementation, has no usable address)."""
        return (*addrs, *(f"{gate}/p2p-circuit/p2p/{peer_id}" for gate in self.gates))

    async def _advert_from_peer(self, peer_id: str, addrs: list[str]) -> tuple[Envelope, AdvertBody] | None:
        """The signed advert a provider gives over `/sark/profile` at `ask_addrs`."""
        try:
            envelope, body, _ = await self.profile_at(
                peer_id, self.ask_addrs(peer_id, addrs), PROFILE_PROBE_S
            )
        except (NodeError, ProtocolError) as exc:
            log.info("provider %s gave no profile: %s", peer_id, exc)
            return None
        return envelope, body

    async def fresh_profile(self, peer: Peer, timeout: float = 5.0) -> tuple[AdvertBody, Load]:
        """Ask the peer itself (`/sark/profile/1.0.0`) for its current signed advert and load."""
        body, load, _ = await self.profile_and_host(peer, timeout)
        return body, load

    async def profile_and_host(self, peer: Peer, timeout: float = 5.0) -> tuple[AdvertBody, Load, str]:
        """`fresh_profile`, and the IP address the connection that carried it reached ("" unknown:
        relayed). The address the submitter saw, not one the peer advertises: replicas of a task
        must come from distinct hosts (`scheduler.verification.replicas`)."""
        return await self.profile_and_host_at(peer.peer_id, peer.dial_addrs(), timeout)

    async def profile_and_host_at(
        self, peer_id: str, addrs: Sequence[str], timeout: float = 5.0
    ) -> tuple[AdvertBody, Load, str]:
        """`profile_and_host` of a peer known by its id and where to dial it (a provider as
        `find_providers` gives it), its advert checked as signed by `peer_id`."""
        _, body, load, host = await self._ask_profile(peer_id, addrs, timeout)
        return body, load, host

    async def profile_at(
        self, peer_id: str, addrs: Sequence[str], timeout: float
    ) -> tuple[Envelope, AdvertBody, Load]:
        """A peer's signed advert and load over `/sark/profile/1.0.0`, checked: signed by `peer_id`.

        Raises:
            NodeError: the peer could not be reached or answered something else.
            ProtocolError: the advert is not validly signed by the peer, or is about another peer.
        """
        envelope, body, load, _ = await self._ask_profile(peer_id, addrs, timeout)
        return envelope, body, load

    async def _ask_profile(
        self, peer_id: str, addrs: Sequence[str], timeout: float
    ) -> tuple[Envelope, AdvertBody, Load, str]:
        channel = await self.host.open_channel(
            peer_id, PROFILE, addrs=addrs, timeout=timeout, read_timeout=timeout
        )
        host = channel.remote_ip or ""
        async with channel:
            await channel.send(ProfileGet())
            reply = await channel.receive()
        if not isinstance(reply, ProfileReply):
            raise PeerUnreachable(peer_id, f"answered {reply.kind} to profile_get")
        body = open_envelope(reply.advert, DOMAIN_ADVERT, AdvertBody, now=time.time(), signer=peer_id)
        if body.peer_id != peer_id:
            raise PeerUnreachable(peer_id, f"answered with the advert of {body.peer_id}")
        return reply.advert, body, reply.load, host


@asynccontextmanager
async def open_node(
    config: NodeConfig, *, role: Role, relay_allow: frozenset[str] | None = None
) -> AsyncIterator[Node]:
    """A host listening, connected to the configured gates, with a bootstrapped DHT.

    A gate relays for peers behind NAT: only for those in `relay_allow` when given (T16).

    Raises:
        ConfigError: bad key file or listen address.
        NoGateAnswered: gates were given and none answered (a worker keeps trying: `node/p2p/gates.py`).
    """
    host_config = HostConfig(
        key_file=config.key_file(),
        listen=config.listen,
        relay_hop=role == "gate",
        relay_allow=relay_allow,
        relay_reservations=config.max_reservations or GATE_RESERVATIONS,
        first_frame_s=config.first_frame_s,
        max_connections=connection_cap(config, role),
        max_per_address=config.max_per_address,
        prune_idle=role != "gate",  # P42: a relay slot lives on a connection that carries nothing
    )
    async with open_host(host_config) as host:
        for gate in config.gates:  # P42: never closed to make room (spares too: a swap dials them)
            with contextlib.suppress(ConfigError, ValueError):  # a bad address: `connect_gates` names it
                host.protect(peer_of(gate), "gate")
        gates = await connect_gates(host, config.gates, patient=role == "worker")
        server = role == "gate" or config.dht_mode == "server"
        async with open_kad(
            host, "server" if server else "client", config.record_ttl_s, validate_record, select_record
        ) as kad:
            kad.closest = ClosestServers(rewalk_every(config.reannounce_interval()))  # a walk per ~100 min
            kad.places = places_for(config.places_per_network)  # issue 50: per network, per key
            if server:
                kad.bound_providers(provider_bound)  # issue 43: no key holds more than SHARD_CAP
            if gates:
                await kad.bootstrap([g.rsplit("/p2p/", 1)[-1] for g in gates])
            yield Node(host, Dht(kad), config, gates, kad)


def connection_cap(config: NodeConfig, role: Role) -> int:
    """The connections a node holds at once (P33): its configuration's, else its role's default."""
    return config.max_connections or (GATE_CONNECTIONS if role == "gate" else NODE_CONNECTIONS)


async def check_reachability(node: Node, askers: Sequence[str] = ()) -> ReachVerdict:
    """Dial-backs by our gates, or by other sark peers when no gate serves `/sark/reach` (P13).

    `askers` are sark peers that asked us for a dial-back (so serve `/sark/reach` themselves); the
    providers of the any-worker key come after them.
    """

    async def helpers() -> list[tuple[str, tuple[str, ...]]]:
        found = (await node.dht.lookup(None, HELPERS)).providers
        return [*((p, ()) for p in askers), *((p, tuple(a)) for p, a in found.items() if p not in askers)]

    return await dial_back_verdict(node.host, node.gates, helpers)


__all__ = ["Look", "Node", "Peer", "Role", "check_reachability", "connection_cap", "open_node"]
