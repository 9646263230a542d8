"""The original orchestrator's JSON shapes, filled from the swarm's view and the campaign store.

A worker is a swarm peer: its id is the libp2p peer id, its status what its advert, load and the last
discovery round say ("active", "busy" or "faulty"). A seeds "job" is a task here: a job with
``devices: all`` fans out into one task per matching peer, so counts are of tasks once placed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from starlette.responses import JSONResponse

import scheduler as sch
from node.http.state import CampaignState, Seen
from protocol import Measurement
from scheduler.results import Front, Ranking, decimals_for, verification_groups

SEED_RESULT_FIELDS: Final = sch.SEED_COLUMNS[sch.SEED_COLUMNS.index("LoadMsMedian") :]
"""The seeds' measurement columns, which `GET /jobs/{id}` returns in its result."""

_BREAKDOWN: Final[dict[sch.TaskState, str]] = {
    sch.TaskState.PENDING: "pending",
    sch.TaskState.OFFERED: "pending",
    sch.TaskState.LEASED: "running",
    sch.TaskState.DONE: "complete",
    sch.TaskState.FAILED: "failed",
    sch.TaskState.UNSCHEDULABLE: "failed",
    sch.TaskState.UNVERIFIABLE: "failed",
    sch.TaskState.CANCELLED: "failed",
}


def strict(value: Any) -> Any:
    """A JSON value with every NaN and infinity made None: JSON has no such numbers (Starlette refuses
    them, and a browser's `JSON.parse` too), and a peer's heartbeat, advert or row may carry one."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict(v) for v in value]
    return value


class ApiJson(JSONResponse):
    """Every JSON answer of the API: strict JSON whatever a peer sent (`strict`)."""

    def render(self, content: Any) -> bytes:
        """The body, non-finite numbers as null."""
        return super().render(strict(content))


def iso(t: float) -> str:
    """A wall-clock time as the seeds print it (ISO 8601, UTC, seconds)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def worker_status(seen: Seen, now: float, stale_after_s: float) -> str:
    """ "faulty" when unseen for `stale_after_s`, "busy" when it runs something, else "active"."""
    if not seen.fresh and now - seen.last_seen > stale_after_s:
        return "faulty"
    return "busy" if seen.view.load.running > 0 else "active"


def _ip(addrs: Iterable[str]) -> str:
    for addr in addrs:
        parts = addr.split("/")
        if len(parts) > 2 and parts[1] in ("ip4", "ip6"):
            return parts[2]
    return ""


def worker(seen: Seen, now: float, stale_after_s: float) -> dict[str, Any]:
    """A worker object: the seeds' fields, then the swarm's own (units with reasons, load, addresses)."""
    view = seen.view
    p = view.profile
    status = worker_status(seen, now, stale_after_s)
    return {
        "worker_id": view.peer_id,
        "device_name": p.device_name,
        "ip_address": _ip(seen.addrs),
        "capabilities": [u.value for u in p.usable_units()],
        "device_info": {
            "Soc": p.soc,
            "Ram": f"{p.ram_mb / 1024:.0f}",
            "DeviceOs": p.os,
            "DeviceOsVersion": p.os_version,
            "UDID": p.fingerprint,
        },
        "status": status,
        "last_heartbeat": iso(seen.last_seen),
        "is_healthy": status != "faulty",
        "source": "swarm",
        "reachability": view.reachability,
        "addresses": list(seen.addrs),
        "units": [{"unit": u.unit.value, "usable": u.usable, "reason": u.reason} for u in p.units],
        "load": view.load.model_dump(mode="json"),
    }


def health(seen: Seen, now: float, stale_after_s: float) -> dict[str, Any]:
    """A worker's health object (seeds' GET /workers/{id}/health)."""
    status = worker_status(seen, now, stale_after_s)
    return {
        "worker_id": seen.view.peer_id,
        "device_name": seen.view.profile.device_name,
        "status": status,
        "is_healthy": status != "faulty",
        "last_heartbeat": iso(seen.last_seen),
        "seconds_since_heartbeat": round(max(0.0, now - seen.last_seen), 1),
    }


def breakdown(tasks: Iterable[sch.TaskView]) -> dict[str, int]:
    """Tasks counted by the seeds' job states."""
    counts = Counter(_BREAKDOWN[t.state] for t in tasks)
    return {k: counts.get(k, 0) for k in ("pending", "running", "complete", "failed")}


def campaign_status(state: CampaignState) -> str:
    """ "running", "completed", "cancelled", or "interrupted" (stored as running, but no loop runs it)."""
    if state.running:
        return "running"
    if state.record.status == "cancelled":
        return "cancelled"
    if state.record.status == "finished":
        cancelled = state.tasks and all(t.state == sch.TaskState.CANCELLED for t in state.tasks)
        return "cancelled" if cancelled else "completed"
    return "interrupted" if state.record.status == "running" else state.record.status


def _model_url(state: CampaignState) -> str:
    urls = [m.url for m in state.campaign.models if m.url]
    return urls[0] if urls else ""


def task(view: sch.TaskView) -> dict[str, Any]:
    """A task with its live progress, for the dashboard and GET /jobs/{id}: its state, whether that is
    an ending, and a phase only while it is leased (`TaskView.shown_phase`)."""
    p = view.progress
    return {
        "task_id": view.task_id,
        "job_index": view.job_index,
        "compute_unit": view.unit.value,
        "state": view.state.value,
        "ended": view.ended,
        "status": _BREAKDOWN[view.state],
        "worker_id": view.peer_id,
        "device_name": view.device_name,
        "phase": view.shown_phase.value if view.shown_phase else None,
        "done": p.done,
        "total": p.total,
        "median_ms": p.median_ms,
        "attempts": len(view.attempts),
        "detail": view.detail,
        "reasons": list(view.reasons),
    }


def campaign(
    state: CampaignState,
    fronts: tuple[Front, ...] = (),
    ranking: Ranking | None = None,
    speedups: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    """A campaign object (seeds' GET /campaigns/{id}), with its tasks, each replica group's
    verification (`verification`), its sweep's fronts and its ranking (`ApiState.fronts`: [] and
    null where none), and each task's SpeedupVsCpu (`ApiState.speedups`: (task id, cell) pairs, as an
    object), as results.json has them; the dashboard draws them."""
    counts = breakdown(state.tasks)
    total = len(state.tasks) if state.tasks else len(state.campaign.jobs)
    return {
        "campaign_id": state.record.campaign_id,
        "name": state.record.name,
        "model_url": _model_url(state),
        "status": campaign_status(state),
        "created_at": state.record.created_utc,
        "total_jobs": total,
        "completed_jobs": counts["complete"],
        "job_breakdown": counts,
        "states": {s.value: n for s, n in sch.state_counts(t.state for t in state.tasks).items()},
        "tasks": [task(t) for t in state.tasks],
        "error": state.error or None,
        "verification": verification(state.tasks),
        "fronts": [f.model_dump(mode="json") for f in fronts],
        "ranking": None if ranking is None else ranking.model_dump(mode="json"),
        "speedups": dict(speedups),
    }


def verification(tasks: Iterable[sch.TaskView]) -> list[dict[str, Any]]:
    """Each replica group's verification (`scheduler.results.verification_groups`, as results.json
    has it): the agreed figure, the band, each replica's peer, figure, network and verdict, the
    outliers and why; [] when no job asked `verify:`. The dashboard draws it."""
    return [g.model_dump(mode="json") for g in verification_groups(tasks)]


def created(state: CampaignState) -> dict[str, Any]:
    """The seeds' answer to POST /campaigns: one pending job per expanded campaign job."""
    cid = state.record.campaign_id
    return {
        "campaign_id": cid,
        "total_jobs": len(state.campaign.jobs),
        "status": "running",
        "jobs": [
            {
                "job_id": f"{cid}-job-{job.index}",
                "compute_unit": job.spec.compute_unit.value,
                "status": "pending",
            }
            for job in state.campaign.jobs
        ],
    }


def result(task: sch.ReportTask) -> dict[str, Any]:
    """A result in the seeds' JSON: Status, the timing columns as numbers from the derived
    measurement (None without one; never read back from the row's text; NaN or infinity becomes null
    in the answer, `ApiJson`), and the row."""
    row, measurement = task.row, task.measurement
    out: dict[str, Any] = {"status": row.get("Status", "")}
    figures = sch.seed_figures(measurement) if measurement is not None else {}
    out.update({name: figures.get(name) for name in SEED_RESULT_FIELDS})
    out["row"] = dict(row)
    out["figures"] = dashboard_figures(measurement) if measurement is not None else None
    return out


def dashboard_figures(measurement: Measurement) -> dict[str, Any]:
    """The figures the dashboard draws (`scheduler.shown_figures`), with the inference sample's count
    (`InferenceN`: its tail ends "n 300", as report.html's) and the decimals its spread supports
    (`InferenceDecimals`: `scheduler.results.decimals_for`, the rule every other view rounds by)."""
    inference = measurement.inference_ms
    figures: dict[str, Any] = dict(sch.shown_figures(measurement))
    figures["InferenceN"] = inference.n
    figures["InferenceDecimals"] = decimals_for(inference if inference.n else None)
    return figures


def job_results(
    tasks: Iterable[sch.ReportTask], task_ids: Collection[str], *, asked: bool
) -> list[dict[str, Any]]:
    """The results of a job's stored tasks (`task_ids`) for GET /jobs/{id} and the dashboard: each
    task's row as the campaign's files render it (`campaign_rows`: its Verified, quorum and cost
    columns), never a row rendered again without them; Verified left blank where the job asked no
    verification (`asked`), as every report's view leaves it (`scheduler.results.verification_of`)."""
    shown = []
    for task in tasks:
        if task.row.get("JobId") in task_ids:
            out = result(task)
            if not asked:
                out["row"]["Verified"] = ""
            shown.append(out)
    return shown
