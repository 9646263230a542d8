"""Whether the load client held its schedule: send rates, send lag and saturation, from raw parts.

Derived on the worker and again on the submitter from the raw request records (`planned_s`, when a
request was due; `started_s`, when its first byte was written; both seconds after the run's start),
the client's CPU over the run and the planned sends the deadline came before (`unsent`). A client
that falls behind is said with its reason (`client_saturated_reason`), in every generate row. The
formulas are `FORMULAS` (`request_rate_achieved`, `schedule_lag_ms`, `client_saturated`); a fleet's
rows use the same ones over all its members' records (`scheduler.results.fleetrows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

from protocol.generation import GenerateSpec, RequestRecord
from protocol.stats import percentile

SATURATED_CPU_PCT: Final = 90.0  # genai-bench warns past 90 % client CPU
SATURATED_LAG_MS: Final = 10.0  # p99 send lag past this: the client is behind its schedule
SHORTFALL: Final = 0.95  # an open loop that sent under 95 % of its planned sends within its span
SPAN_EDGE_S: Final = 1e-9  # a send or a plan at the span's end is within it (float rounding)


class ClientLoad(NamedTuple):
    span_s: float | None
    rate_achieved: float | None
    lag_p50_ms: float | None
    lag_p99_ms: float | None
    saturated: bool
    reason: str


def schedule_lag_ms(records: Sequence[RequestRecord]) -> list[float]:
    """Actual minus planned send time (ms) of each request that had a plan."""
    return [(r.started_s - r.planned_s) * 1e3 for r in records if r.planned_s is not None]


def schedule_span_s(records: Sequence[RequestRecord], spec: GenerateSpec) -> float | None:
    """The span the schedule asked for (see `CLIENT_FORMULAS`); None for a run with no span."""
    if spec.duration_s:
        return spec.duration_s
    planned = [r.planned_s for r in records if r.planned_s is not None]
    span = max(planned) if planned else max((r.started_s for r in records), default=0.0)
    return span if span > 0 else None


def request_rate_achieved(records: Sequence[RequestRecord], span_s: float | None) -> float | None:
    """`FORMULAS["request_rate_achieved"]`: the requests whose first byte was written within the span
    (`schedule_span_s`; a send at its very end counts, within `SPAN_EDGE_S`), per second of it; None
    for a run with no span. The one formula of every row's RequestRateAchieved, a fleet's too."""
    if not span_s:
        return None
    return sum(1 for r in records if r.started_s <= span_s + SPAN_EDGE_S) / span_s


def client_load(
    records: Sequence[RequestRecord], spec: GenerateSpec, cpu_pct: float | None, unsent: int
) -> ClientLoad:
    """The client's figures and verdict for one run (or one fleet member, or a merged fleet). A session
    run's sends are its sessions' arrivals: their first turns (later turns follow the answers)."""
    records = [r for r in records if (r.turn or 1) == 1]
    span = schedule_span_s(records, spec)
    edge = (span or 0.0) + SPAN_EDGE_S
    sent = sum(1 for r in records if r.started_s <= edge)
    rate = request_rate_achieved(records, span)
    lags = sorted(schedule_lag_ms(records))
    p50 = percentile(lags, 50.0) if lags else None
    p99 = percentile(lags, 99.0) if lags else None
    reasons: list[str] = []
    if cpu_pct is not None and cpu_pct > SATURATED_CPU_PCT:
        reasons.append(f"client CPU {cpu_pct:.0f} % of one core (over {SATURATED_CPU_PCT:g} %)")
    if p99 is not None and p99 > SATURATED_LAG_MS:
        reasons.append(f"send lag p99 {p99:.1f} ms (over {SATURATED_LAG_MS:g} ms)")
    if unsent:
        reasons.append(f"{unsent} planned sends not sent before the deadline")
    due = sum(1 for r in records if r.planned_s is not None and r.planned_s <= edge) + unsent
    if due and sent < SHORTFALL * due and rate is not None:
        asked = due / span if span else 0.0
        reasons.append(f"sent {rate:.1f} req/s of {asked:.1f} planned")
    return ClientLoad(span, rate, p50, p99, bool(reasons), "; ".join(reasons))


__all__ = [
    "SATURATED_CPU_PCT",
    "SATURATED_LAG_MS",
    "ClientLoad",
    "client_load",
    "request_rate_achieved",
    "schedule_lag_ms",
    "schedule_span_s",
]
