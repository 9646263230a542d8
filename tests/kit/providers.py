"""DHT providers as `node.p2p.node.Node` gives them, for discovery's tests (no network)."""

from __future__ import annotations

from kit.data import make_profile
from node.p2p.node import Peer
from protocol import AdvertBody, Envelope


def advertised(peer_id: str) -> Peer:
    """A provider with a valid-looking advert (the profile `make_profile` makes) and a blank envelope."""
    advert = AdvertBody(peer_id=peer_id, seq=1, issued_at=0.0, expires_at=1e12, profile=make_profile(peer_id))
    envelope = Envelope(peer_id=peer_id, public_key=bytes(32), payload=b"", signature=bytes(64))
    return Peer(peer_id=peer_id, advert=advert, age_s=0.0, envelope=envelope)


def at(peer_id: str) -> tuple[str, ...]:
    """Where `find_providers` says to ask a provider: its record's address (one, on a LAN)."""
    return (f"/ip4/10.0.0.1/tcp/4001/p2p/{peer_id}",)


def shallowest(
    levels: list[list[str]], skip: frozenset[str], known: frozenset[str]
) -> dict[str, tuple[str, ...]]:
    """A look in a tree written as levels of provider ids: the shallowest level's providers neither
    skipped nor known, each at its record's address (`at`); none when every level is read."""
    for level in levels:
        new = [p for p in level if p not in skip and p not in known]
        if new:
            return {p: at(p) for p in new}
    return {}
