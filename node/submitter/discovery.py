"""Finding workers for a campaign: DHT adverts as hints, confirmed by a live `/sark/profile` answer."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import final

import trio

import scheduler as sch
from node.errors import NodeError
from node.p2p.node import Node, Peer
from node.p2p.survey import Shortfall, why_no_workers
from protocol import AdvertBody, ComputeUnit, DeviceProfile, Load, Reachability, owner_of
from scheduler.verification import DeviceClass, claim_problems, device_class

log = logging.getLogger(__name__)

PROBES_AT_ONCE = 16
"""Live-profile probes in flight at once during discovery (each dials and opens a stream)."""
LOOKUP_SLACK = 2
"""Providers a lookup asks for per device a campaign needs: some do not answer, some do not fit."""


def lookup_count(campaign: sch.Campaign) -> int | None:
    """How many providers a campaign's lookups ask for (issue 43): None (all) when a job runs on
    `devices: all`, else `LOOKUP_SLACK` x the most devices one job needs (`any` is one, each replica one).

    Also None when a job asks for more than every worker has (a unit other than `CPU (ONNX)`, or any
    requirement): the lookup reads the any-worker keys, so the first workers found may all miss the
    unit, and a short count would make a feasible job Unschedulable while fitting workers exist."""
    needs: list[int] = []
    for job in campaign.jobs:
        plain = job.spec.compute_unit == ComputeUnit.CPU_ONNX and job.require == sch.Requirements()
        if job.devices == "all" or not plain:
            return None
        needs.append((1 if job.devices == "any" else job.devices) * campaign.verify_of(job).replicas)
    return LOOKUP_SLACK * max(needs, default=1)


@dataclass(frozen=True)
class DiscoveryConfig:
    """How long to look for workers, how many to wait for, and how many providers a lookup asks for.

    `count` (None: every provider) lets a lookup stop early: a campaign that needs ten devices does not
    read the whole swarm's keys. Each round asks for `count` workers it has not confirmed yet, so a
    later round reads past the known ones to where joiners land. A round that confirms fewer live
    workers than it asked for doubles it.
    """

    want: int | None = None
    count: int | None = None
    timeout_s: float = 5.0
    settle_s: float = 1.0
    interval_s: float = 10.0
    probe_timeout_s: float = 3.0


@final
class Discovery:
    """Turns the DHT's view of the swarm into scheduler peer views, and remembers how to dial them."""

    def __init__(self, node: Node, config: DiscoveryConfig, *, exclude: frozenset[str] = frozenset()) -> None:
        self._node = node
        self._config = config
        self._exclude = exclude
        self._adverts: dict[str, AdvertBody] = {}
        self._count = config.count
        self._known: set[str] = set()
        """Workers a round confirmed: a later round's lookup counts only the others."""
        self._probes = trio.CapacityLimiter(PROBES_AT_ONCE)
        self.empty_cause: Shortfall | None = None
        """Why `initial` found no worker (None when it found some)."""

    def addrs(self, peer_id: str) -> tuple[str, ...]:
        """Every address a peer advertised, direct ones first, then its circuit addresses."""
        advert = self._adverts.get(peer_id)
        return () if advert is None else (*advert.addrs, *advert.circuit_addrs)

    def direct_addrs(self, peer_id: str) -> tuple[str, ...]:
        """A peer's advertised direct addresses (no circuit ones)."""
        advert = self._adverts.get(peer_id)
        return () if advert is None else advert.addrs

    def reachability(self, peer_id: str) -> Reachability:
        """What the peer's advert says: direct, relayed or unknown."""
        advert = self._adverts.get(peer_id)
        return Reachability.UNKNOWN if advert is None else advert.reachability

    async def initial(self) -> tuple[sch.PeerView, ...]:
        """Look until `want` live workers answered (or the timeout), or until the count settles.

        Rounds accumulate: a worker that answered once stays a candidate even if a later round's
        probe of it timed out (on a busy machine some always do).
        """
        deadline = trio.current_time() + self._config.timeout_s
        confirmed: dict[str, sch.PeerView] = {}
        stable_since = trio.current_time()
        while trio.current_time() < deadline:
            before = len(confirmed)
            confirmed.update((view.peer_id, view) for view in await self.round())
            if len(confirmed) > before:
                stable_since = trio.current_time()
            want = self._config.want
            if want is not None and len(confirmed) >= want:
                break
            if want is None and confirmed and trio.current_time() - stable_since >= self._config.settle_s:
                break
            await trio.sleep(0.2)
        log.info("discovered %d live workers", len(confirmed))
        if not confirmed:
            self.empty_cause = await why_no_workers(self._node)
            log.warning("no worker found (%s): %s", self.empty_cause.code.value, self.empty_cause.detail)
        return tuple(sorted(confirmed.values(), key=lambda v: v.peer_id))

    async def updates(self) -> AsyncIterator[tuple[sch.PeerView, ...]]:
        """A fresh view of the swarm every interval, for churn and retries."""
        while True:
            await trio.sleep(self._config.interval_s)
            yield await self.round()

    async def round(self) -> tuple[sch.PeerView, ...]:
        """One lookup (of `count` providers not confirmed before, None: all): adverts from the DHT, then
        a live profile from each (concurrently)."""
        known = frozenset(self._known | self._exclude)
        try:
            peers = await self._node.find_workers(
                None, timeout=self._config.timeout_s, count=self._count, known=known
            )
        except NodeError as exc:
            log.info("DHT lookup failed: %s", exc)
            return ()
        views: list[sch.PeerView] = []
        async with trio.open_nursery() as nursery:
            for peer in peers:
                if peer.peer_id not in self._exclude:
                    nursery.start_soon(self._confirm, peer, views)
        offered = sum(1 for p in peers if p.peer_id not in known)
        fresh = sum(1 for v in views if v.peer_id not in known)
        if self._count is not None and fresh < self._count <= offered:
            self._count *= 2  # providers that did not answer: the next round reads further down the keys
        self._known.update(v.peer_id for v in views)
        return tuple(sorted(with_claims(views), key=lambda v: v.peer_id))

    async def _confirm(self, peer: Peer, views: list[sch.PeerView]) -> None:
        async with self._probes:  # a few at a time: each probe's deadline is not spent waiting for CPU
            await self._probe(peer, views)

    async def _probe(self, peer: Peer, views: list[sch.PeerView]) -> None:
        with trio.move_on_after(self._config.probe_timeout_s) as scope:
            try:
                advert, load, host = await self._node.profile_and_host(
                    peer, timeout=self._config.probe_timeout_s
                )
            except NodeError as exc:
                log.warning("peer %s advertised but did not answer: %s", peer.peer_id, exc)
                return
            self._adverts[peer.peer_id] = advert
            view = _view(advert, load, host)
            if view.owner.refused and peer.peer_id not in self._known:  # said once, not every round
                log.warning("peer %s: owner_refused: %s", peer.peer_id, view.owner.refused)
            views.append(view)
        if scope.cancelled_caught:
            log.warning("peer %s advertised but its profile probe timed out", peer.peer_id)


def _view(advert: AdvertBody, load: Load, host: str = "") -> sch.PeerView:
    """A verified advert as the scheduler reads it; its owner statement checked against the peer id
    that signed it (`protocol.owner_of`): placement never places a peer whose statement is refused."""
    return sch.PeerView(
        peer_id=advert.peer_id,
        profile=advert.profile,
        load=load,
        reachability=advert.reachability,
        age_s=max(0.0, time.time() - advert.issued_at),
        host=host,
        owner=owner_of(advert.owner, advert.peer_id),
    )


def home_class(profile: DeviceProfile) -> DeviceClass:
    """The class a peer's claims are compared within: its first usable unit's (CPU (ONNX) if none)."""
    units = profile.usable_units()
    return device_class(profile, units[0] if units else ComputeUnit.CPU_ONNX)


def claims_of(profiles: Sequence[DeviceProfile]) -> list[tuple[str, ...]]:
    """Why each advertised device is not believed (`scheduler.verification.claims`): against physics,
    and against the other profiles of its class among these."""
    classes = [home_class(p) for p in profiles]
    found = []
    for i, (profile, cls) in enumerate(zip(profiles, classes, strict=True)):
        peers = [o for j, (o, c) in enumerate(zip(profiles, classes, strict=True)) if c == cls and j != i]
        found.append(tuple(claim_problems(profile, peers)))
    return found


def with_claims(views: Sequence[sch.PeerView]) -> list[sch.PeerView]:
    """Each view marked with why its advertised device is not believed, against the other peers of
    its class found in the same round (`claims_of`)."""
    marked = []
    for view, problems in zip(views, claims_of([v.profile for v in views]), strict=True):
        if problems:
            log.warning("peer %s: claim_unverified: %s", view.peer_id, "; ".join(problems))
        marked.append(dataclasses.replace(view, claim=problems))
    return marked
