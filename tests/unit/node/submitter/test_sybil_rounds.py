"""Issue 50, scope 1: a discovery round past Sybils a few to a key (as `node.p2p.places` leaves them)
costs one `GRACE_S`, not one a level. A node written here stands in for the DHT and the probes, on
trio's virtual clock: each level of the tree lists 4 stalling Sybils, the root 2 honest workers
besides. A `devices: 2` campaign's lookup asks for 4 providers (`LOOKUP_SLACK`); its round ends once
the 2 it needs answered (the spares come from later rounds), and `initial` ends at its settle
deadline however deep the later rounds are still digging."""

from __future__ import annotations

from typing import Any, cast

import trio
import trio.testing
from kit.providers import advertised, shallowest

from node.p2p.node import Node
from node.submitter.discovery import GRACE_S, LOOKUP_SLACK, Discovery, DiscoveryConfig
from protocol import AdvertBody, Load

LEVELS = 20
HONEST = ("h0", "h1")


class _Tree:
    """Level l lists Sybils s{4l}..s{4l+3} (the root also the honest workers); a look returns the
    shallowest level with a provider not skipped nor known. Sybils stall; honest workers answer."""

    def __init__(self) -> None:
        self.levels = [[f"s{4 * level + i}" for i in range(4)] for level in range(LEVELS)]
        self.levels[0] += HONEST
        self.probes: list[str] = []

    async def find_providers(
        self, *, skip: frozenset[str], known: frozenset[str] = frozenset(), **_: Any
    ) -> dict[str, tuple[str, ...]]:
        return shallowest(self.levels, skip, known)

    async def profile_and_host_at(
        self, peer_id: str, addrs: tuple[str, ...], timeout: float = 5.0
    ) -> tuple[AdvertBody, Load, str]:
        self.probes.append(peer_id)
        if peer_id not in HONEST:
            await trio.sleep_forever()  # a stalling Sybil: the probe's deadline ends it
        await trio.sleep(0.01)
        return advertised(peer_id).advert, Load(), "127.0.0.1"


async def test_a_round_ends_once_the_devices_needed_answered_not_at_the_lookups_spares(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    tree = _Tree()
    discovery = Discovery(cast(Node, tree), DiscoveryConfig(count=2 * LOOKUP_SLACK, timeout_s=5.0))
    found = await discovery.round()
    assert {v.peer_id for v in found} == set(HONEST)
    assert sorted(tree.probes) == sorted(tree.levels[0])  # the root's look only: no level below dug


async def test_initial_ends_at_its_settle_deadline_while_later_rounds_dig_past_sybils(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    tree = _Tree()
    config = DiscoveryConfig(count=2 * LOOKUP_SLACK, timeout_s=5.0, settle_s=1.0)
    found = await Discovery(cast(Node, tree), config).initial()
    assert {v.peer_id for v in found} == set(HONEST)
    # the first round's one grace, then the settle second: the later rounds' looks stop at its end
    assert trio.current_time() <= GRACE_S + config.settle_s + 0.5
    assert len(tree.probes) > len(tree.levels[0])  # they did dig meanwhile (spares for later rounds)
