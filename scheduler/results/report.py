"""What a campaign report shows, as data: entries and the device x unit latency matrix (`diff`
compares two campaigns' entries).

Pure: no files, clock, plotting or printing. `node.report.render` draws and writes what this module shapes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from protocol import DeviceProfile, GenerationStats, Measurement, RunConditions, Stats, Value
from scheduler.results.document import CampaignReport
from scheduler.results.prices import Costs, Price, costs_of
from scheduler.results.speedup import speedups, timed_of
from scheduler.state.settling import flagged

NO_DEVICE: Final = "(no device)"


class ReportEntry(Value):
    """One task of a campaign as the report shows it (a result row plus its raw samples)."""

    task_id: str
    job_index: int
    status: str
    model: str
    model_sha256: str = ""
    unit: str
    device: str
    fingerprint: str = ""
    worker: str = ""
    median_ms: float | None = None
    samples_ms: tuple[float, ...] = ()
    process_medians_ms: tuple[float, ...] = ()
    process_spread_pct: float | None = None
    unstable: bool = False
    unstable_reasons: tuple[str, ...] = ()
    load_ms_median: float | None = None
    load_first_ms: float | None = None
    first_inference_ms: float | None = None
    peak_load_ram_mb: float | None = None
    peak_inference_ram_mb: float | None = None
    conditions: RunConditions | None = None
    throttled: str = ""  # a sustained run that drifted: its causes (`ThrottleCauses`), else ""
    device_profile: DeviceProfile | None = None
    generation: GenerationStats | None = None
    detail: str = ""
    verified: str = ""  # the row's Verified: an outlier's or a disagreed replica's figure is not shown
    claim: str = ""  # the row's Claim: its peer's `claim_unverified` mark and why ("" none)
    speedup: str = ""  # SpeedupVsCpu, from the typed figures (`entries_of`): its baseline CPU row over it
    fallback: bool = False  # ran below the job's placement share: never the unit's figure
    stats: Stats | None = None  # the figure the matrix shows, with its tail (p90, p99, max) and count
    price: Price | None = None  # what an hour of its device costs, and who said so
    costs: Costs = Costs()  # from the measurement and the price (`scheduler.results.prices`)

    @property
    def complete(self) -> bool:
        """Whether the task produced a measurement that may stand as its figure
        (`scheduler.state.settling`)."""
        return (
            self.status == "Complete"
            and self.median_ms is not None
            and not flagged(self.verified)
            and not self.fallback
        )

    @property
    def ending(self) -> tuple[str, str]:
        """What a view writes where this task's figure does not stand, and why: a refused figure's
        verdict (outlier, disagreed, ...) with its reason, `fallback` with the share, else the status."""
        if flagged(self.verified):
            return self.verified.split(":", 1)[0].split(" (")[0], self.verified
        return ("fallback" if self.fallback else self.status), self.detail


class MatrixCell(Value):
    """One device x unit cell: the median of process medians with its tail and count, or the task's
    ending with its reason (`detail`); `verified`: how the figure was verified, where the campaign
    asked (`verification_of`), else ""; `also`: the other tasks this device ran in this column (a
    replica of another device's task, a retry), which the views name beside the one shown."""

    median_ms: float | None = None
    status: str = ""
    unstable: bool = False
    task_id: str = ""
    stats: Stats | None = None
    detail: str = ""
    verified: str = ""
    also: tuple[str, ...] = ()
    speedup: str = ""  # the task's SpeedupVsCpu ("3.21x (2.90-3.55) vs CPU (ONNX)"), where it has one

    @property
    def decimals(self) -> int:
        """The decimals its figures are shown with (`decimals_for`)."""
        return decimals_for(self.stats)

    @property
    def mark(self) -> str:
        """What a view writes beside the figure: ` ✓2/2` for a replicated one, ` (single)` for one
        no replica checked in a campaign that asked verification, else ""."""
        if self.verified.startswith("replicated"):
            return " ✓" + self.verified.split(" ")[1]
        return " (single)" if self.verified == "single" else ""

    @property
    def ending(self) -> str:
        """What a view writes in place of a figure: the refused figure's verdict (outlier,
        disagreed, unverifiable, pending), else the task's ending."""
        return self.verified if self.verified and self.verified != "single" else self.status


def decimals_for(stats: Stats | None) -> int:
    """How many decimals a figure's spread supports: the standard error of its median (1.253 x the
    standard deviation / sqrt(n)) to two significant digits, from 0 to 3 decimals (3 without a spread):
    a 7.5 s end-to-end time whose median is known to 100 ms is shown as "7512", a 0.3 ms inference
    known to a microsecond as "0.312"."""
    if stats is None:
        return 3
    if stats.n < 2 or not math.isfinite(stats.stddev) or stats.stddev <= 0:
        return _significant(stats.median, 3)  # no spread to go by: three significant digits
    error = 1.253 * stats.stddev / math.sqrt(stats.n)
    if not 0 < error < math.inf:  # a spread of a few subnormals underflows to 0 (or a huge one to inf)
        return 3
    return max(0, min(3, 1 - math.floor(math.log10(error))))


def _significant(value: float, digits: int) -> int:
    """The decimals that show `value` to `digits` significant digits, from 0 to 3 (29513.7 -> 0,
    1.482 -> 2, 0.3124 -> 3)."""
    if not math.isfinite(value) or value == 0:
        return 3
    return max(0, min(3, digits - 1 - math.floor(math.log10(abs(value)))))


def shown(value: float | None, decimals: int) -> str:
    """A figure with `decimals` decimals ("" for none)."""
    return "" if value is None else f"{value:.{decimals}f}"


VERIFY_LABELS: Final = ("replicated", "outlier", "disagreed", "pending", "unverifiable")
"""The row labels (`Verified`) only a campaign that asked `verify:` has."""


def verification_of(entry: ReportEntry, asked: bool) -> str:
    """The short verdict a view shows beside an entry's figure (`replicated 2/2`, `outlier`,
    `single`, ...; the reason and "(same host)" left to the row), or "" where nothing was asked."""
    return entry.verified.split(":", 1)[0].split(" (")[0] if asked else ""


class LatencyMatrix(Value):
    """Median inference latency of one model, devices down, compute units (or jobs) across."""

    model: str
    devices: tuple[str, ...]
    columns: tuple[str, ...]
    cells: tuple[tuple[MatrixCell | None, ...], ...]


def short_task(task_id: str) -> str:
    """A task id as a view names it beside its campaign: ``job-{index}-{n}`` (the id itself when it
    holds no ``-job-``)."""
    _, sep, tail = task_id.rpartition("-job-")
    return f"job-{tail}" if sep and tail else task_id


def job_index_of(task_id: str) -> int:
    """The job index inside a task id ``{campaign_id}-job-{index}-{n}`` (0 if it has none)."""
    _, _, tail = task_id.rpartition("-job-")
    head = tail.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def entry_of(
    row: Mapping[str, str],
    samples_ms: Sequence[float],
    device: DeviceProfile | None = None,
    measurement: Measurement | None = None,
    merged: Stats | None = None,
    price: Price | None = None,
) -> ReportEntry:
    """The report's view of one task: who and what from its row's text (task, status, model, unit,
    device, worker, ending), every figure from its typed value: the measurement the submitter
    derived (or, for a fleet's merged row, its merged end-to-end figures). No figure is read back
    from a cell: a row without a typed value has none."""
    detail = "; ".join(x for x in (row.get("FailureReason", ""), row.get("Detail", "")) if x)
    entry = ReportEntry(
        task_id=row.get("JobId", ""),
        job_index=job_index_of(row.get("JobId", "")),
        status=row.get("Status", ""),
        model=row.get("FileName", ""),
        model_sha256=row.get("ModelSha256", ""),
        unit=row.get("ComputeUnits", ""),
        device=row.get("DeviceName", "") or NO_DEVICE,
        fingerprint=device.fingerprint if device is not None else "",
        worker=row.get("WorkerPeerId", ""),
        median_ms=merged.median if merged is not None else None,
        stats=merged,
        samples_ms=tuple(samples_ms),
        device_profile=device,
        detail=detail,
        verified=row.get("Verified", ""),
        claim=row.get("Claim", ""),
        price=price,
        costs=costs_of(measurement, price),
    )
    if measurement is None:
        return entry
    entry = entry.with_(**_figures(measurement))
    return entry.with_(detail=measurement.placement()) if measurement.fallback else entry


def _figures(m: Measurement) -> dict[str, Any]:
    """An entry's figures from a derived measurement."""
    sustained = m.sustained
    throttled = sustained is not None and sustained.throttled
    causes = ";".join(c.value for c in sustained.causes) if sustained is not None else ""
    shown_stats = m.inference_ms if m.inference_ms.n else None
    if shown_stats is None and m.generation is not None and m.generation.e2e_ms.n:
        shown_stats = m.generation.e2e_ms  # a model server's task times requests, not inferences
    return {
        "median_ms": shown_stats.median if shown_stats is not None else m.inference_ms.median,
        "stats": shown_stats,
        "process_medians_ms": m.process_medians_ms,
        "process_spread_pct": m.process_spread_pct,
        "unstable": m.unstable,
        "unstable_reasons": m.unstable_reasons,
        "load_ms_median": m.load_ms.median,
        "load_first_ms": m.load_first_ms,
        "first_inference_ms": m.first_inference_ms,
        "peak_load_ram_mb": m.peak_load_ram_mb,
        "peak_inference_ram_mb": m.peak_inference_ram_mb,
        "conditions": m.conditions,
        "throttled": (causes or "unexplained") if throttled else "",
        "generation": m.generation,
        "fallback": m.fallback,
    }


def entries_of(report: CampaignReport) -> tuple[ReportEntry, ...]:
    """Every entry of a campaign report (each task's row, raw samples and typed parts: the derived
    measurement, a fleet's merged figures), a capacity search's level rows and peaks figures left out."""
    entries, compared = [], []
    peaks = {j.index for j in report.campaign.jobs if j.spec.peaks is not None}
    for task in report.results:
        if task.row.get("CapacityRow") == "level":
            continue  # a capacity search's level: its task's Capacity row stands for it (results.caprows)
        if peaks and job_index_of(task.row.get("JobId", "")) in peaks:
            continue  # a peaks figure times no model: its own table (results.peakrows)
        signed, merged = task.signed, task.merged
        device = signed.device if signed is not None else None
        measurement = signed.measurement if signed is not None else None
        e2e = merged.e2e_ms if merged is not None else None
        entries.append(entry_of(task.row, task.samples_ms, device, measurement, e2e, task.price))
        timed = measurement and timed_of(
            task.row.get("JobId", ""),
            task.row.get("WorkerPeerId", ""),
            task.row.get("ModelSha256", ""),
            task.row.get("ComputeUnits", ""),
            measurement,
        )
        if timed and not flagged(task.row.get("Verified", "")):
            compared.append(timed)
    cells = speedups(compared)  # from the typed figures, so a results.json of any age shows them
    return tuple(e.with_(speedup=cells.get(e.task_id, "")) for e in entries)


def column_of(entry: ReportEntry, shared_units: Iterable[str] = ()) -> str:
    """The matrix column of an entry: its unit, with the job when several jobs share that unit."""
    return f"{entry.unit} · job {entry.job_index}" if entry.unit in set(shared_units) else entry.unit


def _shared_units(entries: Sequence[ReportEntry]) -> set[str]:
    jobs: dict[str, set[int]] = {}
    for e in entries:
        jobs.setdefault(e.unit, set()).add(e.job_index)
    return {unit for unit, indexes in jobs.items() if len(indexes) > 1}


def device_label(entry: ReportEntry, entries: Sequence[ReportEntry]) -> str:
    """A device's row name: its name, with the worker's id tail on every row when two workers share it."""
    if entry.device == NO_DEVICE:
        return NO_DEVICE
    workers = {e.worker for e in entries if e.device == entry.device and e.worker}
    return f"{entry.device} [{entry.worker[-6:] or 'no worker'}]" if len(workers) > 1 else entry.device


def _cell(entries: Sequence[ReportEntry], asked: bool) -> MatrixCell:
    """The cell of a device's tasks in one column: its first completed one (else its first), the
    others named in `also`."""
    entry = next((e for e in entries if e.complete), entries[0])
    return MatrixCell(
        median_ms=entry.median_ms if entry.complete else None,
        status=entry.detail if entry.fallback else entry.status,
        unstable=entry.unstable,
        task_id=entry.task_id,
        stats=entry.stats if entry.complete else None,
        detail=""
        if entry.complete or entry.fallback
        else entry.detail or (entry.verified if flagged(entry.verified) else ""),
        verified=verification_of(entry, asked),
        also=tuple(e.task_id for e in entries if e is not entry),
        speedup=entry.speedup if entry.complete else "",
    )


def latency_matrices(entries: Sequence[ReportEntry]) -> tuple[LatencyMatrix, ...]:
    """One device x compute-unit matrix per model, devices and columns sorted (no device last).

    A cell holds the completed task's median when there is one, else the task's ending.
    """
    matrices = []
    asked = any(e.verified.startswith(VERIFY_LABELS) for e in entries)
    for model in sorted({e.model for e in entries}):
        mine = [e for e in entries if e.model == model]
        shared = _shared_units(mine)
        grouped: dict[tuple[str, str], list[ReportEntry]] = {}
        for e in mine:
            grouped.setdefault((device_label(e, mine), column_of(e, shared)), []).append(e)
        devices = sorted({d for d, _ in grouped}, key=lambda d: (d == NO_DEVICE, d))
        columns = sorted({c for _, c in grouped})
        cells = tuple(
            tuple(_cell(grouped[(d, c)], asked) if (d, c) in grouped else None for c in columns)
            for d in devices
        )
        matrices.append(
            LatencyMatrix(model=model, devices=tuple(devices), columns=tuple(columns), cells=cells)
        )
    return tuple(matrices)
