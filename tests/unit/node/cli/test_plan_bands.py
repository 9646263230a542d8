"""Issue 50, scope 5: `plan` says the band each class of a replicated job would be judged with, and
whether the class learnt it (from how many replicas) or a fresh class stands at the prior's."""

from __future__ import annotations

import dataclasses

import pytest
from kit.scheduler_harness import MODEL, SHA, peer

from node.cli.planview import bands, plan_json, print_plan
from scheduler import parse_campaign
from scheduler.state import explain
from scheduler.verification import device_class

YAML = f"""\
model: {{url: https://example.org/m.onnx, sha256: {SHA}}}
processes: 1
verify: {{replicas: 2}}
jobs: [{{compute_unit: CPU (ONNX), devices: any}}]
"""


def test_plan_says_the_band_of_a_fresh_class_and_of_one_that_learnt(
    capsys: pytest.CaptureFixture[str],
) -> None:
    peers = [dataclasses.replace(peer(n), host=f"10.0.{i}.1") for i, n in enumerate(("a", "b"))]
    campaign = parse_campaign(YAML)
    plan = explain(campaign, {"m": MODEL, MODEL.name: MODEL}, peers)
    (job,) = plan.jobs
    cls = device_class(peers[0].profile, job.job.spec.compute_unit)
    (fresh,) = bands(job, {})
    assert fresh == {"class": cls.name, "band": 0.463, "processes": 1, "learnt_from": 0}
    learnt = {f"{cls.key}/{SHA[:16]}": (0.03,) * 12}
    (taught,) = plan_json(plan, learnt)["jobs"][0]["bands"]
    assert taught["learnt_from"] == 12
    assert taught["band"] < 0.2
    print_plan(plan)
    said = capsys.readouterr().out
    assert f"class {cls.name}: judged within 46.3% at 1 process(es) (the prior: a fresh class)" in said


def test_plan_says_beforehand_that_refused_peers_are_challenged_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 49, scope 1: a job short of peers its challenge refused and will challenge again waits
    for their next verdict, and `plan` says so before the run (terminal and `--json`)."""
    refused = ("challenge: n=512 x 137 steps, 20 GFLOPS measured against 245 claimed",)
    peers = [
        dataclasses.replace(peer(n), host=f"10.0.{i}.1", claim=refused, challenge_again_by=100.0)
        for i, n in enumerate(("a", "b"))
    ]
    plan = explain(parse_campaign(YAML), {"m": MODEL, MODEL.name: MODEL}, peers)
    assert plan_json(plan)["jobs"][0]["awaiting"] == ["12D3-a", "12D3-b"]
    print_plan(plan)
    said = " ".join(capsys.readouterr().out.split())
    assert "waits: 2 peer(s) its challenge refused are challenged again later in the campaign" in said, said
    assert "unverifiable if none passes: " in said
    assert "claim_unverified: challenge: n=512" in said


def test_plan_keeps_two_classes_that_share_a_short_name_apart(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 50, scope 7: two boards whose classes share the 32-bit short name (`kit.twins`) are two
    classes in `plan`: each its own band and owners, named by its whole id, as the rules name them."""
    from kit.twins import colliding

    boards = colliding()
    peers = [
        dataclasses.replace(peer(n), host=f"10.0.{i}.1", profile=board)
        for i, (n, board) in enumerate(zip(("a", "b"), boards, strict=True))
    ]
    plan = explain(parse_campaign(YAML), {"m": MODEL, MODEL.name: MODEL}, peers)
    (job,) = plan.jobs
    assert len(job.matching) == 2
    classes = [device_class(p.profile, job.job.spec.compute_unit) for p in peers]
    assert classes[0].name == classes[1].name
    said = plan_json(plan)["jobs"][0]
    assert said["classes"] == {p.peer_id: c.id for p, c in zip(peers, classes, strict=True)}
    assert sorted(b["class"] for b in said["bands"]) == sorted(c.id for c in classes)
    print_plan(plan)
    out = capsys.readouterr().out
    assert all(f"class {c.id}: judged within" in out for c in classes), out
