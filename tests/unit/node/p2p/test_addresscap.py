"""The address share (node/p2p/addresscap.py) on py-libp2p's own resource manager, as the swarm calls it:
an admission with no peer id before the handshake, a count with the peer id after it, a release when
the connection closes. One address at its share is refused; another address, and outbound, are not."""

from __future__ import annotations

from node.p2p.addresscap import AddressCappedManager, per_address_default


def admit(manager: AddressCappedManager, ip: str, peer: str) -> bool:
    """One inbound connection as the swarm opens it: the admission, then the counted scope."""
    if not manager.acquire_connection("", ip, "inbound"):
        return False
    taken = manager.acquire_connection(peer, ip, "inbound")
    manager.release_connection("", ip, "inbound")  # the swarm drops the admission's scope once counted
    return taken


def test_an_address_at_its_share_is_refused_and_the_others_are_not() -> None:
    manager = AddressCappedManager(2, enable_metrics=False)
    assert [admit(manager, "203.0.113.7", f"p{i}") for i in range(3)] == [True, True, False]
    assert admit(manager, "198.51.100.1", "q")  # another address has its own share
    assert manager.acquire_connection("", "203.0.113.7", "outbound")  # our own dials are not counted
    assert (manager.held("203.0.113.7"), manager.held("198.51.100.1"), manager.refused) == (2, 1, 1)
    manager.release_connection("p0", "203.0.113.7", "inbound")  # a connection closed frees its place
    assert admit(manager, "203.0.113.7", "p3")


def test_the_default_share_is_a_sixteenth_of_the_cap_and_never_under_eight() -> None:
    assert (per_address_default(2048), per_address_default(512), per_address_default(64)) == (128, 32, 8)


def test_loopback_is_exempt_from_the_default_share_only() -> None:
    default = AddressCappedManager(1, exempt_loopback=True, enable_metrics=False)
    assert [admit(default, "127.0.0.1", f"p{i}") for i in range(3)] == [True, True, True]
    assert [admit(default, "203.0.113.7", f"q{i}") for i in range(2)] == [True, False]
    chosen = AddressCappedManager(1, enable_metrics=False)  # a share set on purpose counts loopback too
    assert [admit(chosen, "127.0.0.1", f"p{i}") for i in range(2)] == [True, False]
