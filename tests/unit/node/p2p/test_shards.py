"""Issue 43: the sharded key tree (node.p2p.shards), pure: paths, the lookup's levels, spillover."""

from __future__ import annotations

import hashlib
import itertools

import cid  # type: ignore[import-untyped]
import pytest

from node.p2p.dht import OLD_KEYS, provider_bound, shard_cid
from node.p2p.kadpatch import PROVIDERS_PER_KEY
from node.p2p.shards import (
    DIG_KEYS,
    MAX_LEVEL,
    SHARD_CAP,
    Shard,
    first_levels,
    is_full,
    next_keys,
    next_levels,
    path_of,
)
from protocol import ComputeUnit


def test_a_shard_key_is_the_multihash_of_its_string_and_a_v1_raw_cid() -> None:
    shard = Shard(ComputeUnit.CPU_ONNX, 2, 3)
    assert shard.text == "sark/cap/v2/CPU (ONNX)/2/3"
    assert shard.dht_key == b"\x12\x20" + hashlib.sha256(shard.text.encode()).digest()
    parsed = cid.make_cid(shard_cid(shard))
    assert (parsed.version, parsed.codec, parsed.multihash) == (1, "raw", shard.dht_key)


@pytest.mark.parametrize("peer", ["12D3KooWA", "12D3KooWB", "12D3KooWC"])
def test_a_peers_path_goes_from_the_root_down_through_children(peer: str) -> None:
    path = path_of(peer, None)
    assert path[0] == Shard(None, 0, 0)
    assert len(path) == MAX_LEVEL + 1
    for parent, child in itertools.pairwise(path):
        assert child in parent.children()
    assert path_of(peer, ComputeUnit.CPU_ONNX) != path_of(peer, ComputeUnit.GPU_ONNX)  # per unit


def test_paths_spread_over_the_children() -> None:
    levels = [path_of(f"peer-{i}", None)[4].index for i in range(1600)]
    counts = [levels.count(i) for i in range(16)]
    assert min(counts) > 50  # 100 expected in each of the 16 keys of level 4


@pytest.mark.parametrize(
    ("count", "keys"),
    [(1, 1), (SHARD_CAP, 1), (SHARD_CAP + 1, 3), (100, 7), (140, 7), (141, 15), (None, 7)],
)
def test_a_lookup_starts_with_the_levels_that_hold_the_count(count: int | None, keys: int) -> None:
    assert len(first_levels(None, count)) == keys


def test_a_lookup_goes_down_only_under_full_keys() -> None:
    root, (left, right) = Shard(None, 0, 0), Shard(None, 0, 0).children()
    assert next_keys({root: SHARD_CAP - 1}, (root,)) == ()
    assert next_keys({root: SHARD_CAP}, (root,)) == (left, right)
    asked = {root: SHARD_CAP, left: SHARD_CAP, right: 2}
    assert next_keys(asked, (root, left, right)) == left.children()
    assert Shard(None, MAX_LEVEL, 0).children() == ()


def test_a_lookup_digging_past_an_uncounted_level_reads_the_levels_below_at_once_within_a_budget() -> None:
    root = Shard(None, 0, 0)
    left, right = root.children()
    asked = {root: SHARD_CAP}
    assert next_levels(asked, (root,), 1) == next_keys(asked, (root,))
    assert next_levels(asked, (root,), 2) == (left, right, *left.children(), *right.children())
    deep = next_levels(asked, (root,), MAX_LEVEL)
    assert len(deep) <= DIG_KEYS
    assert [s.level for s in deep] == sorted(s.level for s in deep)  # whole levels, shallowest first
    assert next_levels({root: SHARD_CAP - 1}, (root,), 4) == ()  # nothing under a key that is not full


def test_a_full_key_refuses_a_new_provider_but_not_one_it_lists() -> None:
    assert not is_full(SHARD_CAP - 1, False)
    assert is_full(SHARD_CAP, False)
    assert not is_full(SHARD_CAP, True)  # a refresh of a listed provider


def test_servers_bound_shard_keys_and_keep_the_old_keys_wide() -> None:
    assert all(provider_bound(key) == PROVIDERS_PER_KEY for key in OLD_KEYS)
    assert provider_bound(Shard(None, 0, 0).dht_key) == SHARD_CAP
