"""Issue 38, scope 6: a reference device outvotes two keys that agree on a lie.

Real processes: a gate, two hostile `join` workers (tests/kit/replicaliar.py `halve`: every sample
halved, every figure derived again, so each result is self-consistent and the two agree with each
other) and one honest `join` worker the campaign names as its reference (`verify: {reference: [id]}`,
the submitter's own device). One quorum of three, under `sark-node submit`: by the majority the two
liars would be `replicated 2/3` and the honest worker the outlier; with the reference, its figure is
the truth, both liars are outliers (their figures kept, flagged, never a figure in the views that
compare devices) and its own row is verified and names it. `plan` says the class has its reference.
All three run on 127.0.0.1, so the campaign says `same_host: allow` (the lab switch). Scope 8, from
the files the run wrote: the agreed figure, the band, the replicas and the outliers in results.json,
report.html, the terminal and `report --diff`.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit import zygote
from kit.campaignlab import MODEL, Swarm, liar, named_swarm, write_campaign
from kit.procs import SARK
from rich.console import Console

from node.cli.campaign import end_tables
from scheduler.results import CampaignReport, entries_of, short_peer

NAMES = ("reference", "liar0", "liar1")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Swarm, dict[str, str]]]:
    programs = {n: None if n == "reference" else liar("halve") for n in NAMES}
    with named_swarm(tmp_path_factory.mktemp("reference"), programs) as lab:
        yield lab


def campaign(root: Path, ids: dict[str, str]) -> Path:
    job: dict[str, Any] = {"compute_unit": "CPU (ONNX)", "devices": "any", "num_inference_runs": 30,
                           "warmup_runs": 2, "load_runs": 1, "processes": 1, "threads": 1,
                           "require": {"peers": list(ids.values())}}  # fmt: skip
    verify = {"replicas": 3, "same_host": "allow", "reference": [ids["reference"]]}
    # one measurement at a time: the three workers share this machine's cores
    body = {
        "name": "reference",
        "model": {"path": MODEL.name},
        "verify": verify,
        "max_inflight": 1,
        "jobs": [job],
    }
    (root / "reference").mkdir(exist_ok=True)
    return write_campaign(root / "reference" / "c.yaml", body)


def test_two_liars_agreeing_on_a_halved_timing_lose_to_the_reference(
    lab: tuple[Swarm, dict[str, str]],
) -> None:
    swarm, ids = lab
    path = campaign(swarm.root, ids)
    planned = swarm.run("plan", str(path), "--json", "--wait-peers", "3")
    assert planned.returncode == 0, planned.stderr
    (job,) = json.loads(planned.stdout)["jobs"]
    assert sorted(job["chosen"]) == sorted(ids.values())  # the reference is one of the three
    (cls,) = job["references"]
    assert cls == {"class": job["classes"][ids["reference"]], "reference": ids["reference"], "why_not": ""}

    done = swarm.run(
        "submit", str(path), "--json", "--wait-peers", "3", "--out", str(path.parent / "out"), timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    with open(outcome["files"]["csv"], newline="") as f:
        rows = {r["WorkerPeerId"]: r for r in csv.DictReader(f)}
    assert set(rows) == set(ids.values())
    reference = ids["reference"]
    assert rows[reference]["Verified"] == f"replicated 1/3 (reference {reference}; same host)"
    for name in ("liar0", "liar1"):
        verdict = rows[ids[name]]["Verified"]
        assert verdict.startswith("outlier: "), verdict
        assert f"against the reference {reference}'s" in verdict, verdict
        assert rows[ids[name]]["InferenceMsMedian"]  # kept, flagged
    document = CampaignReport.from_json(Path(outcome["files"]["json"]).read_text())
    standing = {e.task_id for e in entries_of(document) if e.complete}
    assert standing == {rows[reference]["JobId"]}  # the liars' figures are in no matrix
    assert outcome["verification"]["verified"] == 1
    assert outcome["verification"]["outlier"] == 2
    _shown_in_every_view(document, rows, ids, Path(outcome["files"]["json"]))


def _shown_in_every_view(
    document: CampaignReport, rows: dict[str, dict[str, str]], ids: dict[str, str], results: Path
) -> None:
    """Scope 8, from the files this run wrote: the group's agreed figure (the reference's), its band,
    the three replicas with their figures and network, and the two liars as its outliers, in
    results.json, report.html, the terminal's table after the matrix (what `submit` prints without
    --json) and `report --diff`."""
    reference = ids["reference"]
    (group,) = document.verification
    assert (group.outcome, group.reference) == ("replicated", reference)
    assert sorted(group.outliers) == sorted(ids[n] for n in ("liar0", "liar1"))
    figures = {r.peer: r.figure_ms for r in group.replicas}
    assert group.agreed_ms == figures[reference]
    assert group.agreed_ms == pytest.approx(float(rows[reference]["InferenceMsMedian"]), rel=1e-3, abs=1e-3)
    assert group.band is not None
    assert 0 < group.band <= 0.5
    assert {r.network for r in group.replicas} == {"loopback"}  # one machine: the lab switch let it
    page = (results.parent / "report.html").read_text()
    section = page[page.index('<div id="verification">') :]
    assert f"{group.agreed_ms:.3f}</td>" in section
    assert f"{group.band:.1%}" in section
    assert section.count(" outlier") >= 2
    terminal = io.StringIO()
    Console(file=terminal, width=200).print(end_tables(document))
    said = terminal.getvalue()
    assert "verification: one agreed figure per class" in said
    assert f"replicated (reference {short_peer(reference)})" in said
    wide = {**os.environ, "COLUMNS": "250"}  # rich's width off a terminal: no cell wrapped
    diff = zygote.run(
        [*SARK, "report", "--diff", str(results), str(results)],
        capture_output=True,
        text=True,
        timeout=120,
        env=wide,
    )
    assert diff.returncode == 0, diff.stderr[-3000:]
    assert "verification: agreed figures, A -> B" in diff.stdout
    assert "within the band" in diff.stdout
