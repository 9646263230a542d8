"""Places per network under one provider key (node/p2p/places.py, issue 50): a server keeps at most a
few records of a key from one network (/24, /48), read from the connection's address; a refresh keeps
its place; local addresses are exempt unless the share is set. Pure, then on libp2p's own provider
store through `Kad.bound_providers` as a kad request reaches it (`kad.SENDER`)."""

from __future__ import annotations

import contextvars
from types import SimpleNamespace
from typing import Any

from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.kad_dht.provider_store import ProviderStore
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo

from node.p2p.kad import SENDER, Kad
from node.p2p.kadpatch import patch_kad
from node.p2p.places import PLACES_PER_NETWORK, Places, network_of, places_for, places_said

KEY, OTHER = b"\x12\x20" + b"\x01" * 32, b"\x12\x20" + b"\x02" * 32


def offer(places: Places, kept: dict[bytes, list[str]], key: bytes, peer: str, address: str | None) -> bool:
    """One ADD_PROVIDER as a server stores it: admitted against the key's current records, then kept."""
    ok = places.admit(key, peer, address, kept.setdefault(key, []))
    if ok and peer not in kept[key]:
        kept[key].append(peer)
    return ok


def test_one_network_holds_its_share_of_a_key_and_another_network_has_its_own() -> None:
    places, kept = Places(2, exempt_local=False), {}
    sybils = [offer(places, kept, KEY, f"s{i}", f"203.0.113.{i + 1}") for i in range(5)]
    assert sybils == [True, True, False, False, False]  # one /24, whatever the addresses within it
    assert offer(places, kept, KEY, "h1", "198.51.100.9")  # another /24
    assert offer(places, kept, KEY, "h2", "198.51.100.10")
    assert not offer(places, kept, KEY, "h3", "198.51.100.11")
    assert offer(places, kept, KEY, "n1", "198.51.101.1")  # the next /24 of the same /16: its own
    assert places.refused == 4


def test_the_share_is_per_key() -> None:
    places, kept = Places(1, exempt_local=False), {}
    assert offer(places, kept, KEY, "s0", "203.0.113.1")
    assert not offer(places, kept, KEY, "s1", "203.0.113.2")
    assert offer(places, kept, OTHER, "s1", "203.0.113.2")  # another key: a place of its own


def test_a_refresh_by_a_kept_provider_keeps_its_place_and_a_record_gone_frees_it() -> None:
    places, kept = Places(1, exempt_local=False), {}
    assert offer(places, kept, KEY, "s0", "203.0.113.1")
    assert offer(places, kept, KEY, "s0", "203.0.113.1")  # a refresh
    assert offer(places, kept, KEY, "s0", "192.0.2.1")  # a refresh from elsewhere still refreshes
    assert not offer(places, kept, KEY, "s1", "203.0.113.2")
    kept[KEY].remove("s0")  # expired at the server
    assert offer(places, kept, KEY, "s1", "203.0.113.2")


def test_local_addresses_are_exempt_unless_the_share_is_set_then_each_slash24_of_loopback_counts() -> None:
    default, kept = places_for(None), {}
    assert default.per_network == PLACES_PER_NETWORK
    assert all(offer(default, kept, KEY, f"w{i}", "127.0.0.1") for i in range(30))  # one machine's swarm
    assert all(offer(default, kept, KEY, f"l{i}", "192.168.1.7") for i in range(30))  # one LAN
    public = [offer(default, kept, KEY, f"p{i}", "93.184.216.7") for i in range(PLACES_PER_NETWORK + 1)]
    assert public == [True] * PLACES_PER_NETWORK + [False]  # a public network is counted by default
    chosen, kept = places_for(2), {}
    assert [offer(chosen, kept, KEY, f"s{i}", f"127.0.1.{i + 1}") for i in range(3)] == [True, True, False]
    assert offer(chosen, kept, KEY, "h0", "127.0.0.1")  # 127.0.0.0/24 is another network
    assert (places_said(None), places_said(2)) == ("4 (public networks)", "2")


def test_ipv6_counts_by_slash48_and_a_mapped_ipv4_by_its_slash24() -> None:
    places, kept = Places(1, exempt_local=False), {}
    assert offer(places, kept, KEY, "a", "2001:db8:1:1::1")
    assert not offer(places, kept, KEY, "b", "2001:db8:1:ffff::2")  # the same /48
    assert offer(places, kept, KEY, "c", "2001:db8:2::1")  # another /48
    assert offer(places, kept, KEY, "d", "192.0.2.1")
    assert not offer(places, kept, KEY, "e", "::ffff:192.0.2.9")  # IPv4 in IPv6: its /24
    assert network_of("2001:db8:1:1::1") == "2001:db8:1::/48"
    assert network_of("::ffff:203.0.113.9") == "203.0.113.0/24"


def test_connections_with_no_address_share_one_network() -> None:
    places, kept = Places(1, exempt_local=True), {}
    assert offer(places, kept, KEY, "r0", None)  # relayed: no address
    assert not offer(places, kept, KEY, "r1", None)
    assert not offer(places, kept, KEY, "r2", "not an address")


def kad_on_store(places: Places) -> tuple[Kad, ProviderStore]:
    patch_kad(record_ttl_s=60)
    store = ProviderStore(SimpleNamespace(get_id=lambda: ID(b"me")))  # type: ignore[arg-type]
    kad = Kad(SimpleNamespace(provider_store=store), None, True)  # type: ignore[arg-type]
    kad.places = places
    kad.bound_providers(lambda key: 20)
    return kad, store


def stored_from(store: ProviderStore, address: str | None, peer: ID) -> None:
    """`add_provider` as libp2p calls it inside a kad request whose connection came from `address`."""

    def call() -> Any:
        SENDER.set((address,))
        store.add_provider(KEY, PeerInfo(peer, []))

    contextvars.copy_context().run(call)


def test_the_server_store_keeps_a_networks_share_of_a_key_from_kad_requests_only() -> None:
    kad, store = kad_on_store(Places(2, exempt_local=False))
    sybils = [ID.from_pubkey(create_new_key_pair().public_key) for _ in range(5)]
    for i, peer in enumerate(sybils):
        stored_from(store, f"203.0.113.{i + 1}", peer)
    honest = ID.from_pubkey(create_new_key_pair().public_key)
    stored_from(store, "198.51.100.1", honest)
    assert {i.peer_id for i in store.get_providers(KEY)} == {*sybils[:2], honest}
    stored_from(store, "203.0.113.1", sybils[0])  # a refresh
    mine = ID.from_pubkey(create_new_key_pair().public_key)
    store.add_provider(KEY, PeerInfo(mine, []))  # not from a kad request: our own provide, a lookup's cache
    assert {i.peer_id for i in store.get_providers(KEY)} == {*sybils[:2], honest, mine}
    assert kad.places.refused == 3
