"""Random event sequences: no exception, one ending per task, and time alone always finishes the campaign.

Events are drawn against the scheduler's current state (a real task, its peer, its current lease or
a stale one), so that the sequences reach deep states: commits, heartbeats, results racing
failures, lapses and cancels, and crashes of the submitter in between.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kit.scheduler_harness import KEY, MODEL, Node, cpu_fleet

from protocol import DeclineReason, FailureReason, Phase
from scheduler import (
    CancelRequested,
    Event,
    FinishCampaign,
    LeaseLapsed,
    LeaseReleased,
    OfferCommitted,
    OfferDeclined,
    OfferLost,
    PeersDiscovered,
    ProgressReported,
    ResultAccepted,
    Scheduler,
    SchedulerSnapshot,
    TaskFailedRemotely,
    Tick,
    parse_campaign,
)

CAMPAIGN = """
model: {url: "https://example.org/mobilenet.onnx"}
jobs:
  - {compute_unit: CPU (ONNX), devices: all}
  - {compute_unit: CPU (ONNX), devices: 2}
  - {compute_unit: GPU (ONNX), devices: any}
"""
PEERS = cpu_fleet(4)
KINDS = [
    "commit",
    "commit",
    "decline",
    "lost",
    "progress",
    "result",
    "result",
    "fail",
    "lapse",
    "release",
    "tick",
    "cancel",
]

Step = tuple[str, int, float, bool, bool]
steps = st.lists(
    st.tuples(
        st.sampled_from(KINDS), st.integers(0, 50), st.floats(0, 40), st.booleans(), st.integers(0, 30)
    ),
    max_size=40,
).map(lambda raw: [(kind, pick, elapsed, stale, crash == 0) for kind, pick, elapsed, stale, crash in raw])


def event_for(node: Node, kind: str, pick: int, stale: bool) -> Event:
    """An event about a real task: its peer, and its current lease or an older one."""
    tasks = node.scheduler.tasks()
    task = tasks[pick % len(tasks)]
    peer = task.peer_id or PEERS[pick % len(PEERS)].peer_id
    leases = [a.lease_id for a in task.attempts if a.lease_id] or ["never-granted"]
    lease = leases[pick % len(leases)] if stale else task.lease_id or leases[-1]
    node.leases += 1
    events: dict[str, Event] = {
        "commit": OfferCommitted(task.task_id, peer, f"lease-{node.leases}", 0, 5.0 + pick % 30),
        "decline": OfferDeclined(task.task_id, peer, list(DeclineReason)[pick % len(DeclineReason)]),
        "lost": OfferLost(task.task_id, peer),
        "progress": ProgressReported(task.task_id, lease, Phase.MEASURING),
        "result": ResultAccepted(task.task_id, lease, peer),
        "fail": TaskFailedRemotely(task.task_id, lease, list(FailureReason)[pick % len(FailureReason)]),
        "lapse": LeaseLapsed(task.task_id, lease),
        "release": LeaseReleased(task.task_id, lease, peer),
        "tick": Tick(),
        "cancel": CancelRequested() if pick % 5 == 0 else PeersDiscovered(PEERS[: pick % 4]),
    }
    return events[kind]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.integers(0, 3))
def test_random_events_keep_the_invariants_and_time_finishes_the_campaign(
    script: list[Step], budget: int
) -> None:
    scheduler = Scheduler("c", parse_campaign(CAMPAIGN), {"mobilenet": MODEL}, key=KEY, retry_budget=budget)
    node = Node(scheduler)
    node.discover(PEERS)
    for kind, pick, elapsed, stale, crash in script:
        node.now += elapsed
        if crash:  # the submitter crashes and resumes from its last snapshot
            stored = node.scheduler.snapshot().model_dump_json()
            node.scheduler = Scheduler.restore(SchedulerSnapshot.model_validate_json(stored), KEY)
        node.feed(event_for(node, kind, pick, stale))  # the harness checks one ending per task
    for _ in range(200):
        if node.scheduler.done:
            break
        node.tick_to_deadline()
    assert node.scheduler.done
    assert len(node.sent(FinishCampaign)) == 1
    assert all(task.ended for task in node.scheduler.tasks())
    assert node.scheduler.next_deadline() is None
