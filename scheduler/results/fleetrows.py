"""A fleet job's rows: each member's fleet columns, and one merged row derived from all raw records.

The merged row is computed by the submitter from the members' request records together (every
percentile over all requests, never a mean of members' medians), with `ComputeUnits` = `Endpoint
(fleet)`. A member lost mid-run (its worker died, its lease lapsed, it failed) is named in
`FleetLost` and in `Detail`; it is not retried (its place in the schedule has passed), and the row
keeps what the others measured. A lost member's own records are not in the row: a worker delivers
its records only in its signed result, so a member that never delivered one contributes none (its
dealt requests are counted in `Detail`).

A member's records are also held to the other members' (`apart`), the floor that is left where this
submitter could not measure the server itself (`scheduler.verification.serverfloor`: a gray-box
server, an address it cannot reach) and a second one where it could: a member whose quickest
successful first token is under `FLOOR_SHARE` x the lower median of the other members' quickest
(each less its own stated round trip) is kept out of the merged row, named in `FleetLost` and
`Detail` with both figures. The cheater's view: a member chooses its own records and its stated
round trip, never the others'; its own round trip is not subtracted from its own figure (claiming
one can only lower what it is held to), and the lower median moves only when half the others lie
alike. A member far from the server is not kept out for it (the others' figures are taken less
their round trips, so only the server's time is compared). A member needs two others to be judged.
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
from scheduler.verification.serverfloor import FLOOR_SHARE

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


def _quickest(g: GenerationStats) -> float | None:
    """A member's quickest successful first token (E2E where a record has none), in ms."""
    times = [r.ttft_ms if r.ttft_ms is not None else r.e2e_ms for r in g.records if r.error is None]
    return min(times, default=None)


def apart(members: Sequence[Member]) -> dict[str, str]:
    """The measured members kept out of the merged row (by task id), each with why (`kept_apart`)."""
    return kept_apart({m.task.task_id: m.generation for m in members if m.generation is not None})


def kept_apart(measured: Mapping[str, GenerationStats]) -> dict[str, str]:
    """Of the measured members (task id -> its signed generation), those kept out of the merged row,
    each with why (the module's docstring): a quickest first token under `FLOOR_SHARE` x the lower
    median of the others' less their round trips. Read from signed records only, so `sark-node
    verify` applies the same rule (`scheduler.results.mergeproof`)."""
    quickest = {
        task_id: (q, max(q - (g.rtt_ms or 0.0), 0.0))
        for task_id, g in measured.items()
        if (q := _quickest(g)) is not None
    }
    kept_out: dict[str, str] = {}
    for task_id, (own, _) in quickest.items():
        others = sorted(server for k, (_, server) in quickest.items() if k != task_id)
        if len(others) < 2:
            continue
        reference = others[(len(others) - 1) // 2]
        if own < FLOOR_SHARE * reference:
            kept_out[task_id] = (
                f"its quickest first token {own:.4g} ms is under {FLOOR_SHARE:g} x {reference:.4g} ms, the "
                f"lower median of the {len(others)} other members' quickest less their round trips"
            )
    return kept_out


def _merged(members: Sequence[Member]) -> list[GenerationStats]:
    """The measurements the merged row is made of: every measured member's not kept `apart`."""
    out = apart(members)
    return [m.generation for m in members if m.generation is not None and m.task.task_id not in out]


def _lost(members: Sequence[Member]) -> list[str]:
    out = apart(members)
    return [
        f"{m.task.device_name or 'unplaced'} ({m.task.peer_id or '-'}): "
        + (
            f"{m.row.get('Status', '')} {m.task.failure_reason}".rstrip()
            if m.generation is None
            else f"kept out: {out[m.task.task_id]}"
        )
        for m in members
        if m.generation is None or m.task.task_id in out
    ]


def merged_stats(job: Job, members: Sequence[Member]) -> GenerationStats:
    """The fleet's figures: every measured member's raw records summarized together."""
    spec = job.spec.generate
    assert spec is not None
    return merged_generation(spec, _merged(members))


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
    measured, out = _merged(members), apart(members)
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
    workers = [
        m.task.peer_id or "" for m in members if m.generation is not None and m.task.task_id not in out
    ]
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
    kept = len(_merged(members))
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
    "apart",
    "fleet_columns",
    "fleet_records",
    "fleet_rows",
    "kept_apart",
    "member_row",
    "merged_figures",
    "merged_generation",
    "merged_row",
    "merged_stats",
]
