"""The campaign store keeps what results are made of, never rendered text, and old stores still open.

A store written before the derived measurement was kept (a text row per result) opens: its rows are
rebuilt from the signed envelopes, the figures derived again, byte for byte the golden files. A fleet
member's offer spec (its signed deal) is kept, so that a lease reclaimed after a restart is checked
against the deal that member signed.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from kit.golden_campaigns import CAMPAIGNS, CREATED

import scheduler as sch
from node.submitter.outputs import (
    bundle_body,
    campaign_report,
    campaign_rows,
    pack_measurement,
    result_body,
    write_outputs,
)
from node.submitter.store import CampaignStore, ResultRecord
from protocol import FailureReason, TaskSpec
from protocol.codec import pack_body, unpack_body
from scheduler.results import COLUMNS, CampaignReport, cell, cells, entries_of
from scheduler.results.bundle import ServerWitness
from unit.scheduler.results.test_golden import GOLDEN
from unit.scheduler.verification.test_sendcheck import HONEST, SIGNED, SPEC, _measurement

OLD_RESULTS = """
CREATE TABLE results (
    campaign_id TEXT NOT NULL, task_id TEXT NOT NULL, lease_id TEXT NOT NULL, peer_id TEXT NOT NULL,
    status TEXT NOT NULL, envelope BLOB, row TEXT NOT NULL, samples TEXT NOT NULL, received TEXT NOT NULL,
    PRIMARY KEY (campaign_id, task_id)
);
"""


def _old_store(path: Path, name: str) -> None:
    """A store as it was written before the derived measurement was kept: each result's text row."""
    golden = CAMPAIGNS[name]()
    tasks = {t.task_id: t for t in golden.scheduler.tasks()}
    with sqlite3.connect(path) as db:
        db.executescript(OLD_RESULTS)
        for r in golden.results:
            body = result_body(r)
            assert body is not None
            row = sch.result_row(tasks[r.task_id], body, "verified", CREATED)
            values = (golden.campaign_id, r.task_id, r.lease_id, r.peer_id, r.status, r.envelope)
            db.execute(
                "INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*values, json.dumps(row), json.dumps(list(r.samples)), "2026-11-22T03:30:01Z"),
            )


@pytest.mark.parametrize("name", ["sustained", "capacity"])  # the goldens whose figures derive again
def test_an_old_store_with_text_rows_opens_and_its_files_are_rebuilt_from_the_envelopes(
    name: str, tmp_path: Path
) -> None:
    _old_store(tmp_path / "campaigns.sqlite", name)
    store = CampaignStore(tmp_path / "campaigns.sqlite")
    golden = CAMPAIGNS[name]()
    results = store.results(golden.campaign_id)
    assert [r.derived for r in results] == [None] * len(golden.results)
    assert [r.witness for r in results] == [None] * len(golden.results)  # a column the old store lacked
    assert {r.received for r in results} == {CREATED}  # the old row's CreatedUtc, not the insert time
    out = tmp_path / "out"
    write_outputs(out, golden.campaign_id, golden.campaign, golden.scheduler, results, CREATED)
    for file in ("results.csv", "results.json"):
        assert (out / file).read_bytes() == (GOLDEN / name / file).read_bytes(), file


def test_a_new_result_is_stored_as_its_parts_and_its_row_is_rendered_from_the_derived_measurement(
    tmp_path: Path,
) -> None:
    golden = CAMPAIGNS["tensor"]()
    store = CampaignStore(tmp_path / "campaigns.sqlite")
    for record in golden.results:
        assert store.put_result(golden.campaign_id, record)
        assert not store.put_result(golden.campaign_id, record)  # once: nothing is overwritten
    stored = store.results(golden.campaign_id)
    assert stored == sorted(golden.results, key=lambda r: r.task_id)
    with sqlite3.connect(tmp_path / "campaigns.sqlite") as db:
        assert {r[0] for r in db.execute("SELECT row FROM results")} == {"{}"}  # no rendered text kept
    first = stored[0]
    body = result_body(first)
    assert body is not None
    # a stored derived measurement is what the row shows, not the worker's figures
    shown = body.measurement.with_(inference_ms=body.measurement.inference_ms.with_(median=123.456789))
    moved = ResultRecord(**{**first.__dict__, "derived": pack_measurement(shown)})
    rows = campaign_rows(golden.scheduler, [moved, *stored[1:]], CREATED, golden.campaign)
    (row,) = [row for row, result in rows if result is not None and result.task.task_id == first.task_id]
    assert row["InferenceMsMedian"] == "123.457"


def test_what_the_submitter_saw_of_a_server_is_kept_with_the_result_and_goes_into_the_bundle(
    tmp_path: Path,
) -> None:
    """Issue 50: the floor and the server's count a result was judged with are stored with it (so a
    resumed campaign's bundle still has them) and travel in its bundle row for a reader to hold the
    records to again (`scheduler.results.proof`)."""
    golden = CAMPAIGNS["tensor"]()
    store = CampaignStore(tmp_path / "campaigns.sqlite")
    count = sch.ServerCount(
        {"requests": 12.0}, {"requests": "vllm:request_success_total"}, "http://h/metrics"
    )
    witness = ServerWitness.of(sch.ServerFloor(4.5, "half the probe's first token"), count, sch.Claimed(3))
    assert witness is not None
    first, *rest = golden.results
    kept = ResultRecord(**{**first.__dict__, "witness": witness.model_dump_json().encode()})
    for record in (kept, *rest):
        assert store.put_result(golden.campaign_id, record)
    stored = {r.task_id: r for r in store.results(golden.campaign_id)}
    assert stored[first.task_id].witness == kept.witness
    assert all(stored[r.task_id].witness is None for r in rest)
    body = bundle_body(golden.campaign_id, golden.campaign, golden.scheduler, list(stored.values()), "", "me")
    servers = {row.task_id: row.server for row in body.rows}
    assert servers[first.task_id] == witness
    assert servers[first.task_id].count() == count
    assert servers[first.task_id].claimed_before() == sch.Claimed(3)
    assert all(servers[r.task_id] is None for r in rest)


def test_each_jobs_server_floor_state_is_kept_by_campaign_and_replaced(tmp_path: Path) -> None:
    store = CampaignStore(tmp_path / "campaigns.sqlite")
    assert store.floorbooks("c1") == {}
    store.put_floorbook("c1", 0, '{"a": 1}')
    store.put_floorbook("c1", 0, '{"a": 2}')
    store.put_floorbook("c1", 3, "{}")
    store.put_floorbook("c2", 0, "{}")
    assert CampaignStore(tmp_path / "campaigns.sqlite").floorbooks("c1") == {0: '{"a": 2}', 3: "{}"}


def test_a_fleet_members_offer_spec_is_kept_and_checks_a_reclaimed_result_against_its_deal(
    tmp_path: Path,
) -> None:
    store = CampaignStore(tmp_path / "campaigns.sqlite")
    assert store.offer("c", "c-job-0-1", "peer-a") is None
    store.put_offer("c", "c-job-0-1", "peer-a", pack_body(SPEC))
    store.put_offer("c", "c-job-0-1", "peer-a", pack_body(SIGNED))  # the latest offer to that peer
    kept = store.offer("c", "c-job-0-1", "peer-a")
    assert kept is not None
    signed = unpack_body(kept, TaskSpec)
    assert signed == SIGNED
    assert store.offer("c", "c-job-0-1", "peer-b") is None
    honest = _measurement(HONEST)
    assert sch.check_sends(honest, SPEC, signed) == honest
    fabricated = _measurement([*HONEST, *HONEST[:3]])  # duplicates: refused against the kept deal
    refused = sch.check_sends(fabricated, SPEC, signed)
    assert isinstance(refused, sch.Refusal)
    assert refused.reason == FailureReason.INVALID
    unknown = sch.check_sends(honest, SPEC, None)  # what a restart without the kept offer meant
    assert isinstance(unknown, sch.Refusal)
    assert unknown.reason == FailureReason.INTERNAL
    store.clear()
    assert store.offer("c", "c-job-0-1", "peer-a") is None


@pytest.mark.parametrize("name", sorted(CAMPAIGNS))
def test_the_typed_figures_the_api_and_dashboard_get_are_the_rows_cells_before_formatting(name: str) -> None:
    golden = CAMPAIGNS[name]()
    rows = campaign_rows(golden.scheduler, golden.results, CREATED, golden.campaign)
    measured = [
        (row, result) for row, result in rows if result is not None and result.measurement is not None
    ]
    assert measured
    for row, result in measured:
        assert result.measurement is not None
        for column, value in sch.shown_figures(result.measurement).items():
            shown = cells(column, value) if isinstance(value, tuple) else cell(column, value)
            assert shown == row[column], column


@pytest.mark.parametrize("name", sorted(CAMPAIGNS))
def test_no_view_reads_a_figure_back_from_a_row_cell(name: str) -> None:
    """results.json with every numeric and flag cell turned to garbage, read back as a report: its
    entries, its Markdown and the terminal's generation table come out the same (fleet merged row
    included)."""
    from node.report.tables import render_markdown

    golden = CAMPAIGNS[name]()
    report = campaign_report(golden.scheduler, golden.results, CREATED, golden.campaign_id, golden.campaign)
    document = json.loads(report.to_json())
    flags = ("Unstable", "UnstableReasons", "Throttled", "ThrottleCauses", "InputsDefaulted")
    for result in document["results"]:
        row = result["row"]
        row.update({c.name: "garbage" for c in COLUMNS if c.form and row.get(c.name)})
        row.update({f: "True" if row.get(f) == "False" else "garbage" for f in flags if f in row})
    spoiled = CampaignReport.from_json(json.dumps(document))
    assert entries_of(spoiled) == entries_of(report)
    assert any(e.complete for e in entries_of(spoiled))
    assert render_markdown(spoiled) == render_markdown(report)
