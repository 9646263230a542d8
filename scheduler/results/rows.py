"""A task's result row and the two files: results.csv and results.json.

The columns, their order, units and forms are the registry's (`scheduler.results.columns`); a
section's cells come from its module (`genrows`, `caprows`, `energyrows`, `sustainrows`, `peakrows`; a
fleet's from `fleetrows`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Final

from protocol import DeviceProfile, GenerationStats, Measurement, ResultBody, for_csv
from protocol.sessions import ttft_by_turn_text
from scheduler.results.caprows import capacity_columns
from scheduler.results.columns import CSV_COLUMNS, cell, cells
from scheduler.results.energyrows import energy_columns
from scheduler.results.genrows import generation_columns
from scheduler.results.peakrows import peak_columns
from scheduler.results.sustainrows import sustain_columns
from scheduler.state.tasks import Status, TaskView

_MB: Final = 1024 * 1024


def _gb(name: str, mb: int) -> str:
    return cell(name, round(mb / 1024)) if mb else ""


def _task_columns(task: TaskView, status: Status, created_utc: str) -> dict[str, str]:
    row = dict.fromkeys(CSV_COLUMNS, "")
    row.update(
        Status=status.value,
        JobId=task.task_id,
        FileName=task.model.name,
        FileSize=cell("FileSize", task.model.size / _MB),
        ComputeUnits=task.shown_unit,
        DeviceName=task.device_name,
        CreatedUtc=created_utc,
        ModelSha256=task.model.sha256,
        WorkerPeerId=task.peer_id or "",
    )
    return row


def _device_columns(device: DeviceProfile) -> dict[str, str]:
    return {
        "DeviceName": device.device_name,
        "Soc": device.soc,
        "Ram": _gb("Ram", device.ram_mb),
        "DeviceOs": device.os,
        "DeviceYear": cell("DeviceYear", device.device_year),
        "DiscreteGpu": cells("DiscreteGpu", (g.name for g in device.gpus)),
        "VRam": _gb("VRam", device.vram_mb()),
        "DeviceOsVersion": device.os_version,
        "RuntimeVersions": cells("RuntimeVersions", (f"{k}={v}" for k, v in sorted(device.runtimes.items()))),
    }


def seed_figures(m: Measurement) -> dict[str, float]:
    """The seeds' measurement columns as numbers, from a derived measurement (the REST API's result)."""
    return {
        "LoadMsMedian": m.load_ms.median,
        "LoadMsAverage": m.load_ms.mean,
        "LoadMsStdDev": m.load_ms.stddev,
        "PeakLoadRamUsage": m.peak_load_ram_mb,
        "InferenceMsMedian": m.inference_ms.median,
        "InferenceMsAverage": m.inference_ms.mean,
        "InferenceMsStdDev": m.inference_ms.stddev,
        "PeakInferenceRamUsage": m.peak_inference_ram_mb,
    }


Figure = float | bool | str | tuple[str, ...] | None
"""A figure as the REST API and the dashboard get it: a number, a flag, text or a list, never a cell."""


def shown_figures(m: Measurement) -> dict[str, Figure]:
    """The figures the dashboard draws, by column name, typed, from a derived measurement: the seeds'
    columns, the inference percentiles, stability, throttling and a generate task's lead figures."""
    inference, g, sustained = m.inference_ms, m.generation, m.sustained
    figures: dict[str, Figure] = {**seed_figures(m)}
    figures |= {
        "InferenceMsMin": inference.min,
        "InferenceMsMax": inference.max,
        "InferenceMsP90": inference.p90,
        "InferenceMsP95": inference.p95,
        "InferenceMsP99": inference.p99,
        "Unstable": m.unstable,
        "UnstableReasons": m.unstable_reasons,
        "Throttled": sustained.throttled if sustained is not None else None,
        "ThrottleCauses": tuple(c.value for c in sustained.causes) if sustained is not None else (),
        "ThrottleDetail": sustained.detail if sustained is not None else "",
        "TtftMsMedian": g.ttft_ms.median if g is not None and g.ttft_ms.n else None,
        "TpotMsMedian": g.tpot_ms.median if g is not None and g.tpot_ms.n else None,
        "ItlMsP99": g.itl_ms.p99 if g is not None and g.itl_ms.n else None,
        "DecodeTokPerS": g.decode_tok_per_s if g is not None and g.requests > g.errors else None,
        "RougeL": g.rouge.rouge_l if g is not None and g.rouge is not None else None,
        "E2eMsMedian": g.e2e_ms.median if g is not None and g.e2e_ms.n else None,
    }  # a figure no successful request gave is None (drawn empty), never 0
    figures |= _session_figures(g)
    for stats, names in ((m.load_ms, _LOAD_TIMES), (inference, _INFERENCE_TIMES)):
        if stats.n == 0:
            figures |= {name: None for name in names if name in figures}
    return figures


def _session_figures(g: GenerationStats | None) -> dict[str, Figure]:
    """A session run's figures for the dashboard: TTFT by turn (`1:120.3` per turn), its sessions, the
    turns they completed and their median duration; {} without sessions."""
    s = g.sessions if g is not None else None
    if g is None or s is None:
        return {}
    return {
        "TtftMsByTurn": tuple(ttft_by_turn_text([t]) for t in g.by_turn),
        "Sessions": float(s.sessions),
        "SessionsCompleted": float(s.completed),
        "SessionTurnsMean": s.turns_mean,
        "SessionDurationSMedian": s.duration_s.median if s.duration_s.n else None,
    }


def _time_columns(m: Measurement) -> dict[str, str]:
    """The seeds' and the reference load and inference times; a time nothing was measured for (an
    endpoint task loads nothing; a run with no successful request has no latency) is empty, never 0."""
    load, inference = m.load_ms, m.inference_ms
    columns = {name: cell(name, value) for name, value in seed_figures(m).items()}
    columns |= {
        "LoadMsFirst": cell("LoadMsFirst", m.load_first_ms),
        "InferenceMsFirst": cell("InferenceMsFirst", m.first_inference_ms),
        "InferenceMsMin": cell("InferenceMsMin", inference.min),
        "InferenceMsMax": cell("InferenceMsMax", inference.max),
        "InferenceMsP90": cell("InferenceMsP90", inference.p90),
        "InferenceMsP95": cell("InferenceMsP95", inference.p95),
        "InferenceMsP99": cell("InferenceMsP99", inference.p99),
    }
    for stats, names in ((load, _LOAD_TIMES), (inference, _INFERENCE_TIMES)):
        if stats.n == 0:
            columns |= dict.fromkeys(names, "")
    return columns


_LOAD_TIMES: Final = ("LoadMsMedian", "LoadMsAverage", "LoadMsStdDev", "LoadMsFirst")
_INFERENCE_TIMES: Final = (
    "InferenceMsMedian", "InferenceMsAverage", "InferenceMsStdDev", "InferenceMsFirst", "InferenceMsMin",
    "InferenceMsMax", "InferenceMsP90", "InferenceMsP95", "InferenceMsP99",
)  # fmt: skip


def _measurement_columns(m: Measurement) -> dict[str, str]:
    inference = m.inference_ms
    columns = _time_columns(m)
    columns |= {
        "InferenceCv": cell("InferenceCv", inference.cv),
        "InferenceOutliers": cell("InferenceOutliers", inference.outliers),
        "ProcessMedians": cells("ProcessMedians", m.process_medians_ms),
        "ProcessSpreadPct": cell("ProcessSpreadPct", m.process_spread_pct),
        "Unstable": cell("Unstable", m.unstable),
        "UnstableReasons": cells("UnstableReasons", m.unstable_reasons),
        "WarmupsUsed": cell("WarmupsUsed", m.warmups_used),
        "CpuCoresUsed": cell("CpuCoresUsed", m.cpu_cores_used),
        "BackgroundCores": cell("BackgroundCores", m.conditions.background_cores),
        "GpuUtilPct": cell("GpuUtilPct", m.gpu_util_pct),
        "GpuMemMb": cell("GpuMemMb", m.gpu_mem_mb),
        "Providers": cell("Providers", m.placement()),
        "Fallback": cell("Fallback", m.fallback),
        "InputShapes": cells("InputShapes", (i.label() for i in m.inputs)),
        "InputsDefaulted": cell("InputsDefaulted", m.inputs_defaulted) if m.inputs else "",
        # what the worker cut to fit one envelope (node/worker/fit.py)
        "Trimmed": cells("Trimmed", m.trimmed),
    }
    if m.conditions.runtime_versions:
        versions = sorted(m.conditions.runtime_versions.items())
        columns["RuntimeVersions"] = cells("RuntimeVersions", (f"{k}={v}" for k, v in versions))
    if m.conditions.runtime_settings:  # how the runtime compiled it (OpenVINO: precision, hint, streams...)
        settings = sorted(m.conditions.runtime_settings.items())
        columns["RuntimeSettings"] = cells("RuntimeSettings", (f"{k}={v}" for k, v in settings))
    if m.async_runs:  # the runtime's throughput run (OpenVINO), the median over processes
        columns["ThroughputPerS"] = cell("ThroughputPerS", m.throughput_per_s)
        columns["AsyncRequests"] = cell("AsyncRequests", max(run.requests for run in m.async_runs))
    columns.update(generation_columns(m.generation))
    columns.update(capacity_columns(m))
    columns.update(energy_columns(m.energy))
    columns.update(sustain_columns(m))
    columns.update(peak_columns(m))
    return columns


def result_row(task: TaskView, body: ResultBody, signature: str, created_utc: str) -> dict[str, str]:
    """The row of a completed task.

    Args:
        task: the task as the scheduler holds it.
        body: the verified result body.
        signature: how its signature checked out ("verified", or why not).
        created_utc: when the result was stored, ISO 8601.

    Returns:
        Every column of `CSV_COLUMNS`, as text.
    """
    row = _task_columns(task, Status.COMPLETE, created_utc)
    row.update(body_columns(body))
    row.update(SignatureStatus=signature)
    return row


def body_columns(body: ResultBody) -> dict[str, str]:
    """The cells of a completed task's row that come from its signed body alone: its device, every
    figure of its measurement, its model's digest and its worker (`sark-node verify` renders them
    again from the figures it derived)."""
    row = _device_columns(body.device)
    row.update(_measurement_columns(body.measurement))
    row.update(ModelSha256=body.model_sha256, WorkerPeerId=body.worker)
    return row


def failure_row(task: TaskView, status: Status, reason: str, detail: str, created_utc: str) -> dict[str, str]:
    """The row of a task that ended without a measurement (Failed, Cancelled or Unschedulable).

    `created_utc` stamps a task that has not ended; an ended task keeps the time it ended.
    """
    if task.ended_at is not None:
        created_utc = datetime.fromtimestamp(task.ended_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    row = _task_columns(task, status, created_utc)
    row.update(FailureReason=reason, FailureStage=task.failure_stage, Detail=detail)
    return row


def to_csv(rows: Iterable[Mapping[str, str]]) -> str:
    """results.csv: a header of `CSV_COLUMNS` then one line per row (missing columns are empty).

    Every cell passes `protocol.for_csv`, the CSV seam: no formula, no control character.
    """
    buffer = io.StringIO()
    writer = csv.DictWriter(
        buffer, fieldnames=CSV_COLUMNS, restval="", extrasaction="raise", lineterminator="\n"
    )
    writer.writeheader()
    writer.writerows({name: for_csv(cell) for name, cell in row.items()} for row in rows)
    return buffer.getvalue()
