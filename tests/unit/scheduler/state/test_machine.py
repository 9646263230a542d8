"""The scheduling state machine against the recording harness: events in, commands out."""

from __future__ import annotations

import pytest
from kit.scheduler_harness import CAMPAIGN_YAML, KEY, MODEL, REFUSED_DETAIL, Node, cpu_fleet, peer

from protocol import ComputeUnit, DeclineReason, FailureReason, Phase
from scheduler import (
    CancelRequested,
    FinishCampaign,
    Lapse,
    LeaseLapsed,
    MarkUnschedulable,
    Misfit,
    OfferCommitted,
    OfferDeclined,
    ProgressReported,
    RecordOutcome,
    ResultAccepted,
    Scheduler,
    SchedulerSnapshot,
    SendAck,
    SendCancel,
    SendDispatch,
    SendOffer,
    SendReclaim,
    Status,
    SubmitterStopped,
    TaskFailedRemotely,
    TaskState,
    Tick,
    parse_campaign,
)

CID = "campaign-7"


def node_for(text: str = CAMPAIGN_YAML, **kwargs: object) -> Node:
    scheduler = Scheduler(CID, parse_campaign(text), {"mobilenet": MODEL}, key=KEY, **kwargs)  # type: ignore[arg-type]
    return Node(scheduler)


def one_job(devices: str | int = "any", unit: str = "CPU (ONNX)") -> str:
    return (
        "priority: 70\nmodel: {url: 'https://example.org/mobilenet.onnx'}\n"
        f"jobs: [{{compute_unit: {unit}, num_inference_runs: 20, devices: {devices}}}]\n"
    )


def statuses(node: Node) -> dict[str, str]:
    return {task_id: outcome.status.value for task_id, outcome in node.outcomes().items()}


def tried(node: Node, task_id: str) -> list[tuple[str, str]]:
    (task,) = [t for t in node.scheduler.tasks() if t.task_id == task_id]
    return [(a.peer_id, a.outcome) for a in task.attempts]


def test_cpu_job_on_all_three_peers_and_gpu_job_unschedulable_with_each_peers_reason() -> None:
    node = node_for()
    out = node.discover(cpu_fleet(3))
    offers = [c for c in out if isinstance(c, SendOffer)]
    assert [(o.task_id, o.peer_id) for o in offers] == [
        (f"{CID}-job-0-{i}", f"12D3-cpu{i}") for i in range(3)
    ]
    assert {(o.job_index, o.priority, o.model) for o in offers} == {(0, 50, MODEL)}
    (mark,) = [c for c in out if isinstance(c, MarkUnschedulable)]
    assert (mark.job_index, mark.task_ids, mark.detail) == (
        1,
        (f"{CID}-job-1-0",),
        "no feasible peer among 3",
    )
    assert {peer: tuple(r.code for r in why) for peer, why in mark.reasons.items()} == {
        f"12D3-cpu{i}": (Misfit.UNIT_UNAVAILABLE,) for i in range(3)
    }
    node.run()
    assert statuses(node) == {
        f"{CID}-job-0-0": "Complete",
        f"{CID}-job-0-1": "Complete",
        f"{CID}-job-0-2": "Complete",
        f"{CID}-job-1-0": "Unschedulable",
    }
    assert node.sent(FinishCampaign) == [FinishCampaign(done=3, failed=0, unschedulable=1, cancelled=0)]
    assert node.scheduler.done
    assert node.scheduler.next_deadline() is None


def test_one_task_goes_offer_dispatch_outcome_ack_in_that_order() -> None:
    node = node_for(one_job("any"))
    node.discover(cpu_fleet(1))
    task = f"{CID}-job-0-0"
    lease = node.commit(task, "12D3-cpu0")
    node.feed(ProgressReported(task, lease, Phase.MEASURING, 5, 20, 3.5))
    (view,) = node.scheduler.tasks()
    assert (view.state, view.progress.phase, view.progress.done, view.progress.median_ms) == (
        TaskState.LEASED,
        Phase.MEASURING,
        5,
        3.5,
    )
    node.deliver(task, lease, "12D3-cpu0")
    kinds = [type(c).__name__ for c in node.log]
    assert kinds == ["SendOffer", "SendDispatch", "RecordOutcome", "SendAck", "FinishCampaign"]
    assert node.log[1] == SendDispatch(task, lease)
    assert node.log[2] == RecordOutcome(task, Status.COMPLETE)
    assert node.log[0] == SendOffer(
        task, "12D3-cpu0", 0, node.scheduler.snapshot().campaign.jobs[0].spec, MODEL, priority=70
    )


@pytest.mark.parametrize(
    ("devices", "peers", "placed", "unschedulable"),
    [("all", 3, 3, 0), ("any", 3, 1, 0), (2, 3, 2, 0), (5, 3, 3, 2), ("any", 0, 0, 1), ("all", 0, 0, 1)],
)
def test_fan_out(devices: str | int, peers: int, placed: int, unschedulable: int) -> None:
    node = node_for(one_job(devices))
    out = node.discover(cpu_fleet(peers))
    offers = [c for c in out if isinstance(c, SendOffer)]
    assert len(offers) == placed
    assert len({o.peer_id for o in offers}) == placed
    ends = [c for c in out if isinstance(c, RecordOutcome)]
    assert [c.status for c in ends] == [Status.UNSCHEDULABLE] * unschedulable
    ids = [o.task_id for o in offers] + [c.task_id for c in ends]
    assert ids == [f"{CID}-job-0-{n}" for n in range(placed + unschedulable)]
    node.run()
    assert list(statuses(node).values()).count("Complete") == placed


def test_no_peers_makes_every_job_unschedulable_and_finishes() -> None:
    node = node_for()
    out = node.discover([])
    marks = [c for c in out if isinstance(c, MarkUnschedulable)]
    assert [(m.job_index, dict(m.reasons), m.detail) for m in marks] == [
        (0, {}, "no peers discovered"),
        (1, {}, "no peers discovered"),
    ]
    assert out[-1] == FinishCampaign(done=0, failed=0, unschedulable=2, cancelled=0)


RETRIES = [
    ("declined elsewhere", ["decline:not_enough_memory"], [("12D3-cpu0", "declined not_enough_memory")]),
    ("lost", ["lost"], [("12D3-cpu0", "offer lost: connection refused")]),
    ("no answer", ["silent"], [("12D3-cpu0", "no answer to the offer within 10 s")]),
    ("lease lapsed", ["commit"], [("12D3-cpu0", "lease lease-1 lapsed: no heartbeat for 30 s")]),
    ("lease released", ["release"], [("12D3-cpu0", "lease lease-1 released: leaving")]),
    ("retryable failure", ["fail:crashed"], [("12D3-cpu0", "failed crashed: boom")]),
    (
        "rejected result",
        ["forged"],
        [("12D3-cpu0", "failed internal: rejected result: result signature: bad signature")],
    ),
]


@pytest.mark.parametrize(("script", "first"), [c[1:] for c in RETRIES], ids=[c[0] for c in RETRIES])
def test_a_failed_attempt_moves_the_task_to_another_peer(
    script: list[str], first: list[tuple[str, str]]
) -> None:
    node = node_for(one_job("any"))
    node.scripts["12D3-cpu0"] = script
    node.discover(cpu_fleet(3))
    node.run()
    task = f"{CID}-job-0-0"
    assert statuses(node) == {task: "Complete"}
    assert tried(node, task) == [*first, ("12D3-cpu1", "done")]


def test_no_answer_and_lapse_withdraw_the_offer_or_void_the_lease_on_the_old_peer() -> None:
    node = node_for(one_job(2))
    node.scripts = {"12D3-cpu0": ["silent"], "12D3-cpu1": ["commit"]}
    node.discover(cpu_fleet(4))
    node.run()
    cancels = node.sent(SendCancel)
    assert [(c.task_id, c.peer_id, c.lease_id) for c in cancels] == [
        (f"{CID}-job-0-0", "12D3-cpu0", None),
        (f"{CID}-job-0-1", "12D3-cpu1", "lease-1"),
    ]
    assert statuses(node) == {f"{CID}-job-0-0": "Complete", f"{CID}-job-0-1": "Complete"}
    assert {t.peer_id for t in node.scheduler.tasks()} == {"12D3-cpu2", "12D3-cpu3"}


@pytest.mark.parametrize("reason", [FailureReason.INCONSISTENT, FailureReason.INVALID])
def test_a_refused_result_fails_the_task_with_its_reason_and_detail_when_no_one_else_fits(
    reason: FailureReason,
) -> None:
    node = node_for(one_job("any"))
    node.scripts["12D3-cpu0"] = [f"refuse:{reason.value}"]
    node.discover(cpu_fleet(1))
    node.run()
    (outcome,) = node.outcomes().values()
    assert (outcome.status, outcome.reason) == (Status.FAILED, reason.value)
    assert REFUSED_DETAIL in outcome.detail


def test_a_peer_whose_figures_were_refused_gets_no_retry_of_any_task() -> None:
    node = node_for(one_job(2))
    node.scripts = {"12D3-cpu0": ["refuse:inconsistent"], "12D3-cpu1": ["fail:crashed"]}
    node.discover(cpu_fleet(3))
    node.run()
    first, second = f"{CID}-job-0-0", f"{CID}-job-0-1"
    assert statuses(node) == {first: "Complete", second: "Failed"}
    assert [o.peer_id for o in node.sent(SendOffer) if o.task_id == second] == ["12D3-cpu1"]
    assert node.outcomes()[second].reason == "crashed"


@pytest.mark.parametrize(
    "reason",
    [
        FailureReason.UNIT_UNAVAILABLE,
        FailureReason.DIGEST_MISMATCH,
        FailureReason.FORMAT,
        FailureReason.LOAD,
        FailureReason.INPUT,
        FailureReason.FALLBACK,
    ],
)
def test_a_non_retryable_failure_ends_the_task_failed_at_once(reason: FailureReason) -> None:
    node = node_for(one_job("any"))
    node.scripts["12D3-cpu0"] = [f"fail:{reason.value}"]
    node.discover(cpu_fleet(3))
    node.run()
    (outcome,) = node.outcomes().values()
    assert (outcome.status, outcome.reason, outcome.detail) == (Status.FAILED, reason.value, "boom")
    assert len(node.sent(SendOffer)) == 1


def test_the_retry_budget_caps_attempts() -> None:
    node = node_for(one_job("any"), retry_budget=2)
    node.scripts = {f"12D3-cpu{i}": ["decline:policy"] for i in range(5)}
    node.discover(cpu_fleet(5))
    node.run()
    (outcome,) = node.outcomes().values()
    assert (outcome.status, outcome.reason) == (Status.FAILED, "policy")
    assert outcome.detail == "gave up after 3 attempts (retry budget 2)"
    assert len(node.sent(SendOffer)) == 3
    (task,) = node.scheduler.tasks()
    assert task.reasons == tuple(f"12D3-cpu{i}: declined policy" for i in range(3))


def test_a_release_is_retried_at_once_elsewhere_and_spends_no_retry_budget() -> None:
    node = node_for(one_job("any"), retry_budget=0)
    node.scripts["12D3-cpu0"] = ["release"]
    node.discover(cpu_fleet(2))
    start = node.now
    node.run()
    task = f"{CID}-job-0-0"
    assert statuses(node) == {task: "Complete"}
    assert node.now == start  # no deadline waited out: the next offer went with the release's commands
    assert [c.lease_id for c in node.sent(SendCancel)] == []  # the worker gave the lease up itself
    (view,) = node.scheduler.tasks()
    assert [a.cause for a in view.attempts] == [Lapse.RELEASED, Lapse.DONE]


def test_a_second_release_by_the_same_peer_spends_the_budget() -> None:
    node = node_for(one_job("all"), retry_budget=1)
    node.scripts["12D3-cpu0"] = ["release", "release", "release"]
    node.discover(cpu_fleet(1))
    node.run()
    (outcome,) = node.outcomes().values()
    assert (outcome.status, outcome.reason) == (Status.FAILED, "released")
    assert len(node.sent(SendOffer)) == 3  # free, counted, counted: over a budget of 1


def test_a_released_task_with_no_other_peer_goes_back_after_a_backoff() -> None:
    node = node_for(one_job("all"))
    node.scripts["12D3-cpu0"] = ["release"]  # a service restarted: the same peer id comes back
    node.discover(cpu_fleet(1))
    start = node.now
    node.run()
    assert [o.peer_id for o in node.sent(SendOffer)] == ["12D3-cpu0"] * 2
    assert node.now == start + 2.0
    assert statuses(node) == {f"{CID}-job-0-0": "Complete"}


def test_a_busy_peer_with_no_alternative_is_offered_again_after_a_backoff() -> None:
    node = node_for(one_job("all"))
    node.scripts["12D3-cpu0"] = ["decline:busy", "decline:queue_full"]
    node.discover(cpu_fleet(1))
    start = node.now
    node.run()
    offers = node.sent(SendOffer)
    assert [o.peer_id for o in offers] == ["12D3-cpu0"] * 3
    assert node.now == start + 2.0 + 4.0  # backoff 2 s, then 4 s
    assert statuses(node) == {f"{CID}-job-0-0": "Complete"}


def test_an_all_task_that_is_lost_does_not_move_onto_a_peer_that_has_its_own_task() -> None:
    node = node_for(one_job("all"))
    node.scripts["12D3-cpu0"] = ["lost"]
    node.discover(cpu_fleet(2))
    node.run()
    assert statuses(node) == {f"{CID}-job-0-0": "Failed", f"{CID}-job-0-1": "Complete"}
    failed = node.outcomes()[f"{CID}-job-0-0"]
    assert failed.reason is Lapse.OFFER_LOST
    assert failed.detail == "offer lost: connection refused; no other feasible peer to retry on"


def lapsed_then_reoffered(node: Node) -> tuple[str, str]:
    """Task 0 leased on cpu0 as lease-1, lapses, and is committed on cpu1 as lease-2."""
    node.discover(cpu_fleet(3))
    task = f"{CID}-job-0-0"
    old = node.commit(task, "12D3-cpu0")
    node.feed(LeaseLapsed(task, old))
    new = node.commit(task, "12D3-cpu1")
    return old, new


def test_a_result_for_a_stale_lease_is_never_accepted() -> None:
    node = node_for(one_job("any"))
    old, new = lapsed_then_reoffered(node)
    task = f"{CID}-job-0-0"
    assert node.scheduler.current_lease(task) == new
    assert node.deliver(task, old, "12D3-cpu0") == []  # the node's own check
    out = node.feed(ResultAccepted(task, old, "12D3-cpu0"))  # and the machine's, if the node slipped
    assert out == [SendCancel(task, "12D3-cpu0", old, "stale lease: result not accepted")]
    assert node.feed(ProgressReported(task, old, Phase.MEASURING)) == [
        SendCancel(task, "12D3-cpu0", old, "stale lease")
    ]
    assert node.feed(TaskFailedRemotely(task, old, FailureReason.CRASHED)) == []
    assert node.outcomes() == {}
    node.deliver(task, new, "12D3-cpu1")
    assert statuses(node) == {task: "Complete"}
    assert node.feed(ResultAccepted(task, new, "12D3-cpu1")) == [SendAck(task, new)]  # redelivered: ack only
    assert node.feed(ResultAccepted(task, old, "12D3-cpu0"))[0] == SendCancel(
        task, "12D3-cpu0", old, "stale lease: result not accepted"
    )
    assert len(node.outcomes()) == 1


def test_a_commit_that_arrives_after_the_offer_was_abandoned_is_cancelled() -> None:
    node = node_for(one_job("any"))
    node.discover(cpu_fleet(2))
    task = f"{CID}-job-0-0"
    node.tick_to_deadline()  # cpu0 never answered; the task moved to cpu1
    out = node.feed(OfferCommitted(task, "12D3-cpu0", "late-lease"))
    assert out == [SendCancel(task, "12D3-cpu0", "late-lease", "the offer no longer stands")]
    assert node.feed(OfferDeclined(task, "12D3-cpu0", DeclineReason.BUSY)) == []
    assert node.feed(OfferCommitted("no-such-task", "12D3-cpu0", "x")) == [
        SendCancel("no-such-task", "12D3-cpu0", "x", "the offer no longer stands")
    ]


def test_cancel_ends_every_live_task_once_and_tells_the_workers() -> None:
    node = node_for(one_job(3))
    node.scripts["12D3-cpu2"] = ["decline:busy"]
    node.discover(cpu_fleet(3))
    t0, t1, t2 = (f"{CID}-job-0-{n}" for n in range(3))
    lease = node.commit(t0, "12D3-cpu0")
    node.feed(OfferDeclined(t2, "12D3-cpu2", DeclineReason.BUSY))  # t2 waits out a backoff
    out = node.feed(CancelRequested("user pressed ctrl-c"))
    assert [c for c in out if isinstance(c, SendCancel)] == [
        SendCancel(t0, "12D3-cpu0", lease, "campaign cancelled"),
        SendCancel(t1, "12D3-cpu1", None, "campaign cancelled"),
    ]
    assert statuses(node) == {t0: "Cancelled", t1: "Cancelled", t2: "Cancelled"}
    assert out[-1] == FinishCampaign(done=0, failed=0, unschedulable=0, cancelled=3)
    voided = SendCancel(t0, "12D3-cpu0", lease, "stale lease: result not accepted")
    assert node.feed(ResultAccepted(t0, lease, "12D3-cpu0")) == [voided]  # not recorded
    assert node.feed(CancelRequested()) == []
    assert len(node.outcomes()) == 3


def test_cancel_before_discovery_finishes_without_tasks() -> None:
    node = node_for()
    assert node.feed(CancelRequested()) == [FinishCampaign(0, 0, 0, 0)]
    assert node.discover(cpu_fleet(3)) == []
    assert node.scheduler.tasks() == ()


def test_racing_endings_for_one_lease_end_the_task_once() -> None:
    node = node_for(one_job("any"))
    node.discover(cpu_fleet(2))
    task = f"{CID}-job-0-0"
    lease = node.commit(task, "12D3-cpu0")
    node.feed(ResultAccepted(task, lease, "12D3-cpu0"))
    assert node.feed(ProgressReported(task, lease, Phase.MEASURING)) == []  # crossed the result in flight
    assert node.feed(TaskFailedRemotely(task, lease, FailureReason.CRASHED)) == []
    assert node.feed(LeaseLapsed(task, lease)) == []
    node.now += 1000
    node.feed(Tick())
    node.feed(CancelRequested())
    assert statuses(node) == {task: "Complete"}
    assert len(node.sent(FinishCampaign)) == 1


def test_deadlines_are_data() -> None:
    node = node_for(one_job("any"), offer_timeout_s=5.0)
    assert node.scheduler.next_deadline() is None
    node.discover(cpu_fleet(1))
    assert node.scheduler.next_deadline() == node.now + 5.0
    task = f"{CID}-job-0-0"
    lease = node.commit(task, "12D3-cpu0", ttl=12.0)
    assert node.scheduler.next_deadline() == node.now + 12.0
    node.now += 10
    node.feed(ProgressReported(task, lease, Phase.QUEUED, queue_position=2))
    assert node.scheduler.next_deadline() == node.now + 12.0
    assert node.scheduler.tasks()[0].progress.queue_position == 2
    node.now += 11.9
    assert [c for c in node.feed(Tick()) if isinstance(c, SendCancel)] == []


def test_snapshot_and_restore_mid_campaign_resume_with_reclaims() -> None:
    node = node_for(one_job(3))
    node.discover(cpu_fleet(4))
    t0, t1, t2 = (f"{CID}-job-0-{n}" for n in range(3))
    lease0 = node.commit(t0, "12D3-cpu0")
    lease2 = node.commit(t2, "12D3-cpu2")
    node.deliver(t2, lease2, "12D3-cpu2")
    stored = node.scheduler.snapshot().model_dump_json()

    restored = Scheduler.restore(SchedulerSnapshot.model_validate_json(stored), KEY)
    assert restored.snapshot() == node.scheduler.snapshot()
    later = Node(restored, now=node.now + 120.0, log=list(node.log))  # down for two minutes
    out = later.feed(Tick())
    assert out == [
        SendReclaim(t0, "12D3-cpu0", lease0),
        SendOffer(t1, "12D3-cpu1", 0, restored.snapshot().campaign.jobs[0].spec, MODEL, 70),
    ]
    assert restored.next_deadline() == later.now + 10.0  # the offer; the lease got a fresh 30 s
    later.deliver(t0, lease0, "12D3-cpu0")  # the worker kept its result and delivers it on reclaim
    later.commit(t1, "12D3-cpu1")
    later.run()
    assert statuses(later) == {t0: "Complete", t1: "Complete", t2: "Complete"}
    assert later.sent(FinishCampaign) == [FinishCampaign(3, 0, 0, 0)]


def test_a_stopping_submitter_withdraws_what_is_out_and_resumes_it_without_spending_budget() -> None:
    node = node_for(one_job(3), retry_budget=0)
    node.discover(cpu_fleet(4))
    t0, t1, t2 = (f"{CID}-job-0-{n}" for n in range(3))
    lease0 = node.commit(t0, "12D3-cpu0")
    node.feed(ProgressReported(t0, lease0, Phase.MEASURING, done=5, total=20))
    lease2 = node.commit(t2, "12D3-cpu2")
    node.deliver(t2, lease2, "12D3-cpu2")
    out = node.feed(SubmitterStopped("ctrl-c"))
    assert out == [SendCancel(t0, "12D3-cpu0", lease0, "ctrl-c"), SendCancel(t1, "12D3-cpu1", None, "ctrl-c")]
    views = {t.task_id: t for t in node.scheduler.tasks()}
    assert [views[t].state for t in (t0, t1, t2)] == [TaskState.PENDING, TaskState.PENDING, TaskState.DONE]
    assert views[t0].attempts == views[t1].attempts == ()  # struck: no retry budget spent
    assert (views[t0].peer_id, views[t0].lease_id, views[t0].progress.done) == ("12D3-cpu0", None, 0)
    assert not node.scheduler.done

    stored = SchedulerSnapshot.model_validate_json(node.scheduler.snapshot().model_dump_json())
    later = Node(Scheduler.restore(stored, KEY), now=node.now + 60.0, log=list(node.log))
    offers = [c for c in later.feed(Tick()) if isinstance(c, SendOffer)]
    assert [(o.task_id, o.peer_id) for o in offers] == [(t0, "12D3-cpu0"), (t1, "12D3-cpu1")]  # no reclaim
    assert later.feed(ResultAccepted(t0, lease0, "12D3-cpu0")) == [
        SendCancel(t0, "12D3-cpu0", lease0, "stale lease: result not accepted")
    ]  # the withdrawn lease's late result is never accepted
    later.run()
    assert statuses(later) == {t0: "Complete", t1: "Complete", t2: "Complete"}


def test_a_snapshot_with_a_cause_outside_the_vocabulary_is_refused() -> None:
    node = node_for(one_job(1))
    node.scripts["12D3-cpu0"] = ["lost"]
    node.discover(cpu_fleet(1))
    node.run()
    stored = node.scheduler.snapshot().model_dump(mode="json")
    [task] = stored["tasks"]
    assert task["failure_reason"] == "offer_lost"
    assert task["attempts"][-1]["cause"] == "offer_lost"
    SchedulerSnapshot.model_validate(stored)  # the vocabulary round-trips
    task["attempts"][-1]["cause"] = "ofer_lost"  # a misspelt cause is not silently kept
    with pytest.raises(ValueError, match="cause"):
        SchedulerSnapshot.model_validate(stored)


def test_a_finished_campaign_restores_finished() -> None:
    node = node_for(one_job("any"))
    node.discover(cpu_fleet(1))
    node.run()
    restored = Scheduler.restore(node.scheduler.snapshot(), KEY)
    assert restored.done
    assert restored.handle(Tick(), node.now + 5) == []


def test_the_unit_and_model_of_each_task_are_in_its_view() -> None:
    node = node_for(one_job("any", unit="CPU (ONNX)"))
    node.discover([peer("mac", os="Darwin", soc="Apple M2")])
    (task,) = node.scheduler.tasks()
    assert (task.unit, task.model, task.device_name, task.peer_id) == (
        ComputeUnit.CPU_ONNX,
        MODEL,
        "mac",
        "12D3-mac",
    )


def test_a_finished_task_shows_every_run_done_its_last_phase_and_its_median() -> None:
    node = node_for(one_job("any"))
    node.discover(cpu_fleet(1))
    task = f"{CID}-job-0-0"
    lease = node.commit(task, "12D3-cpu0")
    node.feed(ProgressReported(task, lease, Phase.LOADING, 7, 9))  # the last heartbeat was mid-load
    node.feed(ResultAccepted(task, lease, "12D3-cpu0", median_ms=1.25))
    (view,) = node.scheduler.tasks()
    progress = view.progress
    assert (view.state, progress.phase, progress.done, progress.total, progress.median_ms) == (
        TaskState.DONE,
        Phase.MEASURING,
        9,
        9,
        1.25,
    )


def test_a_task_records_when_it_ended_from_the_event_that_ended_it() -> None:
    node = node_for(one_job("any", unit="GPU (ONNX)"))
    node.discover(cpu_fleet(1))  # no GPU anywhere: unschedulable on discovery
    (view,) = node.scheduler.tasks()
    assert view.state == TaskState.UNSCHEDULABLE
    assert view.ended_at == node.now
