"""The board's rows: many campaigns' results as one comparable table (`sark-node board`), pure.

One row per model x device class x runtime and campaign: a verified group's agreed figure (its
replicas of one class agreed within the band) or a single measured task's figure, kept apart; each
names the campaign and the task or group whose proof (results.json, bundle.json) it links. Cost and
energy are the cells the campaign's rows already carry, empty where not known. Cells are read from
the report's rows and groups, never computed again here (`scheduler.results.proof` checked them).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.results.document import CampaignReport, ReportTask
from scheduler.results.verifygroups import GroupVerification


@dataclass(frozen=True, order=True)
class BoardRow:
    """One row of the board.

    Attributes:
        model: the model's file name.
        device_class: its class's short name ("" unknown).
        runtime: the compute unit it ran on.
        figure_ms: the agreed figure, or the single task's median (ms).
        verified: whether replicas of one class agreed on the figure.
        label: `replicated k/n`, or how the single row was verified (`single`, `disagreed`, ...).
        devices: the devices that ran it.
        campaign_id: the campaign.
        anchor: the group's or the task's id.
        cost_per_1k: the row's cost per 1,000 inferences ("" unknown).
        per_joule: the row's inferences per joule ("" unknown).
    """

    model: str
    device_class: str
    runtime: str
    figure_ms: float
    verified: bool
    label: str
    devices: str
    campaign_id: str
    anchor: str
    cost_per_1k: str = ""
    per_joule: str = ""


def board_rows(report: CampaignReport) -> list[BoardRow]:
    """A campaign's rows on the board: each verified group once, each other measured task alone."""
    by_task = {t.row.get("JobId", ""): t for t in report.results if t.signed is not None}
    rows: list[BoardRow] = []
    grouped: set[str] = set()
    for group in report.verification:
        if group.verified and group.agreed_ms is not None:
            rows.append(_group_row(report.campaign_id, group, by_task))
            grouped.update(r.task_id for r in group.replicas)
    for task_id, task in by_task.items():
        if task_id not in grouped and task.measurement is not None:
            rows.append(_task_row(report.campaign_id, task_id, task))
    return rows


def _group_row(campaign_id: str, group: GroupVerification, by_task: dict[str, ReportTask]) -> BoardRow:
    agreed = [r for r in group.replicas if r.verdict.startswith("replicated")]
    first = by_task.get(agreed[0].task_id if agreed else "")
    row = first.row if first is not None else {}
    assert group.agreed_ms is not None
    return BoardRow(
        model=group.model,
        device_class=group.device_class,
        runtime=group.unit,
        figure_ms=group.agreed_ms,
        verified=True,
        label=f"replicated {len(agreed)}/{len(group.replicas)}",
        devices=", ".join(sorted({r.device for r in agreed})),
        campaign_id=campaign_id,
        anchor=group.group,
        cost_per_1k=row.get("CostPer1kInferences", ""),
        per_joule=row.get("InferencesPerJoule", ""),
    )


def _task_row(campaign_id: str, task_id: str, task: ReportTask) -> BoardRow:
    row = task.row
    assert task.measurement is not None
    return BoardRow(
        model=row.get("FileName", ""),
        device_class=row.get("DeviceClass", ""),
        runtime=row.get("ComputeUnits", ""),
        figure_ms=task.measurement.inference_ms.median,
        verified=False,
        label=row.get("Verified", "") or "single",
        devices=row.get("DeviceName", ""),
        campaign_id=campaign_id,
        anchor=task_id,
        cost_per_1k=row.get("CostPer1kInferences", ""),
        per_joule=row.get("InferencesPerJoule", ""),
    )
