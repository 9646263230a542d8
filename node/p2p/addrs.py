"""Multiaddrs from user input and records: parsing with a named field, and the peer id they end in.

No libp2p import (only `multiaddr`), so that the CLI checks addresses without loading libp2p.
"""

from __future__ import annotations

import multiaddr

from node.errors import ConfigError


def parse_multiaddr(addr: str, *, field: str = "address") -> multiaddr.Multiaddr:
    """A multiaddr from user input, or a `ConfigError` naming the field."""
    try:
        return multiaddr.Multiaddr(addr)
    except Exception as exc:  # multiaddr raises a zoo of types for bad input
        raise ConfigError(field, f"not a valid multiaddr: {addr!r}") from exc


def peer_of(addr: str) -> str:
    """The last `/p2p/<id>` of a multiaddr (the destination, also for a circuit address)."""
    parts = addr.rstrip("/").split("/")
    ids = [parts[i + 1] for i, p in enumerate(parts[:-1]) if p == "p2p"]
    if not ids:
        raise ConfigError("address", f"no /p2p/<peer id> in {addr!r}")
    return ids[-1]


def without_p2p(addr: str) -> multiaddr.Multiaddr:
    """The transport part of a multiaddr: everything before its first `/p2p/`."""
    return multiaddr.Multiaddr(addr.split("/p2p/", 1)[0])


__all__ = ["parse_multiaddr", "peer_of", "without_p2p"]
