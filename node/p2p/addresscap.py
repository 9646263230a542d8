"""Inbound connections from one address bounded, so that one stranger's machine cannot fill a host.

A host holds `max_connections` at once (P33) and refuses the next before its handshake. Keys are free,
and a connection costs its opener one Noise handshake: one machine with a loop of fresh identities
filled a gate's 2,048 and every worker after it was refused. `AddressCappedManager` is py-libp2p's
resource manager with one rule more: an inbound connection is admitted before its handshake only
while its address holds fewer than `per_address` established inbound connections (the swarm asks the
manager before the upgrade with no peer id, and again after it with one: the first is the admission,
the second is counted, and its release uncounts it). A stranger then needs `max_connections /
per_address` addresses to fill a host, not a loop. The price: a site whose workers share one public
address (an office behind NAT) joins one gate with at most `per_address` of them; the rest are refused
as at a full gate and join through their other gates (docs/operators.md).

The cheater's view: the address is the TCP peer's, as the kernel accepted it, not anything the peer
says; a peer id is free and is not what is counted. Outbound connections are never counted. Loopback
is exempt from the default share (`exempt_loopback`): every connection of one machine's own swarm, a
lab's or README's one-machine recipe, comes from 127.0.0.1, and a peer there is on the machine
already; a share set on purpose (`--max-per-address`) counts loopback too.
"""

from __future__ import annotations

import ipaddress
import logging
from collections import Counter
from typing import Any

from libp2p.rcmgr.manager import ResourceManager

log = logging.getLogger(__name__)


def per_address_default(max_connections: int) -> int:
    """A sixteenth of the host's cap, at least 8: 128 of a gate's 2,048, 32 of a worker's 512."""
    return max(8, max_connections // 16)


class AddressCappedManager(ResourceManager):
    """py-libp2p's resource manager, with at most `per_address` inbound connections from one address.

    Attributes:
        per_address: established inbound connections one address may hold.
        exempt_loopback: loopback addresses hold any number.
        refused: inbound connections refused for their address's share, since the host started.
    """

    def __init__(self, per_address: int, *, exempt_loopback: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.per_address = per_address
        self.exempt_loopback = exempt_loopback
        self.refused = 0
        self._held: Counter[str] = Counter()

    def held(self, address: str) -> int:
        """Established inbound connections from `address`."""
        return self._held[address]

    def acquire_connection(
        self, peer_id: str = "", endpoint_ip: str | None = None, direction: str = "inbound"
    ) -> bool:
        if direction != "inbound" or not endpoint_ip:
            return bool(super().acquire_connection(peer_id, endpoint_ip, direction))
        if not peer_id:  # before the handshake: the admission
            if self._held[endpoint_ip] >= self.per_address and not self._exempt(endpoint_ip):
                self.refused += 1
                if self.refused == 1 or self.refused % 1000 == 0:
                    log.warning(
                        "inbound connections refused for their address's share (%d from one address): "
                        "%d so far, the last from %s",
                        self.per_address,
                        self.refused,
                        endpoint_ip,
                    )
                return False
            return bool(super().acquire_connection(peer_id, endpoint_ip, direction))
        taken = bool(super().acquire_connection(peer_id, endpoint_ip, direction))
        if taken:
            self._held[endpoint_ip] += 1
        return taken

    def _exempt(self, address: str) -> bool:
        try:
            return self.exempt_loopback and ipaddress.ip_address(address).is_loopback
        except ValueError:
            return False

    def release_connection(
        self, peer_id: str = "", endpoint_ip: str | None = None, direction: str = "inbound"
    ) -> None:
        super().release_connection(peer_id, endpoint_ip, direction)
        if direction == "inbound" and endpoint_ip and peer_id and self._held[endpoint_ip] > 0:
            self._held[endpoint_ip] -= 1
            if not self._held[endpoint_ip]:
                del self._held[endpoint_ip]


__all__ = ["AddressCappedManager", "per_address_default"]
