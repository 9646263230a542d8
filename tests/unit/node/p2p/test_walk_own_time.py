"""A look's reads of the DHT count their waits in the look's own seconds (`run_delay`,
`node.p2p.looktime`): a submitter the machine starves (its run delay grows by `STARVED` of every real
second) gets the answers its requests would have got on a quiet machine, where the same reads on real
seconds (the run delay read as none: every other read, and a look's before) timed its requests out.

On trio's virtual clock, both ways of reading the DHT: a large swarm's walk (the in-memory kad of
300 servers of tests/unit/node/p2p/test_walk.py, each answer 4 s of real time: 0.4 s of the
submitter's own) and a small swarm's asks of the servers it knows (two servers, one answering at 2 s,
one at 4 s, against the ask's 3 s).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, cast

import trio
import trio.testing
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo

from node.p2p.host import Host
from node.p2p.kad import Kad
from node.p2p.kadlink import QUERY_TIMEOUT_S
from node.p2p.walk import walk_providers
from unit.node.p2p.test_walk import KEY, _far_start, _kad

STARVED = 0.9
"""The share of every real second the machine keeps the starved submitter waiting for a CPU."""
ANSWER_S = 4.0
"""Real seconds each walked server takes to answer: past the request's 3 s, 0.4 s of the submitter's."""


def _starving() -> Callable[[], float]:
    """A run delay that grows by `STARVED` of every second of trio's clock from now."""
    began = trio.current_time()
    return lambda: STARVED * (trio.current_time() - began)


async def test_a_starved_walk_finds_every_provider_its_requests_timed_out_on_real_seconds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    kad = _kad(7)
    kad.latency = ANSWER_S
    with trio.fail_after(600):
        own = await walk_providers(
            KEY, _far_start(kad), kad.ask, 20, QUERY_TIMEOUT_S, random.Random(1), run_delay=_starving()
        )
        real = await walk_providers(KEY, _far_start(kad), kad.ask, 20, QUERY_TIMEOUT_S, random.Random(1))
    assert {p.peer_id for p in kad.providers} <= set(own.providers)
    assert own.failures == {}
    assert real.providers == {}
    assert real.answered == 0
    assert set(real.failures.values()) == {"timed out"}


QUICK, SLOW = (ID(b"\x00\x24" + bytes([n]) * 36) for n in (1, 2))
ANSWERS_S = {QUICK: 2.0, SLOW: 4.0}
"""Real seconds each known server takes to answer: one within the ask's 3 s, one past them."""


class _Table:
    def find_local_closest_peers(self, key: bytes, count: int) -> list[ID]:
        return [QUICK, SLOW]


class _NoPeerstore:
    def get_peerstore(self) -> Any:
        raise KeyError("no identify yet")  # neither server known to serve kad: both asked all the same


class _Dht:
    """The kad-dht a `Kad` reads for a small swarm's asks: two servers known, nothing held."""

    routing_table = _Table()
    local_peer_id = ID(b"\x00\x24" + bytes([9]) * 36)
    host = _NoPeerstore()
    provider_store = None


def _small_swarm() -> Kad:
    kad = Kad(_Dht(), cast(Host, None), server=False)

    async def get_providers(peer: ID, key: bytes) -> list[PeerInfo]:
        await trio.sleep(ANSWERS_S[peer])
        return [PeerInfo(ID(b"\x00\x24" + bytes([100 + int(ANSWERS_S[peer])]) * 36), [])]

    setattr(kad.link, "get_providers", get_providers)  # noqa: B010 (the one request the test answers itself)
    return kad


async def test_a_starved_look_of_a_small_swarm_hears_the_server_real_seconds_cut_off(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(600):
        own = await _small_swarm().lookup_providers(b"\x01" * 32, 20, walk=False, run_delay=_starving())
        real = await _small_swarm().lookup_providers(b"\x01" * 32, 20, walk=False)
    assert (own.answered, len(own.providers), own.failures) == (2, 2, {})
    assert (real.answered, len(real.providers)) == (1, 1)
    assert real.failures == {SLOW.to_base58(): f"no answer within {QUERY_TIMEOUT_S:g} s"}
