"""P24 pinned: a server keeps every provider of a key, not only libp2p's first k = 20."""

from __future__ import annotations

from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.kad_dht.provider_store import ProviderStore
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo

from node.p2p.host import Host
from node.p2p.kadpatch import PROVIDERS_PER_KEY, patch_kad
from node.p2p.shortlist import K


async def test_a_server_keeps_more_than_k_providers_per_key(host_pair: tuple[Host, Host]) -> None:
    patch_kad(record_ttl_s=60)
    store = ProviderStore(host_pair[0].raw)
    key = b"\x01" * 32
    peers = [ID.from_pubkey(create_new_key_pair().public_key) for _ in range(K + 30)]
    for peer in peers:
        store.add_provider(key, PeerInfo(peer, []))
    assert {info.peer_id for info in store.get_providers(key)} == set(peers)
    assert PROVIDERS_PER_KEY > K + 30
