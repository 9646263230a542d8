"""Exit codes of a finished campaign: 0 every placeable task completed, 1 something failed (or a
figure the campaign asked verified could not be: `Unverifiable`).

Exit 2 (a bad campaign file or configuration) is decided earlier, before anything runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import scheduler as sch
from node.cli.options import fail


def exit_code(states: Sequence[sch.TaskState], *, strict: bool) -> int:
    """The exit code of a finished campaign: 1 when a task failed, was cancelled, was unverifiable (its
    verified figure asked for could not be had: no quorum, or every peer that fits refused by
    verification) or never ended (and, with `strict`, when one was unschedulable), else 0.
    Unschedulable rows are reported either way."""
    fine = {sch.TaskState.DONE} | (set() if strict else {sch.TaskState.UNSCHEDULABLE})
    return 0 if all(state in fine for state in states) else 1


def fail_if_nobody(outcome: Any) -> None:
    """Exit 1 naming the cause when discovery found no worker and no task completed."""
    why = outcome.no_workers
    if why is not None and not any(t.state == sch.TaskState.DONE for t in outcome.tasks):
        fail(f"error: no worker found ({why.code.value}): {why.detail}", 1)


def exit_for(tasks: Sequence[sch.TaskView], *, strict: bool) -> None:
    """Exit with `exit_code` (one red line on stderr saying what did not complete and, where a figure
    asked verified could not be, the first such task's reason: the rule and the field), or return on 0.
    A task that completed but whose group's named reference gave no result (`Verified` unverifiable)
    is a verification asked and not obtained: exit 1 too."""
    held = [t for t in tasks if t.state == sch.TaskState.DONE and t.verified.startswith("unverifiable")]
    code = exit_code([t.state for t in tasks], strict=strict) or (1 if held else 0)
    if code:
        done = sum(1 for t in tasks if t.state == sch.TaskState.DONE)
        counts = ", ".join(
            f"{n} {state.value}"
            for state in (
                sch.TaskState.FAILED,
                sch.TaskState.CANCELLED,
                sch.TaskState.UNSCHEDULABLE,
                sch.TaskState.UNVERIFIABLE,
            )
            if (n := sum(1 for t in tasks if t.state == state))
        )
        unverifiable = next((t.detail for t in tasks if t.state == sch.TaskState.UNVERIFIABLE), "")
        unverifiable = unverifiable or next((t.verify_detail for t in held), "")
        why = f"; verification not obtained: {unverifiable}" if unverifiable else ""
        if held:
            said = f"{len(held)} unverifiable for want of their reference"
            counts = f"{counts}, {said}" if counts else said
        fail(f"error: {done} of {len(tasks)} tasks completed ({counts or 'the rest unfinished'}){why}", code)
