"""Issue 50, scope 1: a lookup past a level whose providers it does not count (`Dht.lookup`'s
`discount`: the submitter's discovery past networks that did not answer this round) reads the levels
below two, then four at once (`shards.next_levels`), not one a walk. A Kad written here lists each
key's providers after a second of trio's virtual clock: the time a lookup takes is its walks in a row.

The tree: 200 Sybils from 5 /24s (4 of each network a key, the most the servers' places rule keeps)
fill levels 0-2 and part of 3; honest workers, each on a /24 of its own, fill level 3's rest and
below (as `benchmarks/swarm_sybil.py` places them at 10,000 devices).

A look that reads several keys at once ends with the first walks that give it enough
(`node.p2p.lookup._ask_keys`): a key of the cheater's whose walk is slow (its servers stall) does not
hold a look that a quicker key has filled."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import trio
import trio.testing

from node.p2p.dht import Dht
from node.p2p.kad import Kad, ProviderLookup
from node.p2p.lookup import Hints
from node.p2p.shards import SHARD_CAP, Shard
from node.submitter.networks import provider_network

SUSPECT = {f"45.0.{n}.0/24" for n in range(5)}


class _Kad:
    def __init__(self) -> None:
        self.keys: dict[bytes, list[str]] = {}
        self.addrs: dict[str, list[str]] = {}
        sybils, honest = 200, 0
        for level in range(6):
            for index in range(2**level):
                names = []
                while len(names) < SHARD_CAP and sybils:
                    sybils -= 1
                    name = f"s{sybils}"
                    self.addrs[name] = [f"/ip4/45.0.{sybils % 5}.{1 + sybils // 5}/tcp/4001"]
                    names.append(name)
                while len(names) < SHARD_CAP:
                    honest += 1
                    name = f"h{honest}"
                    self.addrs[name] = [f"/ip4/20.{honest // 256}.{honest % 256}.1/tcp/4001"]
                    names.append(name)
                self.keys[Shard(None, level, index).dht_key] = names

    async def lookup_providers(
        self, key: bytes, count: int, *, walk: bool = True, **_: Any
    ) -> ProviderLookup:
        await trio.sleep(1.0)  # a walk
        listed = self.keys.get(key, []) if walk else []
        return ProviderLookup({p: self.addrs[p] for p in listed}, 20, {}, holds=len(listed))


def _suspect(addrs: Sequence[str]) -> bool:
    return provider_network(addrs) in SUSPECT


async def _look(discount: Callable[[Sequence[str]], bool] | None) -> tuple[dict[str, list[str]], set[str]]:
    """A lookup of 4 past the root's providers (known): what it found, and the root's."""
    kad = _Kad()
    root = set(kad.keys[Shard(None, 0, 0).dht_key])
    return (await Dht(cast(Kad, kad)).lookup(None, 4, Hints(frozenset(root), discount))).providers, root


async def test_a_lookup_past_uncounted_levels_digs_two_then_four_at_once(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    found, _ = await _look(_suspect)
    honest = [p for p in found if p.startswith("h")]
    assert len(honest) >= 4
    # levels 0-1 (the root known, level 1 the cheater's), then levels 2-3 at once: two walks, where
    # one a level took three (and the old key's read once, with the first)
    assert trio.current_time() == 2.0


async def test_without_a_discount_a_lookup_reads_one_level_a_walk_as_before(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    found, root = await _look(None)
    assert len(found.keys() - root) >= 4
    assert trio.current_time() == 1.0  # level 1's forty count: no level below read


class _SlowKeys(_Kad):
    """`_Kad` where the Sybils' keys (levels 0-2) take 3 s a walk and the others 1 s."""

    async def lookup_providers(
        self, key: bytes, count: int, *, walk: bool = True, **_: Any
    ) -> ProviderLookup:
        listed = self.keys.get(key, []) if walk else []
        await trio.sleep(3.0 if listed and all(p.startswith("s") for p in listed) else 1.0)
        return ProviderLookup({p: self.addrs[p] for p in listed}, 20, {}, holds=len(listed))


async def test_a_look_of_several_keys_ends_with_the_quickest_that_fills_it(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    kad = _SlowKeys()
    # levels 0-3 at once (the discovery's first look past suspect networks digs so): level 3 holds honest
    found = await Dht(cast(Kad, kad)).lookup(None, 4, Hints(discount=_suspect, dig=4))
    assert len([p for p in found.providers if p.startswith("h")]) >= 4
    assert trio.current_time() == 1.0  # not the 3 s of the cheater's slow keys read with it


async def test_a_lookup_cut_by_its_callers_deadline_keeps_what_its_walks_listed(
    mock_clock: trio.testing.MockClock,
) -> None:
    """`into`: the providers are the caller's as each walk answers, so a look whose deadline cuts the
    lookup while it reads on for more (`Node.find_providers`' `timeout`) keeps those it had found;
    before, it returned none of them."""
    mock_clock.autojump_threshold = 0
    kad = _Kad()
    root = set(kad.keys[Shard(None, 0, 0).dht_key])
    level1 = set(kad.keys[Shard(None, 1, 0).dht_key])
    into: dict[str, list[str]] = {}
    with trio.move_on_after(1.5) as cut:  # levels 0-1 answered at 1 s; levels 2-3 are out (`_look`: 2 s)
        await Dht(cast(Kad, kad)).lookup(None, 4, Hints(frozenset(root), _suspect), into=into)
    assert cut.cancelled_caught
    assert root | level1 <= set(into)
