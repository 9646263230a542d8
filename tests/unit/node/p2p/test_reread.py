"""Issue 50, scope 2: a key whose first read listed providers that did not answer is read again, in
the same lookup, by a walk that waits for every one of its k closest (`Hints.unanswered`).

Hostile DHT servers ground near a key on more networks than its honest holders still to answer end
a walk at its count with their Sybils alone (`node.p2p.shortlist`); a walk that waits for every one
of the k closest reads the honest holders' lists too. The Kad written here is that key: its quick
walk lists the hostile servers' 20 Sybils, its `every` walk the Sybils and the two honest providers
the key's honest holders list (`Shortlist.ranked`: each network a share). Each walk takes a second of
trio's virtual clock.
"""

from __future__ import annotations

from typing import Any, cast

import trio
import trio.testing
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo

from node.p2p.dht import Dht
from node.p2p.host import Host
from node.p2p.kad import Kad, ProviderLookup
from node.p2p.lookup import Hints
from node.p2p.shards import Shard

ROOT = Shard(None, 0, 0).dht_key
SYBILS = [f"s{i}" for i in range(20)]
HONEST = ["h0", "h1"]
_UNANSWERED = Hints(frozenset(SYBILS), unanswered=frozenset(SYBILS))  # the probes: no Sybil answered


class _Kad:
    def __init__(self, quick: list[str], whole: list[str], walk_s: float = 1.0, local: bool = False) -> None:
        self.quick, self.whole, self.walk_s = quick, whole, walk_s
        self.reads: list[tuple[bytes, bool]] = []
        self.ip = "127.0.0.1" if local else "20.0.{}.1"  # local: on no network a discovery can suspect

    async def lookup_providers(
        self, key: bytes, count: int, *, walk: bool = True, every: bool = False, **_: Any
    ) -> ProviderLookup:
        self.reads.append((key, every))
        await trio.sleep(self.walk_s * (2 if every else 1))  # a walk; one that waits for every holder
        listed = (self.whole if every else self.quick) if walk and key == ROOT else []
        addrs = {p: [f"/ip4/{self.ip.format(i)}/tcp/{4001 + i}"] for i, p in enumerate(listed)}
        return ProviderLookup(addrs, 20, {}, holds=len(listed))


def _everys(kad: _Kad) -> list[bytes]:
    return [key for key, every in kad.reads if every]


async def test_a_key_whose_providers_did_not_answer_is_read_again_to_its_k_closest(
    mock_clock: trio.testing.MockClock,
) -> None:
    """The discovery's second look: the Sybils were probed (skipped: known) and did not answer. The
    root is read again, with the level below, by a walk of every holder; its honest providers count."""
    mock_clock.autojump_threshold = 0
    kad = _Kad(SYBILS, SYBILS + HONEST)
    found = (await Dht(cast(Kad, kad)).lookup(None, 2, _UNANSWERED)).providers
    assert set(HONEST) <= set(found)
    assert _everys(kad) == [ROOT]  # once
    assert trio.current_time() == 3.0  # the root, then its children and its second read (2 s) at once


async def test_a_first_look_and_a_key_that_answered_are_never_read_again(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Nothing unanswered yet (a round's first look), or most of a key's providers answered (one
    departed worker among 20 live ones): no walk waits for every holder, and a look costs what it did."""
    mock_clock.autojump_threshold = 0
    kad = _Kad(SYBILS, SYBILS + HONEST)
    found = (await Dht(cast(Kad, kad)).lookup(None, 2)).providers
    assert set(found) <= set(SYBILS)  # the quick walk's: counted until probed
    live = [f"w{i}" for i in range(19)]
    departed = _Kad([*live, "gone"], [*live, "gone"])
    await Dht(cast(Kad, departed)).lookup(None, 2, Hints(frozenset(live), unanswered=frozenset({"gone"})))
    assert _everys(kad) == _everys(departed) == []


async def test_a_key_read_again_is_read_so_once_a_lookup(mock_clock: trio.testing.MockClock) -> None:
    """Its second read lists the same providers that did not answer (every holder lists them: Sybils
    that announced first, not hostile servers): the lookup reads on below, never the key a third time."""
    mock_clock.autojump_threshold = 0
    kad = _Kad(SYBILS, SYBILS)
    found = (await Dht(cast(Kad, kad)).lookup(None, 2, _UNANSWERED)).providers
    assert not set(found) - set(SYBILS)
    assert _everys(kad) == [ROOT]


HOSTILE = [ID(b"\x00\x24" + bytes([n]) * 36) for n in (1, 2, 3)]
HOLDER = ID(b"\x00\x24" + bytes([4]) * 36)
SYBIL_IDS = [ID(b"\x00\x24" + bytes([100 + n]) * 36) for n in range(20)]
WORKER = ID(b"\x00\x24" + bytes([200]) * 36)


class _Table:
    def find_local_closest_peers(self, key: bytes, count: int) -> list[ID]:
        return [*HOSTILE, HOLDER]


class _NoPeerstore:
    def get_peerstore(self) -> Any:
        raise KeyError("no identify yet")  # no server known to serve kad: every one asked all the same


class _Servers:
    """A small swarm's kad (at most k servers: a lookup asks every one at once, `Kad._ask_known`):
    three hostile servers, each on a network of its own, listing 20 Sybils at once, and the key's
    honest holder, 0.5 s away, listing the worker."""

    routing_table = _Table()
    host = _NoPeerstore()
    local_peer_id = ID(b"\x00\x24" + bytes([9]) * 36)
    provider_store = None


def _small_swarm() -> Kad:
    kad = Kad(_Servers(), cast(Host, None), server=False)
    kad.link.networks.update({p: f"45.0.{i}.0/24" for i, p in enumerate([*HOSTILE, HOLDER])})

    async def get_providers(peer: ID, key: bytes) -> list[PeerInfo]:
        if peer == HOLDER:
            await trio.sleep(0.5)
            return [PeerInfo(WORKER, [])]
        return [PeerInfo(s, []) for s in SYBIL_IDS]

    setattr(kad.link, "get_providers", get_providers)  # noqa: B010 (the one request the test answers itself)
    return kad


async def test_a_small_swarms_read_of_every_server_waits_for_the_holder_the_quick_one_cut_off(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Three hostile networks answer at once and vouch for 20 Sybils, more networks than the one server
    still to answer: the quick read ends without the honest holder; `every` waits for it, and its
    worker is among the key's first 20 (each network a turn)."""
    key = b"\x01" * 32
    quick = await _small_swarm().lookup_providers(key, 20, walk=False)
    assert WORKER.to_base58() not in quick.providers
    whole = await _small_swarm().lookup_providers(key, 20, walk=False, every=True)
    assert WORKER.to_base58() in whole.providers
    assert whole.answered == 4
