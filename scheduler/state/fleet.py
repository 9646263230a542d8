"""Fleet load: one seeded arrival schedule dealt among N members, their clocks, and their figures.

A job's `fleet:` field itself is the campaign language's (`scheduler.language.fleet`).

Pure: the randomness is the seeded SplitMix64 stream of `protocol.arrivals` (the seed is drawn
by node/ and kept in every member's deal), time is an argument. Open loop (`request_rate`): Poisson
arrivals over `duration_s`, request k dealt to member k mod N, so each member's share is itself a
Poisson stream of rate/N.
Closed loop (`concurrency`): every member keeps C requests in flight, N x C in all. A member's clock
offset is the midpoint of the tightest of several ping-pong rounds, its bound half that round trip.
A member's figures and the merged row's (`scheduler.results.fleetrows`) are computed from raw
request records (`RequestRecord` with `planned_s` and `started_s` in the submitter's time base),
never from members' medians.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from protocol import FleetDeal, GenerateSpec, RequestRecord
from protocol.arrivals import SplitMix64, arrivals
from protocol.clientload import SATURATED_CPU_PCT, SATURATED_LAG_MS, schedule_lag_ms
from protocol.fleet import MAX_DEALT
from protocol.stats import percentile

FLEET_UNIT: Final = "Endpoint (fleet)"
FLEET_FORMULAS: Final[dict[str, str]] = {
    "request_rate_achieved": "FORMULAS' request_rate_achieved over all members' records (the span is "
    "duration_s, which a fleet job gives; open loop only)",
    "schedule_lag_ms_p99": "p99 over requests of (actual - planned send time), submitter's time base",
    "client_cpu_max_pct": "max over members of client process CPU time / run wall time x 100",
    "client_saturated": f"a member over {SATURATED_CPU_PCT:g} % CPU or p99 lag over {SATURATED_LAG_MS:g} ms, "
    "sends left unsent, or under 95 % of the planned sends sent within the span (protocol.clientload)",
}


def deal(spec: GenerateSpec, size: int, member: int, *, seed: int, start_at: float) -> FleetDeal:
    """Member `member`'s share of the fleet's schedule (its clock offset still unmeasured).

    Open loop: the arrivals k with k mod size == member, each with prompt k (cycled by the worker).
    Closed loop: `spec.concurrency` slots for `spec.duration_s`.
    """
    base = FleetDeal(size=size, member=member, seed=seed, start_at=start_at)
    if spec.request_rate is None:
        return base.with_(slots=spec.concurrency)
    limit = min(MAX_DEALT * size, 2**31)
    times = arrivals(spec.request_rate, spec.duration_s or 1.0, seed, limit)
    mine = range(member, len(times), size)
    return base.with_(planned_s=tuple(times[k] for k in mine), prompts=tuple(mine))


def still_ahead(dealt: FleetDeal, now: float, margin_s: float) -> FleetDeal:
    """The deal without the planned sends due before `now + margin_s` (submitter clock): a member offered
    late (another declined or lost the offer first) never sends a planned time that has passed."""
    cut = now + margin_s - dealt.start_at
    kept = [(t, p) for t, p in zip(dealt.planned_s, dealt.prompts, strict=True) if t >= cut]
    return dealt.with_(planned_s=tuple(t for t, _ in kept), prompts=tuple(p for _, p in kept))


@dataclass(frozen=True)
class ClockRound:
    """One ping-pong round: submitter clock when sent and when answered, the worker's clock between."""

    sent: float
    worker: float
    received: float


def clock_offset(rounds: Sequence[ClockRound]) -> tuple[float, float] | None:
    """(offset, bound): the worker's clock minus ours at the tightest round's midpoint, and half that
    round's trip, which bounds the error; None with no round."""
    valid = [r for r in rounds if r.received >= r.sent]
    if not valid:
        return None
    best = min(valid, key=lambda r: r.received - r.sent)
    return best.worker - (best.sent + best.received) / 2, (best.received - best.sent) / 2


def lag_p99_ms(records: Sequence[RequestRecord]) -> float | None:
    """The p99 of `schedule_lag_ms` (None for a run without planned sends)."""
    lags = sorted(schedule_lag_ms(records))
    return percentile(lags, 99.0) if lags else None


def saturated(cpu_pct: float | None, lag_ms: float | None) -> bool:
    """Whether a client was above `SATURATED_CPU_PCT` or behind its schedule by `SATURATED_LAG_MS`."""
    return (cpu_pct or 0.0) > SATURATED_CPU_PCT or (lag_ms or 0.0) > SATURATED_LAG_MS


__all__ = [
    "FLEET_FORMULAS",
    "FLEET_UNIT",
    "ClockRound",
    "SplitMix64",
    "arrivals",
    "clock_offset",
    "deal",
    "lag_p99_ms",
    "saturated",
    "schedule_lag_ms",
    "still_ahead",
]
