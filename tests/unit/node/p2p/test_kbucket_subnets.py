"""P35 pinned: py-libp2p 0.8.1's routing table keeps at most 2 peers of one public /24 in a bucket,
grouped by the first public address the peer itself announced; loopback and private addresses are
never grouped (every lab here, and a LAN fleet, is exempt). The cheater's view: the address grouped is
the peer's own claim, so a server that announces only private addresses is never capped; our own
rule on agreeing servers (`node.p2p.shortlist`) reads the network we reached a server at instead."""

from __future__ import annotations

import trio
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.kad_dht.common import MAX_PEERS_PER_SUBNET
from libp2p.kad_dht.routing_table import KBucket
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from multiaddr import Multiaddr


def peer(*addrs: str) -> PeerInfo:
    return PeerInfo(ID.from_pubkey(create_new_key_pair().public_key), [Multiaddr(a) for a in addrs])


def admitted(peers: list[PeerInfo]) -> list[bool]:
    async def main() -> list[bool]:
        bucket = KBucket(None)  # type: ignore[arg-type]  # the host is used only to ping a full bucket
        return [await bucket.add_peer(p) for p in peers]

    return trio.run(main)


def test_a_bucket_keeps_two_peers_of_one_public_24_and_others_beside_them() -> None:
    assert MAX_PEERS_PER_SUBNET == 2
    same = [peer(f"/ip4/8.8.8.{i}/tcp/4001") for i in range(1, 5)]
    other = [peer("/ip4/8.8.9.1/tcp/4001"), peer("/ip4/1.1.1.1/tcp/4001")]
    assert admitted([*same, *other]) == [True, True, False, False, True, True]


def test_loopback_and_private_addresses_are_never_grouped() -> None:
    lan = [peer(f"/ip4/192.168.1.{i}/tcp/4001") for i in range(1, 6)]
    loop = [peer(f"/ip4/127.0.0.1/tcp/{4000 + i}") for i in range(5)]
    assert all(admitted([*lan, *loop]))


def test_the_subnet_grouped_is_the_peers_own_first_public_claim() -> None:
    public = [peer(f"/ip4/8.8.8.{i}/tcp/4001") for i in range(1, 3)]
    private_first = peer("/ip4/10.0.0.7/tcp/4001", "/ip4/8.8.8.9/tcp/4001")  # still grouped by 8.8.8.9
    private_only = peer("/ip4/10.0.0.8/tcp/4001")  # really at 8.8.8.10, it says nothing of it
    assert admitted([*public, private_first, private_only]) == [True, True, False, True]
