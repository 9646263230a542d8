"""Places per network under one provider key: a kad server keeps at most a few records per key from one
network, so that free keys on one network cannot fill the places a lookup reads first (issue 50).

A sharded key (`node.p2p.shards`) holds at most `SHARD_CAP` (20) providers, and a worker takes the
first key of its path that is not full. Keys are free: 200 Sybils announcing first filled the any-worker
tree's first three levels (140 places), every honest worker spilled below them, and a `devices: N`
look probed Sybils until its deadline. `Places` is the rule a server of this code applies as it stores
an ADD_PROVIDER (`Kad.bound_providers`): a new provider of a key is kept only while the network it sent
from holds fewer than `per_network` of that key's current records; past that it is not kept (the
server's debug log says so), and a provider already kept is always refreshed. A network is the
sender's /24 (IPv4) or /48 (IPv6), read from the connection's remote address as the kernel accepted
it (`node.p2p.stream.remote_ip`); a connection with no address (relayed, closing) counts as one
network of its own, "unknown".

The cheater's view: the Sybil mints keys for free, chooses its own listen and announced addresses,
its signed advert, which keys it provides to and when (first), and it may run DHT servers of its own.
The rule reads none of those: not the addresses an ADD_PROVIDER or an advert carries, not the peer id,
only the TCP peer's address of the connection the record came over, which an off-path sender cannot
forge (it must complete the handshake from there). A Sybil then holds `per_network` places of a key
per network it owns, and a network costs real money (a /24 is 256 addresses routed to one place). What
the rule does not cover: a Sybil with many networks (each holds `per_network` places of every key;
20 / `per_network` networks fill a key), and Sybil DHT servers near a key, which keep whatever they
like (the walk's rules, `node.p2p.shortlist`, keep a minority of them from ending a look). The price: a site
whose workers share one public /24 (an office behind one NAT address) gets `per_network` places in
each key of a public server; the rest stay unlisted there (docs/operators.md).

Loopback and the private ranges are exempt unless the operator sets the share (`--places-per-network`,
`places_per_network`): one machine's embedded swarm has every worker on 127.0.0.1, and a LAN swarm on
its own gate has every worker in one private /24; a stranger on the internet cannot send from either.
Set on purpose, the share counts them too, each /24 of 127.0.0.0/8 a network of its own (a lab puts
Sybils on 127.0.1.x and honest workers on 127.0.0.1).

Pure: no libp2p, trio or clock; the caller gives the providers a key holds now (expired records hold
no place).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Final

PLACES_PER_NETWORK: Final = 4
"""Records of one key a server keeps from one network by default (global addresses only)."""
IPV4_PREFIX: Final = 24
IPV6_PREFIX: Final = 48
UNKNOWN: Final = "unknown"
"""The network of a connection with no address (relayed, closing): all such count as one."""
KEYS_KEPT: Final = 100_000
"""Keys whose senders' networks are remembered; past it the oldest key's are dropped (a bounded memory:
a key forgotten is re-learnt from the next records, its current ones then count as no network's)."""


def network_of(address: str | None) -> str:
    """The network an address counts as: its /24 (IPv4, an IPv4-mapped IPv6 too) or /48 (IPv6) in CIDR
    form, `UNKNOWN` when there is none or it is not an address."""
    if not address:
        return UNKNOWN
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]").split("%", 1)[0])
    except ValueError:
        return UNKNOWN
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    prefix = IPV4_PREFIX if ip.version == 4 else IPV6_PREFIX
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))


def is_local(address: str | None) -> bool:
    """Loopback, private, link-local and other addresses no internet stranger sends from."""
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global


class Places:
    """At most `per_network` current records of one key from one network.

    Attributes:
        per_network: records of a key one network may hold.
        exempt_local: local addresses (`is_local`) hold any number (the share was not set).
        refused: records not kept for their network's share, since the server started.
    """

    def __init__(self, per_network: int, *, exempt_local: bool) -> None:
        if per_network < 1:
            raise ValueError(f"places per network must be at least 1, not {per_network}")
        self.per_network = per_network
        self.exempt_local = exempt_local
        self.refused = 0
        self._networks: dict[bytes, dict[str, str]] = {}  # key -> provider -> its network when kept

    def admit(self, key: bytes, provider: str, address: str | None, held: Iterable[str]) -> bool:
        """May `provider`'s record of `key`, sent from `address`, be kept?

        Args:
            key: the provider key.
            provider: the sender's peer id (a server keeps only senders' own records).
            address: the connection's remote address as the kernel gave it (None: none known).
            held: the providers whose records of `key` are current on this server.
        """
        current = set(held)
        networks = self._networks.get(key)
        if networks is None:
            if len(self._networks) >= KEYS_KEPT:
                del self._networks[next(iter(self._networks))]
            networks = self._networks[key] = {}
        for gone in [p for p in networks if p not in current]:
            del networks[gone]  # expired or dropped: its place is free
        if provider in current:
            return True  # a refresh keeps its place
        if self.exempt_local and is_local(address):
            networks[provider] = network_of(address)
            return True
        network = network_of(address)
        if sum(1 for n in networks.values() if n == network) >= self.per_network:
            self.refused += 1
            return False
        networks[provider] = network
        return True


def places_for(per_network: int | None) -> Places:
    """The rule a server applies: the share set (local addresses counted too), else the default share
    for global addresses with local ones exempt."""
    if per_network is None:
        return Places(PLACES_PER_NETWORK, exempt_local=True)
    return Places(per_network, exempt_local=False)


def places_said(per_network: int | None) -> str:
    """The rule in a ready line: "4 (public networks)" by default, "K" when set."""
    return f"{PLACES_PER_NETWORK} (public networks)" if per_network is None else str(per_network)


__all__ = [
    "IPV4_PREFIX", "IPV6_PREFIX", "PLACES_PER_NETWORK", "UNKNOWN", "Places", "is_local", "network_of",
    "places_for", "places_said",
]  # fmt: skip
