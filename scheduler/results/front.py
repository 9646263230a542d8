"""The throughput-latency front of a sweep: per device or server, at each swept input and output length,
the load levels' points, and which of them no other point beats on both.

A point is one completed generate task (a load level of a sweep or a `concurrency` / `request_rate`
list): its system throughput (`OutputTokPerS`: all output tokens / the run's wall time) against its
per-request latency (`E2eMsMedian`), with what the row says of it: how it was verified, its error share
and what its tokens cost. A point is on the front when no other point of its group has at least its
throughput at no more latency, one of them strictly better. Groups are the rows' device (or fleet),
unit (`Endpoint` for a server) and target (`FileName`), and the sweep's point; a group of one point
draws no front. Pure: read from the rows and their derived measurements, so a results.json read back
gives the same fronts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from protocol import Measurement, Value
from scheduler.language import Campaign

THROUGHPUT_LABEL: Final = "output tok/s"
THROUGHPUT_FORMULA: Final = "all output tokens / wall time of the run"
LATENCY_LABEL: Final = "E2E ms"
LATENCY_FORMULA: Final = "request sent -> last output token, median over requests"
_JOB: Final = re.compile(r"-job-(\d+)-[^-]+$")


class FrontPoint(Value):
    """One load level of a group: its figures, what the row says of it, and whether it is on the front."""

    job_id: str
    load: str  # "concurrency=4" or "request_rate=2"
    throughput: float
    latency_ms: float
    error_share: float | None = None
    verified: str = ""
    cost_per_m_tokens: float | None = None
    on_front: bool = False


class Front(Value):
    """A device's or server's points at one sweep point (input and output lengths), the front marked."""

    target: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    throughput: str = f"{THROUGHPUT_LABEL}: {THROUGHPUT_FORMULA}"
    latency: str = f"{LATENCY_LABEL}: {LATENCY_FORMULA}"
    points: tuple[FrontPoint, ...] = ()

    def name(self) -> str:
        """The group as a legend names it: the target, then the lengths swept."""
        lengths = [
            f"{n}={v}" for n, v in (("in", self.input_tokens), ("out", self.output_tokens)) if v is not None
        ]
        return " · ".join([self.target, *lengths])


def fronts_of(
    campaign: Campaign, tasks: Iterable[tuple[Mapping[str, str], Measurement | None]]
) -> tuple[Front, ...]:
    """Every group's front (of two points or more), in the order the groups first appear."""
    groups: dict[tuple[str, int | None, int | None], list[FrontPoint]] = {}
    for row, measurement in tasks:
        point = _point(campaign, row, measurement)
        if point is None:
            continue
        key, value = point
        groups.setdefault(key, []).append(value)
    return tuple(
        Front(target=target, input_tokens=i, output_tokens=o, points=_marked(points))
        for (target, i, o), points in groups.items()
        if len(points) > 1
    )


def _point(
    campaign: Campaign, row: Mapping[str, str], m: Measurement | None
) -> tuple[tuple[str, int | None, int | None], FrontPoint] | None:
    g = m.generation if m is not None else None
    if g is None or row.get("Status") != "Complete" or row.get("CapacityRow") or not g.e2e_ms.n:
        return None
    found = _JOB.search(row.get("JobId", ""))
    index = int(found.group(1)) if found else -1
    spec = campaign.jobs[index].spec.generate if 0 <= index < len(campaign.jobs) else None
    load = (
        f"request_rate={g.request_rate:g}" if g.request_rate is not None else f"concurrency={g.concurrency}"
    )
    if row.get("Concurrency") and g.request_rate is None:
        load = f"concurrency={row['Concurrency']}"  # a fleet's merged row: every member's slots
    target = " · ".join(row.get(k, "") for k in ("DeviceName", "ComputeUnits", "FileName"))
    key = (target, spec.sweep_input_tokens if spec else None, spec.sweep_output_tokens if spec else None)
    return key, FrontPoint(
        job_id=row.get("JobId", ""),
        load=load,
        throughput=g.output_tok_per_s,
        latency_ms=g.e2e_ms.median,
        error_share=g.errors / g.requests if g.requests else None,
        verified=row.get("Verified", ""),
        cost_per_m_tokens=_number(row.get("CostPerMTokens", "")),
    )


def _marked(points: Sequence[FrontPoint]) -> tuple[FrontPoint, ...]:
    """The points by latency, each marked on the front when no other beats it on both figures."""

    def beaten(p: FrontPoint) -> bool:
        return any(
            q is not p
            and q.throughput >= p.throughput
            and q.latency_ms <= p.latency_ms
            and (q.throughput > p.throughput or q.latency_ms < p.latency_ms)
            for q in points
        )

    return tuple(p.with_(on_front=not beaten(p)) for p in sorted(points, key=lambda p: p.latency_ms))


def _number(text: str) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


__all__ = ["LATENCY_FORMULA", "THROUGHPUT_FORMULA", "Front", "FrontPoint", "fronts_of"]
