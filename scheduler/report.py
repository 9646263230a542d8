"""What a campaign report shows, as data: entries, the device x unit latency matrix, and diffs.

Pure: no files, clock, plotting or printing. `node.submitter.render` draws and writes what this module shapes.

The diff compares two campaigns per device and compute unit (a generate task: its `llmview` figures
first, each tested on its per-request values, then its end-to-end latency). Its significance test is the
Mann-Whitney U test on the raw inference samples (normal approximation with tie and continuity
corrections, two-sided). Samples of one process are not independent of each other (a process can
sit at 2x for its whole life on a shared machine), so a change counts as significant only when
the test's p-value is below `alpha`, the medians differ by at least `threshold_pct`, and, where
both sides ran at least two processes, no process median of one side falls inside the range of the
other's (the process is the unit that repeats).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from protocol import DeviceProfile, GenerationStats, Measurement, RunConditions, Stats, Value
from scheduler.llmview import E2E, LLM_FIGURES, LlmFigure, headline, per_request
from scheduler.significance import MannWhitney, mann_whitney

NO_DEVICE: Final = "(no device)"
DEFAULT_THRESHOLD_PCT: Final = 5.0
DEFAULT_ALPHA: Final = 0.05


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

    @property
    def complete(self) -> bool:
        """Whether the task produced a measurement."""
        return self.status == "Complete" and self.median_ms is not None


class MatrixCell(Value):
    """One device x unit cell: the median of process medians, or the task's ending."""

    median_ms: float | None = None
    status: str = ""
    unstable: bool = False
    task_id: str = ""


class LatencyMatrix(Value):
    """Median inference latency of one model, devices down, compute units (or jobs) across."""

    model: str
    devices: tuple[str, ...]
    columns: tuple[str, ...]
    cells: tuple[tuple[MatrixCell | None, ...], ...]


class DiffRow(Value):
    """One device and unit compared between two campaigns (before = A, after = B)."""

    device: str
    column: str
    metric: str = "latency ms"
    before_ms: float | None = None
    after_ms: float | None = None
    change_pct: float | None = None
    p_value: float | None = None
    significant: bool = False
    regression: bool = False
    improvement: bool = False
    verdict: str
    note: str = ""
    n_before: int = 0
    n_after: int = 0


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
        samples_ms=tuple(samples_ms),
        device_profile=device,
        detail=detail,
    )
    return entry if measurement is None else entry.with_(**_figures(measurement))


def _figures(m: Measurement) -> dict[str, Any]:
    """An entry's figures from a derived measurement."""
    sustained = m.sustained
    throttled = sustained is not None and sustained.throttled
    causes = ";".join(c.value for c in sustained.causes) if sustained is not None else ""
    return {
        "median_ms": m.inference_ms.median,
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
    }


def entries_from_document(document: Mapping[str, Any]) -> tuple[ReportEntry, ...]:
    """Every entry of a results.json document (rows, raw samples, each row's "signed" part with the
    derived measurement, a fleet's "merged" figures), a capacity search's level rows left out."""
    entries = []
    for result in document.get("results", []):
        if result["row"].get("CapacityRow") == "level":
            continue  # a capacity search's level: its task's Capacity row stands for it (results.caprows)
        signed = result.get("signed") or None
        device = DeviceProfile.model_validate(signed["device"]) if signed else None
        measurement = Measurement.model_validate(signed["measurement"]) if signed else None
        merged = (result.get("merged") or {}).get("e2e_ms")
        e2e = Stats.model_validate(merged) if merged else None
        entries.append(entry_of(result["row"], result.get("samples_ms", ()), device, measurement, e2e))
    return tuple(entries)


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


def _cell(entry: ReportEntry) -> MatrixCell:
    return MatrixCell(
        median_ms=entry.median_ms if entry.complete else None,
        status=entry.status,
        unstable=entry.unstable,
        task_id=entry.task_id,
    )


def latency_matrices(entries: Sequence[ReportEntry]) -> tuple[LatencyMatrix, ...]:
    """One device x compute-unit matrix per model, devices and columns sorted (no device last).

    A cell holds the completed task's median when there is one, else the task's ending.
    """
    matrices = []
    for model in sorted({e.model for e in entries}):
        mine = [e for e in entries if e.model == model]
        shared = _shared_units(mine)
        placed: dict[tuple[str, str], ReportEntry] = {}
        for e in mine:
            key = (device_label(e, mine), column_of(e, shared))
            if key not in placed or (e.complete and not placed[key].complete):
                placed[key] = e
        devices = sorted({d for d, _ in placed}, key=lambda d: (d == NO_DEVICE, d))
        columns = sorted({c for _, c in placed})
        cells = tuple(
            tuple(_cell(placed[(d, c)]) if (d, c) in placed else None for c in columns) for d in devices
        )
        matrices.append(
            LatencyMatrix(model=model, devices=tuple(devices), columns=tuple(columns), cells=cells)
        )
    return tuple(matrices)


def _by_fingerprint_and_name(e: ReportEntry) -> tuple[object, ...] | None:
    return (e.fingerprint, e.device, e.unit, e.job_index)


def _by_fingerprint(e: ReportEntry) -> tuple[object, ...] | None:
    """A renamed device: the same fingerprint under another name."""
    return (e.fingerprint, e.unit, e.job_index) if e.fingerprint else None


def _by_name(e: ReportEntry) -> tuple[object, ...] | None:
    return (e.device, e.unit, e.job_index)


_KEYS: Final[tuple[Callable[[ReportEntry], tuple[object, ...] | None], ...]] = (
    _by_fingerprint_and_name,
    _by_fingerprint,
    _by_name,
)
"""How two campaigns' entries are paired, tried in turn: same device fingerprint and name, same
fingerprint (a renamed device), same name."""


Pair = tuple[ReportEntry | None, ReportEntry | None]


def match_entries(before: Sequence[ReportEntry], after: Sequence[ReportEntry]) -> list[Pair]:
    """Pair the tasks of two campaigns by device and (unit, job).

    Device fingerprint and name together first; then the fingerprint alone, then the name alone,
    each only where it picks exactly one task on both sides. Tasks that never reached a device are
    left out; the rest that found no partner come back alone.
    """
    left = [e for e in before if e.device != NO_DEVICE]
    right = [e for e in after if e.device != NO_DEVICE]
    pairs: list[Pair] = []
    for key in _KEYS:
        groups_a: dict[tuple[object, ...], list[ReportEntry]] = {}
        groups_b: dict[tuple[object, ...], list[ReportEntry]] = {}
        for entries, groups in ((left, groups_a), (right, groups_b)):
            for e in entries:
                k = key(e)
                if k is not None:
                    groups.setdefault(k, []).append(e)
        for k, found in groups_a.items():
            other = groups_b.get(k, [])
            if len(found) == 1 and len(other) == 1:
                pairs.append((found[0], other[0]))
                left.remove(found[0])
                right.remove(other[0])
    pairs.extend((e, None) for e in left)
    pairs.extend((None, e) for e in right)
    return pairs


def _separated(a: Sequence[float], b: Sequence[float]) -> bool | None:
    """Whether the process medians of two sides do not overlap (None: fewer than two processes a side)."""
    if len(a) < 2 or len(b) < 2:
        return None
    return max(a) < min(b) or max(b) < min(a)


def _alone(a: ReportEntry | None, b: ReportEntry | None) -> DiffRow | None:
    one = a or b
    assert one is not None
    column = f"{one.unit} · job {one.job_index}" if one.job_index else one.unit
    row = DiffRow(device=one.device, column=column, verdict="")
    if a is None or b is None:
        return row.with_(verdict="only in A" if b is None else "only in B")
    if not a.complete or not b.complete:
        missing = " and ".join(n for n, e in (("A", a), ("B", b)) if not e.complete)
        return row.with_(verdict=f"no result in {missing}", before_ms=a.median_ms, after_ms=b.median_ms)
    return None


def _notes(
    a: ReportEntry,
    b: ReportEntry,
    test: MannWhitney | None,
    change: float,
    separated: bool | None,
    bounds: tuple[float, float],
) -> list[str]:
    """Why a change did not count, and which side was flagged unstable."""
    threshold_pct, alpha = bounds
    notes = []
    if test is None:
        notes.append("no raw samples")
    elif test.p_value >= alpha:
        notes.append(f"p >= {alpha:g}")
    if abs(change) < threshold_pct:
        notes.append(f"change under {threshold_pct:g}%")
    if separated is False:
        notes.append("process medians overlap")
    notes.extend(f"{n} unstable" for n, e in (("A", a), ("B", b)) if e.unstable)
    notes.extend(f"{n} throttled ({e.throttled})" for n, e in (("A", a), ("B", b)) if e.throttled)
    return notes


def compare(
    a: ReportEntry | None,
    b: ReportEntry | None,
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    alpha: float = DEFAULT_ALPHA,
) -> DiffRow:
    """One diff row: change of the median from A to B, the test on raw samples, and the verdict."""
    alone = _alone(a, b)
    if alone is not None:
        return alone
    assert a is not None
    assert a.median_ms is not None
    assert b is not None
    assert b.median_ms is not None
    change = (b.median_ms - a.median_ms) / a.median_ms * 100.0 if a.median_ms > 0 else 0.0
    test = mann_whitney(a.samples_ms, b.samples_ms) if a.samples_ms and b.samples_ms else None
    separated = _separated(a.process_medians_ms, b.process_medians_ms)
    significant = (
        test is not None and test.p_value < alpha and abs(change) >= threshold_pct and separated is not False
    )
    verdict = ("regression" if change > 0 else "improvement") if significant else "no significant change"
    return DiffRow(
        device=a.device if a.device == b.device else f"{a.device} / {b.device}",
        column=f"{a.unit} · job {a.job_index}" if a.job_index else a.unit,
        metric=E2E.label if a.generation is not None and b.generation is not None else "latency ms",
        before_ms=a.median_ms,
        after_ms=b.median_ms,
        change_pct=change,
        p_value=test.p_value if test is not None else None,
        significant=significant,
        regression=significant and change > 0,
        improvement=significant and change < 0,
        verdict=verdict,
        note="; ".join(_notes(a, b, test, change, separated, (threshold_pct, alpha))),
        n_before=len(a.samples_ms),
        n_after=len(b.samples_ms),
    )


def compare_figure(a: ReportEntry, b: ReportEntry, figure: LlmFigure, bounds: tuple[float, float]) -> DiffRow:
    """One LLM figure of two generate tasks compared, tested on its per-request values, better either way."""
    threshold_pct, alpha = bounds
    before, after = headline(a.generation, figure), headline(b.generation, figure)
    change = (after - before) / before * 100.0 if before and after is not None else 0.0
    xs, ys = per_request(a.generation, figure), per_request(b.generation, figure)
    test = mann_whitney(xs, ys) if xs and ys else None
    significant = test is not None and test.p_value < alpha and abs(change) >= threshold_pct
    worse = change < 0 if figure.higher_is_better else change > 0
    return compare(a, b, threshold_pct, alpha).with_(
        metric=figure.label,
        before_ms=before,
        after_ms=after,
        change_pct=change,
        p_value=test.p_value if test is not None else None,
        significant=significant,
        regression=significant and worse,
        improvement=significant and not worse,
        verdict=("regression" if worse else "improvement") if significant else "no significant change",
        note="; ".join(_notes(a, b, test, change, None, bounds)),
        n_before=len(xs),
        n_after=len(ys),
    )


def _rows_of(a: ReportEntry | None, b: ReportEntry | None, bounds: tuple[float, float]) -> list[DiffRow]:
    """A pair's rows: a generate task's LLM figures that both sides have first, then its latency."""
    latency = compare(a, b, *bounds)
    if not (a and b and a.complete and b.complete and a.generation and b.generation):
        return [latency]
    both = [f for f in LLM_FIGURES if None not in (headline(a.generation, f), headline(b.generation, f))]
    return [*(compare_figure(a, b, f, bounds) for f in both), latency]


def diff_entries(
    before: Sequence[ReportEntry],
    after: Sequence[ReportEntry],
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    alpha: float = DEFAULT_ALPHA,
) -> tuple[DiffRow, ...]:
    """Every matched device and unit of two campaigns compared (see the module docstring for the rule).

    Args:
        before: campaign A's entries.
        after: campaign B's entries.
        threshold_pct: the smallest change of the median that can count, in percent.
        alpha: the significance level of the Mann-Whitney test.

    Returns:
        One row per pair and per unmatched task (a generate task's pair: one per LLM figure, then its
        end-to-end latency), sorted by device then column, the figures in their order.
    """
    rows = [r for a, b in match_entries(before, after) for r in _rows_of(a, b, (threshold_pct, alpha))]
    return tuple(sorted(rows, key=lambda r: (r.device, r.column)))  # stable: each pair's order kept
