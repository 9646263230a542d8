"""Issue 38, scope 2: a liar that widens its own band is still refused.

Real processes: a gate, three honest `join` workers and a hostile one (tests/kit/replicaliar.py
`scatter`): it reports 0.7x of its latency with its process medians spread at 0.5x, 0.7x and 1x
(every figure derived again, self-consistent), a spread of about 26 % of its own making. Under the
band sark-node took from the pair's own spreads before scope 2, that spread widened the band to its
50 % ceiling and a 43 % lie agreed. Now the band is the class's, from the submitter's store (the
prior before any history), and a replica whose own spread is over 4x its class's cannot vouch:
the liar's row is never `replicated` and never a figure in the views that compare devices; the
honest replicas' errors, not the liar's, are what the store pools for the class. All workers run
on 127.0.0.1, so the campaign says `same_host: allow` (the lab switch), one measurement at a time,
on a paced workload (`kit.campaignlab.PACE_MS`): the honest replicas agree on a loaded machine too.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.campaignlab import MODEL, PACE_MS, Swarm, liar, named_swarm, write_campaign

from node.submitter.store import CampaignStore
from scheduler.results import CampaignReport, entries_of
from scheduler.verification.agreement import FAR, PRIOR

HONEST = ("h0", "h1", "h2")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Swarm, dict[str, str]]]:
    programs = {**dict.fromkeys(HONEST), "scatter": liar("scatter")}
    with named_swarm(tmp_path_factory.mktemp("scattered"), programs) as lab:
        yield lab


def test_a_liar_that_scatters_its_processes_to_widen_its_band_is_refused(
    lab: tuple[Swarm, dict[str, str]],
) -> None:
    swarm, ids = lab
    job = {"compute_unit": "CPU (ONNX)", "devices": "all", "num_inference_runs": 40, "warmup_runs": 3,
           "load_runs": 1, "processes": 3, "threads": 1}  # fmt: skip
    job["require"] = {"peers": list(ids.values())}
    verify = {"replicas": 2, "same_host": "allow"}
    body = {
        "name": "scatter",
        "model": {"path": MODEL.name},
        "verify": verify,
        "max_inflight": 1,
        "jobs": [job],
    }
    path = write_campaign(swarm.root / "scatter.yaml", body)
    done = swarm.run(
        "submit", str(path), "--json", "--wait-peers", "4", "--out", str(swarm.root / "out"), timeout=400
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    with open(outcome["files"]["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    document = CampaignReport.from_json(Path(outcome["files"]["json"]).read_text())

    liar = ids["scatter"]
    (mine,) = [r for r in rows if r["WorkerPeerId"] == liar]
    verdict = mine["Verified"]
    # refused: the outlier of its group (it cannot vouch, or it is outside the class's band); the
    # workload is paced (`kit.campaignlab.PACE_MS`), so the honest replicas agree on a loaded machine too
    assert verdict.startswith("outlier: "), verdict
    assert liar in verdict
    assert "cannot vouch" in verdict or "against the agreed" in verdict, verdict
    assert mine["InferenceMsMedian"]  # its figures are kept, flagged
    standing = {e.task_id for e in entries_of(document) if e.complete}
    assert mine["JobId"] not in standing  # never the figure in the views that compare devices
    others = [r for r in rows if r["WorkerPeerId"] != liar]
    replicated = {r["JobId"] for r in others if r["Verified"].startswith("replicated")}
    assert replicated == {r["JobId"] for r in others}, [r["Verified"] for r in others]
    assert all(float(r["InferenceMsMedian"]) >= PACE_MS for r in others), others  # the pace held
    assert replicated <= standing
    assert outcome["verification"]["verified"] == len(replicated)

    # the class's pool in the store holds only agreeing replicas' errors: never the liar's spread
    pools = CampaignStore(swarm.submitter_dir / "campaigns.sqlite").class_errors()
    pooled = [e for errors in pools.values() for e in errors]
    assert len(pooled) == len(replicated)
    assert all(e <= FAR * PRIOR for e in pooled), pooled  # none past what can vouch
