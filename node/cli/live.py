"""The live view of `submit`: a row per task, redrawn on stderr as the campaign's events arrive."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import scheduler as sch


class LiveView:
    """A row per task (device, unit, phase, progress, median so far), redrawn as events arrive."""

    def __init__(self, *, enabled: bool, announce: bool = True) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.table import Table

        self._console = Console(stderr=True, highlight=False)
        self._live = (
            Live(Table(), console=self._console, refresh_per_second=4, transient=False) if enabled else None
        )
        self._announce = announce  # False under --json: stdout's closing object names the campaign
        self._resumed = False  # a resume said what it took over: no "running" line after it
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

    def event(self, event: str, /, **fields: Any) -> None:
        """An event sink (`node.events.EventSink`) that says the campaign's id once it starts, on stderr
        above the live view, so that `status`, `cancel` or `--resume` can name it while it runs; a
        resumed campaign says instead what the resume took over (`resumed_line`); a job that waits for
        a peer's next challenge says so once (`awaiting`)."""
        from protocol import for_rich

        if event == "awaiting":  # a job waits for a re-challenge: said once, when it begins to wait
            self._console.print(
                f"job {fields.get('job')}: {for_rich(str(fields.get('detail', '')))}", soft_wrap=True
            )
            return
        if event not in ("campaign", "resumed") or not self._announce or self._resumed:
            return

        campaign = for_rich(str(fields.get("campaign", "")))
        if event == "resumed":
            self._resumed = True
            self._console.print(resumed_line(campaign, fields), soft_wrap=True)
            return
        self._console.print(
            f"campaign [bold]{campaign}[/] running (sark-node status {campaign})", soft_wrap=True
        )

    def update(self, tasks: Sequence[sch.TaskView]) -> None:
        """Redraw the table, at most five times a second."""
        self._tasks = tasks
        now = time.monotonic()
        if self._live is None or now - self._last < 0.2:
            return
        self._last = now
        self._live.update(task_table(tasks))


def resumed_line(campaign: str, counts: dict[str, Any]) -> str:
    """What a resume took over, in words (`node.submitter.run.resumed_counts`)."""
    parts = [
        f"{counts.get('done', 0)} task(s) already done",
        f"{counts.get('reclaiming', 0)} lease(s) to reclaim from their workers",
        f"{counts.get('reoffered', 0) + counts.get('requeued', 0)} task(s) queued again",
    ]
    if counts.get("ended"):
        parts.append(f"{counts['ended']} ended otherwise (failed, cancelled, unschedulable or unverifiable)")
    return f"campaign [bold]{campaign}[/] resumed: {', '.join(parts)} (sark-node status {campaign})"


def task_table(tasks: Sequence[sch.TaskView]) -> Any:
    """The live view's frame (a rich Table): a row per task (device, unit, state, phase, progress, median)."""
    from rich import box
    from rich.table import Table

    from protocol import for_rich

    # no rules between columns, one space of padding: every cell but the device reads whole at 80 columns
    table = Table(title="tasks", box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    for name in ("task", "device", "unit", "state", "phase", "progress", "median ms"):
        table.add_column(name, no_wrap=name != "device", justify="right" if name == "median ms" else "left")
    for t in tasks:
        p = t.progress
        table.add_row(
            for_rich(t.task_id.rsplit("-job-", 1)[-1]),
            for_rich(worker_cell(t, tasks)),
            t.shown_unit,
            t.state.value,
            "awaits a challenge" if t.awaits else t.shown_phase.value if t.shown_phase else "",
            f"{p.done}/{p.total}" if p.total else "",
            f"{p.median_ms:.3f}" if p.median_ms is not None else "",
        )
    return table


def worker_cell(task: sch.TaskView, tasks: Sequence[sch.TaskView]) -> str:
    """A task's device as people tell it apart: its name, with the end of its worker's id where
    another worker carries the same name (identical boards with one hostname), or the id's end alone."""
    from node.cli.console import id_tail

    if not task.peer_id:
        return task.device_name or ""
    peers = {t.peer_id for t in tasks if t.peer_id and t.device_name == task.device_name}
    if task.device_name and len(peers) < 2:
        return task.device_name
    return f"{task.device_name} {id_tail(task.peer_id)}".strip()
