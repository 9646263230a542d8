"""Issue 38, scope 3: one owner's devices are one vote.

A quorum never holds two devices of one owner (`replicas.pick_replicas`), the lab switch relaxes the
network rule only, a majority of one owner's devices is one witness (`evidence.weigh`), a peer whose
owner statement was refused is never placed, and a replicated row names its quorum's owners.
"""

from __future__ import annotations

import dataclasses

from kit.scheduler_harness import KEY, MODEL, SHA, peer

from protocol import Owner
from scheduler import OfferCommitted, PeersDiscovered, ResultAccepted, Scheduler, SendOffer, parse_campaign
from scheduler.results import verification_groups
from scheduler.results.verifyrows import verify_columns
from scheduler.state import Misfit, PeerView, explain
from scheduler.verification import Candidate, DeviceClass, PeerRecord, Replica, pick_replicas, settle, weigh

YAML = f"""\
model: {{url: https://example.org/m.onnx, sha256: {SHA}}}
verify: {{VERIFY}}
jobs: [{{compute_unit: CPU (ONNX), devices: DEVICES}}]
"""
MODELS = {"m": MODEL, MODEL.name: MODEL}
OWNER = "owner-00112233aabbccdd"


def campaign(verify: str, devices: str = "all") -> str:
    return YAML.replace("VERIFY", verify).replace("DEVICES", devices)


def fleet(owners: list[str], host: str = "127.0.0.1") -> list[PeerView]:
    """Peers b0, b1... on `host` (loopback: one network), each of the owner given ("" its own)."""
    return [
        dataclasses.replace(peer(f"b{i}"), host=host, owner=Owner(owner)) for i, owner in enumerate(owners)
    ]


def test_a_quorum_never_holds_two_devices_of_one_owner() -> None:
    cls = DeviceClass("A")
    pool = [
        Candidate("p0", cls, "h0", "owner-a"),
        Candidate("p1", cls, "h1", "owner-a"),  # another network, the same owner: not a second vote
        Candidate("p2", cls, "h2"),
        Candidate("p3", cls, "h3", "owner-b"),
    ]
    assert [c.peer_id for c in pick_replicas(pool, 3)] == ["p0", "p2", "p3"]
    assert [c.peer_id for c in pick_replicas(pool, 2, taken=["p0"], taken_owners=["owner-a"])] == ["p2", "p3"]
    assert pick_replicas(pool[:2], 2) == (pool[0],)  # one owner alone: no quorum


def test_the_lab_switch_relaxes_the_network_rule_never_the_owner_rule() -> None:
    peers = fleet([OWNER, OWNER, ""])  # three devices on one machine, two of one owner
    (plan,) = explain(parse_campaign(campaign("replicas: 2, same_host: allow")), MODELS, peers).jobs
    chosen = [r.peer.peer_id for r in plan.chosen]
    assert len(chosen) == 2  # one quorum: the second device of the owner pairs with nobody left
    assert "12D3-b2" in chosen
    (two,) = explain(parse_campaign(campaign("replicas: 2, same_host: allow", "2")), MODELS, peers).jobs
    assert len(two.chosen) == 2
    assert "of distinct owners" in two.shortfall


def test_a_replicated_row_names_the_owners_of_its_quorum() -> None:
    peers = fleet([OWNER, OWNER, ""])
    sched = Scheduler("c1", parse_campaign(campaign("replicas: 2, same_host: allow", "any")), MODELS, key=KEY)
    out = sched.handle(PeersDiscovered(peers=tuple(peers)), 0.0)
    offers = [c for c in out if isinstance(c, SendOffer)]
    assert len(offers) == 2
    for o in offers:
        sched.handle(OfferCommitted(o.task_id, o.peer_id, f"L-{o.task_id}"), 1.0)
        sched.handle(ResultAccepted(o.task_id, f"L-{o.task_id}", o.peer_id, 5.0, 0.01, "sha256:x"), 1.0)
    by_id = {p.peer_id: p for p in peers}
    for task in sched.tasks():
        assert task.verified.startswith("replicated 2/2")
        assert task.quorum_owners == ("owner-00112233", "…12D3-b2")
        cells = verify_columns(task, by_id[task.peer_id or ""])
        assert cells["QuorumOwners"] == "owner-00112233;…12D3-b2"
        assert cells["QuorumNetworks"] == "loopback"
    (group,) = verification_groups(sched.tasks())  # every view's verification section
    assert group.owners == ("owner-00112233", "…12D3-b2")
    assert {r.peer: r.owner for r in group.replicas} == {"12D3-b0": "owner-00112233", "12D3-b2": ""}


def test_a_majority_of_one_owners_devices_is_one_witness() -> None:
    networks = {"honest": "10.0.1.0/24", "s1": "10.0.2.0/24", "s2": "10.0.3.0/24"}
    records = {p: PeerRecord(agreed=9, streak=9) for p in networks}
    replicas = [Replica("honest", 10.0, 0.01), Replica("s1", 5.0, 0.01), Replica("s2", 5.05, 0.01)]
    settled = settle(replicas, 3)
    assert settled.agreed == ("s1", "s2")
    apart = dict(weigh(settled, ["honest", "s1", "s2"], networks, records))
    assert apart["honest"].weight > 0  # two owners on two networks: independent
    owned = {"s1": "owner-x", "s2": "owner-x"}
    said = dict(weigh(settled, ["honest", "s1", "s2"], networks, records, owners=owned))
    assert said["honest"].weight == 0.0  # one owner on two networks: one vote, counts nothing
    assert said["honest"].partners == (("owner-x", "10.0.3.0/24"),)  # named once, by its owner


def test_a_peer_whose_owner_statement_was_refused_is_never_placed() -> None:
    why = "owner statement refused: owner-aa's signature does not verify for this peer id"
    peers = [*fleet(["", ""]), dataclasses.replace(peer("liar"), host="127.0.0.1", owner=Owner(refused=why))]
    for verify in ("replicas: 2, same_host: allow", "replicas: 1"):
        (plan,) = explain(parse_campaign(campaign(verify)), MODELS, peers).jobs
        assert "12D3-liar" not in [r.peer.peer_id for r in plan.chosen]
        (rejected,) = [r for r in plan.rejected if r.peer_id == "12D3-liar"]
        assert [r.code for r in rejected.reasons] == [Misfit.OWNER_REFUSED]
        assert rejected.reasons[0].detail == why


def test_an_owner_id_in_reference_makes_every_device_of_that_owner_a_reference() -> None:
    hosts = ["10.0.1.1", "10.0.2.1", "10.0.3.1"]
    owners = [OWNER, "", ""]
    peers = [
        dataclasses.replace(peer(f"b{i}"), host=h, owner=Owner(o))
        for i, (h, o) in enumerate(zip(hosts, owners, strict=True))
    ]
    text = campaign(f"replicas: 3, reference: [{OWNER}]", "any")
    (plan,) = explain(parse_campaign(text), MODELS, peers).jobs
    assert plan.chosen[0].peer.peer_id == "12D3-b0"  # the owner's device, first
    sched = Scheduler("c1", parse_campaign(text), MODELS, key=KEY)
    out = sched.handle(PeersDiscovered(peers=tuple(peers)), 0.0)
    figures = {"12D3-b0": 10.0, "12D3-b1": 5.0, "12D3-b2": 5.0}  # two keys agreeing on a halved figure
    for o in [c for c in out if isinstance(c, SendOffer)]:
        sched.handle(OfferCommitted(o.task_id, o.peer_id, f"L-{o.task_id}"), 1.0)
        event = ResultAccepted(o.task_id, f"L-{o.task_id}", o.peer_id, figures[o.peer_id], 0.01, "sha256:x")
        sched.handle(event, 1.0)
    verified = {t.peer_id: t.verified for t in sched.tasks()}
    assert verified == {
        "12D3-b0": "replicated 1/3 (reference 12D3-b0)",
        "12D3-b1": "outlier",
        "12D3-b2": "outlier",
    }


def test_a_retried_replica_never_goes_to_another_device_of_its_partners_owner() -> None:
    from scheduler.state.quorum import replica_pool

    peers = fleet([OWNER, OWNER, "", ""])  # b0, b1 one owner; b2, b3 their own
    parsed = parse_campaign(campaign("replicas: 2, same_host: allow", "any"))
    sched = Scheduler("c1", parsed, MODELS, key=KEY)
    sched.handle(PeersDiscovered(peers=tuple(peers)), 0.0)
    tasks = {t.task_id: t for t in sched.tasks()}
    by_id = {p.peer_id: p for p in peers}
    assert sorted(t.peer_id or "" for t in tasks.values()) == ["12D3-b0", "12D3-b2"]  # owned and own
    for task in tasks.values():
        (partner,) = [t.peer_id for t in tasks.values() if t.task_id != task.task_id]
        pool = {p.peer_id for p in replica_pool(task, tasks, by_id, parsed)}
        owner = by_id[partner or ""].owner.owner_id
        partners_owner = {p.peer_id for p in peers if owner and p.owner.owner_id == owner}
        assert pool, "another owner's device is left"
        assert not pool & (partners_owner | {partner})
