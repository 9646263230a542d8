"""Offers are paced by each peer's capacity: a worker is never offered more than it can hold."""

from __future__ import annotations

from collections.abc import Sequence

from kit.scheduler_harness import KEY, MODEL, SHA, Node, peer

from protocol import Load
from scheduler import ResultAccepted, Scheduler, SendOffer, parse_campaign


def _campaign(tasks: int) -> str:
    job = "  - {compute_unit: CPU (ONNX), devices: 1}\n"
    return f"name: many\nmodel: {{url: https://example.org/m.onnx, sha256: {SHA}}}\njobs:\n" + job * tasks


def _offers(commands: Sequence[object]) -> list[SendOffer]:
    return [c for c in commands if isinstance(c, SendOffer)]


def test_a_peer_gets_no_more_offers_than_its_queue_holds_and_the_rest_wait() -> None:
    campaign = parse_campaign(_campaign(10))
    node = Node(Scheduler("c", campaign, {m.key: MODEL for m in campaign.models}, key=KEY))
    small = peer("small", load=Load(max_queue=1, mem_available_mb=8192))  # holds 1 running + 1 queued
    first = _offers(node.discover([small]))
    assert len(first) == 2
    # finishing one frees one place, and exactly one more offer goes out
    lease = node.commit(first[0].task_id, small.peer_id)
    node.commit(first[1].task_id, small.peer_id)
    after = node.feed(ResultAccepted(first[0].task_id, lease, small.peer_id))
    assert len(_offers(after)) == 1


def test_a_busy_peer_counts_what_it_already_runs_for_others() -> None:
    campaign = parse_campaign(_campaign(5))
    node = Node(Scheduler("c", campaign, {m.key: MODEL for m in campaign.models}, key=KEY))
    busy = peer("busy", load=Load(running=1, queued=2, max_queue=4, mem_available_mb=8192))
    assert len(_offers(node.discover([busy]))) == 2


def test_paced_campaign_still_completes_every_task() -> None:
    campaign = parse_campaign(_campaign(12))
    node = Node(Scheduler("c", campaign, {m.key: MODEL for m in campaign.models}, key=KEY))
    node.discover([peer(f"p{i}", load=Load(max_queue=0, mem_available_mb=8192)) for i in range(3)])
    node.run(max_steps=2000)
    assert sorted({o.status.value for o in node.outcomes().values()}) == ["Complete"]
    assert len(node.outcomes()) == 12


def test_max_inflight_caps_the_whole_campaign() -> None:
    campaign = parse_campaign("max_inflight: 3\n" + _campaign(10))
    node = Node(Scheduler("c", campaign, {m.key: MODEL for m in campaign.models}, key=KEY))
    first = _offers(node.discover([peer(f"p{i}") for i in range(5)]))
    assert len(first) == 3
    node.run(max_steps=2000)
    assert len(node.outcomes()) == 10
