"""Issue 38, scope 6: reference devices, the submitter's own, in every quorum of their class.

The language refuses each bad entry by its index; placement puts a class's reference in each of its
quorums (full replication) and in each spot check; agreement trusts it: a replica that disagrees with
it is the outlier whatever the others say, so two keys of one owner agreeing on a lie lose, and the
row names the reference. A class with no reference is settled by the majority as before.
"""

from __future__ import annotations

import dataclasses

import pytest
from kit.scheduler_harness import KEY, MODEL, SHA, peer

from protocol import FailureReason
from scheduler import (
    CampaignError,
    OfferCommitted,
    PeersDiscovered,
    ReplicasSettled,
    ResultAccepted,
    ResultRejected,
    Scheduler,
    SendOffer,
    parse_campaign,
)
from scheduler.state import PeerView, class_references, explain
from scheduler.verification import Outcome, Replica, judge

YAML = f"""\
model: {{url: https://example.org/m.onnx, sha256: {SHA}}}
verify: {{VERIFY}}
jobs: [{{compute_unit: CPU (ONNX), devices: DEVICES}}]
"""
MODELS = {"m": MODEL, MODEL.name: MODEL}


def campaign(verify: str, devices: str = "all") -> str:
    return YAML.replace("VERIFY", verify).replace("DEVICES", devices)


def fleet(hosts: list[str], **kwargs: object) -> list[PeerView]:
    return [dataclasses.replace(peer(f"b{i}", **kwargs), host=h) for i, h in enumerate(hosts)]  # type: ignore[arg-type]


def run(sched: Scheduler, peers: list[PeerView], figures: dict[str, float]) -> list[object]:
    """Commit every offer and deliver each peer's figure at once, round after round, until nothing
    is offered (answered within the offer's timeout: no retry moves a task)."""
    log: list[object] = []
    out = sched.handle(PeersDiscovered(peers=tuple(peers)), 0.0)
    now = 1.0
    while True:
        log += out
        offers = [c for c in out if isinstance(c, SendOffer)]
        if not offers:
            return log
        out = []
        for o in offers:
            out += sched.handle(OfferCommitted(o.task_id, o.peer_id, f"L-{o.task_id}"), now)
            event = ResultAccepted(
                o.task_id, f"L-{o.task_id}", o.peer_id, figures[o.peer_id], 0.01, "sha256:x"
            )
            out += sched.handle(event, now)
        now += 1


def test_bad_reference_entries_are_refused_each_by_its_index() -> None:
    bad = campaign("replicas: 2, reference: [12D3KooWa, 'two words', 12D3KooWa, 7]")
    with pytest.raises(CampaignError) as caught:
        parse_campaign(bad)
    assert [p.path for p in caught.value.problems] == [
        "verify.reference[1]",
        "verify.reference[2]",
        "verify.reference[3]",
    ]
    assert "listed twice" in str(caught.value)
    with pytest.raises(CampaignError) as caught:
        parse_campaign(campaign("reference: [12D3KooWa]"))  # nothing replicated: nothing to join
    assert [p.path for p in caught.value.problems] == ["verify.reference"]
    with pytest.raises(CampaignError) as caught:
        parse_campaign(campaign("replicas: 2, reference: {a: b}"))
    assert [p.path for p in caught.value.problems] == ["verify.reference"]
    parsed = parse_campaign(campaign("spot_check: 0.1, reference: 12D3KooWa"))
    assert parsed.verify.reference == ("12D3KooWa",)
    job = campaign("replicas: 2, reference: [12D3KooWa]").replace(
        "devices: all}", "devices: all, verify: {replicas: 3}}"
    )
    parsed = parse_campaign(job)
    assert parsed.verify_of(parsed.jobs[0]).reference == ()  # a job's block replaces the campaign's


def test_two_replicas_agreeing_on_a_lie_against_the_reference_lose() -> None:
    liars = [Replica("sybil-a", 5.0, 0.01), Replica("sybil-b", 5.1, 0.01)]
    truth = Replica("mine", 10.0, 0.01)
    majority = judge([*liars, truth], 3, 0.03, {})
    assert majority.outcome == Outcome.REPLICATED
    assert majority.agreed == ("sybil-a", "sybil-b")
    got = judge([*liars, truth], 3, 0.03, {}, references=("mine",))
    assert got.outcome == Outcome.REPLICATED
    assert got.agreed == ("mine",)
    assert {p for p, _ in got.outliers} == {"sybil-a", "sybil-b"}
    assert got.reference == "mine"
    assert got.figure_ms == 10.0
    assert "against the reference mine's 10 ms" in got.reason
    honest = judge(
        [Replica("other", 10.2, 0.01), truth], 2, 0.03, {"mine": "distrusted elsewhere"}, ("mine",)
    )
    assert honest.agreed == ("mine", "other")
    assert not honest.outliers
    outputs = judge(
        [Replica("other", 10.0, 0.01, "x"), Replica("mine", 10.0, 0.01, "y")], 2, 0.03, {}, ("mine",)
    )
    assert outputs.outliers == (("other", 10.0),)
    assert "outputs differ from the reference's" in outputs.reason


def test_the_reference_joins_every_quorum_of_its_class_and_the_sybils_lose() -> None:
    peers = fleet(["10.0.1.1", "10.0.2.1", "10.0.3.1", "10.0.4.1"])
    text = campaign("replicas: 2, reference: [12D3-b3]")
    (plan,) = explain(parse_campaign(text), MODELS, peers).jobs
    chosen = [r.peer.peer_id for r in plan.chosen]
    assert chosen.count("12D3-b3") == 3
    assert len(chosen) == 6
    assert [set(chosen[k : k + 2]) & {"12D3-b3"} for k in (0, 2, 4)] == [{"12D3-b3"}] * 3
    (cls,) = class_references(peers, plan.job.spec.compute_unit, plan.verify)
    assert cls.reference == "12D3-b3"
    assert not cls.why_not

    three = parse_campaign(campaign("replicas: 3, reference: [12D3-b2]", devices="any"))
    sched = Scheduler("c1", three, MODELS, key=KEY)
    log = run(sched, peers[:3], {"12D3-b0": 5.0, "12D3-b1": 5.0, "12D3-b2": 10.0})
    verified = {t.peer_id: t.verified for t in sched.tasks()}
    assert verified == {
        "12D3-b0": "outlier",
        "12D3-b1": "outlier",
        "12D3-b2": "replicated 1/3 (reference 12D3-b2)",
    }
    (settled,) = [c for c in log if isinstance(c, ReplicasSettled)]
    assert sorted(settled.outliers) == ["12D3-b0", "12D3-b1"]  # the reference convicts: records learn it
    assert sched.done


def test_a_spot_check_goes_to_the_reference_of_the_class() -> None:
    peers = fleet(["10.0.1.1", "10.0.2.1", "10.0.3.1", "10.0.4.1"])
    jobs = ", ".join(["{compute_unit: CPU (ONNX), devices: 1}"] * 6)
    text = campaign("spot_check: 0.5, reference: [12D3-b0]").replace(
        "jobs: [{compute_unit: CPU (ONNX), devices: all}]", f"jobs: [{jobs}]"
    )
    sched = Scheduler("c2", parse_campaign(text), MODELS, key=KEY)
    run(sched, peers, {p.peer_id: 10.0 for p in peers})
    groups: dict[str, list[str]] = {}
    for t in sched.tasks():
        groups.setdefault(t.replica_group, []).append(t.peer_id or "")
    checked = [g for g in groups.values() if len(g) > 1]
    assert checked  # new peers are checked every time
    assert all("12D3-b0" in g for g in checked), groups
    for t in sched.tasks():
        assert (
            t.verified.endswith("(reference 12D3-b0)")
            if len(groups[t.replica_group]) > 1
            else t.verified == "single"
        )


def test_plan_says_which_classes_have_a_reference_and_why_one_cannot_join() -> None:
    arm = fleet(["10.0.1.1", "10.0.2.1"], soc="arm board")
    x86 = fleet(["10.0.3.1", "10.0.4.1"])
    x86 = [dataclasses.replace(p, peer_id=f"12D3-x{i}") for i, p in enumerate(x86)]
    c = parse_campaign(campaign("replicas: 2, reference: [12D3-b1, 12D3-x0]"))
    unit = c.jobs[0].spec.compute_unit
    found = class_references([*arm, *x86], unit, c.verify)
    assert [r.reference for r in found] == ["12D3-b1", "12D3-x0"]
    found = class_references([*arm, dataclasses.replace(x86[0], host=""), x86[1]], unit, c.verify)
    assert found[1].reference == ""
    assert "relayed" in found[1].why_not
    found = class_references(arm, unit, parse_campaign(campaign("replicas: 2")).verify)
    assert found[0].reference == ""
    assert "no reference device" in found[0].why_not


def _reference_refused(verify: str) -> Scheduler:
    """A quorum of three with the reference 12D3-b2, whose result is refused (its retry goes to
    another peer of the class); the others all agree."""
    peers = fleet(["10.0.1.1", "10.0.2.1", "10.0.3.1", "10.0.4.1"])
    three = parse_campaign(campaign(verify, devices="any"))
    sched = Scheduler("c3", three, MODELS, key=KEY)
    figures = {"12D3-b0": 10.0, "12D3-b1": 10.1, "12D3-b2": 10.0, "12D3-b3": 9.9}
    out = sched.handle(PeersDiscovered(peers=tuple(peers)), 0.0)
    now = 1.0
    while offers := [c for c in out if isinstance(c, SendOffer)]:
        out = []
        for o in offers:
            out += sched.handle(OfferCommitted(o.task_id, o.peer_id, f"L-{o.peer_id}"), now)
            if o.peer_id == "12D3-b2":  # the reference's result is refused: the task moves on
                why = ResultRejected(o.task_id, f"L-{o.peer_id}", o.peer_id, "a bound", FailureReason.INVALID)
                out += sched.handle(why, now)
                continue
            event = ResultAccepted(
                o.task_id, f"L-{o.peer_id}", o.peer_id, figures[o.peer_id], 0.01, "sha256:x"
            )
            out += sched.handle(event, now)
        now += 1
    assert sched.done
    return sched


def test_a_group_whose_reference_did_not_report_is_unverifiable_with_the_rule_and_the_field() -> None:
    """Issue 50, scope 4: the reference's result is refused and its retry goes to another peer; the
    three strangers agree, but a class is never settled without its reference: every row is
    `unverifiable`, its figure kept but standing nowhere, the reason naming the reference, the rule
    and `reference_fallback: allow`; the group says nothing of anyone's record (submit's exit:
    tests/unit/node/cli/test_exits.py)."""
    from scheduler.results import verification_counts

    sched = _reference_refused("replicas: 3, reference: [12D3-b2]")
    tasks = sched.tasks()
    assert {t.peer_id for t in tasks} == {"12D3-b0", "12D3-b1", "12D3-b3"}
    assert {t.verified for t in tasks} == {"unverifiable"}
    for t in tasks:
        assert "verify.reference: the reference 12D3-b2 did not report" in t.verify_detail
        assert "reference_fallback: allow" in t.verify_detail
    assert verification_counts(tasks)["unverifiable"] == 3
    assert verification_counts(tasks)["verified"] == 0


def test_a_campaign_that_allows_the_fallback_is_settled_by_the_majority_and_says_so() -> None:
    sched = _reference_refused("replicas: 3, reference: [12D3-b2], reference_fallback: allow")
    tasks = sched.tasks()
    assert {t.verified for t in tasks} == {"replicated 3/3"}
    for t in tasks:
        assert "the reference 12D3-b2 did not report" in t.verify_detail, t.verify_detail
        assert "settled by the majority" in t.verify_detail


def test_a_named_reference_not_found_holds_every_class_without_one_of_its_own() -> None:
    """Issue 50, scope 4: the reference is offline (not among the peers found). Two keys that would
    agree on a lie make no quorum: the job is `Unverifiable` before anything runs, the shortfall
    naming the reference and the field; plan says so for the class. A class whose own reference is
    present is placed as before; the fallback places the rest by the majority."""
    arm = fleet(["10.0.1.1", "10.0.2.1"], soc="arm board")
    x86 = [
        dataclasses.replace(p, peer_id=f"12D3-x{i}") for i, p in enumerate(fleet(["10.0.3.1", "10.0.4.1"]))
    ]
    gone = parse_campaign(campaign("replicas: 2, reference: [12D3-gone]", devices="1"))
    (plan,) = explain(gone, MODELS, arm).jobs
    assert plan.unverifiable
    assert not plan.chosen
    assert "verify.reference: 12D3-gone not found" in plan.shortfall
    assert "reference_fallback: allow" in plan.shortfall
    (cls,) = class_references(
        [r.peer for r in plan.matching], plan.job.spec.compute_unit, plan.verify, plan.gap
    )
    assert cls.why_not.startswith("unverifiable: verify.reference: 12D3-gone not found")
    sched = Scheduler("c4", gone, MODELS, key=KEY)
    log = run(sched, arm, {p.peer_id: 5.0 for p in arm})
    assert not [c for c in log if isinstance(c, SendOffer)]
    assert {t.state.value for t in sched.tasks()} == {"unverifiable"}

    two = parse_campaign(campaign("replicas: 2, reference: [12D3-gone, 12D3-x0]", devices="1"))
    (plan,) = explain(two, MODELS, [*arm, *x86]).jobs
    assert not plan.unverifiable  # the x86 class has its own reference: it is placed
    assert {r.peer.peer_id for r in plan.chosen} == {"12D3-x0", "12D3-x1"}
    assert plan.gap.held == {
        c.device_class
        for c in class_references(
            [r.peer for r in plan.matching], plan.job.spec.compute_unit, plan.verify, plan.gap
        )
        if c.why_not
    }

    allowed = parse_campaign(
        campaign("replicas: 2, reference: [12D3-gone], reference_fallback: allow", devices="1")
    )
    (plan,) = explain(allowed, MODELS, arm).jobs
    assert not plan.unverifiable
    assert len(plan.chosen) == 2


def test_a_found_reference_that_cannot_join_holds_its_own_class_only() -> None:
    """A reference the submitter found but cannot place (relayed: its network unknown) holds its own
    class; another class is settled by the majority as before."""
    arm = fleet(["10.0.1.1", "10.0.2.1", ""], soc="arm board")
    x86 = [
        dataclasses.replace(p, peer_id=f"12D3-x{i}") for i, p in enumerate(fleet(["10.0.3.1", "10.0.4.1"]))
    ]
    c = parse_campaign(campaign("replicas: 2, reference: [12D3-b2]", devices="all"))
    (plan,) = explain(c, MODELS, [*arm, *x86]).jobs
    assert {r.peer.peer_id for r in plan.chosen} == {"12D3-x0", "12D3-x1"}
    assert "12D3-b2 cannot join (relayed" in plan.gap.why
    assert len(plan.gap.held) == 1


def test_reference_fallback_needs_a_reference_and_is_allow_or_refuse() -> None:
    with pytest.raises(CampaignError) as caught:
        parse_campaign(campaign("replicas: 2, reference_fallback: allow"))
    assert [p.path for p in caught.value.problems] == ["verify.reference_fallback"]
    with pytest.raises(CampaignError) as caught:
        parse_campaign(campaign("replicas: 2, reference: [a], reference_fallback: maybe"))
    assert [p.path for p in caught.value.problems] == ["verify.reference_fallback"]
    parsed = parse_campaign(campaign("replicas: 2, reference: [a]"))
    assert "reference_fallback" not in parsed.verify.model_dump()  # old campaigns read the same
