"""Replication through the scheduler itself: groups of one class on distinct networks, a disagreement
settled by a third replica, labels and records, claims refused unless allowed."""

from __future__ import annotations

import dataclasses

import pytest
from kit.scheduler_harness import KEY, MODEL, SHA, peer

from protocol import ComputeUnit, FailureReason
from scheduler import (
    CampaignError,
    OfferCommitted,
    PeersDiscovered,
    ReplicasSettled,
    ResultAccepted,
    ResultRejected,
    Scheduler,
    SendOffer,
    Status,
    TaskState,
    parse_campaign,
)
from scheduler.results import verification_counts, verification_line, verify_columns
from scheduler.state import Lapse, PeerView, explain
from scheduler.state.settling import pool_key
from scheduler.verification import Evidence, PeerRecord, Witness, device_class
from scheduler.verification.agreement import POOL_MIN

YAML = f"""\
model: {{url: https://example.org/m.onnx, sha256: {SHA}}}
verify: {{replicas: 2{{extra}}}}
jobs: [{{compute_unit: CPU (ONNX), devices: all}}]
"""


def campaign(extra: str = "") -> str:
    return YAML.replace("{extra}", extra)


def fleet(hosts: list[str]) -> list[PeerView]:
    return [dataclasses.replace(peer(f"b{i}"), host=h) for i, h in enumerate(hosts)]


def run(sched: Scheduler, figures: dict[str, float]) -> list[object]:
    """Commit every offer and deliver each peer's figure, until nothing is offered."""
    log: list[object] = []
    out = sched.handle(PeersDiscovered(peers=tuple(fleet_peers)), 0.0)
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
            out += sched.handle(event, now + 1)
            now += 2


fleet_peers: list[PeerView] = []


def test_a_halving_liar_is_the_outlier_of_a_third_replica_and_the_others_are_replicated() -> None:
    global fleet_peers
    fleet_peers = fleet(["10.0.1.1", "10.0.2.1", "10.0.3.1", "10.0.4.1"])
    sched = Scheduler(
        "c1", parse_campaign(campaign()), {"mobilenet": MODEL, MODEL.name: MODEL, "m": MODEL}, key=KEY
    )
    figures = {"12D3-b0": 10.0, "12D3-b1": 10.1, "12D3-b2": 9.9, "12D3-b3": 5.0}
    log = run(sched, figures)
    tasks = {t.task_id: t for t in sched.tasks()}
    assert len(tasks) == 5  # two groups of two, and one more replica for the group with the liar
    liar = [t for t in tasks.values() if t.peer_id == "12D3-b3"]
    assert [t.verified for t in liar] == ["outlier"]
    assert "5 ms against the agreed" in liar[0].verify_detail
    others = [t.verified for t in tasks.values() if t.peer_id != "12D3-b3"]
    assert sorted(others) == ["replicated 2/2", "replicated 2/2", "replicated 2/3", "replicated 2/3"]
    by_peer = {p.peer_id: p for p in fleet_peers}
    for t in tasks.values():  # each verified row names the networks its quorum came from
        cells = verify_columns(t, by_peer[t.peer_id or ""])
        if t.peer_id == "12D3-b3":
            assert cells["QuorumNetworks"] == ""
        else:
            assert len(t.quorum_networks) == 2
            assert cells["QuorumNetworks"] == ";".join(t.quorum_networks)
            assert f"10.0.{int((t.peer_id or '')[-1]) + 1}.0/24" in t.quorum_networks
    settled = [c for c in log if isinstance(c, ReplicasSettled)]
    assert sorted(s.outcome for s in settled) == ["replicated", "replicated"]
    assert sched.done
    assert all(t.state == TaskState.DONE for t in tasks.values())


def test_one_host_makes_no_quorum_unless_same_host_is_allowed() -> None:
    global fleet_peers
    fleet_peers = fleet(["127.0.0.1"] * 4)
    c = parse_campaign(campaign())
    (plan,) = explain(c, {MODEL.name: MODEL, "m": MODEL}, fleet_peers).jobs
    assert plan.chosen == ()  # a quorum is placed whole or not at all: nothing runs alone
    assert plan.unverifiable
    assert "distinct networks" in plan.shortfall
    assert "same_host: allow" in plan.shortfall  # the field that would allow it, named
    sched = Scheduler("c1", c, {"m": MODEL, MODEL.name: MODEL}, key=KEY)
    log = run(sched, {p.peer_id: 10.0 for p in fleet_peers})
    assert not [o for o in log if isinstance(o, SendOffer)]
    assert {t.state for t in sched.tasks()} == {TaskState.UNVERIFIABLE}
    assert {t.status for t in sched.tasks()} == {Status.UNVERIFIABLE}
    assert {t.failure_reason for t in sched.tasks()} == {Lapse.NO_QUORUM}
    assert sched.done
    c = parse_campaign(campaign(", same_host: allow"))
    (plan,) = explain(c, {MODEL.name: MODEL, "m": MODEL}, fleet_peers).jobs
    assert len(plan.chosen) == 4
    assert not plan.shortfall
    sched = Scheduler("c2", c, {"m": MODEL, MODEL.name: MODEL}, key=KEY)
    run(sched, {p.peer_id: 10.0 for p in fleet_peers})
    assert {t.verified for t in sched.tasks()} == {"replicated 2/2 (same host)"}


def test_a_class_of_one_under_spot_checks_is_unverifiable_not_single() -> None:
    """A spot-check job runs a task only where one more replica could check it: a peer whose CPU
    name is its own (a class of one), or whose class's others share its network, has no partner, so
    its task ends `Unverifiable` (`no_quorum`, naming the rule) in `plan` and in the campaign, never
    a `single` figure; the two peers of one class on two networks run."""
    global fleet_peers
    two = fleet(["10.0.1.1", "10.0.2.1"])
    alone = dataclasses.replace(peer("u"), host="10.0.3.1")
    alone = dataclasses.replace(alone, profile=alone.profile.with_(soc="Cheater CPU 9000"))
    fleet_peers = [*two, alone]
    c = parse_campaign(campaign().replace("replicas: 2", "spot_check: 0.5"))
    (plan,) = explain(c, {MODEL.name: MODEL, "m": MODEL}, fleet_peers).jobs
    assert {r.peer.peer_id for r in plan.chosen} == {"12D3-b0", "12D3-b1"}
    assert plan.unverifiable
    assert "verify.spot_check" in plan.shortfall
    assert "1 of 3 feasible peers have none" in plan.shortfall
    sched = Scheduler("c3", c, {"m": MODEL, MODEL.name: MODEL}, key=KEY)
    run(sched, {p.peer_id: 10.0 for p in fleet_peers})
    ended = sorted((t.state, t.failure_reason, t.peer_id) for t in sched.tasks() if not t.peer_id)
    assert ended == [(TaskState.UNVERIFIABLE, Lapse.NO_QUORUM, None)]
    assert all(t.peer_id != alone.peer_id for t in sched.tasks())
    assert sched.done


def test_a_claim_unverified_peer_is_placed_only_when_the_campaign_allows_it() -> None:
    peers = fleet(["10.0.1.1", "10.0.2.1"])
    peers[1] = dataclasses.replace(peers[1], claim=("calibration.cpu_gflops 9e+04 over 8 cores",))
    yaml = campaign().replace("verify: {replicas: 2}\n", "")
    (plan,) = explain(parse_campaign(yaml), {"m": MODEL}, peers).jobs
    assert [r.peer.peer_id for r in plan.chosen] == ["12D3-b0"]
    assert "claim_unverified" in plan.rejected[0].details[0]
    allowed = yaml + "verify: {unverified: allow}\n"
    (plan,) = explain(parse_campaign(allowed), {"m": MODEL}, peers).jobs
    assert len(plan.chosen) == 2


def test_spot_checks_replicate_every_task_of_an_untrusted_peer_and_few_of_a_trusted_one() -> None:
    global fleet_peers
    fleet_peers = fleet(["10.0.1.1", "10.0.2.1"])
    yaml = campaign().replace("verify: {replicas: 2}", "verify: {spot_check: 0.0001}")
    yaml = yaml.replace("devices: all", "devices: 1")
    sched = Scheduler("c3", parse_campaign(yaml), {"m": MODEL}, key=KEY)
    run(sched, {p.peer_id: 10.0 for p in fleet_peers})
    assert len(sched.tasks()) == 2  # a new peer: checked
    sched = Scheduler("c3", parse_campaign(yaml), {"m": MODEL}, key=KEY)
    sched.know_records({p.peer_id: PeerRecord(agreed=9, streak=9) for p in fleet_peers})
    run(sched, {p.peer_id: 10.0 for p in fleet_peers})
    assert [t.verified for t in sched.tasks()] == ["single"]


def test_bad_verify_blocks_are_refused_naming_each_field() -> None:
    bad = campaign().replace(
        "verify: {replicas: 2}", "verify: {replicas: 11, spot_check: 0.5, same_host: yes}"
    )
    with pytest.raises(CampaignError) as caught:
        parse_campaign(bad)
    paths = {p.path for p in caught.value.problems}
    assert paths == {"verify.replicas", "verify.same_host"}
    both = campaign().replace("verify: {replicas: 2}", "verify: {replicas: 3, spot_check: 0.5}")
    with pytest.raises(CampaignError) as caught:
        parse_campaign(both)
    assert [p.path for p in caught.value.problems] == ["verify.spot_check"]
    job = campaign().replace("devices: all}", "devices: all, verify: {replicas: 3}}")
    parsed = parse_campaign(job)
    assert parsed.verify_of(parsed.jobs[0]).replicas == 3


def test_with_no_third_peer_a_disagreement_ends_disagreed_and_the_campaign_ends() -> None:
    global fleet_peers
    fleet_peers = fleet(["10.0.1.1", "10.0.2.1"])
    sched = Scheduler("c4", parse_campaign(campaign()), {"m": MODEL}, key=KEY)
    run(sched, {"12D3-b0": 10.0, "12D3-b1": 5.0})
    tasks = sched.tasks()
    assert [t.state for t in tasks] == [TaskState.DONE, TaskState.DONE, TaskState.UNVERIFIABLE]
    assert [t.verified for t in tasks[:2]] == ["disagreed", "disagreed"]
    assert "no further replica ran" in tasks[0].verify_detail
    assert sched.done


def test_a_refused_replica_is_retried_on_a_peer_of_another_group_of_its_class() -> None:
    global fleet_peers
    fleet_peers = fleet(["10.0.1.1", "10.0.2.1", "10.0.3.1", "10.0.4.1"])
    sched = Scheduler("c5", parse_campaign(campaign()), {"m": MODEL}, key=KEY)
    out = sched.handle(PeersDiscovered(peers=tuple(fleet_peers)), 0.0)
    offers = [c for c in out if isinstance(c, SendOffer)]
    for o in offers:
        sched.handle(OfferCommitted(o.task_id, o.peer_id, f"L-{o.task_id}"), 1.0)
    first = offers[0]
    retried = sched.handle(
        ResultRejected(first.task_id, f"L-{first.task_id}", first.peer_id, "a bound", FailureReason.INVALID),
        2.0,
    )
    (again,) = [c for c in retried if isinstance(c, SendOffer)]
    group = {o.peer_id for o in offers if o.task_id != first.task_id} & {o.peer_id for o in offers[:2]}
    assert again.task_id == first.task_id
    assert again.peer_id not in group | {first.peer_id}  # another group's peer, never the refused one


def test_a_peer_that_turns_biased_has_the_groups_it_agreed_in_settled_again_without_it() -> None:
    """A peer reporting 0.96x its class's figure agrees within the band; its record already holds
    seven comparisons at 0.9x with partners on three networks, so the eighth (with an established
    partner) proves it off its class for good (`PeerRecord.biased`): the group it agreed in is
    settled again without it, with one more replica."""
    global fleet_peers
    fleet_peers = fleet([f"10.0.{i}.1" for i in range(1, 5)])
    sched = Scheduler("c4", parse_campaign(campaign()), {"m": MODEL, MODEL.name: MODEL}, key=KEY)
    cheat = "12D3-b3"
    seen = tuple(Witness(f"w{k}", f"10.9.{k}.0/24", compared=7 / 3) for k in range(3))
    leaning = PeerRecord(7, 0, 7, offsets=7, offset_sum=-0.7, offset_squares=0.0707, witnesses=seen)
    assert not leaning.distrusted
    sched.know_records({p.peer_id: PeerRecord(agreed=9, streak=9) for p in fleet_peers} | {cheat: leaning})
    figures = {p.peer_id: 10.0 for p in fleet_peers} | {cheat: 9.6}
    log = run(sched, figures)
    tasks = sched.tasks()
    assert len(tasks) == 5  # two groups of two, and one more replica for the cheat's group
    [mine] = [t for t in tasks if t.peer_id == cheat]
    assert mine.verified == "outlier"
    assert "distrusted: its figures ran 0.9" in mine.verify_detail, mine.verify_detail
    group = [t for t in tasks if t.replica_group == mine.replica_group]
    assert sorted(t.verified for t in group) == ["outlier", "replicated 2/3", "replicated 2/3"]
    settled = [c for c in log if isinstance(c, ReplicasSettled) and c.group == mine.replica_group]
    assert settled[0].agreed == tuple(sorted(t.peer_id or "" for t in group[:2]))
    again = settled[-1]  # settled again: only the new replica's record is added
    assert len(again.agreed) == 1
    assert cheat not in again.agreed
    assert not again.outliers
    assert sched.done


def test_a_checked_task_is_offered_exactly_as_an_unchecked_one() -> None:
    """The spot check is drawn after the result (from the campaign's key): before it reports, a
    worker's offer is the same whether its task will be checked or not, in every field but its id."""
    global fleet_peers
    fleet_peers = fleet([f"10.0.{i}.1" for i in range(12)])
    yaml = campaign().replace("verify: {replicas: 2}", "verify: {spot_check: 0.5}")
    sched = Scheduler("c6", parse_campaign(yaml), {"m": MODEL}, key=KEY)
    sched.know_records({p.peer_id: PeerRecord(agreed=9, streak=9) for p in fleet_peers})
    log = run(sched, {p.peer_id: 10.0 for p in fleet_peers})
    groups: dict[str, int] = {}
    for t in sched.tasks():
        groups[t.replica_group] = groups.get(t.replica_group, 0) + 1
    checked = {g for g, size in groups.items() if size > 1}
    assert 0 < len(checked) < len(groups)  # this key checks some tasks and not others
    first_offers = {o.task_id: o for o in log if isinstance(o, SendOffer) and o.task_id in groups}.values()
    assert len(first_offers) == len(groups)
    seen = [  # what a worker reads of its offer, besides its task's id, checked and unchecked
        {
            (o.job_index, o.spec.model_dump_json(), o.model.model_dump_json(), o.priority)
            for o in first_offers
            if (o.task_id in checked) is c
        }
        for c in (True, False)
    ]
    assert seen[0] == seen[1]
    assert len(seen[0]) == 1


def test_submits_last_line_counts_verified_unverifiable_and_outliers() -> None:
    global fleet_peers
    fleet_peers = fleet(["10.0.1.1", "10.0.2.1", "10.0.3.1", "10.0.4.1", "10.0.5.1"])
    yaml = campaign().replace("devices: all", "devices: 3")  # three groups of two: five peers fill two
    sched = Scheduler("c9", parse_campaign(yaml), {"m": MODEL}, key=KEY)
    figures = {"12D3-b0": 10.0, "12D3-b1": 10.1, "12D3-b2": 9.9, "12D3-b3": 5.0, "12D3-b4": 10.0}
    run(sched, figures)
    counts = verification_counts(sched.tasks())
    assert counts == {
        "verified": 4,
        "unverifiable": 2,
        "outlier": 1,
        "disagreed": 0,
        "single": 0,
        "pending": 0,
    }
    assert verification_line(counts) == "verification: 4 verified, 2 unverifiable, 1 outlier"
    assert (
        verification_counts(t for t in sched.tasks() if not t.replica_group and t.state == TaskState.DONE)
        == {}
    )
    unverifiable = [t for t in sched.tasks() if t.state == TaskState.UNVERIFIABLE]
    assert {verify_columns(t, None)["Verified"] for t in unverifiable} == {"unverifiable"}
    assert all(
        "1 of 3 quorum(s)" not in t.detail and "2 of 3 quorum(s) placed" in t.detail for t in unverifiable
    )


def test_the_band_is_the_classs_pool_from_the_store_not_the_replicas_own() -> None:
    """Two replicas 15 % apart agree under the prior (a band of 26 % at 3 processes), and disagree once the
    store's pool says the class is quiet; every settlement hands the agreeing replicas' errors back
    for the store, never an outlier's."""
    global fleet_peers
    fleet_peers = fleet(["10.0.1.1", "10.0.2.1"])
    figures = {"12D3-b0": 10.0, "12D3-b1": 11.5}
    prior = Scheduler("c10", parse_campaign(campaign()), {"m": MODEL}, key=KEY)
    log = run(prior, figures)
    assert {t.verified for t in prior.tasks()} == {"replicated 2/2"}
    (settled,) = [c for c in log if isinstance(c, ReplicasSettled)]
    pool = pool_key(prior.tasks()[0])
    assert pool == f"{device_class(fleet_peers[0].profile, ComputeUnit.CPU_ONNX).key}/{MODEL.sha256[:16]}"
    assert settled.pool == pool
    assert settled.errors == pytest.approx((0.01 * 3**0.5,) * 2)  # spread x sqrt(3 processes)
    quiet = Scheduler("c11", parse_campaign(campaign()), {"m": MODEL}, key=KEY)
    quiet.know_records({}, {pool: (0.02,) * POOL_MIN})
    log = run(quiet, figures)
    done = [t for t in quiet.tasks() if t.state == TaskState.DONE]
    assert {t.verified for t in done} == {"disagreed"}  # and no third peer on another network:
    assert [t.state for t in quiet.tasks()][2:] == [TaskState.UNVERIFIABLE]
    assert [c.errors for c in log if isinstance(c, ReplicasSettled)] == [()]


def test_sybils_that_outvote_an_honest_peer_count_by_their_networks_and_records() -> None:
    """Two Sybils report half the latency and outvote the honest peer of their group of three: its
    row says `outlier` (what the majority said), but what that counts against its record depends on
    who they are (issue 38, scope 4): on one network (the lab switch lets them form a quorum)
    nothing, however established; on two networks but fresh, a quarter, its streak kept; established
    on two networks, in full. Two partners never make it distrusted (`reputation.WITNESSES_MIN`)."""
    global fleet_peers
    figures = {"12D3-b0": 10.0, "12D3-b1": 5.0, "12D3-b2": 5.05}
    established = {p: PeerRecord(agreed=9, streak=9) for p in ("12D3-b1", "12D3-b2")}
    honest = {"12D3-b0": PeerRecord(agreed=9, streak=9)}
    weights = []
    for hosts, extra, records in (
        (["10.0.1.1", "10.0.2.1", "10.0.2.2"], ", same_host: allow", established),
        (["10.0.1.1", "10.0.2.1", "10.0.3.1"], "", {}),
        (["10.0.1.1", "10.0.2.1", "10.0.3.1"], "", established),
    ):
        fleet_peers = fleet(hosts)
        three = campaign(extra).replace("replicas: 2", "replicas: 3")
        sched = Scheduler("c12", parse_campaign(three), {"m": MODEL}, key=KEY)
        sched.know_records({**records, **honest})
        log = run(sched, figures)
        row = next(t for t in sched.tasks() if t.peer_id == "12D3-b0")
        assert row.verified == "outlier"
        (settled,) = [c for c in log if isinstance(c, ReplicasSettled)]
        assert sorted(settled.agreed) == ["12D3-b1", "12D3-b2"]
        (ev,) = [ev for p, ev in settled.evidence if p == "12D3-b0"]
        assert sorted(p for p, _ in ev.partners) == ["12D3-b1", "12D3-b2"]
        weights.append(ev.weight)
        after = honest["12D3-b0"].after(ev)
        assert not after.distrusted
    assert weights == [0.0, 0.25, 1.0]
    assert settled.outliers == ("12D3-b0",)
    overruled = honest["12D3-b0"].after(Evidence(False, 0.0, None, (("s1", "loopback"), ("s2", "loopback"))))
    assert overruled.streak == 9  # one network's word: its spot checks are untouched
    assert overruled.evidence("overruled") == "overruled: s1 (loopback) 1, s2 (loopback) 1"
