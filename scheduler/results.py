"""Result rows: the seeds' CSV columns first, then the later reference ones, the extended ones, then a
generate task's (`scheduler.genrows`), then the energy ones (`scheduler.energyrows`).

Units: Ram and VRam in GB (whole numbers, like the seeds' "16"), FileSize and every other memory
column in MB, times in ms. Lists are joined with ";", booleans are "True"/"False", and a value
that does not apply is "".
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Final

from protocol import DeviceProfile, Measurement, ResultBody, for_csv
from scheduler.campaign import Campaign
from scheduler.caprows import CAPACITY_COLUMNS, capacity_columns
from scheduler.endpoints import endpoint_unit
from scheduler.energyrows import ENERGY_COLUMNS, energy_columns
from scheduler.fleet import FLEET_COLUMNS
from scheduler.genrows import GENERATION_COLUMNS, column_formulas, generation_columns
from scheduler.sustainrows import SUSTAIN_COLUMNS, sustain_columns
from scheduler.tasks import Status, TaskView

SEED_COLUMNS: Final = (
    "Status",
    "JobId",
    "FileName",
    "FileSize",
    "ComputeUnits",
    "DeviceName",
    "Soc",
    "Ram",
    "DeviceOs",
    "LoadMsMedian",
    "LoadMsAverage",
    "LoadMsStdDev",
    "PeakLoadRamUsage",
    "InferenceMsMedian",
    "InferenceMsAverage",
    "InferenceMsStdDev",
    "PeakInferenceRamUsage",
)
REFERENCE_COLUMNS: Final = (
    "CreatedUtc",
    "DeviceYear",
    "DiscreteGpu",
    "VRam",
    "DeviceOsVersion",
    "LoadMsFirst",
    "InferenceMsFirst",
)
EXTENDED_COLUMNS: Final = (
    "InferenceMsMin",
    "InferenceMsMax",
    "InferenceMsP90",
    "InferenceMsP95",
    "InferenceMsP99",
    "InferenceCv",
    "InferenceOutliers",
    "ProcessMedians",
    "ProcessSpreadPct",
    "Unstable",
    "UnstableReasons",
    "WarmupsUsed",
    "CpuCoresUsed",
    "BackgroundCores",
    "GpuUtilPct",
    "GpuMemMb",
    "Providers",
    "Fallback",
    "ModelSha256",
    "RuntimeVersions",
    "WorkerPeerId",
    "SignatureStatus",
    "Verified",
    "DeviceClass",
    "Claim",
    "InputShapes",
    "InputsDefaulted",
    "Trimmed",
    "FailureReason",
    "FailureStage",
    "Detail",
)
CSV_COLUMNS: Final = (
    *SEED_COLUMNS,
    *REFERENCE_COLUMNS,
    *EXTENDED_COLUMNS,
    *GENERATION_COLUMNS,
    *CAPACITY_COLUMNS,  # a capacity search's (`scheduler.caprows`)
    *ENERGY_COLUMNS,
    *FLEET_COLUMNS,
    *SUSTAIN_COLUMNS,
)
_MB: Final = 1024 * 1024


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _mb(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def _gb(mb: int) -> str:
    return str(round(mb / 1024)) if mb else ""


def _flag(value: bool) -> str:
    return "True" if value else "False"


def _task_columns(task: TaskView, status: Status, created_utc: str) -> dict[str, str]:
    row = dict.fromkeys(CSV_COLUMNS, "")
    row.update(
        Status=status.value,
        JobId=task.task_id,
        FileName=task.model.name,
        FileSize=f"{task.model.size / _MB:.3f}",
        ComputeUnits=endpoint_unit(task.model) or task.unit.value,
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
        "Ram": _gb(device.ram_mb),
        "DeviceOs": device.os,
        "DeviceYear": "" if device.device_year is None else str(device.device_year),
        "DiscreteGpu": ";".join(g.name for g in device.gpus),
        "VRam": _gb(device.vram_mb()),
        "DeviceOsVersion": device.os_version,
        "RuntimeVersions": ";".join(f"{k}={v}" for k, v in sorted(device.runtimes.items())),
    }


def _measurement_columns(m: Measurement) -> dict[str, str]:
    inference = m.inference_ms
    columns = {
        "LoadMsMedian": _ms(m.load_ms.median),
        "LoadMsAverage": _ms(m.load_ms.mean),
        "LoadMsStdDev": _ms(m.load_ms.stddev),
        "PeakLoadRamUsage": _mb(m.peak_load_ram_mb),
        "InferenceMsMedian": _ms(inference.median),
        "InferenceMsAverage": _ms(inference.mean),
        "InferenceMsStdDev": _ms(inference.stddev),
        "PeakInferenceRamUsage": _mb(m.peak_inference_ram_mb),
        "LoadMsFirst": _ms(m.load_first_ms),
        "InferenceMsFirst": _ms(m.first_inference_ms),
        "InferenceMsMin": _ms(inference.min),
        "InferenceMsMax": _ms(inference.max),
        "InferenceMsP90": _ms(inference.p90),
        "InferenceMsP95": _ms(inference.p95),
        "InferenceMsP99": _ms(inference.p99),
        "InferenceCv": f"{inference.cv:.4f}",
        "InferenceOutliers": str(inference.outliers),
        "ProcessMedians": ";".join(_ms(x) for x in m.process_medians_ms),
        "ProcessSpreadPct": f"{m.process_spread_pct:.2f}",
        "Unstable": _flag(m.unstable),
        "UnstableReasons": ";".join(m.unstable_reasons),
        "WarmupsUsed": str(m.warmups_used),
        "CpuCoresUsed": f"{m.cpu_cores_used:.2f}",
        "BackgroundCores": f"{m.conditions.background_cores:.2f}",
        "GpuUtilPct": "" if m.gpu_util_pct is None else f"{m.gpu_util_pct:.1f}",
        "GpuMemMb": _mb(m.gpu_mem_mb),
        "Providers": ";".join(m.providers),
        "Fallback": _flag(m.fallback),
        "InputShapes": ";".join(i.label() for i in m.inputs),
        "InputsDefaulted": _flag(m.inputs_defaulted) if m.inputs else "",
        "Trimmed": ";".join(m.trimmed),  # what the worker cut to fit one envelope (node/worker/fit.py)
    }
    if m.conditions.runtime_versions:
        columns["RuntimeVersions"] = ";".join(
            f"{k}={v}" for k, v in sorted(m.conditions.runtime_versions.items())
        )
    columns.update(generation_columns(m.generation))
    columns.update(capacity_columns(m))
    columns.update(energy_columns(m.energy))
    columns.update(sustain_columns(m))
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
    row.update(_device_columns(body.device))
    row.update(_measurement_columns(body.measurement))
    row.update(ModelSha256=body.model_sha256, WorkerPeerId=body.worker, SignatureStatus=signature)
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


def results_document(
    campaign_id: str,
    campaign: Campaign,
    rows_with_samples: Iterable[tuple[Mapping[str, str], Sequence[float]]],
) -> dict[str, object]:
    """results.json: the campaign, the columns, the formula of each computed generation column, and
    every row with its raw inference samples (ms)."""
    return {
        "campaign_id": campaign_id,
        "campaign": campaign.model_dump(mode="json"),
        "columns": list(CSV_COLUMNS),
        "formulas": column_formulas(),
        "results": [{"row": dict(row), "samples_ms": list(samples)} for row, samples in rows_with_samples],
    }
