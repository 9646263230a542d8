"""Issue 49, scope 1: a verified job short of peers that a challenge refused and will challenge again
waits for their next verdict instead of ending `Unverifiable` at the campaign's start.

The pure rule (`placement.open_refusals`) and the scheduler that applies it, on `now` passed in: a
README-like recipe (`verify: {replicas: 2, same_host: allow}`, two peers on one host), both refused at
the start by a challenge the submitter will try again. The job's tasks wait unplaced (said once,
`AwaitChallenge`), are placed when the views say both passed, and complete; refused for good (the
submitter's last challenge used: no due time), or past the due time with no verdict, they end
`Unverifiable` naming the rule and the field, as before. A refusal by physics or the class is final.
"""

from __future__ import annotations

import dataclasses

from kit.scheduler_harness import KEY, MODEL, SHA, peer

from scheduler import (
    AwaitChallenge,
    OfferCommitted,
    PeersDiscovered,
    RecordOutcome,
    ResultAccepted,
    Scheduler,
    SendOffer,
    Status,
    TaskState,
    Tick,
    parse_campaign,
)
from scheduler.state import PeerView, explain, open_refusals
from scheduler.state.placement import Misfit, Reason, Rejection

YAML = f"""\
model: {{url: https://example.org/m.onnx, sha256: {SHA}}}
verify: {{replicas: 2, same_host: allow}}
max_inflight: 1
jobs: [{{compute_unit: CPU (ONNX), devices: all}}]
"""
REFUSED = "challenge: n=512 x 137 steps, 20 GFLOPS measured against 245 claimed"


def _peers(claim: str = "", again_by: float = 0.0) -> tuple[PeerView, ...]:
    """Two workers on one host; each carries `claim` (refused) and `again_by` (its next verdict's due)."""
    out = []
    for name in ("w0", "w1"):
        view = dataclasses.replace(peer(name), host="127.0.0.1")
        if claim:
            view = dataclasses.replace(view, claim=(claim,), challenge_again_by=again_by)
        out.append(view)
    return tuple(out)


def _rejection(peer_id: str, *codes: Misfit) -> Rejection:
    return Rejection(peer_id, "d", tuple(Reason(code, code.value) for code in codes))


def test_only_a_challenge_refusal_still_to_be_tried_again_is_open() -> None:
    views = (
        dataclasses.replace(peer("a"), claim=(REFUSED,), challenge_again_by=100.0),
        dataclasses.replace(peer("b"), claim=(REFUSED,), challenge_again_by=0.0),  # its last challenge
        dataclasses.replace(peer("c"), claim=(REFUSED,), challenge_again_by=100.0),
        dataclasses.replace(peer("d"), claim=(REFUSED,), challenge_again_by=100.0),
    )
    rejected = (
        _rejection("12D3-a", Misfit.CLAIM_UNVERIFIED),
        _rejection("12D3-b", Misfit.CLAIM_UNVERIFIED),
        _rejection("12D3-c", Misfit.CLAIM_UNVERIFIED, Misfit.RAM),  # would not fit whatever its challenge
        _rejection("12D3-d", Misfit.OWNER_REFUSED),  # a lie about its owner: final
    )
    assert open_refusals(rejected, views, now=50.0) == ("12D3-a",)
    assert open_refusals(rejected, views, now=100.0) == ()  # its due time passed: no verdict came


def _deliver(sched: Scheduler, out: list[object], now: float) -> list[object]:
    """Commit each offer and deliver one figure per task (both peers agree), until none is offered."""
    log: list[object] = []
    while offers := [c for c in out if isinstance(c, SendOffer)]:
        log += out
        out = []
        for o in offers:
            out += sched.handle(OfferCommitted(o.task_id, o.peer_id, f"L-{o.task_id}"), now)
            out += sched.handle(
                ResultAccepted(o.task_id, f"L-{o.task_id}", o.peer_id, 10.0, 0.01, "x"), now + 1
            )
            now += 2
    return log + out


def test_a_job_refused_at_the_start_waits_and_runs_once_a_rechallenge_passes() -> None:
    sched = Scheduler("c1", parse_campaign(YAML), {"m": MODEL}, key=KEY)
    out = sched.handle(PeersDiscovered(peers=_peers(REFUSED, again_by=100.0)), 0.0)
    (said,) = [c for c in out if isinstance(c, AwaitChallenge)]  # said once
    assert "waits for the next challenge of 2 peer(s)" in said.detail, said.detail
    assert not [c for c in out if isinstance(c, SendOffer | RecordOutcome)]
    assert all(t.state == TaskState.PENDING and t.awaits and t.peer_id is None for t in sched.tasks())
    assert sched.next_deadline() == 100.0
    assert not sched.done
    out = sched.handle(PeersDiscovered(peers=_peers(REFUSED, again_by=100.0)), 30.0)  # no verdict yet
    assert not [c for c in out if isinstance(c, AwaitChallenge | SendOffer | RecordOutcome)]
    out = sched.handle(PeersDiscovered(peers=_peers()), 40.0)  # both passed their second challenge
    _deliver(sched, out, 41.0)
    tasks = sched.tasks()
    assert [t.state for t in tasks] == [TaskState.DONE, TaskState.DONE], tasks
    assert not any(t.awaits for t in tasks)
    assert all(t.verified.startswith("replicated 2/2") for t in tasks), [t.verified for t in tasks]
    assert sched.done


def _ends_unverifiable(out: list[object], sched: Scheduler) -> None:
    (task,) = sched.tasks()
    assert task.state == TaskState.UNVERIFIABLE, task
    assert "claim_unverified: challenge: " in task.detail
    assert "verify: {unverified: allow}" in task.detail
    (outcome,) = [c for c in out if isinstance(c, RecordOutcome)]
    assert outcome.status == Status.UNVERIFIABLE
    assert sched.done


def test_refused_at_its_last_challenge_the_job_ends_unverifiable_naming_rule_and_field() -> None:
    sched = Scheduler("c2", parse_campaign(YAML), {"m": MODEL}, key=KEY)
    sched.handle(PeersDiscovered(peers=_peers(REFUSED, again_by=100.0)), 0.0)
    out = sched.handle(PeersDiscovered(peers=_peers(REFUSED, again_by=200.0)), 40.0)  # refused again
    assert not sched.done
    assert sched.next_deadline() == 200.0
    out = sched.handle(PeersDiscovered(peers=_peers(REFUSED, again_by=0.0)), 80.0)  # the last: no more
    _ends_unverifiable(out, sched)


def test_with_no_verdict_by_its_due_time_the_job_ends_unverifiable() -> None:
    sched = Scheduler("c3", parse_campaign(YAML), {"m": MODEL}, key=KEY)
    sched.handle(PeersDiscovered(peers=_peers(REFUSED, again_by=100.0)), 0.0)
    assert sched.handle(Tick(), 99.0) == []
    assert not sched.done
    _ends_unverifiable(sched.handle(Tick(), 100.0), sched)  # the peers left: no further view came


def test_a_refusal_that_is_not_tried_again_ends_the_job_at_the_start_as_before() -> None:
    sched = Scheduler("c4", parse_campaign(YAML), {"m": MODEL}, key=KEY)
    physics = "calibration.cpu_gflops 9e+04 over 8 cores"  # refuted by physics: no challenge to come
    out = sched.handle(PeersDiscovered(peers=_peers(physics)), 0.0)
    assert not [c for c in out if isinstance(c, AwaitChallenge)]
    (task,) = sched.tasks()
    assert task.state == TaskState.UNVERIFIABLE


def test_plan_says_beforehand_which_refused_peers_are_challenged_again() -> None:
    plan = explain(parse_campaign(YAML), {"m": MODEL}, _peers(REFUSED, again_by=100.0))
    (job,) = plan.jobs
    assert job.unverifiable
    assert job.awaiting == ("12D3-w0", "12D3-w1")
    (job,) = explain(parse_campaign(YAML), {"m": MODEL}, _peers(REFUSED, again_by=0.0)).jobs
    assert job.unverifiable
    assert job.awaiting == ()


def test_a_waiting_job_survives_a_restart_and_is_placed_after_it() -> None:
    sched = Scheduler("c5", parse_campaign(YAML), {"m": MODEL}, key=KEY)
    sched.handle(PeersDiscovered(peers=_peers(REFUSED, again_by=100.0)), 0.0)
    snap = type(sched.snapshot()).model_validate_json(sched.snapshot().model_dump_json())
    restored = Scheduler.restore(snap, KEY)
    assert restored.handle(Tick(), 10.0) == []  # still waiting: nothing offered, nothing ended
    assert all(t.awaits for t in restored.tasks())
    out = restored.handle(PeersDiscovered(peers=_peers()), 40.0)
    assert [c.peer_id for c in out if isinstance(c, SendOffer)] == ["12D3-w0"]  # max_inflight: 1
    assert not any(t.awaits for t in restored.tasks())
