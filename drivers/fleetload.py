"""A fleet member's share of a shared schedule, sent on the submitter's clock (`protocol.FleetDeal`).

The deal names the common start instant in the submitter's time base and this worker's measured
clock offset (worker minus submitter); the instant on this worker's wall clock is `start_at +
offset_s`, mapped once onto trio's monotonic clock. Open loop: each planned request is sent at its
planned time (never early; late when the client falls behind, which the records show). Closed loop:
the deal's slots keep that many requests in flight until `duration_s` after the instant. Each
record's `planned_s` and `started_s` are seconds after the instant: the submitter's time base.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

import trio

from protocol import FleetDeal, Prompt

if TYPE_CHECKING:
    from drivers.endpoint import _Load

MAX_INFLIGHT: Final = 1024


def start_instant(deal: FleetDeal) -> float:
    """The deal's start instant on trio's clock: the submitter's instant plus this worker's offset."""
    return trio.current_time() + (deal.start_at + deal.offset_s - time.time())


async def fleet_open_loop(load: _Load, deal: FleetDeal) -> None:
    """Send each dealt request at its planned time after the start instant, none past the deadline."""
    prompts = load.spec.prompts
    inflight = trio.Semaphore(MAX_INFLIGHT)
    async with trio.open_nursery() as nursery:
        for planned, index in zip(deal.planned_s, deal.prompts, strict=True):
            await trio.sleep_until(min(load.start + planned, load.deadline))
            if trio.current_time() >= load.deadline:
                return
            await inflight.acquire()
            nursery.start_soon(_released, load, inflight, prompts[index % len(prompts)], planned)


async def _released(load: _Load, inflight: trio.Semaphore, prompt: Prompt, planned: float) -> None:
    try:
        await load.one(prompt, planned)
    finally:
        inflight.release()


async def fleet_closed_loop(load: _Load, deal: FleetDeal) -> None:
    """From the start instant, `deal.slots` requests in flight until the run's duration ends."""
    await trio.sleep_until(min(load.start, load.deadline))
    prompts = load.prompts()

    async def slot() -> None:
        for prompt in prompts:
            await load.one(prompt)

    async with trio.open_nursery() as nursery:
        for _ in range(deal.slots):
            nursery.start_soon(slot)


__all__ = ["fleet_closed_loop", "fleet_open_loop", "start_instant"]
