"""The exit code of a finished campaign, from its tasks' states (the end-to-end codes are in
tests/labs/e2e/test_contain.py and tests/labs/e2e/test_campaign.py)."""

from __future__ import annotations

import pytest

from node.cli.exits import exit_code
from scheduler import TaskState

DONE, FAILED, CANCELLED, UNSCHEDULABLE, UNVERIFIABLE, LEASED = (
    TaskState.DONE,
    TaskState.FAILED,
    TaskState.CANCELLED,
    TaskState.UNSCHEDULABLE,
    TaskState.UNVERIFIABLE,
    TaskState.LEASED,
)


@pytest.mark.parametrize(
    ("states", "plain", "strict"),
    [
        ([DONE, DONE], 0, 0),
        ([DONE, UNSCHEDULABLE], 0, 1),
        ([UNSCHEDULABLE], 0, 1),
        ([DONE, FAILED], 1, 1),
        ([DONE, CANCELLED], 1, 1),
        ([DONE, LEASED], 1, 1),  # a task that never ended is not a success
        ([DONE, UNVERIFIABLE], 1, 1),  # a figure asked verified that could not be is not either
        ([], 0, 0),
    ],
)
def test_exit_code(states: list[TaskState], plain: int, strict: int) -> None:
    assert exit_code(states, strict=False) == plain
    assert exit_code(states, strict=True) == strict


def test_a_completed_task_whose_reference_gave_no_result_exits_1_naming_the_rule(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 50, scope 4: the rows completed but their group's named reference gave no result
    (`Verified` unverifiable): a verification asked and not obtained, one line with the reason."""
    import typer
    from kit.scheduler_harness import MODEL

    from node.cli.exits import exit_for
    from protocol import ComputeUnit
    from scheduler import TaskView

    why = "verify.reference: the reference R did not report (lost); verify: {reference_fallback: allow} ..."
    task = TaskView(task_id="t", job_index=0, unit=ComputeUnit("CPU (ONNX)"), model=MODEL, state=DONE)
    held = [task.with_(verified="unverifiable", verify_detail=why), task.with_(task_id="u")]
    with pytest.raises(typer.Exit) as ended:
        exit_for(held, strict=False)
    assert ended.value.exit_code == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "1 unverifiable for want of their reference" in line
    assert line.endswith(f"verification not obtained: {why}")
    exit_for([task], strict=False)  # completed and nothing held: returns, exit 0
