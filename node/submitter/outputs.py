"""A campaign's files: results.csv (seed columns first), results.json (raw samples), report.html, and
bundle.json (what anyone needs to check results.json offline: `scheduler.results.bundle`), sealed with
the submitter's key where one is at hand.

Every row is rendered at output time from a typed value (`scheduler.TaskResult`) built once per
task from the store: the signed envelope with the measurement the submitter derived, or the task's
ending as the scheduler holds it. No row is kept as text, and no figure is read back from one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import scheduler as sch
from node.errors import disk_errors, megabytes
from node.report.render import render_html
from node.report.roofline import Costs
from node.submitter.store import ResultRecord
from node.transfer.cache import ModelCache
from protocol import (
    DOMAIN_BUNDLE,
    BundleSeal,
    Envelope,
    Measurement,
    ModelFormat,
    ModelRef,
    ResultBody,
    TaskSpec,
    derive,
    seal,
)
from protocol.codec import pack_body, unpack_body
from scheduler.results import cost_columns, priced, verify_columns, with_output_diffs, with_speedups
from scheduler.results.bundle import (
    BUNDLE_FILE,
    BUNDLE_FORMAT,
    BundleBody,
    ServerWitness,
    SignedPart,
    body_digest,
    body_of,
    results_digest,
)

Shown = tuple[dict[str, str], sch.TaskResult | None]
"""One output row and the typed value it was rendered from (None: a capacity search's level row)."""


def pack_envelope(envelope: Envelope) -> bytes:
    """How the store keeps a result's signed envelope (verifiable again later)."""
    return pack_body(envelope)


def pack_measurement(measurement: Measurement) -> bytes:
    """How the store keeps the measurement the submitter derived from a result's raw parts."""
    return pack_body(measurement)


def result_body(record: ResultRecord) -> ResultBody | None:
    """The signed body of a stored result, as the worker sent it (None for rows without one)."""
    if record.envelope is None:
        return None
    envelope = unpack_body(record.envelope, Envelope)
    return unpack_body(envelope.payload, ResultBody)


def task_results(
    scheduler: sch.Scheduler, results: Sequence[ResultRecord], created_utc: str, campaign: sch.Campaign
) -> list[sch.TaskResult]:
    """Each task's typed value, in task order: a stored result with its derived measurement (derived
    again for a result stored before it was kept), else the task's ending stamped `created_utc`."""
    stored = {r.task_id: r for r in results}
    return [
        task_result(task, campaign.jobs[task.job_index].spec, stored.get(task.task_id), created_utc)
        for task in scheduler.tasks()
    ]


def task_result(
    task: sch.TaskView, spec: TaskSpec, record: ResultRecord | None, created_utc: str
) -> sch.TaskResult:
    """One task's typed value: its stored result with the derived measurement, else its ending.

    A result stored before the derived measurement was kept is derived again from its raw parts
    (`protocol.derive` is pure, and an accepted result derives again to the bit), in the store's
    packed form so that its files come out as a kept one's would.
    """
    body = result_body(record) if record is not None else None
    if record is None or body is None:
        return sch.ended(task, created_utc)
    kept = record.derived if record.derived is not None else pack_measurement(_derived_again(body, spec))
    derived = unpack_body(kept, Measurement)
    return sch.measured(task, body, derived, record.samples, record.received or created_utc)


def _derived_again(body: ResultBody, spec: TaskSpec) -> Measurement:
    """A result stored before the derived measurement was kept, derived again; one whose raw parts
    no longer derive (stored before the submitter derived figures at all) is shown as it was then."""
    try:
        return derive(body.measurement, spec)
    except (ValueError, ArithmeticError, IndexError):
        return body.measurement


def campaign_rows(
    scheduler: sch.Scheduler, results: Sequence[ResultRecord], created_utc: str, campaign: sch.Campaign
) -> list[Shown]:
    """One row per task, in task order, rendered from its typed value and priced; a capacity search's
    level rows follow its row; each fleet job's member rows get their fleet columns and its merged row
    comes last."""
    rows: list[Shown] = []
    peers = {p.peer_id: p for p in scheduler.peers()}
    for measured in task_results(scheduler, results, created_utc, campaign):
        peer = peers.get(measured.task.peer_id or "")
        result = priced(measured, campaign.prices, peer)  # the one seam a price passes
        plain = sch.row_of(result)
        marks = verify_columns(result.task, peer)  # settled after storing
        rows.append(({**plain, **marks, **cost_columns(result.measurement, result.price)}, result))
        found = result.measurement.capacity if result.measurement is not None else None
        if found is not None:  # a capacity search: one row per level after its Capacity row
            rows.extend((level, None) for level in sch.level_rows(plain, found))
    return with_fleet_rows(with_speedups(with_output_diffs(rows)), campaign, created_utc)


def with_fleet_rows(rows: list[Shown], campaign: sch.Campaign, created_utc: str) -> list[Shown]:
    """The rows with every fleet job's members completed and its merged row appended
    (`scheduler.fleet_rows`: derived from the members' raw records, never from their figures)."""
    members: dict[int, list[sch.Member]] = {}
    for row, result in rows:
        if result is not None and sch.is_fleet(campaign.jobs[result.task.job_index].spec.generate):
            generation = result.measurement.generation if result.measurement is not None else None
            members.setdefault(result.task.job_index, []).append(sch.Member(result.task, row, generation))
    if not members:
        return rows
    updated, merged = sch.fleet_rows(campaign.jobs, members, created_utc)
    kept = [(updated.get(row["JobId"], row), result) for row, result in rows]
    groups = [(i, g) for i, g in sorted(members.items()) if campaign.jobs[i].spec.generate is not None and g]
    figures = [
        sch.TaskResult(group[0].task, created_utc, merged=sch.merged_stats(campaign.jobs[i], group))
        for i, group in groups
    ]
    return kept + list(zip(merged, figures, strict=True))


def campaign_report(
    scheduler: sch.Scheduler,
    results: Sequence[ResultRecord],
    created_utc: str,
    campaign_id: str,
    campaign: sch.Campaign,
    swarm: tuple[str, ...] = (),
) -> sch.CampaignReport:
    """The campaign's report, built once from the store: every row with the typed value it was rendered
    from (results.json is its `to_json`; every medium renders it), and the swarm it ran on."""
    return sch.CampaignReport.of(
        campaign_id, campaign, campaign_rows(scheduler, results, created_utc, campaign), swarm
    )


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
    return write_files(out_dir, campaign_report(scheduler, results, created_utc, campaign_id, campaign))


@dataclass(frozen=True)
class Sealer:
    """What bundle.json is written from: its body, and the submitter's key that seals it."""

    body: BundleBody
    private_key: bytes


def bundle_body(
    campaign_id: str,
    campaign: sch.Campaign,
    scheduler: sch.Scheduler,
    results: Sequence[ResultRecord],
    campaign_text: str,
    submitter: str,
    offers: Mapping[str, bytes] | None = None,
) -> BundleBody:
    """The bundle's body from the store's signed envelopes (and the offer specs it kept, packed, by
    task, and what it saw of each load's server), and the scheduler's tasks and peers."""
    envelopes = {r.task_id: unpack_body(r.envelope, Envelope) for r in results if r.envelope is not None}
    processes = {i: job.spec.processes for i, job in enumerate(campaign.jobs)}
    specs = {task_id: unpack_body(packed, TaskSpec) for task_id, packed in (offers or {}).items()}
    witnesses = {r.task_id: ServerWitness.model_validate_json(r.witness) for r in results if r.witness}
    tasks, peers = scheduler.tasks(), scheduler.peers()
    return body_of(
        campaign_id, submitter, campaign_text, envelopes, tasks, peers, processes, specs, witnesses
    )


def write_files(
    out_dir: Path, report: sch.CampaignReport, sealer: Sealer | None = None, costs: Costs | None = None
) -> dict[str, Path]:
    """results.csv and results.json first, then report.html, all three from the one report value
    (nothing read back): report.html never stops the other two (`render_html` is total: a picture
    that cannot be drawn is a note, a page that cannot be built says why), so every result reaches a
    file whatever a peer sent. With a `sealer`, bundle.json last (the seal names results.json's digest).
    `costs` (`model_costs`) feed report.html's roofline only: results.json is the same with or without.

    Raises:
        DiskFull: as `write_outputs`.
    """
    with disk_errors(out_dir, "creating the results folder"):
        out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "csv": write_whole(out_dir / "results.csv", sch.to_csv(task.row for task in report.results)),
        "json": write_whole(out_dir / "results.json", results_json := report.to_json()),
    }
    files["html"] = write_whole(out_dir / "report.html", render_html(report, costs=costs))
    if sealer is not None:
        files["bundle"] = write_whole(out_dir / BUNDLE_FILE, bundle_text(results_json, sealer))
    return files


def model_costs(refs: Iterable[ModelRef], cache: ModelCache) -> Costs:
    """Each pinned ONNX model's FLOPs and bytes per inference by sha256 (counted in a capped child,
    `drivers.measuring.costchild`: the file is untrusted), or why not; blocks moments per model."""
    from drivers.measuring.costchild import count_costs

    onnx = {r.sha256: r for r in refs if r.format is ModelFormat.ONNX}
    paths = {sha: path for sha in onnx if (path := cache.path_for(sha)) is not None}
    missing: dict[str, str] = {sha: f"{r.name}: not in this node's model cache" for sha, r in onnx.items()}
    return Costs.of({**missing, **count_costs(paths)})


def bundle_text(results_json: str, sealer: Sealer) -> str:
    """bundle.json: the body and the submitter's seal over it and over results.json's bytes."""
    body = sealer.body
    said = BundleSeal(
        campaign_id=body.campaign_id,
        submitter=body.submitter,
        results_sha256=results_digest(results_json.encode()),
        body_sha256=body_digest(body),
        rows=len(body.rows),
    )
    sealed = SignedPart.of(seal(said, DOMAIN_BUNDLE, sealer.private_key))
    document = {
        "format": BUNDLE_FORMAT,
        "seal": sealed.model_dump(mode="json"),
        "body": body.model_dump(mode="json"),
    }
    return json.dumps(document, separators=(",", ":")) + "\n"


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
