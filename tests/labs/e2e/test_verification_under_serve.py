"""Issue 38 under `serve`: every cheating strategy the submit labs pin, one campaign each, posted to
the REST API of one `sark-node serve` over one swarm.

The processes are the submit labs' own: a gate, three honest `join` workers and the patched liars of
tests/kit/replicaliar.py (`halve` and its Sybil, `norun`, `scatter`, `predict`), and, for the last
campaigns only (a peer that claims a calibration is challenged by every campaign that sees it), a
worker whose written profile claims 8x this machine's speed under a CPU name of its own (tests/labs/e2e/
test_challenge.py's liar), then test_challenge.py's GPU liar (tests/kit/gpuliar.py) and
test_owners.py's owner forger (tests/kit/ownerforger.py) beside an honest worker with an owner key
whose statement the forger copies (h0-h2 hold none: the other checks pair them). Every worker
advertises a written profile (`join --profile`, no probe: the lab starts in seconds), the honest
ones and the replica liars one profile, so one device class, and runs a paced workload
(`kit.campaignlab.PACE_MS`): the honest replicas agree beside the rest of the suite.
Each campaign's rows are read as the API gives them (GET /campaigns/{id}/results), checked with the
submit lab's own assertions, and found the same in results.csv, in the dashboard's data (GET
/jobs/{id}, each result's row) and in report.html. All run on 127.0.0.1: the campaigns say
`same_host: allow` (the lab switch) except the one that is under test without it.
"""

from __future__ import annotations

import csv
import io
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import httpx
import pytest
from kit.campaignlab import LIAR, MODEL, PACE_MS, ROOT, CampaignLab, Swarm, campaign_end, submitter_id
from kit.fleet import _SERVE
from kit.replicaliar import old_predicts_checked

from labs.e2e.test_challenge import _profiles
from labs.e2e.test_replication import check_caught
from node.cli.records import record_rows
from node.ownerkey import mint_owner_key, read_owner_key
from node.submitter.run import restore
from node.submitter.store import CampaignStore
from protocol import DeviceProfile, sign_owner
from scheduler import DrawKey, TaskView
from scheduler.results import CampaignReport, entries_of
from scheduler.verification import Evidence, Purpose

GPU_LIAR = ROOT / "tests" / "kit" / "gpuliar.py"
FORGER = ROOT / "tests" / "kit" / "ownerforger.py"
HONEST = ("h0", "h1", "h2")
LIARS = {"halve": "halve", "sybil": "halve", "norun": "norun", "scatter": "scatter", "predict": "predict"}
SPOT_JOBS = 8
SPOT_P = 0.75
"""Eight jobs on both peers, each task checked at 0.75: each of the sixteen tasks (the liar's own, or
its replica of the honest one's) holds a lie the key checks with a chance of 0.375, so a campaign
whose key checks none is about 1 in 2,000 (`check_predicting` then posts another)."""
SWITCH = "same_host: allow"


@dataclass
class Served:
    """The swarm, `serve`'s API and its event lines, the model's URL, the workers' ids by name."""

    swarm: Swarm
    api: str
    served: Any
    model_url: str
    ids: dict[str, str]
    fast: Path
    """The written profile of the `fast` worker (started for the last campaigns only: a peer that
    claims a calibration is challenged by every campaign that sees it)."""
    claimed: float
    """The GFLOPS its profile claims (8x this machine's on the challenge's kernel)."""
    gpu: Path
    """The GPU liar's written profile (the honest CPU claim, an H100 and 20 TFLOPS on cuda:0)."""


@dataclass
class Outcome:
    """A campaign as `serve` ended it: the API's rows, its files, its report and stored record."""

    cid: str
    rows: list[dict[str, str]]
    document: CampaignReport
    html: str
    files: dict[str, Path]

    def of(self, peer: str) -> list[dict[str, str]]:
        return [r for r in self.rows if r["WorkerPeerId"] == peer]


def _start_workers(lab: CampaignLab, gate: str, me: str, root: Path) -> dict[str, Any]:
    honest_file = _profiles(root)[0]
    plain = DeviceProfile.model_validate_json(honest_file.read_text()).with_(calibration=None)
    (root / "plain.json").write_text(plain.model_dump_json())  # no calibration: no challenge asked
    started = {}
    for name in (*HONEST, *LIARS):
        program = [sys.executable, str(LIAR), LIARS[name]] if name in LIARS else None
        extra = ["--profile", str(root / "plain.json")]
        started[name] = lab.real_worker(name, [gate], me, wait=False, program=program, extra=extra)
    return started


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("verifyserve")
    lab = CampaignLab(root, record_ttl=30.0, pace_ms=PACE_MS)
    try:
        submitter_dir = root / "submitter"
        me = submitter_id(submitter_dir)
        gate = lab.gate().ready["addrs"][0]
        www = root / "www"
        www.mkdir()
        (www / MODEL.name).write_bytes(MODEL.read_bytes())
        port = lab.start("www", [sys.executable, "-c", _SERVE, str(www), "127.0.0.1"]).wait_event("ready", 30)
        started = _start_workers(lab, gate, me, root)
        fast = root / "fast.json"  # written by `_profiles`
        claim = DeviceProfile.model_validate_json(fast.read_text()).calibration
        assert claim is not None
        ids = {name: proc.wait_event("ready", 120)["peer_id"] for name, proc in started.items()}
        store = CampaignStore(submitter_dir / "campaigns.sqlite")
        for _ in range(6):  # both earned spot checks in earlier campaigns (a clean streak)
            store.settled([(ids["h2"], Evidence(True)), (ids["predict"], Evidence(True))])
        network = ["--allow-http", "--allow-network", "127.0.0.0/8", "--refresh", "0.5"]
        where = ["--data-dir", str(submitter_dir), "--gate", gate, "--out", str(root / "out")]
        proc = lab.submitter(["serve", "--http", "127.0.0.1:0", "--events", *where, *network])
        api = f"{proc.wait_event('http', 90)['url']}/api"
        while proc.wait_event("peers", 90)["count"] < len(ids):
            pass
        swarm = Swarm(lab, gate, {ids[n]: p for n, p in started.items()}, submitter_dir, root, ids)
        url = f"http://127.0.0.1:{port['port']}/{MODEL.name}"
        yield Served(swarm, api, proc, url, ids, fast, claim.cpu_gflops, root / "gpu.json")
    finally:
        lab.close()


def post(s: Served, name: str, jobs: list[dict[str, Any]], verify: dict[str, Any]) -> Outcome:
    """Post one campaign (one measurement at a time: the workers share this machine's cores), wait
    for `serve` to end it, and read it back: the API's CSV (the same as results.csv), results.json,
    report.html, and the dashboard's data (each job's results), whose Verified is the row's (blank
    where the campaign asked no verification, as every report view leaves it)."""
    body = {"name": name, "model_url": s.model_url, "verify": verify, "max_inflight": 1, "jobs": jobs}
    created = httpx.post(f"{s.api}/campaigns", json=body, timeout=60)
    assert created.status_code == 201, created.text
    cid = created.json()["campaign_id"]
    ended = campaign_end(s.served, cid, 400)
    assert ended["event"] == "campaign_done", ended
    files = {kind: Path(path) for kind, path in ended["files"].items()}
    answer = httpx.get(f"{s.api}/campaigns/{cid}/results", timeout=30)
    assert answer.status_code == 200, answer.text
    rows = list(csv.DictReader(io.StringIO(answer.text)))
    with open(files["csv"], newline="") as f:
        assert list(csv.DictReader(f)) == rows
    for index in range(len(jobs)):
        job = httpx.get(f"{s.api}/jobs/{cid}-job-{index}", timeout=30).json()
        shown = {r["row"]["JobId"]: r["row"]["Verified"] for r in job["results"]}
        asked = verify.get("replicas", 1) > 1 or verify.get("spot_check", 0) > 0  # else no verdict shown
        assert shown == {r["JobId"]: r["Verified"] if asked else "" for r in rows if r["JobId"] in shown}
    document = CampaignReport.from_json(files["json"].read_text())
    html = files["html"].read_text()
    for row in rows:  # report.html's provenance says how each row was verified
        assert escape(row["Verified"].split("'")[0]) in html, row["Verified"]
    return Outcome(cid, rows, document, html, files)


def replicas(peers: list[str], *, runs: int = 40, processes: int = 3) -> dict[str, Any]:
    return {"compute_unit": "CPU (ONNX)", "devices": "all", "num_inference_runs": runs, "warmup_runs": 3,
            "load_runs": 1, "processes": processes, "threads": 1, "require": {"peers": peers}}  # fmt: skip


def standing(out: Outcome) -> set[str]:
    return {e.task_id for e in entries_of(out.document) if e.complete}


def check_scaled_and_norun(s: Served) -> None:
    """tests/labs/e2e/test_replication.py: the halving liar is the outlier against the agreed figure; the
    liar that never runs the model, by its outputs; the honest rows replicated, naming their quorum."""
    honest = [s.ids[n] for n in HONEST]
    for liar, why in (("halve", "against the agreed"), ("norun", "outputs differ")):
        job = replicas([*honest, s.ids[liar]])  # as the submit lab: 40 runs in 3 processes
        out = post(s, liar, [job], {"replicas": 2, "same_host": "allow"})
        check_caught(out.rows, out.document, s.ids[liar], why)


def check_scattered(s: Served) -> None:
    """tests/labs/e2e/test_scattered_liar.py: a liar widening its own band is refused, never a figure."""
    liar = s.ids["scatter"]
    peers = [*(s.ids[n] for n in HONEST), liar]
    out = post(s, "scatter", [replicas(peers)], {"replicas": 2, "same_host": "allow"})
    mine = out.of(liar)  # its own task, and any third replica of another's group it was dealt
    assert mine
    for row in mine:
        verdict = row["Verified"]
        assert verdict.startswith(("outlier: ", "disagreed: ")), verdict
        assert liar in verdict, verdict
        why = ("cannot vouch", "against the agreed", "no majority")
        assert any(w in verdict for w in why), verdict
        assert row["JobId"] not in standing(out)
    replicated = {r["JobId"] for r in out.rows if r["Verified"].startswith("replicated")}
    assert replicated <= standing(out)


def check_predicting(s: Served) -> None:
    """tests/labs/e2e/test_spot_checks.py: the secret draw decides which tasks are checked, and every lie
    it checks is refused; the store's key is the one the submitter kept. `serve` draws each campaign's
    key itself, so a campaign whose key checked none of the lies (about 1 in 2,000: it held every
    assertion, and proved nothing) is followed by another, with a fresh key; three in a row is 1 in
    10^10, and fails."""
    for _ in range(3):
        if predicted(s):
            return
    pytest.fail("three campaigns' keys checked none of the liar's lies")


def predicted(s: Served) -> int:
    """One spot-checked campaign, every assertion of check_predicting held: the lies its key checked."""
    liar = s.ids["predict"]
    job = replicas([s.ids["h2"], liar], runs=20, processes=1) | {"warmup_runs": 1}
    verify = {"spot_check": SPOT_P, "same_host": "allow"}
    out = post(s, "predicted", [job] * SPOT_JOBS, verify)
    record = CampaignStore(s.swarm.submitter_dir / "campaigns.sqlite").campaign(out.cid)
    assert record is not None
    assert record.secret is not None
    key = DrawKey(record.secret)
    groups: dict[str, list[TaskView]] = {}
    for t in restore(record).scheduler.tasks():
        groups.setdefault(t.replica_group, []).append(t)
    rows = {r["JobId"]: r for r in out.rows}
    caught = 0
    for first_id, members in groups.items():
        checked = len(members) > 1
        assert checked or key.draw(Purpose.SPOT_CHECK, first_id) >= SPOT_P, first_id
        lies = [
            t
            for t in members
            if t.state.value == "done" and t.peer_id == liar and not old_predicts_checked(out.cid, t.task_id)
        ]
        if checked and lies:
            caught += len(lies)
            for t in (t for t in members if t.task_id in rows):
                assert not rows[t.task_id]["Verified"].startswith("replicated"), rows[t.task_id]
                assert t.task_id not in standing(out)
        elif lies:
            assert rows[first_id]["Verified"] == "single"  # unchecked: shown unverified, the cost of p
    return caught


def check_reference(s: Served) -> None:
    """tests/labs/e2e/test_reference_device.py: two halving keys agree with each other and lose to the
    reference, which is verified and named."""
    reference, liars = s.ids["h1"], [s.ids["halve"], s.ids["sybil"]]
    job = replicas([reference, *liars], runs=30, processes=1) | {"devices": "any", "warmup_runs": 2}
    verify = {"replicas": 3, "same_host": "allow", "reference": [reference]}
    out = post(s, "reference", [job], verify)
    (ref,) = out.of(reference)
    said = [(r["WorkerPeerId"][-6:], r["Status"], r["InferenceMsMedian"], r["Verified"], r["FailureReason"])
            for r in out.rows]  # fmt: skip
    assert ref["Verified"] == f"replicated 1/3 (reference {reference}; same host)", said
    for liar in liars:
        (row,) = out.of(liar)
        assert row["Verified"].startswith("outlier: "), row["Verified"]
        assert f"against the reference {reference}'s" in row["Verified"]
    assert standing(out) == {ref["JobId"]}


def check_sybils(s: Served) -> None:
    """tests/labs/e2e/test_replication.py: two Sybils outvoting an honest peer on one host never turn its
    record; where they outvoted it, the store names them as overruled, on their network."""
    honest, liars = s.ids["h0"], {s.ids["halve"], s.ids["sybil"]}
    job = replicas([honest, *sorted(liars)], runs=20) | {"warmup_runs": 1}
    out = post(s, "sybils", [job], {"replicas": 3, "same_host": "allow"})
    mine = {r["peer_id"]: r for r in record_rows(s.swarm.submitter_dir / "campaigns.sqlite")}[honest]
    assert not mine["distrusted"], mine
    if any(r["Verified"].startswith("outlier") for r in out.of(honest)):
        overruled = {w["peer_id"]: w["network"] for w in mine["overruled"] if w["peer_id"] in liars}
        assert overruled == dict.fromkeys(liars, "loopback"), mine


def check_unverifiable(s: Served) -> None:
    """tests/labs/e2e/test_unverifiable.py: without the lab switch loopback is one network: no figure,
    each row `Unverifiable` naming the switch; nothing ran alone."""
    job = replicas([s.ids["h0"], s.ids["h1"]], runs=10, processes=1)
    out = post(s, "one-machine", [job], {"replicas": 2})
    assert [r["Status"] for r in out.rows] == ["Unverifiable"] * 2
    for row in out.rows:
        assert row["InferenceMsMedian"] == row["LoadMsMedian"] == ""
        assert (row["Verified"], row["FailureReason"]) == ("unverifiable", "no_quorum")
        assert SWITCH in row["Detail"]
    assert "Unverifiable" in out.html


def check_challenge(s: Served) -> None:
    """tests/labs/e2e/test_challenge.py: a CPU claiming 8x its speed is refused by its challenge; the
    honest worker (it claims nothing) carries no mark."""
    honest, me = s.ids["h0"], submitter_id(s.swarm.submitter_dir)
    started = s.swarm.lab.real_worker("fast", [s.swarm.gate], me, 120, extra=["--profile", str(s.fast)])
    fast: str = started.ready["peer_id"]
    while fast not in s.served.wait_event("peers", 90)["peers"]:  # serve's next look at the swarm
        pass
    job = replicas([fast, honest], runs=10, processes=1)
    out = post(s, "challenged", [job], {"unverified": "allow", "same_host": "allow"})
    ((row,), (plain,)) = out.of(fast), out.of(honest)
    assert row["Claim"].startswith("claim_unverified: challenge: n="), row["Claim"]
    assert f"against {s.claimed:.3g} claimed" in row["Claim"]
    assert plain["Claim"] == ""
    assert row["Status"] == plain["Status"] == "Complete"


def check_gpu_and_owner(s: Served) -> None:
    """tests/labs/e2e/test_challenge.py's GPU liar (tests/kit/gpuliar.py: an H100 at 20 TFLOPS advertised,
    its GPU challenge answered on its CPU) and tests/labs/e2e/test_owners.py's forger (tests/kit/
    ownerforger.py: another device's owner statement copied byte for byte), started for this last
    campaign only, beside `owned`, an honest worker with an owner key whose statement the forger
    copies. The GPU liar's row names its GPU challenge's refusal; the forger is never placed, even
    where `require.peers` names it: the job that names it alone is Unverifiable (verification was asked
    and the only peer that fits was refused by it: issue 49's one rule), its task's reasons
    (GET /campaigns/{id}) name `owner_refused`, and `serve`'s log warns of it."""
    lab, gate, me = s.swarm.lab, s.swarm.gate, submitter_id(s.swarm.submitter_dir)
    root, plain = s.swarm.root, ["--profile", str(s.swarm.root / "plain.json")]
    key = root / "owner.key"
    owner = mint_owner_key(key)
    copied = sign_owner(read_owner_key(key), submitter_id(root / "owned"))  # made before it starts
    forger = [sys.executable, str(FORGER), copied.public_key.hex(), copied.signature.hex()]
    gpu = [sys.executable, str(GPU_LIAR)]
    started = {
        "owned": lab.real_worker("owned", [gate], me, wait=False, extra=[*plain, "--owner-key", str(key)]),
        "forger": lab.real_worker("forger", [gate], me, wait=False, extra=plain, program=forger),
        "gpu": lab.real_worker("gpu", [gate], me, wait=False, extra=["--profile", str(s.gpu)], program=gpu),
    }
    ids = {name: proc.wait_event("ready", 120)["peer_id"] for name, proc in started.items()}
    while not set(ids.values()) <= set(s.served.wait_event("peers", 90)["peers"]):  # serve's next look
        pass
    both = replicas([ids["gpu"], ids["owned"], ids["forger"]], runs=10, processes=1)
    alone = replicas([ids["forger"]], runs=10, processes=1)
    out = post(s, "gpu-and-owner", [both, alone], {"unverified": "allow", "same_host": "allow"})
    assert ids["forger"] not in {r["WorkerPeerId"] for r in out.rows}, out.rows
    ((row,), (plain_row,)) = out.of(ids["gpu"]), out.of(ids["owned"])
    claim = row["Claim"]
    assert claim.startswith("claim_unverified: challenge on GPU (PyTorch) cuda:0: n=16384 x "), claim
    assert plain_row["Claim"] == "", plain_row["Claim"]
    assert row["Status"] == plain_row["Status"] == "Complete", (row, plain_row)
    assert "challenge on GPU (PyTorch) cuda:0" in out.html
    campaign = httpx.get(f"{s.api}/campaigns/{out.cid}", timeout=30).json()
    (unplaced,) = [t for t in campaign["tasks"] if t["job_index"] == 1]
    assert unplaced["state"] == "unverifiable", unplaced
    assert "refused by verification: owner statement refused" in unplaced["detail"], unplaced
    (why,) = [r for r in unplaced["reasons"] if ids["forger"] in r]
    assert "owner statement refused" in why, unplaced["reasons"]
    assert owner in why  # names whose statement it copied
    assert [r["Status"] for r in out.rows if r["JobId"] == unplaced["task_id"]] == ["Unverifiable"], out.rows
    assert f"peer {ids['forger']}: owner_refused: owner statement refused" in s.served.log.read_text()


@pytest.mark.timeout(1500)  # a deadline on a loaded machine, not a speed
def test_every_cheating_strategy_is_refused_under_serve_as_under_submit(served: Served) -> None:
    took = {}
    for check in (
        check_predicting,
        check_scaled_and_norun,
        check_scattered,
        check_reference,
        check_sybils,
        check_unverifiable,
        check_challenge,
        check_gpu_and_owner,
    ):
        started = time.monotonic()
        check(served)
        took[check.__name__] = round(time.monotonic() - started, 1)
    print(took)
    assert served.served.popen.poll() is None, served.served.log_excerpt()
