"""Issue 50, scope 4: a named reference that is offline is never replaced in silence.

Real processes: a gate, two hostile `join` workers (tests/kit/replicaliar.py `halve`: every sample
halved, each result self-consistent, so the two agree with each other on a 0.5x lie) and the
submitter's own reference device R, started (so its advert is in the swarm) and then stopped, as a
reference that is down the day a campaign runs. The campaign names R (`verify: {reference: [R]}`).
Before this issue the two liars were `replicated 2/2`, exit 0, and no line named R. Now `plan` says
the class is unverifiable and why, and `submit` runs nothing, exits 1 and its one error line names
the rule (`verify.reference`), R, and the field that would allow the majority
(`reference_fallback: allow`); with that field, `plan` places the two as before (said, not silent).
All three run on 127.0.0.1, so the campaign says `same_host: allow` (the lab switch).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.campaignlab import LIAR, CampaignLab, Swarm, submitter_id, write_campaign


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Swarm, str]]:
    root = tmp_path_factory.mktemp("missing-reference")
    lab = CampaignLab(root, record_ttl=30.0)
    try:
        submitter_dir = root / "submitter"
        me = submitter_id(submitter_dir)
        gate = lab.gate().ready["addrs"][0]
        liar = [sys.executable, str(LIAR), "halve"]
        reference = lab.real_worker("reference", [gate], me, wait=False)
        liars = [lab.real_worker(f"liar{i}", [gate], me, wait=False, program=liar) for i in range(2)]
        reference_id: str = reference.wait_event("ready", 120)["peer_id"]
        lab.kill(reference)  # R is down today: its advert may still be listed, it answers nothing
        workers = {p.wait_event("ready", 120)["peer_id"]: p for p in liars}
        yield Swarm(lab, gate, workers, submitter_dir, root), reference_id
    finally:
        lab.close()


def campaign(root: Path, reference: str, liars: list[str], **more: str) -> Path:
    job: dict[str, Any] = {"compute_unit": "CPU (ONNX)", "devices": "any", "num_inference_runs": 10,
                           "warmup_runs": 1, "load_runs": 1, "processes": 1, "threads": 1,
                           "require": {"peers": [*liars, reference]}}  # fmt: skip
    verify = {"replicas": 2, "same_host": "allow", "reference": [reference], **more}
    body = {
        "name": "missing-reference",
        "model": {"path": "tiny-convnet.onnx"},
        "verify": verify,
        "jobs": [job],
    }
    folder = root / ("fallback" if more else "strict")
    folder.mkdir(exist_ok=True)
    return write_campaign(folder / "c.yaml", body)


def test_two_liars_without_their_stopped_reference_make_no_quorum_and_submit_says_why(
    lab: tuple[Swarm, str],
) -> None:
    swarm, reference = lab
    liars = sorted(swarm.workers)
    path = campaign(swarm.root, reference, liars)
    planned = swarm.run("plan", str(path), "--json", "--wait-peers", "2")
    assert planned.returncode == 0, planned.stderr
    (job,) = json.loads(planned.stdout)["jobs"]
    assert job["unverifiable"]
    assert job["chosen"] == []
    assert f"verify.reference: {reference} not found" in job["shortfall"]
    assert "reference_fallback: allow" in job["shortfall"]
    (cls,) = [c for c in job["references"] if c["class"]]
    assert cls["why_not"].startswith("unverifiable: verify.reference")

    done = swarm.run("submit", str(path), "--wait-peers", "2", "--out", str(path.parent / "out"), timeout=300)
    assert done.returncode == 1, done.stderr[-3000:]
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert "verification not obtained: verify.reference: " in line
    assert reference in line
    assert "reference_fallback: allow" in line
    drained = swarm.drain()
    assert not any(
        e.get("event") == "committed" for events in drained.values() for e in events
    )  # nothing ran

    allowed = campaign(swarm.root, reference, liars, reference_fallback="allow")
    planned = swarm.run("plan", str(allowed), "--json", "--wait-peers", "2")
    assert planned.returncode == 0, planned.stderr
    (job,) = json.loads(planned.stdout)["jobs"]
    assert not job["unverifiable"]
    assert sorted(job["chosen"]) == liars  # the fallback, asked for in the campaign
