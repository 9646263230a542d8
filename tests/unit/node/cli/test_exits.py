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
