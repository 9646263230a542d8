"""A lookup's walk towards a key's holders (`node.p2p.walk`), over an in-memory kad of 300 servers.

Each server answers as a kad server does: the providers it holds (the 20 servers closest to the key
hold them) and the 20 servers closest to the key of those it knows (its own routing table: the
servers sharing its first bits with the key, then some others). A departed server raises.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import trio
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo

from node.p2p.walk import ALPHA, Answer, K, walk_providers

KEY = b"\x12\x20" + hashlib.sha256(b"sark/cap/v2/any/3/5").digest()


def _distance(peer: ID, key: bytes = KEY) -> int:
    return int.from_bytes(hashlib.sha256(key).digest(), "big") ^ int.from_bytes(
        hashlib.sha256(peer.to_bytes()).digest(), "big"
    )


@dataclass
class Kad:
    servers: list[ID]
    providers: list[PeerInfo]
    dead: set[ID]
    asked: int = 0
    seen: set[ID] = field(default_factory=set)
    self_listed: frozenset[ID] = frozenset()

    def holders(self) -> list[ID]:
        return sorted((s for s in self.servers if s not in self.dead), key=_distance)[:K]

    def table(self, owner: ID) -> list[ID]:
        """What `owner` knows: every 10th server, and the servers no farther from the key than it."""
        near = [s for s in self.servers if _distance(s) <= _distance(owner)]
        return [*self.servers[::10], *near]

    async def ask(self, peer: ID) -> Answer:
        self.asked += 1
        self.seen.add(peer)
        await trio.lowlevel.checkpoint()
        if peer in self.dead:
            raise ConnectionError("gone")
        closer = sorted(self.table(peer), key=_distance)[:K]
        held = self.providers if peer in self.holders() else []
        held = held or ([PeerInfo(peer, [])] if peer in self.self_listed else [])  # it provides the key too
        return Answer(list(held), [PeerInfo(p, []) for p in closer])


def _kad(providers: int) -> Kad:
    servers = [ID(b"\x00\x24" + hashlib.sha256(f"server-{i}".encode()).digest()[:4] * 9) for i in range(300)]
    listed = [PeerInfo(ID(b"\x00\x24" + bytes([i]) * 36), []) for i in range(providers)]
    return Kad(servers, listed, set())


async def test_a_walk_reaches_the_holders_and_stops_at_the_count_or_the_second_holder() -> None:
    with trio.fail_after(10):
        full = _kad(20)
        start = sorted(full.servers[::10], key=_distance, reverse=True)[:K]  # far from the key
        walked = await walk_providers(KEY, start, full.ask, 20, timeout=1.0)
        assert set(walked.providers) == {p.peer_id for p in full.providers}
        assert walked.asked <= 4 * ALPHA + K  # a walk, not the swarm: 300 servers
        assert full.asked == walked.asked
        few = _kad(7)  # a key not full: the walk goes on until the k closest it knows answered
        walked = await walk_providers(KEY, start, few.ask, 20, timeout=1.0)
        assert len(walked.providers) == 7
        assert set(few.holders()) <= few.seen  # it ended where a kad lookup ends: the k closest asked


async def test_a_departed_server_is_a_failure_and_the_walk_goes_on() -> None:
    with trio.fail_after(10):
        kad = _kad(20)
        start = sorted(kad.servers[::10], key=_distance, reverse=True)[:K]
        kad.dead = set(sorted(start, key=_distance)[:ALPHA])  # the first asked are gone
        walked = await walk_providers(KEY, start, kad.ask, 20, timeout=1.0)
        assert len(walked.providers) == 20
        assert walked.failures
        assert all(reason.startswith("ConnectionError") for reason in walked.failures.values())


async def test_a_server_listing_only_itself_is_no_holder_and_the_walk_goes_on() -> None:
    with trio.fail_after(10):
        kad = _kad(20)
        start = sorted(kad.servers[::10], key=_distance, reverse=True)[:K]
        kad.self_listed = frozenset(sorted(start, key=_distance)[:1])  # the first asked
        walked = await walk_providers(KEY, start, kad.ask, 40, timeout=1.0)
        assert {p.peer_id for p in kad.providers} <= set(walked.providers)
