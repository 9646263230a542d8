"""Settling as a stage: a `SettlingState` in, a `Settled` out, nothing of the input changed.

The machine's own tests (`test_replication_flow.py`) drive settling through `Scheduler.handle`; these
call the stage alone, with tasks placed by a real `Scheduler` and ended as a worker's results end them.
"""

from __future__ import annotations

import dataclasses

import pytest
from kit.scheduler_harness import KEY, MODEL, SHA, peer

from scheduler import (
    Campaign,
    PeersDiscovered,
    RecordOutcome,
    ReplicasSettled,
    Scheduler,
    Status,
    TaskProgress,
    TaskState,
    TaskView,
    campaign_needs,
    parse_campaign,
)
from scheduler.state import PeerView
from scheduler.state.settling import SettlingState, settle_groups

YAML = f"""\
model: {{url: https://example.org/m.onnx, sha256: {SHA}}}
verify: {{replicas: 2}}
jobs: [{{compute_unit: CPU (ONNX), devices: 1}}]
"""
MODELS = {"m": MODEL, MODEL.name: MODEL}


def placed(hosts: list[str]) -> tuple[Campaign, dict[str, PeerView], dict[str, TaskView]]:
    """One group of two replicas placed by a real scheduler over peers on `hosts`."""
    peers = {p.peer_id: p for p in (dataclasses.replace(peer(f"b{i}"), host=h) for i, h in enumerate(hosts))}
    campaign = parse_campaign(YAML)
    sched = Scheduler("c1", campaign, MODELS, key=KEY)
    sched.handle(PeersDiscovered(peers=tuple(peers.values())), 0.0)
    return campaign, peers, {t.task_id: t for t in sched.tasks()}


def done(task: TaskView, median_ms: float) -> TaskView:
    return task.with_(
        state=TaskState.DONE, progress=TaskProgress(median_ms=median_ms), spread=0.01, ended_at=5.0
    )


def state_of(hosts: list[str], figures: list[float]) -> SettlingState:
    campaign, peers, tasks = placed(hosts)
    tasks = {t.task_id: done(t, f) for t, f in zip(tasks.values(), figures, strict=True)}
    return SettlingState("c1", KEY, campaign, tasks, peers, campaign_needs(campaign, MODELS), {}, 10.0)


def test_two_replicas_that_agree_are_labelled_and_their_peers_recorded() -> None:
    state = state_of(["10.0.1.1", "10.0.2.1"], [10.0, 10.1])
    settled = settle_groups(state)
    assert [t.verified for t in settled.labelled] == ["replicated 2/2", "replicated 2/2"]
    assert settled.added == ()
    [command] = settled.commands
    assert isinstance(command, ReplicasSettled)
    assert command.outcome == "replicated"
    assert sorted(command.agreed) == sorted(state.peers)
    assert {p: r.agreed for p, r in settled.records.items()} == {p: 1 for p in state.peers}


@pytest.mark.parametrize(
    ("hosts", "added_state"),
    [
        (["10.0.1.1", "10.0.2.1", "10.0.3.1"], TaskState.PENDING),  # a third peer on a third host
        (["10.0.1.1", "10.0.2.1"], TaskState.UNVERIFIABLE),  # nobody left for one more replica
    ],
)
def test_two_replicas_that_disagree_ask_one_more(hosts: list[str], added_state: TaskState) -> None:
    state = state_of(hosts, [10.0, 5.0])
    before = dict(state.tasks)
    settled = settle_groups(state)
    [added] = settled.added
    assert added.state == added_state
    assert added.task_id not in state.tasks
    assert added.replica_group == next(iter(state.tasks.values())).replica_group
    if added_state == TaskState.PENDING:
        assert added.peer_id == "12D3-b2"
        assert (settled.labelled, settled.commands) == ((), ())
    else:  # ended at once, so a second round settles the group without it
        outcome, replicas = settled.commands
        assert isinstance(outcome, RecordOutcome)
        assert outcome.status == Status.UNVERIFIABLE
        assert isinstance(replicas, ReplicasSettled)
        assert replicas.outcome == "disagreed"
        assert {t.verified.split(" ")[0] for t in settled.labelled} == {"disagreed"}
    assert state.tasks == before  # the stage reads its input and writes none of it
