"""Issue 50, scope 5: single-process replicas teach their class its band, with real processes.

One process has no scatter of process medians, so before scope 5 a class measured only with
`processes: 1` never added to its pool and kept the prior's band for good (46.3 %), in which a liar
reporting 0.72x of its latency beside one honest peer was `replicated 2/2`. The unit test
(tests/unit/scheduler/verification/test_single_process_band.py) pins the rule; this lab runs it end
to end: a gate, two honest `join` workers and a hostile one (tests/kit/replicaliar.py `shave`: every
sample 0.72x, every figure derived again), `plan --json` and `submit`, all of one submitter whose
store keeps the class's pool across campaigns.

1. A fresh class: `plan` says the prior's band and that it learnt from no replica; the liar beside
   one honest peer agrees within it (the cost of a prior, said before anything runs).
2. Five single-process jobs on the two honest workers (a task each, replicated on both): every group
   agrees, and each replica adds its distance from the other (`agreement.pair_error`, what the
   submitter measured across peers, never a worker's word) to the class's pool, where the first
   pair's two distances are too (the liar agreed: the pool's median, not its mean, is the class's
   error); `plan` now says a band learnt from them, under the liar's 38.9 %.
3. The same liar beside the same honest peer: the pair is `disagreed`, a third replica is asked and
   none of the class is left (exit 1: a verification asked and not obtained), and neither figure
   stands in the views that compare devices (one honest peer and one liar: no majority can say which).

The cheater's view: it sees its offers and its own samples, never the other replica's figure nor the
class's pool, and chooses its figure; the band it is judged with comes from honest groups' distances
as this submitter measured them. All workers run on 127.0.0.1, so the campaigns say `same_host:
allow`; the workload is paced (`kit.campaignlab.PACE_MS`), so honest replicas agree on a loaded machine
as on an idle one, and the learnt band is the pacer's jitter, not the weather.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.campaignlab import MODEL, PACE_MS, Swarm, liar, named_swarm, write_campaign

from scheduler.results import CampaignReport, entries_of
from scheduler.verification.agreement import POOL_MIN

SHAVED = 0.72
"""replicaliar's `SHAVE`: the liar's figure over the honest one's."""
OFF = 1 / SHAVED - 1
"""How far apart the liar's figure and an honest one are, as a band measures (|a - b| / min): 38.9 %."""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Swarm, dict[str, str]]]:
    with named_swarm(
        tmp_path_factory.mktemp("single"), {"h0": None, "h1": None, "shave": liar("shave")}
    ) as lab:
        yield lab


def _campaign(swarm: Swarm, name: str, peers: list[str], runs: tuple[int, ...]) -> Path:
    """Single-process jobs (one per entry of `runs`, its inference count) on two `peers`: a task each,
    replicated on both; one measurement at a time."""
    job = {"compute_unit": "CPU (ONNX)", "devices": "all", "warmup_runs": 2, "load_runs": 1, "processes": 1,
           "threads": 1, "require": {"peers": peers}}  # fmt: skip
    jobs = [{**job, "num_inference_runs": n} for n in runs]
    verify = {"replicas": 2, "same_host": "allow"}
    body = {"name": name, "model": {"path": MODEL.name}, "verify": verify, "max_inflight": 1, "jobs": jobs}
    (swarm.root / name).mkdir(exist_ok=True)
    return write_campaign(swarm.root / name / "c.yaml", body)


def _band(swarm: Swarm, path: Path) -> dict[str, Any]:
    """The band `plan --json` says the job's one class would be judged with now."""
    done = swarm.run("plan", str(path), "--json", "--wait-peers", "3")
    assert done.returncode == 0, done.stderr[-3000:]
    (job,) = json.loads(done.stdout)["jobs"]
    (band,) = job["bands"]
    assert band["processes"] == 1
    return dict(band)


def _submit(swarm: Swarm, path: Path, code: int = 0) -> tuple[list[dict[str, str]], set[str], str]:
    """The campaign's rows, the task ids whose figures stand in the views that compare devices, and
    what it printed on stderr; its exit code is `code`."""
    done = swarm.run(
        "submit", str(path), "--json", "--wait-peers", "3", "--out", str(path.parent / "out"), timeout=400
    )
    assert done.returncode == code, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    with open(outcome["files"]["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    document = CampaignReport.from_json(Path(outcome["files"]["json"]).read_text())
    assert len({r["DeviceClass"] for r in rows}) == 1, rows  # one class: one pool
    return rows, {e.task_id for e in entries_of(document) if e.complete}, done.stderr


def test_single_process_replicas_teach_their_class_a_band_the_liar_no_longer_fits(
    lab: tuple[Swarm, dict[str, str]],
) -> None:
    swarm, ids = lab
    pair = [ids["h0"], ids["shave"]]

    fresh = _campaign(swarm, "fresh", pair, (30,))
    band = _band(swarm, fresh)
    assert band["learnt_from"] == 0  # the prior's: said before anything runs
    assert band["band"] > OFF
    rows, _, _ = _submit(swarm, fresh)
    assert {r["Verified"] for r in rows} == {"replicated 2/2 (same host)"}, [r["Verified"] for r in rows]
    liar = [float(r["InferenceMsMedian"]) for r in rows if r["WorkerPeerId"] == ids["shave"]]
    assert liar
    assert all(m < PACE_MS for m in liar)  # it did lie: under the pace every honest call takes

    honest = [ids["h0"], ids["h1"]]
    rows, standing, _ = _submit(swarm, _campaign(swarm, "teach", honest, (30, 31, 32, 33, 34)))
    assert {r["Verified"] for r in rows} == {"replicated 2/2 (same host)"}, [r["Verified"] for r in rows]
    assert {r["JobId"] for r in rows} <= standing
    assert all(float(r["InferenceMsMedian"]) >= PACE_MS for r in rows)  # the pace held

    judged = _campaign(swarm, "judged", pair, (30,))
    band = _band(swarm, judged)
    assert band["learnt_from"] >= POOL_MIN  # the single-process replicas' distances, pooled
    assert band["band"] < OFF, band  # a band the 0.72x liar does not fit
    rows, standing, said = _submit(swarm, judged, code=1)  # 1: a verification asked, not obtained
    assert "verification not obtained" in said
    measured = [r for r in rows if r["WorkerPeerId"]]
    assert len(measured) == 2
    for row in measured:  # the pair apart beyond the learnt band, and no third replica to settle it
        assert row["Verified"].startswith("disagreed: no majority within the band"), row["Verified"]
    assert not {r["JobId"] for r in rows} & standing  # neither figure stands: no majority says which
    mine = [r for r in rows if r["WorkerPeerId"] == ids["shave"]]
    assert mine
    assert all(r["InferenceMsMedian"] for r in mine)  # its figures kept, flagged
