"""A campaign's progress in one vocabulary, `TaskState`'s: the tally every view shows (`state_counts`),
the `finished` line's counts (`FinishCampaign`), and the phase shown only while a task is leased."""

from __future__ import annotations

import dataclasses

import pytest

import scheduler as sch
from protocol import ComputeUnit, ModelRef, Phase
from scheduler.state.tasks import ENDED

MODEL = ModelRef(name="m.onnx", sha256="a" * 64, size=1)


def _view(state: sch.TaskState, phase: Phase | None = Phase.MEASURING) -> sch.TaskView:
    progress = sch.TaskProgress(phase=phase, done=3, total=10)
    return sch.TaskView(
        task_id="c-job-0-0",
        job_index=0,
        unit=ComputeUnit.CPU_ONNX,
        model=MODEL,
        state=state,
        progress=progress,
    )


def test_state_counts_names_every_state_in_its_order_zeros_kept() -> None:
    states = [sch.TaskState.DONE, sch.TaskState.LEASED, sch.TaskState.DONE, sch.TaskState.UNSCHEDULABLE]
    counts = sch.state_counts(states)
    assert list(counts) == list(sch.TaskState)
    assert counts[sch.TaskState.DONE] == 2
    assert counts[sch.TaskState.LEASED] == 1
    assert counts[sch.TaskState.UNSCHEDULABLE] == 1
    assert sum(counts.values()) == len(states)


def test_the_finished_counts_are_named_for_the_endings_they_count() -> None:
    names = {f.name for f in dataclasses.fields(sch.FinishCampaign)}
    assert names == {state.value for state in ENDED}
    tally = sch.FinishCampaign.tally([sch.TaskState.DONE, sch.TaskState.CANCELLED, sch.TaskState.DONE])
    assert (tally.done, tally.cancelled, tally.failed) == (2, 1, 0)


@pytest.mark.parametrize("state", list(sch.TaskState))
def test_a_phase_is_shown_only_while_the_task_is_leased(state: sch.TaskState) -> None:
    shown = _view(state).shown_phase
    assert shown == (Phase.MEASURING if state is sch.TaskState.LEASED else None)
