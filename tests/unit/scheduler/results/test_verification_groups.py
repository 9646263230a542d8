"""Issue 38, scope 8: each replica group's verification, derived once from the task views.

Campaigns played by a real `Scheduler` (offers committed, results accepted with each peer's figure),
then `verification_groups` over its tasks: the agreed figure, the band the settling judged with (the
class's pool: the prior here), each replica's peer, figure, network and verdict, the outlier and
why, the reference. Then two campaigns' agreed figures compared (`agreed_changes`, `report --diff`).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from kit.scheduler_harness import KEY, MODEL, SHA, peer

from scheduler import OfferCommitted, PeersDiscovered, ResultAccepted, Scheduler, SendOffer, parse_campaign
from scheduler.results import GroupVerification, agreed_changes, verification_groups
from scheduler.results.verifygroups import ReplicaFigure
from scheduler.verification import PeerRecord
from scheduler.verification.agreement import band, pooled_spread


def played(verify: str, figures: dict[str, float], hosts: list[str], devices: str = "all") -> Scheduler:
    """A campaign with `verify` over peers b0, b1, ... on `hosts`, each reporting its figure."""
    yaml = (
        f"model: {{url: https://example.org/m.onnx, sha256: {SHA}}}\nverify: {verify}\n"
        f"jobs: [{{compute_unit: CPU (ONNX), devices: {devices}}}]\n"
    )
    peers = tuple(dataclasses.replace(peer(f"b{i}"), host=h) for i, h in enumerate(hosts))
    sched = Scheduler("c1", parse_campaign(yaml), {"m": MODEL}, key=KEY)
    if verify.startswith("{spot_check"):
        sched.know_records({p.peer_id: PeerRecord(agreed=9, streak=9) for p in peers})  # trusted
    out, now = sched.handle(PeersDiscovered(peers=peers), 0.0), 1.0
    while offers := [c for c in out if isinstance(c, SendOffer)]:
        out = []
        for o in offers:
            out += sched.handle(OfferCommitted(o.task_id, o.peer_id, f"L-{o.task_id}"), now)
            figure = figures[o.peer_id]
            out += sched.handle(
                ResultAccepted(o.task_id, f"L-{o.task_id}", o.peer_id, figure, 0.01, "x"), now + 1
            )
            now += 2
    return sched


def prior_band(sched: Scheduler) -> float:
    """The band a class with no pooled history is judged with, at the job's process count."""
    return band(pooled_spread((), sched.snapshot().campaign.jobs[0].spec.processes))


def replicas(group: GroupVerification) -> list[tuple[str, float | None, str, str]]:
    return [(r.peer, r.figure_ms, r.network, r.verdict) for r in group.replicas]


def test_a_replicated_pair_has_its_agreed_figure_band_and_both_networks() -> None:
    sched = played("{replicas: 2}", {"12D3-b0": 10.0, "12D3-b1": 10.2}, ["10.0.1.1", "10.0.2.1"])
    (group,) = verification_groups(sched.tasks())
    assert (group.outcome, group.agreed_ms, group.outliers, group.reference) == ("replicated", 10.1, (), "")
    assert group.band == pytest.approx(prior_band(sched))
    assert group.networks == ("10.0.1.0/24", "10.0.2.0/24")
    assert replicas(group) == [
        ("12D3-b0", 10.0, "10.0.1.0/24", "replicated 2/2"),
        ("12D3-b1", 10.2, "10.0.2.0/24", "replicated 2/2"),
    ]
    assert group.verified
    assert group.device_class.startswith("cls-")
    assert (group.job_index, group.unit, group.model) == (0, "CPU (ONNX)", MODEL.name)


def test_the_outlier_of_three_is_named_with_its_figure_and_the_band() -> None:
    figures = {"12D3-b0": 10.0, "12D3-b1": 5.0, "12D3-b2": 10.1}
    sched = played("{replicas: 2}", figures, ["10.0.1.1", "10.0.2.1", "10.0.3.1"], devices="1")
    (group,) = verification_groups(sched.tasks())
    assert (group.outcome, group.agreed_ms, group.outliers) == ("replicated", 10.05, ("12D3-b1",))
    assert "12D3-b1: 5 ms against the agreed 10.05 ms" in group.reason
    assert f"band {prior_band(sched):.1%}" in group.reason
    assert [(r.peer, r.verdict) for r in group.replicas] == [
        ("12D3-b0", "replicated 2/3"),
        ("12D3-b1", "outlier"),
        ("12D3-b2", "replicated 2/3"),
    ]
    assert group.networks == ("10.0.1.0/24", "10.0.3.0/24")  # the quorum's, not the outlier's


def test_three_that_do_not_agree_are_disagreed_with_no_figure() -> None:
    figures = {"12D3-b0": 10.0, "12D3-b1": 5.0, "12D3-b2": 20.0}
    sched = played("{replicas: 2}", figures, ["10.0.1.1", "10.0.2.1", "10.0.3.1"], devices="1")
    (group,) = verification_groups(sched.tasks())
    assert (group.outcome, group.agreed_ms, group.networks) == ("disagreed", None, ())
    assert not group.verified
    assert group.band == pytest.approx(prior_band(sched))
    assert "no majority within the band" in group.reason
    assert [r.figure_ms for r in group.replicas] == [10.0, 5.0, 20.0]
    assert {r.verdict for r in group.replicas} == {"disagreed"}


def test_a_group_settled_by_its_reference_names_it_and_its_figure_is_the_references() -> None:
    verify = "{replicas: 2, reference: [12D3-b0]}"
    figures = {"12D3-b0": 10.0, "12D3-b1": 5.0}
    sched = played(verify, figures, ["10.0.1.1", "10.0.2.1"], devices="1")
    (group,) = verification_groups(sched.tasks())
    assert (group.outcome, group.agreed_ms, group.reference) == ("replicated", 10.0, "12D3-b0")
    assert group.outliers == ("12D3-b1",)
    assert "against the reference 12D3-b0's 10 ms" in group.reason
    assert [r.verdict for r in group.replicas] == ["replicated 1/2 (reference 12D3-b0)", "outlier"]


def test_a_quorum_that_cannot_be_placed_is_unverifiable_with_the_rule_that_refused_it() -> None:
    sched = played("{replicas: 2}", {"12D3-b0": 10.0, "12D3-b1": 10.0}, ["10.0.1.1", "10.0.1.2"])
    groups = verification_groups(sched.tasks())
    assert groups
    for group in groups:
        assert (group.outcome, group.agreed_ms, group.band) == ("unverifiable", None, None)
        assert "same_host: allow" in group.reason  # the field that would allow it
        assert {r.verdict for r in group.replicas} == {"unverifiable"}
        assert all(r.figure_ms is None for r in group.replicas)


def test_a_spot_checked_task_no_draw_checked_is_a_single_with_no_band() -> None:
    figures = {"12D3-b0": 10.0, "12D3-b1": 10.0}  # b1 could check it (a class of one is unverifiable)
    sched = played("{spot_check: 0.0001}", figures, ["10.0.1.1", "10.0.2.1"], devices="1")
    (group,) = verification_groups(sched.tasks())
    assert (group.outcome, group.agreed_ms, group.band, group.outliers) == ("single", None, None, ())
    assert replicas(group) == [("12D3-b0", 10.0, "10.0.1.0/24", "single")]


def test_a_campaign_that_asked_nothing_has_no_groups() -> None:
    yaml = (
        f"model: {{url: https://example.org/m.onnx, sha256: {SHA}}}\njobs: [{{compute_unit: CPU (ONNX)}}]\n"
    )
    sched = Scheduler("c1", parse_campaign(yaml), {"m": MODEL}, key=KEY)
    sched.handle(PeersDiscovered(peers=(peer("b0"),)), 0.0)
    assert verification_groups(sched.tasks()) == ()


def _group(outcome: str, agreed: float | None, width: float | None) -> GroupVerification:
    shown = ReplicaFigure(task_id="c-job-0-0", peer="p", figure_ms=agreed)
    return GroupVerification.model_validate(
        {"group": "g", "job_index": 0, "device_class": "cls-1", "unit": "CPU (ONNX)", "outcome": outcome,
         "agreed_ms": agreed, "band": width, "replicas": [shown]}
    )  # fmt: skip


def test_report_diff_compares_agreed_figures_and_says_which_side_was_not_verified() -> None:
    a, b = _group("replicated", 10.0, 0.2), _group("replicated", 13.0, 0.1)
    (change,) = agreed_changes([a], [b])
    assert (change.before_ms, change.after_ms, change.verdict) == (10.0, 13.0, "beyond the band")
    assert change.change_pct == pytest.approx(30.0)
    (change,) = agreed_changes([a], [_group("replicated", 11.0, 0.1)])
    assert change.verdict == "within the band"
    (change,) = agreed_changes([a], [_group("single", None, None)])
    assert (change.after_ms, change.change_pct, change.verdict) == (None, None, "B not verified: single")
    assert "A replicated (1 replica(s), band 20.0%)" in change.note
    assert [c.verdict for c in agreed_changes([a], [])] == ["only in A"]
    (change,) = agreed_changes([_group("replicated", None, None)], [b])  # settled before figures were kept
    assert change.verdict == "A replicated, its agreed figure not kept (stored before it was)"
    nan = _group("replicated", math.nan, math.inf)  # a hostile file's numbers: a verdict, no exception
    assert agreed_changes([nan], [a])[0].verdict == "within the band"


def test_two_classes_that_share_a_short_name_are_never_compared() -> None:
    """Issue 50, scope 7: a profile ground to share a class's 8-digit name is another class: `report
    --diff` compares groups by the whole id where both files have it (a file from before: by name)."""
    a = _group("replicated", 10.0, 0.2).with_(class_id="cls-1" + "a" * 63)
    b = _group("replicated", 5.0, 0.2).with_(class_id="cls-1" + "b" * 63)
    assert [c.verdict for c in agreed_changes([a], [b])] == ["only in A", "only in B"]
    (same,) = agreed_changes([a], [b.with_(class_id=a.class_id)])
    assert same.verdict == "beyond the band"
    (old,) = agreed_changes([a], [b.with_(class_id="")])
    assert old.verdict == "beyond the band"
