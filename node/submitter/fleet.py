"""A fleet job's members on one clock: the seed and start instant, each member's deal and clock offset.

`FleetBook` belongs to the campaign loop. The first offer of a fleet job fixes its seed (drawn here:
the pure scheduler takes randomness as data) and its start instant, `FLEET_LEAD_S` after that offer
on the submitter's wall clock; every member's offer then carries its deal of the one schedule
(`scheduler.deal`); a member offered late (another declined or lost the offer first) is dealt only the
sends planned at least `OFFER_MARGIN_S` after its offer (`scheduler.state.fleet.still_ahead`): a replacement
never sends a planned time that has passed. Before each member's offer, `measure_offset` probes the
worker's clock over `/sark/clock/1.0.0` (`CLOCK_ROUNDS` ping-pong rounds, the tightest round's
midpoint and its bound); a worker that cannot be probed gets offset 0 and no bound, which its deal says.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final, final

import trio

import scheduler as sch
from node.errors import NodeError
from node.p2p.host import Host
from node.p2p.wire import Channel
from protocol import CLOCK, ClockGet, ClockReply, FleetDeal, ProtocolError, TaskSpec
from protocol.fleet import CLOCK_ROUNDS
from scheduler.state import still_ahead

log = logging.getLogger(__name__)

FLEET_LEAD_S: Final = 5.0  # first offer to start instant: clock probes, offers, commits, dispatches
PROBE_S: Final = 3.0  # the whole clock probe of one member
OFFER_MARGIN_S: Final = 1.0  # an offer to its dispatch: sends planned sooner are not dealt to a late member

OpenClock = Callable[[str, tuple[str, ...]], Awaitable[Channel]]


@dataclass(frozen=True)
class _Fleet:
    seed: int
    start_at: float


@final
class FleetBook:
    """Each fleet job's seed and start instant, fixed at its first offer, and its members' deals."""

    def __init__(self, campaign: sch.Campaign, open_clock: OpenClock | None = None) -> None:
        self._campaign = campaign
        self._open_clock = open_clock
        self._fleets: dict[int, _Fleet] = {}

    def is_fleet(self, job_index: int) -> bool:
        """Whether the job drives its endpoint as a fleet."""
        return sch.is_fleet(self._campaign.jobs[job_index].spec.generate)

    def deal(self, task_id: str, job_index: int, tasks: Sequence[sch.TaskView], now: float) -> FleetDeal:
        """The member's deal (offset unmeasured): members are the job's tasks in task order."""
        spec = self._campaign.jobs[job_index].spec.generate
        assert spec is not None
        fleet = self._fleets.get(job_index)
        if fleet is None:
            seed = spec.fleet_seed if spec.fleet_seed is not None else random.SystemRandom().randrange(2**63)
            fleet = self._fleets[job_index] = _Fleet(seed, now + FLEET_LEAD_S)
        members = [t.task_id for t in tasks if t.job_index == job_index]
        dealt = sch.deal(spec, len(members), members.index(task_id), seed=fleet.seed, start_at=fleet.start_at)
        return still_ahead(dealt, now, OFFER_MARGIN_S)

    async def measured(self, deal: FleetDeal, peer_id: str, addrs: tuple[str, ...]) -> FleetDeal:
        """The deal with the worker's clock offset and its bound, when the worker answers the probe."""
        if self._open_clock is None:
            return deal
        rounds: list[sch.ClockRound] = []
        with trio.move_on_after(PROBE_S):
            try:
                async with await self._open_clock(peer_id, addrs) as channel:
                    await probe(channel, rounds)
            except (NodeError, ProtocolError) as exc:
                log.info("clock probe of %s: %s", peer_id, exc)
        found = sch.clock_offset(rounds)
        if found is None:
            return deal
        return deal.with_(offset_s=found[0], offset_bound_s=found[1])


async def probe(channel: Channel, rounds: list[sch.ClockRound]) -> None:
    """`CLOCK_ROUNDS` ping-pong rounds on one stream, each kept as it completes."""
    for n in range(CLOCK_ROUNDS):
        sent = time.time()
        await channel.send(ClockGet(round=n))
        reply = await channel.receive()
        received = time.time()
        if not isinstance(reply, ClockReply) or reply.round != n or not math.isfinite(reply.now):
            raise NodeError(f"the clock probe was answered with {reply.kind}")
        rounds.append(sch.ClockRound(sent, reply.now, received))


def with_deal(spec: TaskSpec, deal: FleetDeal) -> TaskSpec:
    """The task spec with the member's deal in its generate block (for the offer to that member)."""
    assert spec.generate is not None
    return spec.with_(generate=spec.generate.with_(deal=deal))


async def open_clock(host: Host, peer_id: str, addrs: tuple[str, ...]) -> Channel:
    """A `/sark/clock/1.0.0` stream to the worker with the node's host."""
    return await host.open_channel(peer_id, CLOCK, addrs=addrs, timeout=PROBE_S, read_timeout=PROBE_S)


__all__ = ["FLEET_LEAD_S", "FleetBook", "open_clock", "probe", "with_deal"]
