"""Issue 31: replicas of one device class check each other's timings and outputs, end to end.

Real processes: a gate, three honest `join` workers and three hostile ones (tests/kit/replicaliar.py:
one halves its samples and derives every figure again, one returns outputs without running the
model, one advertises a calibration its CPU cannot reach, and a second halving key, its Sybil), and
`sark-node submit` / `plan` / `peers`.
Every worker runs on 127.0.0.1, so the campaigns say `verify: {same_host: allow}` (the lab's explicit
way around the distinct-host rule; the rows say "(same host)"). The workload is paced
(`kit.campaignlab.PACE_MS`: every inference takes the pace, the real run inside it), so honest
replicas agree whatever else this machine runs, and the lab runs beside the rest of the suite.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.campaignlab import MODEL, PACE_MS, Swarm, liar, named_swarm, write_campaign

from node.submitter.store import CampaignStore
from scheduler.results import CampaignReport, entries_of

HONEST = ("h0", "h1", "h2")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Swarm, dict[str, str]]]:
    modes = {"sybil": "halve"}  # a second key lying as `halve` does: two Sybils on this host
    names = [*HONEST, "halve", "norun", "claim", "sybil"]
    programs = {n: None if n in HONEST else liar(modes.get(n, n)) for n in names}
    with named_swarm(tmp_path_factory.mktemp("replication"), programs) as lab:
        yield lab


def campaign(root: Path, name: str, peers: list[str], verify: dict[str, Any]) -> Path:
    job = {"compute_unit": "CPU (ONNX)", "devices": "all", "num_inference_runs": 40, "warmup_runs": 3,
           "load_runs": 1, "processes": 3, "threads": 1, "require": {"peers": peers}}  # fmt: skip
    # One measurement at a time: separate devices never share cores (the pace holds each inference's
    # time; the real runs beside it still share this machine's two).
    body = {"name": name, "model": {"path": MODEL.name}, "verify": verify, "max_inflight": 1, "jobs": [job]}
    (root / name).mkdir(exist_ok=True)
    return write_campaign(root / name / "c.yaml", body)


def submit(swarm: Swarm, path: Path) -> tuple[list[dict[str, str]], CampaignReport]:
    done = swarm.run(
        "submit", str(path), "--json", "--wait-peers", "7", "--out", str(path.parent / "out"), timeout=400
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    with open(outcome["files"]["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    document = CampaignReport.from_json(Path(outcome["files"]["json"]).read_text())
    return rows, document


def check_caught(rows: list[dict[str, str]], document: CampaignReport, liar: str, why: str) -> None:
    """No row of the liar is a figure: each is an outlier of its group with `why`, its figures kept,
    flagged. Every honest row is replicated, 2 of 2 or 2 of 3 (the liar's group asked a third
    replica), at the pace the lab set: the workload is paced (`kit.campaignlab.PACE_MS`), so honest
    replicas time the same model whatever else runs on this machine, and a halved figure is half of it."""
    mine = [r for r in rows if r["WorkerPeerId"] == liar]
    others = [r for r in rows if r["WorkerPeerId"] != liar]
    assert mine, rows  # its own task, and any replica of another's it was dealt
    for row in mine:
        verdict = row["Verified"]
        assert verdict.startswith("outlier: "), verdict
        assert why in verdict, verdict
        assert row["InferenceMsMedian"]  # its figures are kept, flagged
    assert len(others) >= 4
    replicated = ("replicated 2/2 (same host)", "replicated 2/3 (same host)")
    for row in others:
        assert row["Verified"] in replicated, row["Verified"]
        assert float(row["InferenceMsMedian"]) >= PACE_MS, row  # the pace held every honest inference
    assert len({r["DeviceClass"] for r in rows}) == 1
    standing = {e.task_id for e in entries_of(document) if e.complete}
    assert not {r["JobId"] for r in mine} & standing  # never the figure in the views that compare devices
    assert {r["JobId"] for r in others} <= standing


def test_a_liar_that_halves_its_samples_is_the_outlier_and_the_others_are_replicated(
    lab: tuple[Swarm, dict[str, str]],
) -> None:
    swarm, ids = lab
    peers = [ids["h0"], ids["h1"], ids["h2"], ids["halve"]]
    rows, document = submit(
        swarm, campaign(swarm.root, "halve", peers, {"replicas": 2, "same_host": "allow"})
    )
    check_caught(rows, document, ids["halve"], "against the agreed")


def test_a_liar_that_never_runs_the_model_is_refused_by_its_outputs(
    lab: tuple[Swarm, dict[str, str]],
) -> None:
    swarm, ids = lab
    peers = [ids["h0"], ids["h1"], ids["h2"], ids["norun"]]
    rows, document = submit(
        swarm, campaign(swarm.root, "norun", peers, {"replicas": 2, "same_host": "allow"})
    )
    check_caught(rows, document, ids["norun"], "outputs differ from the majority's")


def test_a_peer_claiming_a_speed_it_does_not_have_is_marked_everywhere(
    lab: tuple[Swarm, dict[str, str]],
) -> None:
    swarm, ids = lab
    claimer = ids["claim"]
    listed = swarm.run("peers", "--json")
    assert listed.returncode == 0, listed.stderr
    found = {p["peer_id"]: p for p in json.loads(listed.stdout)["peers"]}
    assert found[claimer]["claim"].startswith("claim_unverified: calibration.cpu_gflops")
    assert not found[ids["h0"]]["claim"]
    refused = campaign(swarm.root, "claim-refused", [claimer, ids["h0"]], {})
    planned = swarm.run("plan", str(refused), "--json", "--wait-peers", "7")
    assert planned.returncode == 0, planned.stderr
    (job,) = json.loads(planned.stdout)["jobs"]
    assert job["chosen"] == [ids["h0"]]
    (rejected,) = [r for r in job["rejected"] if r["peer_id"] == claimer]
    assert rejected["codes"] == ["claim_unverified"]
    assert job["classes"][ids["h0"]].startswith("cls-")
    rows, _ = submit(swarm, campaign(swarm.root, "claim-allowed", [claimer], {"unverified": "allow"}))
    (row,) = rows
    assert row["WorkerPeerId"] == claimer
    assert row["Claim"].startswith("claim_unverified: calibration.cpu_gflops"), row
    assert row["Verified"] == "single"


def test_two_sybils_on_this_host_outvoting_an_honest_peer_never_turn_its_record(
    lab: tuple[Swarm, dict[str, str]],
) -> None:
    """Issue 38, scope 4: two halving keys on this host (the lab switch lets them form a quorum, said
    explicitly) and one honest worker, in a group of three, over two small campaigns sharing one
    store: where the Sybils outvote the honest worker its row says so, but one network's majority
    counts nothing against it: its record never turns distrusted, and `peers` names the liars as
    the evidence (their ids and network). On a loaded machine a halved figure may fall within the
    band of the truth, or the two apart (no majority: a fourth replica no peer can run, exit 1,
    said); the record holds either way."""
    swarm, ids = lab
    honest, liars = ids["h0"], {ids["halve"], ids["sybil"]}
    peers = [honest, *sorted(liars)]
    job = {"compute_unit": "CPU (ONNX)", "devices": "all", "num_inference_runs": 20, "warmup_runs": 1,
           "load_runs": 1, "processes": 3, "threads": 1, "require": {"peers": peers}}  # fmt: skip
    verify = {"replicas": 3, "same_host": "allow"}
    store = CampaignStore(swarm.submitter_dir / "campaigns.sqlite")
    before = store.peer_records().get(honest)  # what the module's other campaigns left
    verdicts = []
    for name in ("sybils-1", "sybils-2"):
        body = {
            "name": name,
            "model": {"path": MODEL.name},
            "verify": verify,
            "max_inflight": 3,
            "jobs": [job],
        }
        (swarm.root / name).mkdir(exist_ok=True)
        path = write_campaign(swarm.root / name / "c.yaml", body)
        done = swarm.run(
            "submit", str(path), "--json", "--wait-peers", "7", "--out", str(path.parent / "out")
        )
        assert done.returncode == 0 or "(1 unverifiable)" in done.stderr, done.stderr[-3000:]
        with open(json.loads(done.stdout.strip().splitlines()[-1])["files"]["csv"], newline="") as f:
            verdicts += [
                r["Verified"].split(":")[0] for r in csv.DictReader(f) if r["WorkerPeerId"] == honest
            ]
        assert not store.peer_records()[honest].distrusted
    listed = swarm.run("peers", "--json", "--timeout", "2")
    assert listed.returncode == 0, listed.stderr
    mine = {r["peer_id"]: r for r in json.loads(listed.stdout)["records"]}[honest]
    assert not mine["distrusted"], mine
    if "outlier" in verdicts:  # outvoted: the liars are named, on their network, and counted nothing
        assert {
            w["peer_id"]: w["network"] for w in mine["overruled"] if w["peer_id"] in liars
        } == dict.fromkeys(liars, "loopback"), mine
    counted = mine["disagreed"] - (before.disagreed if before else 0)
    assert counted <= 0.25 * verdicts.count("disagreed") + 1e-3, (mine, verdicts, before)
