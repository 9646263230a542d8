"""A lookup of a unit's providers: its tree of shard keys read level by level (`read_tree`).

A lookup reads the levels of the unit's tree that hold the count asked at once (`shards.first_levels`),
then the children of full keys, and stops at the count asked; when it is still short it also reads the
unit's key from before issue 43 (`old_key`, at the servers it knows: no walk), where old workers
provide. A key is full as a placement reads it (`ProviderLookup.holds`: the word of most of its holders'
networks), never by the union of their lists. The keys of one level are walked at once (`_ask_keys`),
and the walks still out end when the lookup holds enough. `_Reading` is a lookup's state between its
batches: what it found and counts, how deep it digs past discounted providers, which keys it reads
again, to every one of their k closest, because most of their providers failed the caller
(`read_again`). `node.p2p.dht.Dht.lookup` is the entry point (its kad and its cap).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

import trio

from node.p2p.kad import Kad, ProviderLookup
from node.p2p.kadpatch import PROVIDERS_PER_KEY
from node.p2p.looktime import no_delay
from node.p2p.shards import DIG_KEYS, SHARD_CAP, Shard, below, below_gaps, first_levels, next_levels
from protocol import ComputeUnit

H = TypeVar("H", bound=Hashable)


@dataclass(frozen=True)
class Hints:
    """What a caller knows of a unit's providers that shapes its lookup (`read_tree`) besides the count:
    whom it has, whom it cannot count, who did not answer it, and how deep to read.

    Attributes:
        known: the providers a caller has already (a campaign's later look): they fill the first keys,
            so a look for `count` more reads on past them, down to where joiners land, and stops there.
        discount: a provider whose addresses it holds true for is returned but not counted (the
            submitter's discovery: one on a network whose providers did not answer this round,
            `node.submitter.discovery`), so the look reads on past such providers in one go.
        unanswered: providers that did not answer the caller (the discovery's probes this round); a key
            read this look most of whose providers did not answer, or are discounted, is read once more,
            with the next levels, by a walk that waits for every one of its k closest (`_Reading.again`).
        dig: levels read at once below the first ones; past a level of discounted providers alone the
            lookup doubles it (the next two levels at once, then four: `shards.next_levels`), so a
            cheater's keys cost a walk per doubling of their depth, not per level.
        past_gaps: levels read on below keys that are not full while still short (`shards.below_gaps`:
            where workers spilled under providers that left).
    """

    known: frozenset[str] = frozenset()
    discount: Callable[[Sequence[str]], bool] | None = None
    unanswered: frozenset[str] = frozenset()
    dig: int = 1
    past_gaps: int = 0


NO_HINTS: Final = Hints()
"""A lookup whose caller knows nothing yet (its first look)."""


@dataclass
class _Reading:
    """One lookup's state between its batches of keys (`read_tree`): what it found and counts, how
    deep it digs, how full each key it read was, which keys it read again.

    Attributes:
        count: the providers the caller asks for, not in its `hints.known` (None: all).
        hints: the caller's (`Hints`).
        cap: the providers a shard key holds.
        found: the providers gathered as each walk answers (`read_tree`'s `into`), so that a caller
            whose deadline cuts the lookup keeps what it found (`Node.find_providers`).
        dig: the levels the next batch reads below its first ones (from `hints.dig`, doubled past a
            level of discounted providers alone).
        past_gaps: the levels still to read below keys that are not full (from `hints.past_gaps`).
        asked: how full each key read was (`ProviderLookup.holds`).
        reread: the keys read again this lookup (each once).
    """

    count: int | None
    hints: Hints
    cap: int
    found: dict[str, list[str]]
    dig: int = field(init=False)
    past_gaps: int = field(init=False)
    asked: dict[Shard, int] = field(default_factory=dict)
    reread: set[Shard] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.dig, self.past_gaps = self.hints.dig, self.hints.past_gaps

    def counted(self) -> int:
        """How many of the providers found this lookup counts: neither known nor discounted."""
        discount = self.hints.discount
        return sum(
            1 for p in self.found.keys() - self.hints.known if discount is None or not discount(self.found[p])
        )

    def short(self) -> bool:
        return self.count is None or self.counted() < self.count

    def enough(self) -> bool:
        return not self.short()

    def useless(self, peer: str) -> bool:
        """A provider the caller cannot count: it did not answer, or it is discounted."""
        discount = self.hints.discount
        return peer in self.hints.unanswered or (discount is not None and discount(self.found[peer]))

    def after(
        self, frontier: tuple[Shard, ...], answers: Sequence[ProviderLookup]
    ) -> tuple[tuple[Shard, ...], list[Shard]]:
        """The keys to read next after a batch (`frontier` first in `answers`), and those to read again
        to every one of their k closest (`again`)."""
        self.asked.update((shard, a.holds) for shard, a in zip(frontier, answers, strict=False))
        again = self.again(frontier, answers) if self.count is not None else []
        listed = {p for a in answers for p in a.providers}
        discount = self.hints.discount
        fresh = [discount(self.found[p]) for p in listed - self.hints.known] if discount else []
        self.dig = 2 * self.dig if fresh and all(fresh) else 1  # all discounted: two levels at once, ...
        frontier = next_levels(self.asked, frontier, self.dig, self.cap)
        if not frontier and self.past_gaps > 0 and self.count is not None:
            frontier, self.past_gaps = below_gaps(self.asked), self.past_gaps - 1
        return frontier, again

    def again(self, frontier: Sequence[Shard], answers: Sequence[ProviderLookup]) -> list[Shard]:
        """The keys of `frontier` to read once more, waiting for every one of their k closest: those
        `read_again` names, each once a lookup.

        Hostile servers ground near a key on more networks than the key's honest holders still to answer,
        all listing the same Sybils at once, end a walk by its count before the honest holders answer
        (`node.p2p.shortlist`: on 11, 15 and 19 networks of a key's 20 closest, 15.5, 72.5 and 99 % of the
        walks listed no honest provider). A walk that waits for every one of the k closest loses none below
        20, but costs every look that waits on it (`benchmarks/notes/swarm_hostile.md`), so only a key whose
        providers failed the caller is read so: the look after the probes (`node.submitter.discovery`).
        The cheater's view: it chooses its servers' ids, lists and timing, and its Sybils' answers; it does
        not choose whether its Sybils answer a probe as live workers would (then they are workers the
        campaign may use, judged by verification), and every Sybil that does not makes the key read again
        to its end, where the honest holders' lists count. An honest key with a few departed workers
        (fewer than half of what it lists) is not read again."""
        again = [
            shard
            for shard, answer in zip(frontier, answers, strict=False)
            if shard not in self.reread and read_again(list(answer.providers), self.useless)
        ]
        self.reread.update(again)
        return again


def read_again(listed: Sequence[H], useless: Callable[[H], bool]) -> bool:
    """Whether a key whose read listed `listed` is read again to every one of its k closest: most of its
    providers are `useless` to the caller (did not answer its probe, or discounted). `read_tree`'s rule,
    and the simulators' (`benchmarks/swarm_hostile.py`, `benchmarks/swarm_sybil.py`)."""
    return 2 * sum(map(useless, listed)) > len(listed)


async def read_tree(
    kad: Kad,
    unit: ComputeUnit | None,
    old_key: bytes,
    count: int | None = None,
    hints: Hints = NO_HINTS,
    *,
    into: dict[str, list[str]] | None = None,
    cap: int = SHARD_CAP,
    run_delay: Callable[[], float] = no_delay,
) -> ProviderLookup:
    """Providers of a unit (None: any worker), with what each server said (answered, refused).

    Reads the unit's tree (`shards.first_levels`, then the children of full keys: full as a placement
    reads it, `ProviderLookup.holds`, the word of most of the key's holders' networks; by the union of
    their lists, hostile servers listing 20 Sybils under every key made a look for all workers read over
    1,000 keys where 8 do now, `tests/labs/swarm/test_hostile_places.py`) until it has `count` providers
    not in `hints.known` (None: all; `Hints` shapes the rest), and `old_key` (the unit's key before issue
    43, `dht.capability_dht_key`) when asked for all or still short: at the servers we know only, no walk
    (old workers live where the gates are the servers, and an empty old key walked by every lookup would
    make its closest servers hot). `into`: `_Reading.found` (the lookup's own when None); `cap`: the
    providers a shard key holds.
    `run_delay`: a look's (`node.p2p.looktime`): its walks' waits are its own seconds (`node.p2p.walk`).
    """
    found: dict[str, list[str]] = {} if into is None else into
    reading = _Reading(count, hints, cap, found)
    frontier = first_levels(unit, None if count is None else count + len(hints.known), cap)
    frontier += below(frontier, hints.dig - 1, reading.asked, DIG_KEYS - len(frontier))
    again: list[Shard] = []
    answered, failures, keys, old_read = 0, dict[str, str](), 0, False
    while True:
        wants = [(shard.dht_key, cap, True, False) for shard in frontier]
        wants += [(shard.dht_key, cap, True, True) for shard in again]
        if not old_read and (count is None or (not frontier and reading.short())):
            wants.append((old_key, PROVIDERS_PER_KEY, False, False))
            old_read = True
        if not wants:
            break
        answers = await _ask_keys(kad, wants, found, enough=reading.enough, run_delay=run_delay)
        keys += len(wants)
        answered = max([answered, *(a.answered for a in answers)])
        failures.update(f for a in answers for f in a.failures.items())
        if not reading.short():
            break
        frontier, again = reading.after(frontier, answers)
    return ProviderLookup(found, answered, failures, keys)


async def _ask_keys(
    kad: Kad,
    wants: list[tuple[bytes, int, bool, bool]],
    found: dict[str, list[str]],
    enough: Callable[[], bool] = lambda: False,
    run_delay: Callable[[], float] = no_delay,
) -> list[ProviderLookup]:
    """Look up several keys at once (key, count, walk, every: `Kad.lookup_providers`), merging each answer
    into `found` as it comes; once `enough()` holds, the walks still out are cancelled (their keys
    answer empty): a look past levels of a cheater's keys takes the quickest walk of the level that
    holds what it needs, not the slowest of the keys read with it."""
    answers: list[ProviderLookup] = [ProviderLookup({}, 0, {}) for _ in wants]

    async def one(index: int, want: tuple[bytes, int, bool, bool], scope: trio.CancelScope) -> None:
        key, count, walk, every = want
        answers[index] = answer = await kad.lookup_providers(
            key, count, walk=walk, every=every, run_delay=run_delay
        )
        for peer, addrs in answer.providers.items():
            known = found.setdefault(peer, [])
            known.extend(a for a in addrs if a not in known)
        if enough():
            scope.cancel()

    async with trio.open_nursery() as nursery:
        for index, want in enumerate(wants):
            nursery.start_soon(one, index, want, nursery.cancel_scope)
    return answers


__all__ = ["NO_HINTS", "Hints", "read_again", "read_tree"]
