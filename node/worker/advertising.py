"""The worker's advertising: its signed advert in the DHT, `/sark/profile`, relay slots, gates that come back.

`serve_worker` advertises a device into a `Node`, keeps the advert fresh and never returns. A worker that
leaves calls `Advertised.withdraw`: no more republishing, and a last advert that expires within seconds.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final, final

import trio

from node.p2p.dht import provider_bound
from node.p2p.gates import Links, backoff
from node.p2p.host import peer_of
from node.p2p.kadpatch import become_server, forget_failed_dials
from node.p2p.node import Node, check_reachability
from node.p2p.reach import throwaway_reach_handler
from node.p2p.relay import Reserved, circuit_gate, reserve_spread, short_of_slots
from node.p2p.shards import large_swarm
from node.p2p.wire import Channel, Handler
from protocol import (
    DOMAIN_ADVERT,
    MAX_ADVERT_ADDRS,
    MAX_ADVERT_CIRCUITS,
    PROFILE,
    REACH,
    AdvertBody,
    DeviceProfile,
    Envelope,
    Load,
    OwnerStatement,
    ProfileReply,
    Reachability,
)
from protocol.records import seal

if TYPE_CHECKING:
    from trio_typing import TaskStatus

log = logging.getLogger(__name__)

REANNOUNCE_JITTER: Final = 0.25
"""Each refresh comes after the period less up to this share of it, drawn anew (issue 43): workers that
started together spread their announcements over the period instead of striking the servers at once."""
UNKNOWN_RECHECK_S: Final = 1.0
"""First pause before an "unknown" reachability is checked again (it doubles up to the republish timer)."""
GATE_CHECK_S: Final = 2.0
"""How often a worker checks that its gates are still connected (issue 6: a restarted gate)."""
LEAVING_ADVERT_S: Final = 2.0
"""The lifetime of a leaving worker's adverts: the last one put replaces the servers' copies, then expires."""
WITHDRAW_S: Final = 1.5
"""How long a leaving worker waits for its last advert to be put."""
FULL_PASS_S: Final = 600.0
"""How long a gate whose relay was found full is passed over as a NAT'd worker's replacement for another
full one: the slots' own TTL. Swapped at each retry instead, every device short of slots would churn the
gates' connections every 30 s while every relay is full."""
_DRAW: Final = random.SystemRandom()
"""The order a worker tries its gates for relay slots in (`reserve_spread`): the operating system's."""


async def _not_advertised() -> None:
    """`Advertised.withdraw` of a worker that never advertised."""


@dataclass(frozen=True)
class Advertised:
    """What `serve_worker` reports when its first advert is out."""

    peer_id: str
    addrs: tuple[str, ...]
    circuit_addrs: tuple[str, ...]
    reachability: Reachability
    refused_by: tuple[str, ...] = ()
    """Gates that did not keep our provider records: submitters using only those cannot find us."""
    withdraw: Callable[[], Awaitable[None]] = _not_advertised
    """Leave: stop republishing and put a last advert that expires within `LEAVING_ADVERT_S` (bounded by
    `WITHDRAW_S`); the provider records lapse with their TTL, and `/sark/profile` stops with the host."""


@final
class _Advertiser:
    """Signs our advert with a seq that grows across restarts (milliseconds since the epoch)."""

    def __init__(
        self,
        node: Node,
        profile: Callable[[], DeviceProfile],
        load: Callable[[], Load],
        owner: OwnerStatement | None = None,
    ) -> None:
        self._node = node
        self._profile = profile
        self._load = load
        self._owner = owner
        self._seq = int(time.time() * 1000)
        self.addrs: tuple[str, ...] = ()
        self.circuit_addrs: tuple[str, ...] = ()
        self.refusals: dict[str, str] = {}
        """Gate -> why it refused our last reservation there (each said at WARNING once in a row)."""
        self.reachability = Reachability.UNKNOWN
        self.current: Envelope | None = None
        self.leaving = False

    def sign(self) -> Envelope:
        now = time.time()
        lifetime = LEAVING_ADVERT_S if self.leaving else self._node.config.record_ttl_s
        self._seq = max(self._seq + 1, int(now * 1000))
        body = AdvertBody(
            peer_id=self._node.host.peer_id,
            seq=self._seq,
            issued_at=now,
            expires_at=now + lifetime,
            addrs=self.addrs,
            circuit_addrs=self.circuit_addrs,
            reachability=self.reachability,
            profile=self._profile(),
            load=self._load(),
            owner=self._owner,
        )
        self.current = seal(body, DOMAIN_ADVERT, self._node.host.private_key)
        return self.current

    async def serve_profile(self, channel: Channel) -> None:
        await channel.receive()
        await channel.send(ProfileReply(advert=self.sign(), load=self._load()))
        await channel.close()


async def _place(node: Node, advertiser: _Advertiser, askers: Sequence[str] = ()) -> None:
    """Decide reachability; unless a dial-back reached us, hold relay slots at `RELAY_GATES` of our gates
    and advertise the circuits.

    "direct" only when a dial-back reached us and we advertise an address, "relayed" only when
    dial-backs were tried and failed, "unknown" otherwise (checked again at each republish while it
    stays so). `askers`: sark peers that asked us for a dial-back, so can dial us back in turn (a
    foreign gate serves no `/sark/reach`).
    """
    advertiser.addrs = tuple(node.host.addrs()[:MAX_ADVERT_ADDRS])  # a wildcard expanded, ranked (P29)
    if not node.gates:
        return
    verdict = await check_reachability(node, askers)
    if verdict.addr:  # where a gate reached us (what it observes of us): advertised too
        node.host.reached_at(verdict.addr)
        advertiser.addrs = tuple(node.host.addrs()[:MAX_ADVERT_ADDRS])
    if verdict.reachability == Reachability.DIRECT and advertiser.addrs:
        advertiser.reachability = Reachability.DIRECT
        log.info("directly reachable: %s", verdict.detail)
        return
    log.info("reachability %s (%s); reserving relay slots", verdict.reachability, verdict.detail)
    circuits = (await _reserve(node, advertiser, node.gates)).circuits
    if verdict.reachability == Reachability.RELAYED and not circuits:
        log.warning(
            "unreachable: no dial-back reached us and no gate gave us a relay slot, so no submitter can "
            "dial this worker; give it a gate with a free slot (each refusal above says why)"
        )
    relayed = verdict.reachability == Reachability.RELAYED and circuits
    advertiser.reachability = Reachability.RELAYED if relayed else Reachability.UNKNOWN


async def _reserve(node: Node, advertiser: _Advertiser, gates: Sequence[str], again: str = "") -> Reserved:
    """Hold relay slots at `RELAY_GATES` of `gates` (`reserve_spread`: a random order, the next gate when
    one refuses), keeping those held; advertise the circuits and log each refusal. Returns what it got."""
    got = await reserve_spread(gates, advertiser.circuit_addrs, node.host.reserve_relay, _DRAW)
    for gate, why in got.refused:  # a refusal said once at WARNING; asked again, the same one is INFO
        level = logging.INFO if advertiser.refusals.get(gate) == why else logging.WARNING
        log.log(level, "relay reservation on %s failed%s: %s", gate, again, why)
    advertiser.refusals = dict(got.refused)
    advertiser.circuit_addrs = got.circuits[:MAX_ADVERT_CIRCUITS]
    return got


async def serve_worker(
    node: Node,
    profile: DeviceProfile,
    load: Callable[[], Load],
    *,
    handlers: Mapping[str, Handler] | None = None,
    live: Callable[[], DeviceProfile] | None = None,
    owner: OwnerStatement | None = None,
    task_status: TaskStatus[Advertised] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Advertise this device and keep the advert fresh; serve `/sark/profile` and `handlers`. Never returns.

    `handlers` (e.g. `/sark/negotiate/1.0.0`) run with no overall deadline and the configured per-peer
    cap; they enforce their own read deadlines. `task_status.started(Advertised)` after the first advert.
    The worker also serves `/sark/reach` (dial-backs from a throwaway host) for peers whose gate does not.
    `live` gives the profile as it is now (declared model servers are probed again); each advert and
    `/sark/profile` answer carries it, and `owner`: its owner's statement (`protocol.owner`), if any.
    """
    advertiser = _Advertiser(node, live or (lambda: profile), load, owner)
    node.host.set_handler(PROFILE, advertiser.serve_profile, deadline=10.0)
    for protocol, handler in (handlers or {}).items():
        cap = node.config.max_streams_per_peer
        node.host.set_handler(protocol, handler, max_per_peer=cap, deadline=math.inf)
    askers: list[str] = []
    republish = trio.Event()

    def wake() -> None:
        republish.set()

    def asked(peer_id: str) -> None:  # a sark peer that can dial us back in turn
        askers[:] = [peer_id, *(p for p in askers if p != peer_id)][:8]
        if advertiser.reachability == Reachability.UNKNOWN:
            wake()

    async def withdraw() -> None:
        advertiser.leaving = True
        with trio.move_on_after(WITHDRAW_S):
            await node.dht.put_advert(advertiser.sign())

    node.host.set_handler(REACH, throwaway_reach_handler(asked), max_per_peer=1, deadline=15.0)
    await _place(node, advertiser)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_keep_gates, node, advertiser, wake)
        started, refused = False, tuple[str, ...]()
        while not advertiser.leaving:
            republish = trio.Event()
            refused = await _publish(node, advertiser, profile, refused)
            await _serve_if_due(node, advertiser)
            if not started:
                started = True
                a = advertiser
                task_status.started(
                    Advertised(node.host.peer_id, a.addrs, a.circuit_addrs, a.reachability, refused, withdraw)
                )
            await _until_republish(node, advertiser, askers, republish)
        nursery.cancel_scope.cancel()  # left: nothing more to keep fresh


async def _serve_if_due(node: Node, advertiser: _Advertiser) -> None:
    """Become a DHT server where the configuration says (issue 43): "reachable" once a dial-back reached
    us; "auto" (the default) once one did and our any-worker key lies deep in its tree (a large swarm,
    `large_swarm`). A worker behind NAT never serves: nobody could open a kad stream to it."""
    if node.kad is None or node.kad.server or advertiser.reachability != Reachability.DIRECT:
        return
    placed = node.dht.placed.get(None)
    mode = node.config.dht_mode
    if mode == "reachable" or (mode == "auto" and placed is not None and large_swarm(placed)):
        log.info("serving the DHT (dht_mode %s)", mode)
        await become_server(node.kad, provider_bound)  # lookups and records spread over the reachable


async def _until_republish(
    node: Node, advertiser: _Advertiser, askers: Sequence[str], republish: trio.Event
) -> None:
    """Wait for the next republish: the timer, a wake-up, or an "unknown" reachability that resolved.

    While nobody has dialled us back ("unknown": workers that started together found no sark peer
    to ask), the check is tried again after 1 s, 2 s, 4 s, ... rather than only at the next timer.
    """
    period = node.config.reannounce_interval()
    deadline = trio.current_time() + period * (1 - REANNOUNCE_JITTER * random.random())
    pause = UNKNOWN_RECHECK_S
    while trio.current_time() < deadline:
        with trio.move_on_after(min(pause, deadline - trio.current_time())):
            await republish.wait()
        if advertiser.reachability == Reachability.UNKNOWN:
            await _place(node, advertiser, askers)
            if advertiser.reachability != Reachability.UNKNOWN:
                return
        if republish.is_set():
            return
        pause *= 2


async def _publish(
    node: Node, advertiser: _Advertiser, profile: DeviceProfile, refused_before: tuple[str, ...]
) -> tuple[str, ...]:
    """Publish our advert and provider records; return the gates that do not keep them (logged on change)."""
    try:
        units, circuits = profile.usable_units(), advertiser.circuit_addrs
        refused = await node.dht.publish(advertiser.sign(), units, gates=node.gates, circuits=circuits)
    except Exception:  # a task boundary: a failed announce is retried on the next tick
        log.warning("advert publish failed", exc_info=True)
        return refused_before
    for gate in refused:
        if gate not in refused_before:
            log.warning("gate %s did not keep our provider records (refused or dropped them)", gate)
    return refused


async def _keep_gates(node: Node, advertiser: _Advertiser, wake: Callable[[], None]) -> None:
    """Notice gates that went away, replace them, hold `RELAY_GATES` slots, republish. Never returns.

    The worker holds connections to `GATE_LINKS` of its gates, the others spares (`node.p2p.gates.Links`):
    a gate lost is replaced by the next spare that answers (itself once back, tried last). A gate that
    restarts forgets our relay reservation and its DHT copy of our advert: until we reserve and publish
    again, nobody can reach a relayed worker through it. A lost gate's slot is replaced at another gate
    held, in a random order as at the start. While short of slots, the gates held are asked again with
    `backoff`; a gate whose relay is full is exchanged for a spare (`_swap_full`).
    """
    links = Links(node.config.gates, node.gates, _DRAW)
    short = int(_short_of_slots(advertiser, links.held))  # reservations in a row that left us short
    again_at = trio.current_time() + backoff(short) if short else float("inf")  # when to ask again
    found_full: dict[str, float] = {}  # gate -> trio time its relay last refused us as full
    while True:
        await trio.sleep(GATE_CHECK_S)  # a timer: libp2p has no "connection closed" event we can await
        lost = links.lose(g for g in links.held if not node.host.is_connected(peer_of(g)))
        if lost:
            log.warning("lost gates %s", ", ".join(sorted(lost)))
            kept = (c for c in advertiser.circuit_addrs if circuit_gate(c) not in lost)
            advertiser.circuit_addrs = tuple(kept)
        joined = await _rejoin(node, links) if links.due(trio.current_time()) else []
        node.gates = tuple(links.held)
        retry = trio.current_time() >= again_at
        before = advertiser.circuit_addrs
        swapped: list[str] = []
        if (lost or joined or retry) and advertiser.reachability != Reachability.DIRECT:
            got = await _reserve(node, advertiser, links.held, " again" if joined or retry else "")
            if got.full and _short_of_slots(advertiser, links.held):  # a full relay: a spare's instead
                swapped = await _swap_full(node, links, got.full, found_full)
                if swapped:
                    await _reserve(node, advertiser, links.held, " at a spare gate")
            # short (a gate held refused or did not answer: full, restarted, a lost reply): every gate
            # held is asked again after `backoff` (1 s to 30 s), not once per check, nor never
            short = short + 1 if _short_of_slots(advertiser, links.held) else 0
            again_at = trio.current_time() + backoff(short) if short else float("inf")
            # reachability stays as the dial-backs left it: "unknown" is never turned into a guess
        if lost or joined or swapped or advertiser.circuit_addrs != before:  # one republish, after all
            wake()  # never a relayed advert without its circuit, nor a new circuit left unadvertised


def _short_of_slots(advertiser: _Advertiser, gates: Sequence[str]) -> bool:
    """A worker not directly reachable that holds fewer relay slots than it wants of `gates`."""
    return advertiser.reachability != Reachability.DIRECT and short_of_slots(advertiser.circuit_addrs, gates)


async def _swap_full(
    node: Node, links: Links, full: Sequence[str], found_full: dict[str, float]
) -> list[str]:
    """Hold spares in place of the held gates whose relay was `full` (`Links.swap`), passing over those
    found full within `FULL_PASS_S`; leave the full ones, one line each; bootstrap the DHT at those joined.
    Returns the spares joined. A stranger that fills a gate's relay (with keys that each hold a
    connection) moves the NAT'd workers that have spares to them, rather than leaving them unreachable."""
    now = trio.current_time()
    found_full.update(dict.fromkeys(full, now))
    passed = {g for g, at in found_full.items() if now - at < FULL_PASS_S}
    swapped: list[str] = []
    for gate in full:
        if gate not in links.held:
            continue
        spare = await links.swap(gate, partial(_connect_gate, node), passed)
        if spare is None:
            break  # no spare answered: the next ones would meet the same spares
        swapped.append(spare)
        await node.host.disconnect(peer_of(gate))
        log.warning("gate %s has no free relay slot: joined gate %s in its place", gate, spare)
    node.gates = tuple(links.held)
    await _bootstrap_at(node, swapped)
    return swapped


async def _connect_gate(node: Node, gate: str) -> None:
    forget_failed_dials(node.host, peer_of(gate))  # libp2p's negative cache of a gate that was down
    await node.host.connect(gate, timeout=5.0)


async def _bootstrap_at(node: Node, gates: Sequence[str]) -> None:
    """Bootstrap the DHT at gates just joined (none: nothing)."""
    if gates and node.kad is not None:
        try:
            await node.kad.bootstrap([peer_of(g) for g in gates])
        except Exception:  # a task boundary: the next publish still reaches the gates we know
            log.warning("DHT bootstrap after a gate joined failed", exc_info=True)


async def _rejoin(node: Node, links: Links) -> list[str]:
    """Connect spares until `GATE_LINKS` gates are held (`Links.fill`), one line for what changed;
    bootstrap the DHT at those joined. Returns them."""
    joined, causes = await links.fill(partial(_connect_gate, node), trio.current_time())
    if joined:
        log.warning(
            "joined gate%s %s%s",
            "s" if len(joined) > 1 else "",
            ", ".join(joined),
            f"; not joined: {'; '.join(causes)}" if causes else "",
        )
    elif causes:  # short since a gate was lost: said once, then the spares tried again quietly
        level = logging.WARNING if links.failed_fills == 1 else logging.INFO
        log.log(level, "no spare gate answered: %s; tried again while this worker runs", "; ".join(causes))
    await _bootstrap_at(node, joined)
    return joined


__all__ = ["Advertised", "serve_worker"]
