"""GET /jobs/{id}'s results, which the dashboard draws, carry each row as the campaign's files render
it: a verified campaign's Verified and QuorumNetworks included (issue 38, scope 8). Found by the serve
lab (tests/labs/e2e/test_verification_under_serve.py): the endpoint rendered each row again without them,
so the dashboard showed no verdict for a row that results.csv called `disagreed`.
"""

from __future__ import annotations

import dataclasses

from kit.golden_campaigns import CREATED, _stored, _tensor_measurement  # type: ignore[import-not-found, unused-ignore]
from kit.scheduler_harness import KEY, MODEL, SHA, peer  # type: ignore[import-not-found, unused-ignore]

import scheduler as sch
from node.http.shapes import job_results
from node.submitter.outputs import campaign_rows


def _played() -> tuple[list[tuple[dict[str, str], sch.TaskResult | None]], set[str]]:
    """A replicated campaign the scheduler played on four networks, one halving liar: its rows as
    the files render them, and the ids of its stored tasks."""
    campaign = sch.parse_campaign(
        f"name: verified\nmodel: {{url: https://example.org/m.onnx, sha256: {SHA}}}\n"
        "verify: {replicas: 2}\njobs: [{compute_unit: CPU (ONNX), devices: all}]\n"
    )
    peers = [dataclasses.replace(peer(f"b{i}"), host=f"10.0.{i + 1}.1") for i in range(4)]
    scheduler = sch.Scheduler("verified-1", campaign, {"m": MODEL, MODEL.name: MODEL}, key=KEY)
    figures = {"12D3-b0": 10.0, "12D3-b1": 10.1, "12D3-b2": 9.9, "12D3-b3": 5.0}
    out, now = scheduler.handle(sch.PeersDiscovered(peers=tuple(peers)), 0.0), 1.0
    while offers := [c for c in out if isinstance(c, sch.SendOffer)]:
        out = []
        for o in offers:
            out += scheduler.handle(sch.OfferCommitted(o.task_id, o.peer_id, f"L-{o.task_id}"), now)
            accepted = sch.ResultAccepted(
                o.task_id, f"L-{o.task_id}", o.peer_id, figures[o.peer_id], 0.01, "x"
            )
            out += scheduler.handle(accepted, now + 1)
            now += 2
    done = [t for t in scheduler.tasks() if t.status == sch.Status.COMPLETE]
    results = [_stored("verified-1", t, _tensor_measurement(t.unit)) for t in done]
    return campaign_rows(scheduler, results, CREATED, campaign), {t.task_id for t in done}


def test_a_jobs_results_carry_the_rows_verification_as_the_files_do() -> None:
    rows, stored = _played()
    files = {row["JobId"]: row for row, _ in rows}
    tasks = [sch.ReportTask.of(row, result) for row, result in rows if result is not None]
    shown = job_results(tasks, stored, asked=True)
    assert {r["row"]["JobId"] for r in shown} == stored
    verdicts = [r["row"]["Verified"] for r in shown]
    assert any(v.startswith("outlier: ") for v in verdicts), verdicts  # the liar's, refused
    assert any(v.startswith("replicated ") for v in verdicts), verdicts
    for r in shown:
        assert r["row"] == files[r["row"]["JobId"]]  # Verified, QuorumNetworks, cost columns: the file's
        assert r["row"]["QuorumNetworks"] or not r["row"]["Verified"].startswith("replicated")
    one = sorted(stored)[0]
    assert [r["row"]["JobId"] for r in job_results(tasks, {one}, asked=True)] == [one]  # one task's only
    unasked = job_results(tasks, stored, asked=False)  # a job that asked nothing: no verdict to show
    assert {r["row"]["Verified"] for r in unasked} == {""}
