"""A discovery round's word on the networks its providers are on, and the probe slots that serve the
suspect ones last (`node.submitter.discovery`'s rules against Sybils from a few networks).

    provider_network  the network a provider record places its provider on (its /24 or /48)
    by_network        providers in turns, one of each network's a turn: the order probes dial in
    Networks          a round's suspect networks (crowded in a look, or unanswered in a probe's slot time)
    ProbeSlots        the probe slots, a suspect network's probes served after every other
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import trio

from node.p2p.places import PLACES_PER_NETWORK, is_local, network_of

log = logging.getLogger("node.submitter.discovery")  # its lines are the discovery's

PROBE_SLOTS: Final = 16
"""Live-profile probes dialling at once (each dials, then a Noise handshake: CPU on both sides)."""
PROBE_SLOT_S: Final = 0.5
"""The longest a probe holds its slot: one still unanswered then waits on without one, so a stalling
provider holds a slot half a second once, never the discovery's whole budget."""
SUSPECT_MISSES: Final = 1
"""Providers of one network (`provider_network`) unanswered at a grace's end, none of its providers
having answered, that make a round count that network's providers no more (`Networks`): one, as an
honest device is alone on its network (a second one's answer clears it)."""
CROWD: Final = PLACES_PER_NETWORK
"""Providers of one network among a look's new ones that make it suspect before any is probed: as many
as the servers keep of one network under one key (`node.p2p.places`), which a cheater filling keys
from few networks lists in every key, and honest devices, each on a network of its own, rarely do."""


def by_network(providers: Sequence[tuple[str, tuple[str, ...]]]) -> list[tuple[str, tuple[str, ...]]]:
    """`providers` in turns, one of each network's (`provider_network`; a local or unknown one is a
    network of its own) per turn: a cheater's hundred records on five /24s take five places of a turn,
    an honest worker on a /24 of its own one, so the honest workers of a look are among its first
    probes however many of the cheater's it lists (a wave holds `PROBE_SLOTS`)."""
    groups: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for peer, addrs in providers:
        groups.setdefault(provider_network(addrs) or f"peer:{peer}", []).append((peer, addrs))
    rounds = max(map(len, groups.values()), default=0)
    return [group[turn] for turn in range(rounds) for group in groups.values() if turn < len(group)]


def provider_network(addrs: Sequence[str]) -> str | None:
    """The network a provider record places its provider on: the /24 (/48) of its first direct IP
    address, else of the relay its first circuit goes through (`node.p2p.places.network_of`); None for
    a local address (a lab's loopback, an office's private /24: many honest workers share one) or none."""
    for addr in sorted(addrs, key=lambda a: "/p2p-circuit" in a):
        parts = addr.split("/")
        if len(parts) > 2 and parts[1] in ("ip4", "ip6"):
            return None if is_local(parts[2]) else network_of(parts[2])
    return None


@dataclass
class Networks:
    """One round's word on the networks its providers are on (`provider_network`).

    A network is suspect once `SUSPECT_MISSES` of its providers had not answered when their probes had
    held a slot `PROBE_SLOT_S` (a probe still waiting for its wave is judged when it has: an honest
    worker queued behind a look's first wave is no miss), or once a look lists `CROWD` new providers
    of it, and none of its providers answered in the round: a
    later look counts its providers no more (`Hints.discount`: it reads on past them at once,
    two levels deeper to begin with, `DIG_SUSPECT`, to where honest workers spilled) and probes them
    only after the grace of the others it found (`split`), never not at all; a look that found
    suspect providers alone probes them and looks again without a grace. Every look's probes dial one
    of each network's in turn (`by_network`).

    The cheater's view: it chooses the addresses its records list, so it can place them on any
    network, an honest worker's too. What it gains is at most that an honest worker on a network it
    framed (a record that does not answer there, placed where an earlier look of the round read it)
    is probed with the suspect ones, after the grace of the others that look found: probed still,
    among the first of them (one a network a turn), its answer counted as any.
    It cannot make its own networks count: the suspicion is what its providers did (not answer, read
    at a constant time, `GRACE_S`) or how they sit (crowded: spread thinner, a key holds fewer of its
    records and more honest ones, the places rule's cost), and one answer from a network it holds
    would take a live worker there, which is the service it was meant to deny.
    """

    of: dict[str, str | None] = field(default_factory=dict)
    missed: dict[str, int] = field(default_factory=dict)
    crowded: set[str] = field(default_factory=set)
    heard: set[str | None] = field(default_factory=set)
    suspect: set[str] = field(default_factory=set)

    def discounted(self, addrs: Sequence[str]) -> bool:
        return bool(self.suspect) and provider_network(addrs) in self.suspect

    def split(
        self, new: Sequence[tuple[str, tuple[str, ...]]]
    ) -> tuple[list[tuple[str, tuple[str, ...]]], list[tuple[str, tuple[str, ...]]]]:
        """`new` as the providers to probe now and those (on suspect networks, a crowded one's too) to
        probe after the others' grace."""
        counts: dict[str, int] = {}
        for peer, addrs in new:
            network = self.of[peer] = provider_network(addrs)
            if network is not None:
                counts[network] = counts.get(network, 0) + 1
        self.crowded |= {n for n, c in counts.items() if c >= CROWD}
        self._judge()
        first = [(p, a) for p, a in new if self.of[p] not in self.suspect]
        later = [(p, a) for p, a in new if self.of[p] in self.suspect]
        return first, later

    def miss(self, peer: str) -> None:
        """`peer` had not answered when its probe's slot time was over: a miss of its network."""
        network = self.of.get(peer)
        if network is not None:
            self.missed[network] = self.missed.get(network, 0) + 1
            self._judge()

    def hear(self, peer: str) -> None:
        """`peer` answered (in its slot time or after): its network is heard for the round."""
        self.heard.add(self.of.get(peer))
        self._judge()

    def _judge(self) -> None:
        missed = {n for n, misses in self.missed.items() if misses >= SUSPECT_MISSES}
        suspect = (missed | self.crowded) - self.heard
        for network in sorted(suspect - self.suspect):
            why = f"{CROWD} or more new providers in one look" if network in self.crowded else "unanswered"
            log.warning(
                "network %s is suspect for this round (%s): its providers are probed last", network, why
            )
        for network in sorted(n for n in self.suspect - suspect if n is not None):
            # an answer clears it: said as loudly as the suspicion, which a slow honest answer on a
            # busy machine also raises (its probe held a slot `PROBE_SLOT_S` before it answered)
            log.warning("network %s answered: no longer suspect, its providers are probed as any", network)
        self.suspect = suspect


class ProbeSlots:
    """`total` probe slots; a probe of a suspect network's provider waiting for one is served after
    every other waiting probe (each kind first come, first served). A suspect network's providers are
    probed still, never dropped, with every slot when nothing else waits (a framed honest worker is
    not slowed), but a cheater's hundreds queued after one look's grace do not hold the slots for
    seconds ahead of the honest providers the next look finds (at 10,000 devices, `devices: 100` under
    200 Sybils on 5 /24s: `benchmarks/swarm_sybil.py`).

    The cheater's view: it chooses which networks its records name, an honest worker's too (framed:
    that worker's probe then waits here). What such a probe waits behind is the probes of providers on
    networks not suspect when their look listed them: fewer than `CROWD` of each network a look, and
    each network of the cheater's suspect once one of its providers held a slot `PROBE_SLOT_S`
    unanswered. So it holds a framed worker back by at most about (`CROWD` - 1) x its networks x
    `PROBE_SLOT_S` / `PROBE_SLOTS` (20 /24s: under 2 s), and never drops it."""

    def __init__(self, total: int) -> None:
        self.free = total
        self._first = trio.lowlevel.ParkingLot()
        self._later = trio.lowlevel.ParkingLot()

    def _may(self, suspect: bool) -> bool:
        return self.free > 0 and (not suspect or not self._first)

    async def acquire(self, suspect: bool) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._may(suspect) and not (self._later if suspect else self._first):
            self.free -= 1
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        try:
            while not self._may(suspect):
                await (self._later if suspect else self._first).park()
        except BaseException:
            self._wake()  # a wake-up this probe took, handed on
            raise
        self.free -= 1
        self._wake()  # more free slots than this one: the next waiting probe too

    def release(self) -> None:
        self.free += 1
        self._wake()

    def _wake(self) -> None:
        if self.free > 0:
            (self._first if self._first else self._later).unpark()
