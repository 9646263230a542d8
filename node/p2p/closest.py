"""The servers closest to each key we announce: walked for once, reused by the refreshes (issue 43).

libp2p walks the network (an iterative FIND_NODE, whose answers carry a signed peer record for every
peer) before each ADD_PROVIDER and PUT_VALUE: with every reachable device a DHT server, those walks
were most of a device's upkeep (7.4 KB/s at 10,000 devices in `benchmarks/swarm_sim.py`). The closest
servers of a key change only when servers come and go, so a refresh sends to the ones found last time
and walks again only about every `REWALK_S` (`rewalk_every`), or once fewer than `MIN_KEPT` of them are left
(a server that failed a write is dropped from the list: the others still hold the record).

Pure: no libp2p, trio or clock; `node.p2p.kad` asks it which servers to send to, and the simulator
reads `rewalk_every`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Final, final

from node.p2p.shortlist import K

REWALK_S: Final = 6000.0
"""About how long the servers a walk found are reused (100 minutes: at 10 % churn an hour, about 3 of a
key's 20 servers leave meanwhile, each dropped after a failed write)."""
REWALK_EVERY: Final = 36
"""Announcements of a key per walk by default (`rewalk_every` of the node's refresh period sets it)."""
MIN_KEPT: Final = 10
"""Fewer servers left than this (half of k) and the next refresh walks."""


def rewalk_every(refresh_s: float) -> int:
    """Announcements of a key per walk when a key is announced every `refresh_s` seconds: a walk about
    every `REWALK_S`, whatever the period (a count alone walked every 6 hours at a 600 s period, and
    churn had then left too few of the servers, so nearly every refresh walked)."""
    return max(2, round(REWALK_S / refresh_s))


@dataclass(frozen=True)
class Closest:
    """The servers a walk found closest to a key, and how many refreshes have reused them since."""

    peers: tuple[str, ...]
    reused: int = 0
    found: int = 0
    """How many the walk found (a small swarm has fewer than k)."""
    table: int = 0
    """How many servers our routing table held then."""


@final
class ClosestServers:
    """Per announced key: the closest servers from the last walk, until a walk is due again."""

    def __init__(self, rewalk_every: int = REWALK_EVERY, min_kept: int = MIN_KEPT) -> None:
        self.rewalk_every = rewalk_every
        self.min_kept = min_kept
        self._known: dict[bytes, Closest] = {}

    def due(self, key: bytes, servers: int = 0) -> bool:
        """Is a walk due for the next announcement of `key`: never walked, every `rewalk_every`-th
        announcement, fewer than `min_kept` left (of those it found, when the walk found fewer: a small
        swarm), or a walk that found fewer than k when our routing table now holds more `servers` than
        it did then (a swarm whose workers began to serve: the records must move to the key's closest
        servers, not stay on the gates for `REWALK_S`)."""
        known = self._known.get(key)
        if known is None or not known.peers or known.reused + 1 >= self.rewalk_every:
            return True
        if len(known.peers) < min(self.min_kept, known.found):
            return True
        return known.found < K and servers > known.table

    def reuse(self, key: bytes, servers: int = 0) -> tuple[str, ...] | None:
        """The servers to send a refresh of `key` to, or None when a walk is due (`due`)."""
        if self.due(key, servers):
            return None
        known = self._known[key]
        self._known[key] = replace(known, reused=known.reused + 1)
        return known.peers

    def nearer(self, key: bytes, table: Iterable[str], distance: Callable[[str], int]) -> tuple[str, ...]:
        """The kept servers of `key`, with the servers of our routing table (`table`) nearer the key than
        the farthest kept one: the k closest of both, closest first (kept for the next refreshes).

        A walk in a growing swarm finds the k closest of the servers serving then: the servers that
        join later and are nearer the key are where readers walk, and without this a writer kept
        sending past them for `REWALK_S` (a young swarm's holders listed different writers, and a
        reader's agreeing holders missed one: 29 of 30 found on real processes). In a steady swarm
        a table rarely knows a server nearer than a walk found: nothing changes, nothing is sent."""
        known = self._known.get(key)
        if known is None or not known.peers:
            return () if known is None else known.peers
        farthest = max(distance(p) for p in known.peers)
        new = [p for p in table if p not in known.peers and distance(p) < farthest]
        if not new:
            return known.peers
        peers = tuple(sorted({*known.peers, *new}, key=distance)[:K])
        self._known[key] = replace(known, peers=peers)
        return peers

    def walked(self, key: bytes, peers: tuple[str, ...], servers: int = 0) -> None:
        """A walk found these servers closest to `key`, our routing table holding `servers`."""
        self._known[key] = Closest(peers, found=len(peers), table=servers)

    def failed(self, key: bytes, peers: tuple[str, ...]) -> None:
        """These servers of `key` did not take the record: dropped, the others kept."""
        known = self._known.get(key)
        if known is not None:
            self._known[key] = replace(known, peers=tuple(p for p in known.peers if p not in peers))


__all__ = ["MIN_KEPT", "REWALK_EVERY", "REWALK_S", "Closest", "ClosestServers", "rewalk_every"]
