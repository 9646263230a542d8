"""Sharded capability keys: no key holds more than `SHARD_CAP` providers, however large the fleet.

A unit's providers (None: the any-worker key) live under a binary tree of keys, each a standard
provider key (the sha2-256 multihash of `sark/cap/v2/<unit>/<level>/<index>`, so any kad-dht server,
a js-libp2p one too, keeps them):

- level 0 has one key, level l has 2**l; a peer's key at level l is the first l bits of
  sha256(peer id / unit), so its keys at successive levels are a path down the tree;
- a worker provides at the shallowest key of its path that is not full (fewer than `SHARD_CAP`
  providers as holders on more than half of the networks that answered list, `node.p2p.shortlist.
  holding`; or already listing it): a full key spills it over to its child. It keeps that key
  (`Shard`) for its later refreshes: a refresh is one ADD_PROVIDER per unit, whatever the fleet;
- a child key holds providers only if its parent is full, so a lookup reads level by level, goes
  down only under full keys, and stops once it has the count asked: 100 devices are 7 keys
  (levels 0-2), all of a rare unit's 100 are 7 keys, all of 10,000 are about 1,000 keys;
- a worker placed deep in the any-worker tree knows the swarm is large (`large_swarm`): by default a
  reachable one then serves the DHT, so the gates stop holding every record.

Pure: no libp2p, trio or clock; the node (`node.p2p.dht`) and the simulator
(`benchmarks/swarm_sim.py`) both use these functions.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from protocol import ComputeUnit

SHARD_CAP: Final = 20
"""Providers a server keeps under one shard key (kad's k; rust-libp2p's and py-libp2p's default)."""
MAX_LEVEL: Final = 12
"""Deepest level: a unit has at most 2**13 - 1 keys, room for 163,820 providers."""
SHARD_PREFIX: Final = "sark/cap/v2/"
FIRST_LEVELS: Final = 3
"""Levels a lookup asks at once when it starts (7 keys, 140 providers when full)."""
SERVE_FROM_LEVEL: Final = FIRST_LEVELS
"""A reachable worker placed this deep in the any-worker tree serves the DHT by default (`large_swarm`)."""
SHA2_256_MULTIHASH: Final = b"\x12\x20"
"""Multihash prefix of a sha2-256 digest: code 0x12, length 32."""


def unit_name(unit: ComputeUnit | None) -> str:
    """The unit's name in a shard key ("any" for the any-worker tree)."""
    return "any" if unit is None else unit.value


def multihash_key(text: str) -> bytes:
    """A provider key: the sha2-256 multihash (0x12 0x20 + 32-byte digest) of a capability string."""
    return SHA2_256_MULTIHASH + hashlib.sha256(text.encode()).digest()


@dataclass(frozen=True)
class Shard:
    """One key of a unit's tree: level `level`, index `index` in [0, 2**level)."""

    unit: ComputeUnit | None
    level: int
    index: int

    @property
    def text(self) -> str:
        """The capability string whose multihash is the key."""
        return f"{SHARD_PREFIX}{unit_name(self.unit)}/{self.level}/{self.index}"

    @property
    def dht_key(self) -> bytes:
        """The provider key (34 bytes)."""
        return multihash_key(self.text)

    def children(self) -> tuple[Shard, ...]:
        """The two keys a full key spills over to (none below `MAX_LEVEL`)."""
        if self.level >= MAX_LEVEL:
            return ()
        return tuple(Shard(self.unit, self.level + 1, 2 * self.index + bit) for bit in (0, 1))


def path_of(peer_id: str, unit: ComputeUnit | None) -> tuple[Shard, ...]:
    """A peer's keys of a unit's tree, root first: where it provides, the first not full."""
    bits = int.from_bytes(hashlib.sha256(f"{peer_id}/{unit_name(unit)}".encode()).digest(), "big")
    return tuple(Shard(unit, level, bits >> (256 - level)) for level in range(MAX_LEVEL + 1))


def first_levels(unit: ComputeUnit | None, count: int | None, cap: int = SHARD_CAP) -> tuple[Shard, ...]:
    """The keys a lookup asks at once: the levels that hold `count` when full (`FIRST_LEVELS` for all)."""
    levels, room = 1, cap
    while count is not None and room < count and levels <= MAX_LEVEL:
        levels, room = levels + 1, room + cap * 2**levels
    if count is None:
        levels = FIRST_LEVELS
    return tuple(Shard(unit, level, i) for level in range(levels) for i in range(2**level))


def next_keys(
    asked: dict[Shard, int], frontier: tuple[Shard, ...], cap: int = SHARD_CAP
) -> tuple[Shard, ...]:
    """The keys to ask next: the children of the full keys of the deepest level asked, not asked yet.

    Args:
        asked: every key asked so far -> how many providers it listed.
        frontier: the keys asked in the last round.
    """
    deepest = max((s.level for s in frontier), default=-1)
    full = [s for s in frontier if s.level == deepest and asked.get(s, 0) >= cap]
    return tuple(c for s in full for c in s.children() if c not in asked)


DIG_KEYS: Final = 64
"""The most keys `next_levels` reads at once."""


def next_levels(
    asked: dict[Shard, int], frontier: tuple[Shard, ...], levels: int, cap: int = SHARD_CAP
) -> tuple[Shard, ...]:
    """`next_keys`, and the `levels - 1` levels below them with them (each key taken as full, for the
    read tells), within `DIG_KEYS` keys: a lookup past a level whose providers it does not count (the
    submitter's discovery past a cheater's networks: `Hints.discount`) doubles `levels` each
    such level, so it reads down to where honest workers spilled in a few walks, not one a level."""
    keys = next_keys(asked, frontier, cap)
    return keys + below(keys, levels - 1, asked, DIG_KEYS - len(keys))


def below(keys: tuple[Shard, ...], levels: int, asked: dict[Shard, int], budget: int) -> tuple[Shard, ...]:
    """Every key of the `levels` levels under the deepest of `keys` not in `asked`, whole levels
    within `budget` keys."""
    deepest = max((s.level for s in keys), default=-1)
    level = tuple(s for s in keys if s.level == deepest)
    out: tuple[Shard, ...] = ()
    for _ in range(levels):
        level = tuple(c for s in level for c in s.children() if c not in asked)
        if len(out) + len(level) > budget:
            break
        out += level
    return out


GAP_KEYS: Final = 32
"""The most keys a lookup reads below keys that are not full (`below_gaps`)."""


def below_gaps(asked: dict[Shard, int], budget: int = GAP_KEYS) -> tuple[Shard, ...]:
    """The next level under every key of the deepest level asked, full or not, within `budget` keys.

    A child key holds providers only if its parent was full when they placed, and keys stay where they
    placed: providers that left (Sybils that filled a key first, then went, their records expired)
    leave a key that is not full above the workers that spilled under it, and a lookup that descends
    only under full keys never reads them. A lookup still short of its count reads on below the gap.
    """
    deepest = max((s.level for s in asked), default=-1)
    level = [s for s in asked if s.level == deepest]
    below = tuple(c for s in level for c in s.children() if c not in asked)
    return below if len(below) <= budget else ()


def large_swarm(placed: Shard) -> bool:
    """Is the swarm large enough that its reachable workers should serve the DHT (`dht_mode = "auto"`)?

    A worker's any-worker key at level `SERVE_FROM_LEVEL` or deeper means the keys above it on its path
    were full: the swarm has more than about 140 workers (levels 0-2 hold 140), past which the gates
    alone would hold every record and answer every lookup. A smaller swarm gains nothing from more
    servers (with fewer than k, every server holds every record) and keeps the gates as its only ones.
    """
    return placed.level >= SERVE_FROM_LEVEL


def is_full(listed: int, me_listed: bool, cap: int = SHARD_CAP) -> bool:
    """Does a key refuse a new provider (a key already listing us always takes us: a refresh)?

    `listed`: the providers the key holds as its holders say (the node gives `ProviderLookup.holds`,
    most of their networks' word: never the union of their lists, which one hostile holder fills)."""
    return listed >= cap and not me_listed


__all__ = [
    "FIRST_LEVELS",
    "GAP_KEYS",
    "MAX_LEVEL",
    "SERVE_FROM_LEVEL",
    "SHARD_CAP",
    "SHARD_PREFIX",
    "Shard",
    "below_gaps",
    "first_levels",
    "is_full",
    "large_swarm",
    "multihash_key",
    "next_keys",
    "path_of",
    "unit_name",
]
