"""A lease ends at dispatch + the model's transfer allowance + timeout_s x overrun, whatever its heartbeats
say: a worker that commits and reports "queued" forever loses the task, with cause `lease_overrun`."""

from __future__ import annotations

import pytest
from kit.scheduler_harness import KEY, MODEL, Node, cpu_fleet

from protocol import Phase
from scheduler import (
    FinishCampaign,
    Lapse,
    MessageArriving,
    ProgressReported,
    Scheduler,
    SendCancel,
    TaskState,
    Tick,
    parse_campaign,
)
from scheduler.state import transfer_allowance_s
from scheduler.state.leases import TRANSFER_BASE_S, lease_end
from scheduler.verification import OVERRUN

TIMEOUT_S = 20.0
CAMPAIGN = f"""\
model: {{url: 'https://example.org/m.onnx', sha256: '{MODEL.sha256}'}}
jobs:
- {{compute_unit: CPU (ONNX), devices: 1, timeout_s: {TIMEOUT_S:g}}}
"""


def test_the_transfer_allowance_grows_with_the_model() -> None:
    assert transfer_allowance_s(MODEL.with_(size=0)) == TRANSFER_BASE_S
    assert transfer_allowance_s(MODEL) == TRANSFER_BASE_S + 14.0  # 14 MiB at 1 MiB/s
    assert lease_end(MODEL, TIMEOUT_S, 100.0) == 100.0 + TRANSFER_BASE_S + 14.0 + TIMEOUT_S * OVERRUN


def _leased(peers: int = 1) -> tuple[Node, str, str, float]:
    node = Node(Scheduler("c", parse_campaign(CAMPAIGN), {"m": MODEL}, key=KEY))
    node.discover(cpu_fleet(peers))
    [offer] = node.queue
    node.queue.clear()
    dispatched = node.now
    lease = node.commit(offer.task_id, offer.peer_id, ttl=3.0)  # type: ignore[union-attr]
    return node, offer.task_id, lease, dispatched  # type: ignore[union-attr]


def test_heartbeats_saying_queued_forever_do_not_hold_the_task_past_its_end() -> None:
    node, task_id, lease, dispatched = _leased()
    ends = lease_end(MODEL, TIMEOUT_S, dispatched)
    while node.now + 1.0 < ends:  # a heartbeat every second, each one "queued"
        node.now += 1.0
        node.feed(ProgressReported(task_id, lease, Phase.QUEUED, queue_position=1))
        assert node.scheduler.tasks()[0].state == TaskState.LEASED  # held until its end, not before
        assert node.scheduler.next_deadline() == min(node.now + 3.0, ends)
    node.now = ends
    out = node.feed(Tick())
    [task] = node.scheduler.tasks()
    assert task.state == TaskState.FAILED  # one peer: nobody else to retry on
    assert task.failure_reason == Lapse.LEASE_OVERRUN
    assert task.attempts[-1].cause == Lapse.LEASE_OVERRUN
    assert "overran" in task.detail
    assert f"{TIMEOUT_S:g} s (timeout)" in task.detail
    [cancel] = [c for c in out if isinstance(c, SendCancel)]
    assert cancel.lease_id == lease  # the worker is told
    assert node.sent(FinishCampaign)  # every task ended: the campaign ends as before


def test_an_overrun_lease_is_retried_elsewhere_within_the_budget() -> None:
    node, task_id, lease, dispatched = _leased(peers=2)
    node.now = lease_end(MODEL, TIMEOUT_S, dispatched)
    node.feed(
        ProgressReported(task_id, lease, Phase.MEASURING, 5, 10)
    )  # a heartbeat at the end changes nothing
    node.feed(Tick())
    [task] = node.scheduler.tasks()
    assert task.state in (TaskState.PENDING, TaskState.OFFERED)
    assert task.peer_id != node.scheduler.tasks()[0].attempts[0].peer_id
    assert task.attempts[0].cause == Lapse.LEASE_OVERRUN


def test_a_message_arriving_keeps_the_lease_as_a_heartbeat_and_never_past_its_end() -> None:
    """A result of megabytes is one frame: its bytes move the lease's deadline as a heartbeat does, and
    a worker that trickles a frame forever is held to the lease's end like one that beats forever."""
    node, task_id, lease, dispatched = _leased()
    ends = lease_end(MODEL, TIMEOUT_S, dispatched)
    node.now += 2.5
    node.feed(MessageArriving(task_id, lease))
    assert node.scheduler.next_deadline() == node.now + 3.0
    assert node.scheduler.tasks()[0].progress.phase is None  # the progress stays what the worker said
    node.now += 2.9
    node.feed(Tick())
    assert node.scheduler.tasks()[0].state == TaskState.LEASED  # 5.4 s after the commit, ttl 3 s
    node.feed(MessageArriving(task_id, "another-lease"))  # another lease's bytes move nothing
    assert node.scheduler.next_deadline() == node.now - 2.9 + 3.0
    while node.now + 1.0 < ends:
        node.now += 1.0
        node.feed(MessageArriving(task_id, lease))
        assert node.scheduler.next_deadline() == min(node.now + 3.0, ends)
    node.now = ends
    node.feed(Tick())
    assert node.scheduler.tasks()[0].failure_reason == Lapse.LEASE_OVERRUN


def test_a_silent_lease_still_lapses_as_before() -> None:
    node, _, _, dispatched = _leased()
    node.now = dispatched + 3.0
    node.feed(Tick())
    assert node.scheduler.tasks()[0].failure_reason == Lapse.LEASE_LAPSED


@pytest.mark.parametrize("downtime", [1.0, 10_000.0])
def test_a_restored_lease_keeps_its_end_but_gets_its_ttl_to_be_reclaimed(downtime: float) -> None:
    node, _, _, dispatched = _leased()
    ends = lease_end(MODEL, TIMEOUT_S, dispatched)
    restored = Scheduler.restore(node.scheduler.snapshot(), KEY)
    restored.handle(Tick(), dispatched + downtime)
    [task] = restored.tasks()
    assert task.state == TaskState.LEASED
    assert task.lease_ends_at == max(ends, dispatched + downtime + 3.0)
