"""Fleet load on the wire: one member's deal of a shared arrival schedule, and the clock probe.

A fleet job (`fleet: N`) drives one endpoint from N workers on one clock: the submitter makes one
arrival schedule, deals it among the members and starts them all at one instant of its own clock.
Each member's offer carries its `FleetDeal`: the start instant in the submitter's time base, the
member's clock offset as the submitter measured it (`ClockGet` / `ClockReply` rounds on
`/sark/clock/1.0.0`), and the planned send times of its share. The member converts the instant
with the offset, sends each request at its planned time, and reports planned and actual send
times (`RequestRecord.planned_s`, `started_s`) in seconds after the start instant, so every member's
records share the submitter's time base.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from protocol.base import Value

CLOCK: Final = "/sark/clock/1.0.0"
CLOCK_ROUNDS: Final = 8
MAX_FLEET: Final = 256
MAX_DEALT: Final = 5_000  # planned sends per member: a member keeps at most MAX_RECORDS records


class FleetDeal(Value):
    """One member's share of a fleet's schedule, as the offer to that member carries it.

    Attributes:
        size: members in the fleet.
        member: this member's index (0 .. size - 1).
        seed: the seed the whole fleet's schedule was made from.
        start_at: the common start instant, seconds since the epoch on the submitter's clock.
        offset_s: this worker's clock minus the submitter's, as measured (0 when not measured).
        offset_bound_s: half the tightest probe round's round trip (None: not measured).
        planned_s: open loop: this member's send times, seconds after `start_at`.
        prompts: the index into the spec's prompts of each planned send (cycled).
        slots: closed loop: this member's in-flight slots (0 for an open loop).
    """

    size: int = Field(ge=1, le=MAX_FLEET)
    member: int = Field(ge=0, lt=MAX_FLEET)
    seed: int = Field(ge=0, lt=2**64)
    start_at: float = Field(gt=0)
    offset_s: float = 0.0
    offset_bound_s: float | None = Field(default=None, ge=0)
    planned_s: tuple[float, ...] = Field(default=(), max_length=MAX_DEALT)
    prompts: tuple[int, ...] = Field(default=(), max_length=MAX_DEALT)
    slots: int = Field(default=0, ge=0, le=1024)


class ClockGet(Value):
    """A clock probe round: the submitter asks for the worker's clock (`/sark/clock/1.0.0`)."""

    kind: Literal["clock_get"] = "clock_get"
    round: int = Field(ge=0, lt=CLOCK_ROUNDS)


class ClockReply(Value):
    """The worker's wall clock (seconds since the epoch) when it read the round's `ClockGet`."""

    kind: Literal["clock"] = "clock"
    round: int = Field(ge=0, lt=CLOCK_ROUNDS)
    now: float


__all__ = ["CLOCK", "CLOCK_ROUNDS", "MAX_FLEET", "ClockGet", "ClockReply", "FleetDeal"]
