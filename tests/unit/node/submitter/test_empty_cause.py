"""Why `submit`'s discovery found nobody, said by what its own looks met (`Discovery._why_none`).

Before, `initial` looked the providers up once more after its rounds and explained that lookup: a
provider whose record came after the last round was reported as one that "answered none" though
nobody had asked it. On trio's virtual clock, a node written here stands in for the DHT and the
probes: the providers the rounds listed and probed are "none answered" with their count, with no
lookup after; where the rounds listed nobody, a later lookup's providers are said to have come since,
unasked, and a lookup with none is "no provider" as before.
"""

from __future__ import annotations

from typing import Any, cast

import trio
import trio.testing
from kit.providers import at

from node.p2p.kad import ProviderLookup
from node.p2p.node import Node
from node.p2p.survey import NoWorkers
from node.submitter.discovery import Discovery, DiscoveryConfig
from protocol import AdvertBody, Load


class _Dht:
    def __init__(self, later: dict[str, list[str]]) -> None:
        self.later = later
        self.lookups = 0

    async def lookup(self, unit: object, *_: Any, **__: Any) -> ProviderLookup:
        self.lookups += 1
        return ProviderLookup(dict(self.later), 1, {})


class _Node:
    """Lists `listed` to every look; every probe stalls past its deadline. `later`: the providers a
    lookup after the rounds finds."""

    def __init__(self, listed: list[str], later: dict[str, list[str]]) -> None:
        self.listed = listed
        self.dht = _Dht(later)

    async def find_providers(self, *, skip: frozenset[str], **_: Any) -> dict[str, tuple[str, ...]]:
        return {p: at(p) for p in self.listed if p not in skip}

    async def profile_and_host_at(
        self, peer_id: str, addrs: tuple[str, ...], timeout: float = 5.0
    ) -> tuple[AdvertBody, Load, str]:
        await trio.sleep_forever()  # the caller's deadline decides


async def _empty_cause(node: _Node) -> tuple[NoWorkers, str]:
    discovery = Discovery(cast(Node, node), DiscoveryConfig(timeout_s=5.0, probe_timeout_s=3.0))
    assert await discovery.initial() == ()
    assert discovery.empty_cause is not None
    return discovery.empty_cause.code, discovery.empty_cause.detail


async def test_providers_the_rounds_listed_and_asked_are_none_answered_with_no_lookup_after(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    node = _Node(["s1", "s2"], later={"s1": [], "s2": [], "s3": []})
    code, detail = await _empty_cause(node)
    assert code is NoWorkers.NO_ANSWER
    assert detail.startswith("2 peer(s) advertise any unit, but none answered /sark/profile")
    assert node.dht.lookups == 0


async def test_providers_only_a_lookup_after_the_rounds_lists_are_said_unasked_never_silent(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    node = _Node([], later={"w1": ["/ip4/127.0.0.1/tcp/1"]})
    code, detail = await _empty_cause(node)
    assert code is NoWorkers.NO_PROVIDER
    assert "no worker was listed while the discovery looked" in detail
    assert "1 peer(s), come since and not asked" in detail
    assert "none answered" not in detail


async def test_no_provider_anywhere_is_no_provider_as_before(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    code, detail = await _empty_cause(_Node([], later={}))
    assert code is NoWorkers.NO_PROVIDER
    assert "1 DHT server(s) answered with no provider" in detail
