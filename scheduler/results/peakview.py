"""The peaks table every view renders (report.html, Markdown, the terminal): one line per device x figure.

`peak_lines`: the figures grouped by figure, in the campaign's order, each device's line within it, the
figure as the submitter derived it (`scheduler.results.peakrows`); a task that ended without a figure
(unavailable on that unit, refused, failed) is a line with its status and why.
"""

from __future__ import annotations

from protocol import BANDWIDTHS, Value
from scheduler.results.document import CampaignReport, ReportTask
from scheduler.results.peakrows import peak_size


class PeakLine(Value):
    """One device's line of the peaks table: its figure, or why it has none.

    Attributes:
        precision: the figure asked (fp32 ... fp8, read, write, copy).
        per_s: the figure (GFLOPS, GOPS or GB/s: `figure`), None where the task ended without one.
        status: the task's status ("Complete", "Failed", ...).
        detail: why there is no figure (the failure's reason and detail), or "".
    """

    task_id: str
    device: str
    worker: str = ""
    unit: str
    precision: str
    figure: str
    per_s: float | None = None
    cv: float | None = None
    size: str = ""
    library: str = ""
    kernel: str = ""
    status: str
    detail: str = ""


def peak_jobs(report: CampaignReport) -> dict[int, str]:
    """The campaign's peaks jobs: job index -> the figure it asks."""
    return {j.index: j.spec.peaks.precision for j in report.campaign.jobs if j.spec.peaks is not None}


def _job_index(task_id: str) -> int:
    _, _, tail = task_id.rpartition("-job-")
    head = tail.split("-", 1)[0]
    return int(head) if head.isdigit() else -1


def is_peak_task(task: ReportTask, jobs: dict[int, str]) -> bool:
    """Whether a report's task is a peaks job's (its figure has its own table)."""
    return _job_index(task.row.get("JobId", "")) in jobs


def _figure(precision: str) -> str:
    return "GB/s" if precision in BANDWIDTHS else ("GOPS" if precision == "int8" else "GFLOPS")


def _line(task: ReportTask, precision: str) -> PeakLine:
    row, m = task.row, task.measurement
    run = m.peak_run if m is not None else None
    line = PeakLine(
        task_id=row.get("JobId", ""),
        device=row.get("DeviceName", "") or "(no device)",
        worker=row.get("WorkerPeerId", ""),
        unit=row.get("ComputeUnits", ""),
        precision=precision,
        figure=_figure(precision),
        status=row.get("Status", ""),
    )
    verified = row.get("Verified", "")
    refused = verified.split(":", 1)[0] in ("outlier", "disagreed")
    if run is None or row.get("Status") != "Complete" or refused:
        why = (
            verified
            if refused
            else ": ".join(x for x in (row.get("FailureReason", ""), row.get("Detail", "")) if x)
        )
        return line.with_(detail=why)
    peak = run.peak
    return line.with_(
        per_s=peak.per_s,
        cv=peak.cv,
        size=peak_size(run),
        library=peak.library,
        kernel=peak.kernel,
        unit=peak.unit if peak.unit != "CPU" else line.unit,
    )


def peak_lines(report: CampaignReport) -> tuple[PeakLine, ...]:
    """The peaks table: each peaks task's line, by figure in the campaign's order, then by device."""
    jobs = peak_jobs(report)
    order = list(dict.fromkeys(jobs.values()))
    lines = [
        _line(t, jobs[_job_index(t.row.get("JobId", ""))]) for t in report.results if is_peak_task(t, jobs)
    ]
    return tuple(sorted(lines, key=lambda x: (order.index(x.precision), x.device, x.task_id)))


__all__ = ["PeakLine", "is_peak_task", "peak_jobs", "peak_lines"]
