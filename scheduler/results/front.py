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

from pydantic import Field

from protocol import GenerateSpec, Measurement, Value
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
    bounded: dict[str, float] = Field(default_factory=dict)  # the campaign's rank: bounds' figures
    goodput_per_s: float | None = None  # request/s x goodput: requests/s that met the job's slo


class Front(Value):
    """A device's or server's points at one sweep point (input and output lengths), the front marked."""

    target: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    throughput: str = f"{THROUGHPUT_LABEL}: {THROUGHPUT_FORMULA}"
    latency: str = f"{LATENCY_LABEL}: {LATENCY_FORMULA}"
    points: tuple[FrontPoint, ...] = ()
    failed: int = 0  # its tasks that ended without a figure

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
    return tuple(front for front in groups_of(campaign, tasks) if len(front.points) > 1)


def groups_of(
    campaign: Campaign, tasks: Iterable[tuple[Mapping[str, str], Measurement | None]]
) -> tuple[Front, ...]:
    """Every group of the campaign's generate tasks, its front marked, one point or none included (a
    group of failed tasks only: `failed` says how many), in the order the groups first appear."""
    groups: dict[tuple[str, int | None, int | None], list[FrontPoint]] = {}
    failed: dict[tuple[str, int | None, int | None], int] = {}
    for row, measurement in tasks:
        key, spec = _key(campaign, row)
        generated = measurement is not None and measurement.generation is not None
        if row.get("CapacityRow") or (spec is None and not generated):
            continue  # a tensor task, or a capacity search's level row
        point = _point(campaign, row, measurement)
        groups.setdefault(key, [])
        if point is None:
            failed[key] = failed.get(key, 0) + 1
        else:
            groups[key].append(point)
    return tuple(
        Front(
            target=t, input_tokens=i, output_tokens=o, points=_marked(points), failed=failed.get((t, i, o), 0)
        )
        for (t, i, o), points in groups.items()
    )


def _key(
    campaign: Campaign, row: Mapping[str, str]
) -> tuple[tuple[str, int | None, int | None], GenerateSpec | None]:
    found = _JOB.search(row.get("JobId", ""))
    index = int(found.group(1)) if found else -1
    spec = campaign.jobs[index].spec.generate if 0 <= index < len(campaign.jobs) else None
    target = " · ".join(row.get(k, "") for k in ("DeviceName", "ComputeUnits", "FileName"))
    return (
        target,
        spec.sweep_input_tokens if spec else None,
        spec.sweep_output_tokens if spec else None,
    ), spec


def _point(campaign: Campaign, row: Mapping[str, str], m: Measurement | None) -> FrontPoint | None:
    g = m.generation if m is not None else None
    if g is None or row.get("Status") != "Complete" or not g.e2e_ms.n:
        return None
    load = (
        f"request_rate={g.request_rate:g}" if g.request_rate is not None else f"concurrency={g.concurrency}"
    )
    if row.get("Concurrency") and g.request_rate is None:
        load = f"concurrency={row['Concurrency']}"  # a fleet's merged row: every member's slots
    rank = campaign.rank
    stats = {"ttft_ms": g.ttft_ms, "tpot_ms": g.tpot_ms, "e2e_ms": g.e2e_ms}
    bounded = {
        name: float(getattr(stats[name], rank.at)) for name in rank.bounds() if stats[name].n
    } if rank is not None else {}  # fmt: skip
    return FrontPoint(
        job_id=row.get("JobId", ""),
        load=load,
        throughput=g.output_tok_per_s,
        latency_ms=g.e2e_ms.median,
        error_share=g.errors / g.requests if g.requests else None,
        verified=row.get("Verified", ""),
        cost_per_m_tokens=_number(row.get("CostPerMTokens", "")),
        bounded=bounded,
        goodput_per_s=g.request_per_s * g.goodput if g.goodput is not None else None,
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


__all__ = ["LATENCY_FORMULA", "THROUGHPUT_FORMULA", "Front", "FrontPoint", "fronts_of", "groups_of"]
