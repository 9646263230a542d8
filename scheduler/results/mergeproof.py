"""The rows no single signed result holds, derived again by `sark-node verify`: a fleet's merged row
and a capacity search's level rows.

Who controls what, and what this reads instead:

- **A fleet member** (a worker) sees its own request records and may edit them before it signs. It
  cannot edit another member's, nor the merge: its records are held to the deal its offer gave
  (`check_sends`, in `proof`), and the merged row is derived from every member's records together
  (`fleetrows.merged_figures`, the submitter's own deriver), never from a member's figures or row.
- **The submitter** merges, writes results.json and seals the bundle: it can write any merged figure,
  leave a member's records out of the merge, move a member between jobs, or say a member was lost. So
  none of its merged cells is read: the members are every signed result of the job (a result's job is
  its signed task id's, `{campaign}-job-{index}-{n}`, not the bundle's `job_index`), taken in the
  bundle's (sealed, task) order, and every figure of the merged row (status, workers, latency,
  generation and fleet columns, `merged.e2e_ms`) is derived from their signed records and must match
  to the bit. The fleet's size is the deals' (each member's deal names it, with its seed and start:
  one schedule, each member a distinct share of it, an open loop's planned sends a tail of that
  member's share of the seeded arrivals); the members the bundle lacks are the lost ones, and
  `Detail` and `FleetLost` must count them. Who was lost and why is the submitter's word (a member
  withheld whole is a member lost, shown so); no merged figure is. The deals are the submitter's
  word too, but an open loop's records carry the planned send times their worker signed, so a deal
  rewritten to another size or seed no longer fits them (`check_sends`); a closed loop's member
  withheld with the size edited to match is not seen, and its load was on the server all the same:
  the merged row can only read slower for it, never quicker.
- **A capacity search** is one signed result: its levels, their verdicts and the knee are derived
  again from its records (`check_figures`, `protocol.capacity.derive_capacity`); each level row of
  results.json is derived again from that (`caprows.level_cells`, with the task's signed cells), a
  level row missing, added or edited is named, and so is a complete row with no signed result and no
  derivation.

Each problem is `(place, cause)`: results.json's entry (its index and `JobId`) and the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from protocol import FleetDeal, GenerateSpec, ResultBody, TaskSpec
from scheduler.language import Campaign
from scheduler.language.fleet import is_fleet
from scheduler.results.caprows import level_cells
from scheduler.results.document import CampaignReport, ReportTask
from scheduler.results.fleetrows import fleet_columns, kept_apart, merged_figures, merged_generation
from scheduler.results.rows import body_columns
from scheduler.state.fleet import FLEET_UNIT, deal
from scheduler.state.tasks import Status

RESULTS: Final = "results.json"


@dataclass(frozen=True)
class Member:
    """A signed result as the merge reads it: its task, its body (the derived measurement) and the
    spec its offer gave (its deal), in the bundle's order."""

    task_id: str
    body: ResultBody
    offered: TaskSpec | None


@dataclass
class Found:
    """The problems `(place, cause)` and what a reader is shown."""

    problems: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    derived: int = 0  # rows derived again (a fleet's merged row, a search's level rows)

    def refuse(self, place: str, cause: str) -> None:
        """Add a problem."""
        self.problems.append((place, cause))


def job_of(campaign_id: str, task_id: str) -> int | None:
    """The job a task id names (``{campaign_id}-job-{index}-{n}``: the worker signs it), or None."""
    head, sep, rest = task_id.partition(f"{campaign_id}-job-")
    index, dash, n = rest.partition("-")
    if head or not sep or not dash or not index.isdigit() or not n.isdigit():
        return None
    return int(index)


def check_derived_rows(report: CampaignReport, members: Sequence[Member]) -> Found:
    """Every row of results.json without a signed result of its own: each level row against its
    search, each fleet's merged row against its members, anything else complete refused."""
    found = Found()
    levels: dict[str, tuple[int, ReportTask]] = {}
    merged: dict[str, tuple[int, ReportTask]] = {}
    for i, task in enumerate(report.results):
        if task.signed is not None:
            continue
        row = task.row
        task_id = row.get("JobId", "")
        place = f"{RESULTS} results[{i}] (task {task_id})"
        kind = levels if row.get("CapacityRow") == "level" else merged if task.merged is not None else None
        if kind is None:
            if row.get("Status") == Status.COMPLETE.value or row.get("ComputeUnits") == FLEET_UNIT:
                found.refuse(place, "a complete row with no signed result and no signed parts to derive it")
        elif task_id in kind:
            found.refuse(place, "the row is there twice")
        else:
            kind[task_id] = (i, task)
    _check_levels(found, members, levels)
    _check_fleets(found, report, members, merged)
    return found


def _check_levels(found: Found, members: Sequence[Member], levels: dict[str, tuple[int, ReportTask]]) -> None:
    """Each signed search's level rows derived again from its signed levels; a level row of none named."""
    for member in members:
        search = member.body.measurement.capacity
        if search is None:
            continue
        signed = body_columns(member.body)
        for n, level in enumerate(search.levels, start=1):
            level_id = f"{member.task_id}/{n}"
            shown = levels.pop(level_id, None)
            if shown is None:
                found.refuse(f"{RESULTS} (task {level_id})", f"level {n} of the signed search has no row")
                continue
            i, task = shown
            found.derived += 1
            want = signed | level_cells(member.task_id, n, level)
            _cells(found, f"{RESULTS} results[{i}] (task {level_id})", task.row, want, "its signed search")
    for level_id, (i, _) in levels.items():
        found.refuse(f"{RESULTS} results[{i}] (task {level_id})", "no signed search has this level")


def _check_fleets(
    found: Found, report: CampaignReport, members: Sequence[Member], merged: dict[str, tuple[int, ReportTask]]
) -> None:
    """Each fleet job's merged row derived again from its members' signed records."""
    campaign, campaign_id = report.campaign, report.campaign_id
    by_job: dict[int, list[Member]] = {}
    for member in members:
        of = job_of(campaign_id, member.task_id)
        if of is not None:
            by_job.setdefault(of, []).append(member)
    rows = {t.row.get("JobId", ""): (i, t) for i, t in enumerate(report.results) if t.signed is not None}
    for index, job in enumerate(campaign.jobs):
        spec = job.spec.generate
        if spec is None or not is_fleet(spec):
            continue
        fleet_id = f"{campaign_id}-job-{index}-fleet"
        shown = merged.pop(fleet_id, None)
        group = by_job.get(index, [])
        if shown is None:
            if group:
                found.refuse(f"{RESULTS} (task {fleet_id})", "the fleet's merged row is missing")
            continue
        place = f"{RESULTS} results[{shown[0]}] (task {fleet_id})"
        if not group:
            found.notes.append(f"{fleet_id}: no member's signed result: the row is the submitter's word")
            continue
        size = _size(found, place, campaign, index, group)
        found.derived += 1
        if size is not None:
            _check_merged(found, place, shown[1], spec, size, group)
            _check_members(found, spec, size, group, rows)
    for fleet_id, (i, _) in merged.items():
        found.refuse(f"{RESULTS} results[{i}] (task {fleet_id})", "no fleet job of the campaign has this row")


def _size(found: Found, place: str, campaign: Campaign, index: int, group: Sequence[Member]) -> int | None:
    """The fleet's size, as every member's deal gives it (one schedule, each a distinct share)."""
    spec = campaign.jobs[index].spec.generate
    assert spec is not None
    deals: list[FleetDeal] = []
    for member in group:
        dealt = member.offered.generate.deal if member.offered and member.offered.generate else None
        if dealt is None:
            found.refuse(f"{place} FleetSize", f"member {member.task_id} has no deal in the bundle")
            return None
        deals.append(dealt)
    first = deals[0]
    for member, dealt in zip(group, deals, strict=True):
        for problem in _deal_problems(spec, first, dealt):
            found.refuse(f"{place} FleetSize", f"member {member.task_id}'s deal: {problem}")
    shares = [d.member for d in deals]
    if len(set(shares)) != len(shares):
        found.refuse(f"{place} FleetSize", f"two members hold one share of the schedule ({sorted(shares)})")
    if len(group) < first.size:
        found.notes.append(
            f"{place}: {first.size - len(group)} of the fleet's "
            f"{first.size} members gave no signed result (lost, as the submitter says)"
        )
    return first.size


def _deal_problems(spec: GenerateSpec, first: FleetDeal, dealt: FleetDeal) -> Iterator[str]:
    """Why a member's deal is not its share of the fleet's one schedule."""
    for name in ("size", "seed", "start_at"):
        if getattr(dealt, name) != getattr(first, name):
            yield f"{name} {getattr(dealt, name)!r}, another member's is {getattr(first, name)!r}"
    if dealt.member >= dealt.size:
        yield f"share {dealt.member} of a fleet of {dealt.size}"
        return
    share = deal(spec, dealt.size, dealt.member, seed=dealt.seed, start_at=dealt.start_at)
    cut = len(share.planned_s) - len(dealt.planned_s)
    if cut < 0 or share.planned_s[cut:] != dealt.planned_s or share.prompts[cut:] != dealt.prompts:
        yield "its planned sends are not its share of the seeded schedule"
    if dealt.slots != share.slots:
        yield f"{dealt.slots} slots, the job gives each member {share.slots}"


def _check_merged(
    found: Found, place: str, task: ReportTask, spec: GenerateSpec, size: int, group: Sequence[Member]
) -> None:
    """The merged row's every figure against the members' signed records, and its counts."""
    signed = {m.task_id: g for m in group if (g := m.body.measurement.generation) is not None}
    out = kept_apart(signed)  # the submitter's own rule, on the same signed records
    measured = [m for m in group if m.task_id in signed and m.task_id not in out]
    stats = [signed[m.task_id] for m in measured]
    want = merged_figures(spec, size, stats, [m.body.worker for m in measured])
    want |= {"ComputeUnits": FLEET_UNIT, "DeviceName": f"fleet of {size}"}
    models = {m.body.model_sha256 for m in group}
    if len(models) == 1:
        want["ModelSha256"] = models.pop()
    _cells(found, place, task.row, want, "its members' signed records")
    if task.merged is not None:
        ours = merged_generation(spec, stats).e2e_ms.model_dump(mode="json")
        for path, theirs, derived in exact("merged.e2e_ms", task.merged.e2e_ms.model_dump(mode="json"), ours):
            found.refuse(f"{place} {path}", f"{theirs!r}, its members' signed records give {derived!r}")
    kept, lost = len(measured), size - len(measured)
    said = f"merged from the raw records of {kept} of {size} members"
    detail = task.row.get("Detail", "")
    if detail != said and not detail.startswith(said + "; lost: "):
        found.refuse(f"{place} row.Detail", f"{detail!r}, its members' signed records give {said!r}")
    if bool(task.row.get("FleetLost")) != bool(lost):
        found.refuse(
            f"{place} row.FleetLost", f"{task.row.get('FleetLost')!r}, but {lost} of {size} members are lost"
        )


def _check_members(
    found: Found,
    spec: GenerateSpec,
    size: int,
    group: Sequence[Member],
    rows: Mapping[str, tuple[int, ReportTask]],
) -> None:
    """Each member's own fleet columns, from its own signed records."""
    for member in group:
        g = member.body.measurement.generation
        shown = rows.get(member.task_id)
        if g is None or shown is None:
            continue  # a row missing from results.json is named by `proof`
        want = fleet_columns(g.records, spec, size, [g.client_cpu_pct], unsent=g.unsent)
        i, task = shown
        _cells(found, f"{RESULTS} results[{i}] (task {member.task_id})", task.row, want, "its signed records")


def _cells(found: Found, place: str, row: Mapping[str, str], want: Mapping[str, str], source: str) -> None:
    for column, value in want.items():
        if row.get(column, "") != value:
            found.refuse(f"{place} row.{column}", f"{row.get(column, '')!r}, {source} give {value!r}")


def exact(path: str, theirs: Any, ours: Any) -> Iterator[tuple[str, Any, Any]]:
    """Every leaf of two JSON values that differs (NaN equals NaN), with its path."""
    if isinstance(theirs, dict) and isinstance(ours, dict) and theirs.keys() == ours.keys():
        for key in theirs:
            yield from exact(f"{path}.{key}", theirs[key], ours[key])
    elif isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        for i, (a, b) in enumerate(zip(theirs, ours, strict=True)):
            yield from exact(f"{path}[{i}]", a, b)
    elif not _same(theirs, ours):
        yield path, theirs, ours


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and bool(a == b)


__all__ = ["Found", "Member", "check_derived_rows", "exact", "job_of"]
