"""Finding workers for a campaign: provider records as hints, confirmed by a live `/sark/profile` answer."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Final, final

import trio

import scheduler as sch
from node.errors import NodeError
from node.p2p.looktime import STRETCH_MAX, LookTime, machine_run_delay, within
from node.p2p.node import Node
from node.p2p.survey import NoWorkers, Shortfall, shortfall, unanswered
from node.submitter.networks import (
    PROBE_SLOT_S,
    PROBE_SLOTS,
    Networks,
    ProbeSlots,
    by_network,
)
from protocol import AdvertBody, ComputeUnit, DeviceProfile, Load, ProtocolError, Reachability, owner_of
from scheduler.verification import DeviceClass, claim_problems, device_class

log = logging.getLogger(__name__)

PROBES_IN_FLIGHT: Final = 256
"""Probes waiting at once, slots or not (each holds a stream or a dial): a bound on memory."""
GRACE_S: Final = PROBE_SLOT_S
"""How long a look waits for its providers' answers before it reads the deeper keys as well."""
GAP_LEVELS: Final = 2
"""Levels a round's later look reads below keys that are not full (`shards.below_gaps`)."""
SILENT_FIRST_S: Final = 10.0
"""How long a provider that did not answer once is neither counted nor read again: twice a look's
default 5 s (`node.cli.campaign.LOOK_S`), so one look never probes a silent provider twice."""
SILENT_FOR_S: Final = 600.0
"""The longest a provider is silent: each miss in a row doubles its span from `SILENT_FIRST_S`."""
DIG_SUSPECT: Final = 3
"""A look's `dig` once a network is suspect (`Dht.lookup`): its first levels and the two below them at
once, for the cheater filled the keys the last look read and honest workers spilled below them (at
10,000 devices, 200 Sybils on 5 /24s: 2.48 s to the 2nd worker where 2 gave 3.89 s and 4 gave 2.69 s,
`benchmarks/swarm_sybil.py`, the max of more walks at once costing what fewer walks in a row save)."""


def silent_span(last: float | None, first_s: float = SILENT_FIRST_S) -> float:
    """How long a provider that did not answer is silent now: `first_s` at its first miss, twice its
    last span (at most `SILENT_FOR_S`) after one before it (`last`)."""
    return first_s if last is None else min(SILENT_FOR_S, 2 * last)


OWN_PROBE_S: Final = 120.0
"""How long the profile probe of one of this submitter's own embedded workers is awaited, and
`initial` waits for all of them (`Discovery`'s `own`): they run in its process and have advertised
before discovery begins, so their answer comes once the process gets the CPU for it; only a broken
worker takes this long."""
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
    later round reads past the known ones to where joiners land; within a round, a look whose
    providers do not answer within `GRACE_S` is followed at once by one past them (`Discovery`).
    """

    want: int | None = None
    count: int | None = None
    timeout_s: float = 5.0
    settle_s: float = 1.0
    interval_s: float = 10.0
    probe_timeout_s: float = 3.0


@final
class Discovery:
    """Turns the DHT's view of the swarm into scheduler peer views, and remembers how to dial them.

    Strangers can place provider records for free, ahead of every honest worker (twenty keys fill a
    shard's places). So a round never lets a provider that does not answer cost it more than once:

    - a provider whose probe failed is remembered as silent: not counted, not read, not probed again
      for `SILENT_FIRST_S`, each further miss in a row doubling the span up to `SILENT_FOR_S`
      (`_silent`), as TCP backs off a retransmission;
    - a look reads provider records alone (`Node.find_providers`) and probes each provider at its
      record's addresses: the probe is the ask for its signed advert, so none is fetched from the DHT
      first. The lookup used to fetch each provider's advert (every one of k servers awaited: most
      of a look's time at 10,000 devices) and to ask a provider with none (a foreign gate keeps none;
      a Sybil may put none) itself, returning only once every such ask had answered or waited out its
      3 s: twenty advert-less stalling Sybils denied a campaign (the lab's third gate), 200 held a
      60 s look (`benchmarks/swarm_sybil.py`); now each holds one probe slot for `PROBE_SLOT_S`;
    - a look's providers get `GRACE_S` to answer; those that have not are left to answer late, and the
      round looks again at once, past every provider it has probed, so the deeper keys (where honest
      workers spilled) are read in the same round, until as many answered as the campaign needs
      (`count` / `LOOKUP_SLACK`: the spares come from later rounds, so Sybils a few to a key, as
      `node.p2p.places` leaves them, cost the round one `GRACE_S`, not one a level); `initial`'s
      rounds after the first answers end at its settle deadline; a later look also reads
      `GAP_LEVELS` below keys that are not full (Sybils that filled a key and left: their records
      expired above the honest workers that spilled under them, `shards.below_gaps`);
    - Sybils from a few networks fill every key they can, 4 of each (`node.p2p.places`), level after
      level: a network whose provider's probe held its slot a whole `PROBE_SLOT_S` unanswered, or that
      crowds a look, is suspect for the round (`Networks`), and a later look reads past its
      providers at once, deeper to begin with (`Dht.lookup` ends with the quickest walks that fill
      it), probing them after the others; their probes wait for a slot behind every other's (`ProbeSlots`)
      (200 Sybils on 5 /24s at 10,000 devices: the 2nd honest worker at 2.08 s, 1.40x the swarm
      without them; 7.47 s when each level cost a grace and a walk);
    - a look names the providers whose probes failed or held their slots unanswered (`unanswered`): a
      key most of whose providers are such is read once more in that look, by a walk that waits for
      every one of its k closest (`Dht.lookup`): hostile DHT servers ground near a key on more networks
      than its honest holders still to answer end the first walk with their Sybils alone;
    - probes dial `PROBE_SLOTS` at a time, one of each network's in turn (`by_network`, `_waves`), and
      a probe holds its slot at most `PROBE_SLOT_S`: a stalling provider holds one slot half a second,
      once, never the budget (`_confirm`); the look's grace ends when the first wave's probes have
      each answered or held their slots that long.

    The cheater's view: a Sybil sees the public shard keys and can fill their places first, answer
    nothing, stall, or answer junk; it cannot choose what the round does after `GRACE_S` (a
    constant), nor be read twice in one look: each of its keys costs one probe of one slot for half a
    second per span (7 in its first 10 minutes, then one per `SILENT_FOR_S`), and its places are
    stepped over at once. An honest worker whose probe was lost (a lossy link, a busy moment: the
    fault lab's 10 % loss and 50 ms delay, where a `--wait-peers 2` look of 60 s silenced one of two
    workers for good after one 3 s miss) is probed again after 10 s, 20 s, 40 s ..., never refused
    for the campaign.
    `initial` ends with the probes still waiting cancelled (they are neither confirmed nor silent).
    A look's `timeout_s`, the waits of its reads of the DHT and each probe's wait are the submitter's
    own seconds: those the machine kept the process waiting for a CPU are given back, up to
    `looktime.STRETCH_MAX` times them in all (`node.p2p.looktime`).

    This submitter's own embedded workers (`own`: `submit --workers N`, in its process) are waited
    for, not probed like strangers: on a starved machine (2 cores at load 8, the process given a
    fifth of a core) their answer, a dial and a handshake inside the same loop, took more than the
    probe's `probe_timeout_s`, and a provider that did not answer was silenced for `SILENT_FOR_S`,
    so the campaign found no worker at all. Their probe waits up to `OWN_PROBE_S`, they are never
    silenced, and `initial` does not end before each has answered (within `OWN_PROBE_S`: the DHT's
    lookup of its advert, too, ran past a 5 s look). A stranger cannot be taken for one: the ids
    are of keys in this submitter's own data folder, of the workers this run started
    (`node.submitter.run.running_workers`), authenticated by the connection's handshake.
    """

    def __init__(
        self,
        node: Node,
        config: DiscoveryConfig,
        *,
        exclude: frozenset[str] = frozenset(),
        own: frozenset[str] = frozenset(),
        waited: Callable[[], float] | None = None,
    ) -> None:
        self._node = node
        self._waited = waited
        """The run delay of the thread running trio (`node.p2p.looktime`); read at the first look."""
        self._config = config
        self._exclude = exclude
        self._own = own
        self._adverts: dict[str, AdvertBody] = {}
        self._count = config.count
        self._known: set[str] = set()
        """Workers a round confirmed: a later round's lookup counts only the others."""
        self._silent: dict[str, tuple[float, float]] = {}
        """Providers that did not answer -> since when (trio's clock) and for how long they are skipped
        (`SILENT_FIRST_S`, doubled by each miss in a row; forgotten once one answers)."""
        self._probing: set[str] = set()
        """Providers whose probe is under way (a later look skips them too)."""
        self._listed: set[str] = set()
        """Every provider a look listed (each was probed, or skipped as silent: it did not answer)."""
        self._late: list[sch.PeerView] = []
        """Views confirmed by probes that outlived their round (the next one takes them)."""
        self._slots = ProbeSlots(PROBE_SLOTS)
        self._in_flight = trio.CapacityLimiter(PROBES_IN_FLIGHT)
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

    def silent(self) -> frozenset[str]:
        """The providers skipped now: silent within their span, or with a probe under way."""
        return self._silenced() | self._probing

    def _silenced(self) -> frozenset[str]:
        """The providers silent within their span (their probe failed, `_silence`)."""
        now = trio.current_time()
        return frozenset(p for p, (t, span) in self._silent.items() if now - t < span)

    async def initial(self) -> tuple[sch.PeerView, ...]:
        """Look until `want` live workers answered (or the timeout), or until the count settles.

        Rounds accumulate: a worker that answered once stays a candidate even if a later round's
        probe of it timed out (on a busy machine some always do). Probes that outlive their round
        answer into the next; those still waiting at the end are cancelled.
        """
        started = trio.current_time()
        look = self._look()
        confirmed: dict[str, sch.PeerView] = {}
        stable_since = trio.current_time()
        async with trio.open_nursery() as probes:
            while True:  # a round takes the answers of probes that outlived the one before
                before = len(confirmed)
                settled = self._config.want is None and confirmed
                until = stable_since + self._config.settle_s if settled else None
                confirmed.update((view.peer_id, view) for view in await self.round(probes, until=until))
                if len(confirmed) > before:
                    stable_since = trio.current_time()
                if self._own - confirmed.keys() and trio.current_time() < started + OWN_PROBE_S:
                    await trio.sleep(0.2)
                    continue  # an own worker not heard yet: it is coming, not a stranger stalling
                if look.over():
                    break
                want = self._config.want
                if want is not None and len(confirmed) >= want:
                    break
                if want is None and confirmed and trio.current_time() - stable_since >= self._config.settle_s:
                    break
                await trio.sleep(0.2)
            probes.cancel_scope.cancel()
        log.info("discovered %d live workers", len(confirmed))
        if not confirmed:
            self.empty_cause = await self._why_none()
            log.warning("no worker found (%s): %s", self.empty_cause.code.value, self.empty_cause.detail)
        return tuple(sorted(confirmed.values(), key=lambda v: v.peer_id))

    async def _why_none(self) -> Shortfall:
        """Why `initial` confirmed nobody, by what its own looks met: the providers they listed were
        each asked. A lookup after them explains the rest; providers it lists came since, and nobody
        asked them (said as such, never as "none answered")."""
        if self._listed:
            return unanswered(len(self._listed), "any unit")
        lookup = await self._node.dht.lookup(None)
        if lookup.providers:
            return Shortfall(
                NoWorkers.NO_PROVIDER,
                f"no worker was listed while the discovery looked; a lookup after it lists "
                f"{len(lookup.providers)} peer(s), come since and not asked: run again",
            )
        return shortfall(lookup, "any unit")

    @property
    def interval_s(self) -> float:
        """The wait between two rounds of `updates`."""
        return self._config.interval_s

    async def updates(self) -> AsyncIterator[tuple[sch.PeerView, ...]]:
        """A fresh view of the swarm every interval, for churn and retries."""
        while True:
            await trio.sleep(self._config.interval_s)
            yield await self.round()

    async def round(
        self, probes: trio.Nursery | None = None, *, until: float | None = None
    ) -> tuple[sch.PeerView, ...]:
        """One round: looks (of `count` providers not confirmed, probed or silent; None: all) with a
        live profile asked of each new provider, again past them while fewer than the campaign needs
        (`count` / `LOOKUP_SLACK`) answered within `GRACE_S`. With `probes`, a probe still waiting
        when the round ends goes on there and its view joins the next round; without, the round waits
        for every probe. `until` (trio's clock): no look starts, nor waits, past it (`initial`'s
        settling: a round digging past Sybils must not hold the discovery's end)."""
        if probes is None:
            async with trio.open_nursery() as own:
                return await self._round(own, wait=True, until=until)
        return await self._round(probes, wait=False, until=until)

    async def _round(
        self, probes: trio.Nursery, *, wait: bool, until: float | None = None
    ) -> tuple[sch.PeerView, ...]:
        known = frozenset(self._known | self._exclude)
        networks = Networks()
        answers = _Answers(self._late, self._late_answer, networks)
        self._late = []
        views = answers.views
        seen: set[str] = set()
        look = self._look()

        def left() -> float:
            return look.left() if until is None else min(look.left(), max(0.0, until - trio.current_time()))

        need = None if self._count is None else -(-self._count // LOOKUP_SLACK)
        batch: list[_Probe] = []
        looks = 0
        while left() > 0:
            skip = self.silent() | seen
            try:
                listed = await self._node.find_providers(
                    timeout=left(),
                    count=self._count,
                    known=known,
                    skip=skip,
                    past_gaps=GAP_LEVELS if looks else 0,
                    discount=networks.discounted,
                    dig=DIG_SUSPECT if networks.suspect else 1,
                    unanswered=self._silenced() | answers.unanswered(),
                    run_delay=self._run_delay(),
                )
            except NodeError as exc:
                log.info("DHT lookup failed: %s", exc)
                break
            new = [(p, addrs) for p, addrs in listed.items() if p not in self._exclude and p not in seen]
            seen.update(p for p, _ in new)
            looks += 1
            if not new and (looks > 1 or self._count is None):
                break
            if not new:  # short, and nothing new: once more, below keys that are not full
                continue
            first, later = networks.split(new)
            batch = self._probe_all(probes, first, answers)
            if first:  # a look of suspect providers alone waits for none of them: the next reads on
                await _grace(batch, left)
            batch += self._probe_all(probes, later, answers, suspect=True)  # after the others' grace
            fresh = sum(1 for v in views if v.peer_id not in known)
            # The spares (`LOOKUP_SLACK`) are sought by later rounds, not here: past providers that
            # stall (Sybils a few to a key, `node.p2p.places`) each look deeper costs `GRACE_S`.
            if need is None or fresh >= need:
                break
        self._listed |= seen
        if wait:
            for probe in batch:
                await probe.over.wait()
        answers.ended = True  # an answer from now on joins the next round (`_late`)
        views = list(answers.views)
        self._known.update(v.peer_id for v in views)
        return tuple(sorted(with_claims(views), key=lambda v: v.peer_id))

    def _probe_all(
        self,
        probes: trio.Nursery,
        providers: Sequence[tuple[str, tuple[str, ...]]],
        answers: _Answers,
        *,
        suspect: bool = False,
    ) -> list[_Probe]:
        """Probe each provider (`_confirm`), each network's in turn with the others' (`by_network`), in
        waves of `PROBE_SLOTS` (`_waves`); the events each probe sets (`_Probe`). `suspect`: providers
        of suspect networks, whose probes wait for a slot behind every other's (`ProbeSlots`)."""
        ordered = by_network(providers)
        batch = [_Probe(suspect) for _ in ordered]
        self._probing.update(peer_id for peer_id, _ in ordered)
        probes.start_soon(self._waves, probes, ordered, tuple(batch), answers)
        return batch

    async def _waves(
        self,
        probes: trio.Nursery,
        ordered: Sequence[tuple[str, tuple[str, ...]]],
        batch: Sequence[_Probe],
        answers: _Answers,
    ) -> None:
        """Start `PROBE_SLOTS` probes, the next as many once those are over or held their slots
        `PROBE_SLOT_S`, and so on: the order `by_network` gave is the order they dial in (trio starts
        tasks in no set order, so one batch of them all would dial in none). A probe cancelled before
        it started is over, and not under probe."""
        started = 0
        try:
            for first in range(0, len(ordered), PROBE_SLOTS):
                wave = range(first, min(first + PROBE_SLOTS, len(ordered)))
                for i in wave:
                    probes.start_soon(self._confirm, *ordered[i], answers, batch[i])
                    started = i + 1
                with trio.move_on_after(PROBE_SLOT_S):
                    for i in wave:
                        await batch[i].over.wait()
        finally:
            for (peer_id, _), probe in zip(ordered[started:], batch[started:], strict=True):
                self._probing.discard(peer_id)
                probe.end()

    def _run_delay(self) -> Callable[[], float]:
        """The run delay a look and its probes count out (`node.p2p.looktime`), found at the first
        ask, in the thread running trio."""
        if self._waited is None:
            self._waited = machine_run_delay()
        return self._waited

    def _look(self) -> LookTime:
        """A look's `timeout_s`, counted in the submitter's own seconds."""
        return LookTime(self._config.timeout_s, self._run_delay())

    def _late_answer(self, view: sch.PeerView) -> None:
        self._late.append(view)

    def _silence(self, peer: str) -> None:
        """Remember a provider that did not answer (never a worker that answered before): silent for
        `SILENT_FIRST_S`, or twice its last span (at most `SILENT_FOR_S`) when it missed before."""
        if peer in self._known or peer in self._own:
            return
        now = trio.current_time()
        last = self._silent.get(peer)
        if last is not None and now - last[0] < last[1]:
            return  # silent already: one miss a span
        self._silent[peer] = (now, silent_span(None if last is None else last[1]))

    async def _confirm(self, peer_id: str, addrs: tuple[str, ...], views: _Answers, probe: _Probe) -> None:
        """Probe one provider: a slot while it dials, for at most `PROBE_SLOT_S`, then on without it;
        one that has not answered by then is a miss of its network (`_Answers.judge`)."""
        try:
            async with self._in_flight, self._slot(probe.suspect) as release, trio.open_nursery() as nursery:
                answered = trio.Event()
                nursery.start_soon(self._probe_then, peer_id, addrs, views, answered)
                with trio.move_on_after(PROBE_SLOT_S):
                    await answered.wait()
                release()
                views.judge(peer_id)
                probe.judged.set()
        finally:
            self._probing.discard(peer_id)
            probe.end()

    @contextlib.asynccontextmanager
    async def _slot(self, suspect: bool) -> AsyncIterator[Callable[[], None]]:
        """A probe's slot for the block, or until the `release` it yields is called."""
        await self._slots.acquire(suspect)
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                self._slots.release()

        try:
            yield release
        finally:
            release()

    async def _probe_then(
        self, peer_id: str, addrs: tuple[str, ...], views: _Answers, answered: trio.Event
    ) -> None:
        try:
            if not await self._probe(peer_id, addrs, views):
                self._silence(peer_id)
        finally:
            answered.set()

    async def _probe(self, peer_id: str, addrs: tuple[str, ...], views: _Answers) -> bool:
        """Ask a provider at `addrs` for its live profile; whether it answered with a valid one."""
        wait_s = OWN_PROBE_S if peer_id in self._own else self._config.probe_timeout_s
        ask = partial(self._node.profile_and_host_at, peer_id, addrs, timeout=wait_s * STRETCH_MAX)
        try:  # the wait in the submitter's own seconds (`looktime.within`)
            answer = await within(wait_s, self._run_delay(), ask)
        except (NodeError, ProtocolError) as exc:  # no answer, or junk (a bad signature, another's)
            log.warning("peer %s advertised but did not answer: %s", peer_id, exc)
            return False
        if answer is None:
            log.warning("peer %s advertised but its profile probe timed out", peer_id)
            return False
        advert, load, host = answer
        self._adverts[peer_id] = advert
        self._silent.pop(peer_id, None)  # it answered: a later miss starts the backoff again
        view = _view(advert, load, host)
        if view.owner.refused and peer_id not in self._known:  # said once, not every round
            log.warning("peer %s: owner_refused: %s", peer_id, view.owner.refused)
        views.add(view)
        return True


async def _grace(batch: Sequence[_Probe], left: Callable[[], float]) -> None:
    """A look's wait for its probes: `GRACE_S` for them all to end, then for the first wave's word on
    their networks, neither past the look's end (`left`: its own seconds left)."""
    with trio.move_on_after(min(GRACE_S, left())):
        for probe in batch:
            await probe.over.wait()
    with trio.move_on_after(left()):
        for probe in batch[:PROBE_SLOTS]:
            await probe.judged.wait()


@dataclass
class _Answers:
    """A round's confirmed views, each heard by the round's `networks`; once the round has `ended`, a
    probe that answers late hands its view to `late` (the discovery's, for the next round)."""

    views: list[sch.PeerView]
    late: Callable[[sch.PeerView], None]
    networks: Networks
    ended: bool = False
    answered: set[str] = field(default_factory=set)
    missed: set[str] = field(default_factory=set)

    def add(self, view: sch.PeerView) -> None:
        self.answered.add(view.peer_id)
        self.networks.hear(view.peer_id)
        if self.ended:
            self.late(view)
        else:
            self.views.append(view)

    def judge(self, peer: str) -> None:
        """`peer`'s probe held its slot as long as a probe may (or is over): unanswered, a miss."""
        if peer not in self.answered:
            self.missed.add(peer)
            self.networks.miss(peer)

    def unanswered(self) -> frozenset[str]:
        """The providers whose probes this round held their slot and had not answered (nor since)."""
        return frozenset(self.missed - self.answered)


@dataclass
class _Probe:
    """One probe's events: `judged` once it answered or held its slot `PROBE_SLOT_S` (its network's
    word given, `_Answers.judge`), `over` once it ended or will not run."""

    suspect: bool = False
    """A suspect network's provider: it waits for a slot behind the others' (`ProbeSlots`)."""
    judged: trio.Event = field(default_factory=trio.Event)
    over: trio.Event = field(default_factory=trio.Event)

    def end(self) -> None:
        self.judged.set()
        self.over.set()


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
