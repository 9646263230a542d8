"""A fleet member's share of a shared schedule, sent on the submitter's clock (`protocol.FleetDeal`).

The deal names the common start instant in the submitter's time base and this worker's measured
clock offset (worker minus submitter); the instant on this worker's wall clock is `start_at +
offset_s`, mapped once onto trio's monotonic clock. The deal is sent by the one request loop,
`drivers.endpoint.sender` (`of_deal`): open loop, each planned request at its planned time (never early; late
when the client falls behind, which the records show); closed loop, the deal's slots in flight until
`duration_s` after the instant. Each record's `planned_s` and `started_s` are seconds after the
instant: the submitter's time base.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

import trio

from protocol import FleetDeal

if TYPE_CHECKING:
    pass

MAX_INFLIGHT: Final = 1024


def start_instant(deal: FleetDeal) -> float:
    """The deal's start instant on trio's clock: the submitter's instant plus this worker's offset."""
    return trio.current_time() + (deal.start_at + deal.offset_s - time.time())


__all__ = ["start_instant"]
