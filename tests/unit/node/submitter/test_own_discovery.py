"""Issue 49: a submitter's discovery waits for its own embedded workers instead of silencing them.

On a starved machine (2 cores at load 8) the embedded workers' profile probes, answered inside the
submitter's own process, took longer than the probe's 3 s; a provider that did not answer was
silenced for `SILENT_FOR_S`, and the campaign found no worker. A node written here stands in for
the DHT and the probes, on trio's virtual clock: an own worker that answers after 20 s (virtual) is
confirmed by `initial`, though its look lasts 5 s and a stranger's probe 3 s, and so is one the
lookup lists only after 12 s; a stranger that stalls as long is silenced as ever; an own worker's
failed probe does not silence it either.
"""

from __future__ import annotations

from typing import Any, cast

import trio
import trio.testing
from kit.providers import advertised, at

from node.errors import PeerUnreachable
from node.p2p.node import Node
from node.submitter.discovery import Discovery, DiscoveryConfig
from protocol import AdvertBody, Load

ANSWER_S = 20.0
"""How long (virtual) the starved probes take to answer."""
LISTED_S = 12.0
"""When (virtual) the starved lookup first lists a `late` worker."""


class _Starved:
    """The DHT finds `peers` (those in `late` only after `LISTED_S`: the lookup of their advert ran
    past the look); each probe answers after `ANSWER_S`, or fails at once for those in `dead`."""

    def __init__(
        self, peers: list[str], dead: frozenset[str] = frozenset(), late: frozenset[str] = frozenset()
    ) -> None:
        self.peers = list(peers)
        self.dead = dead
        self.late = late
        self.probes: list[str] = []

    async def find_providers(self, *, skip: frozenset[str], **_: Any) -> dict[str, tuple[str, ...]]:
        listed = trio.current_time() >= LISTED_S
        return {p: at(p) for p in self.peers if p not in skip and (listed or p not in self.late)}

    async def profile_and_host_at(
        self, peer_id: str, addrs: tuple[str, ...], timeout: float = 5.0
    ) -> tuple[AdvertBody, Load, str]:
        self.probes.append(peer_id)
        if peer_id in self.dead:
            raise PeerUnreachable(peer_id, "connection refused")
        await trio.sleep(ANSWER_S)  # the caller's deadline (its cancel scope) decides
        return advertised(peer_id).advert, Load(), "127.0.0.1"


async def test_an_own_worker_slower_than_the_probe_is_waited_for_and_a_stranger_is_silenced(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    node = _Starved(["own-0", "own-1", "stranger"], late=frozenset({"own-1"}))
    config = DiscoveryConfig(timeout_s=5.0, probe_timeout_s=3.0)
    discovery = Discovery(cast(Node, node), config, own=frozenset({"own-0", "own-1"}))
    found = await discovery.initial()
    assert [v.peer_id for v in found] == ["own-0", "own-1"]
    assert trio.current_time() >= LISTED_S + ANSWER_S  # past its look's 5 s, for each own worker
    assert discovery.silent() == frozenset({"stranger"})  # a stranger's 3 s stall is remembered
    assert node.probes.count("stranger") == 2  # at 0 s, then once its 10 s span ended (of a 32 s look)


async def test_the_same_starved_worker_as_a_stranger_is_not_waited_for(
    mock_clock: trio.testing.MockClock,
) -> None:
    """The mechanism's other side: without `own` the slow worker is silenced and nothing is found."""
    mock_clock.autojump_threshold = 0
    node = _Starved(["own-0"])
    discovery = Discovery(cast(Node, node), DiscoveryConfig(timeout_s=5.0, probe_timeout_s=3.0))
    discovery.empty_cause = None
    with trio.move_on_after(30.0):  # a deadline of the test, on the virtual clock
        await discovery.round()
    assert discovery.silent() == frozenset({"own-0"})


async def test_an_own_worker_whose_probe_fails_is_not_silenced(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    node = _Starved(["own-0"], dead=frozenset({"own-0"}))
    discovery = Discovery(cast(Node, node), DiscoveryConfig(probe_timeout_s=3.0), own=frozenset({"own-0"}))
    assert await discovery.round() == ()
    assert discovery.silent() == frozenset()
