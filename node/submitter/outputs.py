"""A campaign's files: results.csv (seed columns first), results.json (raw samples), then report.html."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import scheduler as sch
from node.errors import disk_errors, megabytes
from node.submitter.render import render_html
from node.submitter.store import ResultRecord
from protocol import Envelope, ResultBody
from protocol.codec import pack_body, unpack_body
from scheduler.results.verifyrows import verify_columns


def pack_envelope(envelope: Envelope) -> bytes:
    """How the store keeps a result's signed envelope (verifiable again later)."""
    return pack_body(envelope)


def result_body(record: ResultRecord) -> ResultBody | None:
    """The signed body of a stored result (None for rows without one)."""
    if record.envelope is None:
        return None
    envelope = unpack_body(record.envelope, Envelope)
    return unpack_body(envelope.payload, ResultBody)


def campaign_rows(
    scheduler: sch.Scheduler,
    results: Sequence[ResultRecord],
    created_utc: str,
    campaign: sch.Campaign | None = None,
) -> list[tuple[dict[str, str], ResultRecord | None]]:
    """One row per task, in task order: stored results as they arrived, endings for the rest; with
    `campaign`, each fleet job's member rows get their fleet columns and its merged row comes last."""
    rows = _task_rows(scheduler, results, created_utc)
    return rows if campaign is None else with_fleet_rows(rows, scheduler, campaign, created_utc)


def with_fleet_rows(
    rows: list[tuple[dict[str, str], ResultRecord | None]],
    scheduler: sch.Scheduler,
    campaign: sch.Campaign,
    created_utc: str,
) -> list[tuple[dict[str, str], ResultRecord | None]]:
    """The rows with every fleet job's members completed and its merged row appended
    (`scheduler.fleet_rows`: derived from the members' raw records, never from their figures)."""
    members: dict[int, list[sch.Member]] = {}
    for task, (row, record) in zip(scheduler.tasks(), rows, strict=False):
        if sch.is_fleet(campaign.jobs[task.job_index].spec.generate):
            body = result_body(record) if record is not None else None
            generation = body.measurement.generation if body is not None else None
            members.setdefault(task.job_index, []).append(sch.Member(task, row, generation))
    if not members:
        return rows
    updated, merged = sch.fleet_rows(campaign.jobs, members, created_utc)
    kept = [(updated.get(row["JobId"], row), record) for row, record in rows]
    return kept + [(row, None) for row in merged]


def _task_rows(
    scheduler: sch.Scheduler, results: Sequence[ResultRecord], created_utc: str
) -> list[tuple[dict[str, str], ResultRecord | None]]:
    """One row per task, in task order: stored results as they arrived, endings for the rest; a
    capacity search's level rows (no raw samples or signed part of their own) follow its row."""
    stored = {r.task_id: r for r in results}
    peers = {p.peer_id: p for p in scheduler.snapshot().peers}
    rows: list[tuple[dict[str, str], ResultRecord | None]] = []
    for task in scheduler.tasks():
        record = stored.get(task.task_id)
        marks = verify_columns(task, peers.get(task.peer_id or ""))  # settled after the row was stored
        if record is not None:
            rows.append(({**record.row, **marks}, record))
            body = result_body(record)
            found = body.measurement.capacity if body is not None else None
            if found is not None:  # a capacity search: one row per level after its Capacity row
                rows.extend((level, None) for level in sch.level_rows(record.row, found))
            continue
        status = task.status or sch.Status.FAILED
        detail = task.detail or ("" if task.ended else f"still {task.state.value} when the campaign stopped")
        if task.reasons:
            detail = f"{detail}: {'; '.join(task.reasons)}" if detail else "; ".join(task.reasons)
        rows.append(
            ({**sch.failure_row(task, status, task.failure_reason, detail, created_utc), **marks}, None)
        )
    return rows


def results_document(
    campaign_id: str, campaign: sch.Campaign, rows: Sequence[tuple[dict[str, str], ResultRecord | None]]
) -> dict[str, Any]:
    """results.json: every row with its raw samples and, for a measured task, the signed device and
    measurement (everything report.html draws)."""
    document: dict[str, Any] = sch.results_document(
        campaign_id, campaign, ((row, record.samples if record else ()) for row, record in rows)
    )
    for entry, (_, record) in zip(document["results"], rows, strict=True):
        body = result_body(record) if record is not None else None
        entry["signed"] = None if body is None else {
            "worker": body.worker,
            "device": body.device.model_dump(mode="json"),
            "measurement": body.measurement.model_dump(mode="json", exclude={"samples_ms"}),
        }  # fmt: skip
    return document


def write_outputs(
    out_dir: Path,
    campaign_id: str,
    campaign: sch.Campaign,
    scheduler: sch.Scheduler,
    results: Sequence[ResultRecord],
    created_utc: str = "",
) -> dict[str, Path]:
    """Write the campaign's files into `out_dir`; returns their paths by kind.

    Raises:
        DiskFull: the folder's disk is full; no file is left half-written (a complete one from an
            earlier run may stay), and the store still holds everything to write them again.
    """
    with disk_errors(out_dir, "creating the results folder"):
        out_dir.mkdir(parents=True, exist_ok=True)
    rows = campaign_rows(scheduler, results, created_utc, campaign)
    document = results_document(campaign_id, campaign, rows)
    return write_files(out_dir, sch.to_csv(row for row, _ in rows), document)


def write_files(out_dir: Path, csv_text: str, document: Mapping[str, Any]) -> dict[str, Path]:
    """results.csv and results.json first, then report.html: the report is drawn from what the two
    hold and never stops them (`render_html` is total: a picture that cannot be drawn is a note, a page
    that cannot be built says why), so every result reaches a file whatever a peer sent.

    Raises:
        DiskFull: as `write_outputs`.
    """
    files = {
        "csv": write_whole(out_dir / "results.csv", csv_text),
        "json": write_whole(out_dir / "results.json", json.dumps(document, indent=1)),
    }
    files["html"] = write_whole(out_dir / "report.html", render_html(document))
    return files


def write_whole(path: Path, text: str) -> Path:
    """Write a file whole or not at all: into a temp file beside it, then renamed into place; on a full
    disk the temp file is removed and `DiskFull` names the folder and the file."""
    data = text.encode()
    temp = path.with_name(f".{path.name}.part")
    try:
        with disk_errors(path.parent, f"writing {path.name} ({megabytes(len(data))})"):
            temp.write_bytes(data)
            os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    return path
