"""A fleet job's rows: each member's fleet columns, and one merged row derived from all raw records.

The merged row is computed by the submitter from the members' request records together (every
percentile over all requests, never a mean of members' medians), with `ComputeUnits` = `Endpoint
(fleet)`. A member lost mid-run (its worker died, its lease lapsed, it failed) is named in
`FleetLost` and in `Detail`; it is not retried (its place in the schedule has passed), and the row
keeps what the others measured. A lost member's own records are not in the row: a worker delivers
its records only in its signed result, so a member that never delivered one contributes none (its
dealt requests are counted in `Detail`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from protocol import GenerateSpec, GenerationStats, RequestRecord
from protocol.clientload import client_load
from protocol.genstats import summarize_generation
from scheduler.language.campaign import Job
from scheduler.results.columns import CSV_COLUMNS, cell, cells
from scheduler.results.genrows import generation_columns, stat_cell
from scheduler.state.fleet import FLEET_UNIT
from scheduler.state.tasks import Status, TaskView

_MB: Final = 1024 * 1024


@dataclass(frozen=True)
class Member:
    """One member task of a fleet job as the rows see it: its row, and its measurement if it has one."""

    task: TaskView
    row: Mapping[str, str]
    generation: GenerationStats | None


def fleet_columns(
    records: Sequence[RequestRecord],
    spec: GenerateSpec,
    size: int,
    cpu_pcts: Sequence[float | None],
    lost: Sequence[str] = (),
    *,
    unsent: int = 0,
) -> dict[str, str]:
    """The fleet columns of a member's row or of the merged row, from raw records (the client's
    verdict as every generate row's: `protocol.clientload`, on the busiest member's CPU)."""
    cpus = [c for c in cpu_pcts if c is not None]
    cpu = max(cpus) if cpus else None
    client = client_load(records, spec, cpu, unsent)
    rate = client.rate_achieved if spec.request_rate is not None else None  # an open loop's only
    return {
        "FleetSize": cell("FleetSize", size),
        "RequestRateAchieved": cell("RequestRateAchieved", rate),
        "ScheduleLagMsP99": cell("ScheduleLagMsP99", client.lag_p99_ms),
        "ClientCpuMaxPct": cell("ClientCpuMaxPct", cpu),
        "ClientSaturated": cell("ClientSaturated", client.saturated),
        "ClientSaturatedReason": client.reason,
        "FleetLost": cells("FleetLost", lost),
    }


def member_row(member: Member, spec: GenerateSpec, size: int) -> dict[str, str]:
    """The member's row with its own fleet columns (its records only)."""
    row = dict(member.row)
    if member.generation is not None:
        g = member.generation
        row.update(fleet_columns(g.records, spec, size, [g.client_cpu_pct], unsent=g.unsent))
    else:
        row["FleetSize"] = cell("FleetSize", size)
    return row


def _lost(members: Sequence[Member]) -> list[str]:
    return [
        f"{m.task.device_name or 'unplaced'} ({m.task.peer_id or '-'}): "
        f"{m.row.get('Status', '')} {m.task.failure_reason}".rstrip()
        for m in members
        if m.generation is None
    ]


def merged_stats(job: Job, members: Sequence[Member]) -> GenerationStats:
    """The fleet's figures: every measured member's raw records summarized together."""
    spec = job.spec.generate
    assert spec is not None
    measured = [m.generation for m in members if m.generation is not None]
    return merged_generation(spec, measured)


def merged_generation(spec: GenerateSpec, measured: Sequence[GenerationStats]) -> GenerationStats:
    """The merged figures of the measured members' generations, in task order."""
    records = fleet_records(measured)
    cpus = [g.client_cpu_pct for g in measured if g.client_cpu_pct is not None]
    unsent = sum(g.unsent for g in measured)
    wall_s = max((g.wall_s for g in measured), default=0.0)
    return summarize_generation(records, wall_s, spec, cpu_pct=max(cpus, default=None), unsent=unsent)


def fleet_records(measured: Sequence[GenerationStats]) -> list[RequestRecord]:
    """Every member's records together, a session run's ordinals made distinct across members (each
    member numbers its own sessions from 0): member k's come after member k - 1's."""
    records: list[RequestRecord] = []
    base = 0
    for g in measured:
        records += [r if r.session is None else r.with_(session=base + r.session) for r in g.records]
        base += 1 + max((r.session for r in g.records if r.session is not None), default=-1)
    return records


def merged_row(job: Job, members: Sequence[Member], created_utc: str) -> dict[str, str]:
    """The fleet's merged row, derived from every measured member's raw records together."""
    spec = job.spec.generate
    assert spec is not None
    assert members
    measured = [m.generation for m in members if m.generation is not None]
    size, lost = len(members), _lost(members)
    first = members[0].task
    row = dict.fromkeys(CSV_COLUMNS, "")
    row.update(
        JobId=first.task_id.rsplit("-", 1)[0] + "-fleet",
        FileName=first.model.name,
        FileSize=cell("FileSize", first.model.size / _MB),
        ComputeUnits=FLEET_UNIT,
        DeviceName=f"fleet of {size}",
        CreatedUtc=created_utc,
        ModelSha256=first.model.sha256,
    )
    workers = [m.task.peer_id or "" for m in members if m.generation is not None]
    row.update(merged_figures(spec, size, measured, workers))
    row["FleetLost"] = cells("FleetLost", lost)
    row["Detail"] = _detail(members, lost)
    return row


def merged_figures(
    spec: GenerateSpec, size: int, measured: Sequence[GenerationStats], workers: Sequence[str]
) -> dict[str, str]:
    """Every cell of the merged row that its members' signed records give: its status, workers, latency,
    generation and fleet columns (`FleetLost` left out: who was lost is the submitter's word). One
    deriver: the submitter writes the row with it and `sark-node verify` derives the row again with it
    (`scheduler.results.mergeproof`), from the members in task order."""
    records = fleet_records(measured)
    unsent = sum(g.unsent for g in measured)
    stats = merged_generation(spec, measured)
    row = {
        "Status": (Status.COMPLETE if measured else Status.FAILED).value,
        "WorkerPeerId": cells("WorkerPeerId", workers),
        "InferenceMsMedian": stat_cell("InferenceMsMedian", stats.e2e_ms, "median"),
        "InferenceMsAverage": stat_cell("InferenceMsAverage", stats.e2e_ms, "mean"),
        "InferenceMsStdDev": stat_cell("InferenceMsStdDev", stats.e2e_ms, "stddev"),
        "InferenceMsP99": stat_cell("InferenceMsP99", stats.e2e_ms, "p99"),
        "InferenceMsFirst": stat_cell("InferenceMsFirst", stats.ttft_ms, "median"),
    }
    row.update(generation_columns(stats))
    if spec.request_rate is None:
        row["Concurrency"] = cell("Concurrency", spec.concurrency * size)
    all_cpus = [g.client_cpu_pct for g in measured]
    row.update(fleet_columns(records, spec, size, all_cpus, unsent=unsent))
    del row["FleetLost"]
    return row


def _detail(members: Sequence[Member], lost: Sequence[str]) -> str:
    kept = sum(1 for m in members if m.generation is not None)
    text = f"merged from the raw records of {kept} of {len(members)} members"
    if lost:
        text += f"; lost: {'; '.join(lost)} (a lost member's records are not in this row)"
    return text


def fleet_rows(
    jobs: Sequence[Job], members: Mapping[int, Sequence[Member]], created_utc: str
) -> tuple[dict[str, dict[str, str]], list[dict[str, str]]]:
    """Member rows with their fleet columns (by task id) and one merged row per fleet job."""
    updated: dict[str, dict[str, str]] = {}
    merged: list[dict[str, str]] = []
    for index, group in sorted(members.items()):
        spec = jobs[index].spec.generate
        if spec is None or not group:
            continue
        for member in group:
            updated[member.task.task_id] = member_row(member, spec, len(group))
        merged.append(merged_row(jobs[index], group, created_utc))
    return updated, merged


__all__ = [
    "Member",
    "fleet_columns",
    "fleet_records",
    "fleet_rows",
    "member_row",
    "merged_figures",
    "merged_generation",
    "merged_row",
    "merged_stats",
]
