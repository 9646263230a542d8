"""The live view of `submit`: a row per task, redrawn on stderr as the campaign's events arrive."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import scheduler as sch


class LiveView:
    """A row per task (device, unit, phase, progress, median so far), redrawn as events arrive."""

    def __init__(self, *, enabled: bool) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.table import Table

        self._live = (
            Live(Table(), console=Console(stderr=True), refresh_per_second=4, transient=False)
            if enabled
            else None
        )
        self._last = 0.0
        self._tasks: Sequence[sch.TaskView] = ()

    def __enter__(self) -> LiveView:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(task_table(self._tasks))  # the last frame shows how every task ended
            self._live.__exit__(None, None, None)

    def update(self, tasks: Sequence[sch.TaskView]) -> None:
        """Redraw the table, at most five times a second."""
        self._tasks = tasks
        now = time.monotonic()
        if self._live is None or now - self._last < 0.2:
            return
        self._last = now
        self._live.update(task_table(tasks))


def task_table(tasks: Sequence[sch.TaskView]) -> Any:
    """The live view's frame (a rich Table): a row per task (device, unit, state, phase, progress, median)."""
    from rich.table import Table

    from protocol import for_rich

    table = Table(title="tasks")
    for name in ("task", "device", "unit", "state", "phase", "progress", "median ms"):
        table.add_column(name)
    for t in tasks:
        p = t.progress
        table.add_row(
            for_rich(t.task_id.rsplit("-job-", 1)[-1]),
            for_rich(t.device_name or (t.peer_id or "")[-8:]),
            t.unit.value,
            t.state.value,
            p.phase.value if p.phase else "",
            f"{p.done}/{p.total}" if p.total else "",
            f"{p.median_ms:.3f}" if p.median_ms is not None else "",
        )
    return table
