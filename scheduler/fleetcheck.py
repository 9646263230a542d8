"""A fleet member's records checked against the deal the submitter signed for it, before anything shows them.

`check_figures` re-derives a member's figures from its records; it cannot tell whether those records
are requests the member was dealt. This check can: the submitter made the deal (`scheduler.deal`)
and signed it into the member's offer, so each record of an open loop must be one of the deal's
planned sends, once, sent at its planned time. Refused as `invalid`, naming the field, the worker's
value and the bound:

- more records than the deal has planned sends (open loop);
- a record whose `planned_s` is not a planned time of the deal (within `PLAN_TOL_S`), or none at all
  (a closed loop's records have none: its deal has slots, not times);
- two records of one planned send (a duplicate: each dealt request goes once);
- a record sent (`started_s`) before its planned time less the member's clock bound, or after it plus
  the clock bound plus `LATE_SLACK_S`; a closed loop's records after `duration_s` plus both.

A member result without a known deal (its lease reclaimed after a submitter restart: the deal is not
stored) is refused `internal`: it cannot be checked, and says nothing about the member's honesty.
The merged fleet row is made only from results that pass, so it counts verified, dealt requests.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import Final

from protocol import FailureReason, FleetDeal, GenerateSpec, Measurement, RequestRecord, TaskSpec
from protocol.clientload import SATURATED_LAG_MS
from scheduler.figures import Refusal
from scheduler.fleet import is_fleet

PLAN_TOL_S: Final = 1e-9
"""A planned time travels as a float64 both ways (msgpack doubles): an honest record echoes it to the bit;
a nanosecond absorbs another platform's last digit, far below the microseconds between two arrivals."""
EARLY_TOL_S: Final = 1e-6
"""An honest member never sends early (it sleeps until the planned instant); this absorbs the rounding of
`start + planned - start` on its monotonic clock."""
LATE_SLACK_S: Final = 1.0
"""How far behind its schedule a member's send may be, beyond its clock bound: 100 x the lag that flags a
saturated client (`SATURATED_LAG_MS`, 10 ms), so an honest client that falls behind is shown saturated
long before it is refused, while a member that fires missed sends at once (seconds late) is refused."""
assert LATE_SLACK_S * 1e3 >= 100 * SATURATED_LAG_MS


def check_fleet(m: Measurement, spec: TaskSpec, signed: TaskSpec | None) -> Measurement | Refusal:
    """The measurement unchanged when its records fit the member's deal (or the task is no fleet
    member), else why it is refused.

    Args:
        m: a measurement whose figures `check_figures` derived again.
        spec: the task's spec as the campaign gave it.
        signed: the spec of the offer this attempt answered, with the member's deal (a lease reclaimed
            after a restart: the offer spec the campaign store kept; None if it kept none).
    """
    generate = spec.generate
    if generate is None or not is_fleet(generate):
        return m
    deal = signed.generate.deal if signed is not None and signed.generate is not None else None
    if deal is None:
        why = "fleet records: this member's deal is not known to this submitter (a lease reclaimed after a "
        why += "restart whose offer the campaign store did not keep), so they cannot be checked against it"
        return Refusal(FailureReason.INTERNAL, why)
    records = m.generation.records if m.generation is not None else ()
    problem = next(deal_problems(records, deal, generate), None)
    return m if problem is None else Refusal(FailureReason.INVALID, problem)


def deal_problems(records: Sequence[RequestRecord], deal: FleetDeal, spec: GenerateSpec) -> Iterator[str]:
    """Every way the records depart from the deal, the count first."""
    if deal.planned_s:
        yield from _open_loop(records, deal)
    else:
        yield from _closed_loop(records, deal, spec)


def _open_loop(records: Sequence[RequestRecord], deal: FleetDeal) -> Iterator[str]:
    dealt = len(deal.planned_s)
    if len(records) > dealt:
        yield f"generation.records: {len(records)} records, more than the {dealt} sends this member was dealt"
        return
    bound = deal.offset_bound_s or 0.0
    times = sorted(deal.planned_s)
    first: dict[int, int] = {}  # index into `times` -> the record that claimed it
    for i, record in enumerate(records):
        where = f"generation.records[{i}]"
        slot = _slot(times, record.planned_s)
        if slot is None:
            span = f"{dealt} planned times from {times[0]:.6g} to {times[-1]:.6g} s"
            yield f"{where}.planned_s: {record.planned_s!r}, not a planned send of the deal ({span})"
            return
        if slot in first:
            again = f"repeats records[{first[slot]}]: each dealt send goes once"
            yield f"{where}.planned_s: {record.planned_s!r} s {again}"
            return
        first[slot] = i
        yield from _sent_in_time(where, record.started_s, times[slot], bound)


def _slot(times: Sequence[float], planned: float | None) -> int | None:
    """The index of the deal's planned time within `PLAN_TOL_S` of `planned`, or None."""
    if planned is None:
        return None
    at = bisect.bisect_left(times, planned - PLAN_TOL_S)
    return at if at < len(times) and abs(times[at] - planned) <= PLAN_TOL_S else None


def _sent_in_time(where: str, started: float, planned: float, bound: float) -> Iterator[str]:
    if started < planned - bound - EARLY_TOL_S:
        yield (
            f"{where}.started_s: {started!r} s, before its planned {planned!r} s less the member's clock "
            f"bound {bound:.6g} s"
        )
    elif started > planned + bound + LATE_SLACK_S:
        yield (
            f"{where}.started_s: {started!r} s, after its planned {planned!r} s plus the member's clock "
            f"bound {bound:.6g} s and {LATE_SLACK_S:g} s of slack"
        )


def _closed_loop(records: Sequence[RequestRecord], deal: FleetDeal, spec: GenerateSpec) -> Iterator[str]:
    limit = (spec.duration_s or 0.0) + (deal.offset_bound_s or 0.0) + LATE_SLACK_S
    for i, record in enumerate(records):
        if record.planned_s is not None:
            none = "but this member was dealt slots, no planned sends"
            yield f"generation.records[{i}].planned_s: {record.planned_s!r}, {none}"
            return
        if record.started_s > limit:
            yield (
                f"generation.records[{i}].started_s: {record.started_s!r} s, after the run's "
                f"{spec.duration_s or 0.0:g} s plus the clock bound and slack ({limit:.6g} s)"
            )
            return


__all__ = ["EARLY_TOL_S", "LATE_SLACK_S", "PLAN_TOL_S", "check_fleet", "deal_problems"]
