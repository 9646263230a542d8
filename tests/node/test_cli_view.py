"""The live terminal view: its last frame shows how every task ended."""

from __future__ import annotations

from rich.console import Console

import scheduler as sch
from node.cli.live import task_table
from protocol import ComputeUnit, ModelRef, Phase


def test_the_last_frame_of_a_finished_task_shows_every_run_done_and_its_median() -> None:
    model = ModelRef(name="m.onnx", size=1, sha256="0" * 64)
    done = sch.TaskView(
        task_id="campaign-1-job-0-0",
        job_index=0,
        unit=ComputeUnit.CPU_ONNX,
        model=model,
        state=sch.TaskState.DONE,
        device_name="vm-0",
        progress=sch.TaskProgress(phase=Phase.MEASURING, done=600, total=600, median_ms=1.25),
    )
    console = Console(record=True, width=200)
    console.print(task_table([done]))
    (row,) = [line for line in console.export_text().splitlines() if "vm-0" in line]
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells == ["0-0", "vm-0", "CPU (ONNX)", "done", "measuring", "600/600", "1.250"]
