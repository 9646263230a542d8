"""The live terminal view: its last frame shows how every task ended, it reads at 80 columns, and
`submit` names its campaign when it starts."""

from __future__ import annotations

import io
import os
from pathlib import Path

from kit import zygote
from kit.procs import SARK
from rich.console import Console

import scheduler as sch
from node.cli.live import LiveView, task_table
from protocol import ComputeUnit, ModelRef, Phase

MODEL = ModelRef(name="m.onnx", size=1, sha256="0" * 64)


def _task(state: sch.TaskState, unit: ComputeUnit, device: str = "vm-0") -> sch.TaskView:
    return sch.TaskView(
        task_id="campaign-17954409605958-job-0-0",
        job_index=0,
        unit=unit,
        model=MODEL,
        state=state,
        device_name=device,
        progress=sch.TaskProgress(phase=Phase.MEASURING, done=600, total=600, median_ms=19057.782),
    )


def test_the_last_frame_of_a_finished_task_shows_every_run_done_and_its_median() -> None:
    console = Console(record=True, width=200)
    console.print(task_table([_task(sch.TaskState.DONE, ComputeUnit.CPU_ONNX)]))
    (row,) = [line for line in console.export_text().splitlines() if "vm-0" in line]
    # a finished task shows no phase: it is done, not "measuring"
    assert row.split() == ["0-0", "vm-0", "CPU", "(ONNX)", "done", "600/600", "19057.782"]


def test_the_live_view_reads_at_80_columns() -> None:
    tasks = [
        _task(sch.TaskState.LEASED, ComputeUnit.CPU_TORCH),
        _task(sch.TaskState.UNSCHEDULABLE, ComputeUnit.GPU_TORCH, device=""),
    ]
    console = Console(record=True, width=80)
    console.print(task_table(tasks))
    text = console.export_text()
    assert "…" not in text
    assert "CPU (PyTorch)" in text
    assert "unschedulable" in text
    assert "measuring" in text  # the running task's phase


def test_two_workers_of_one_hostname_read_apart_at_80_columns() -> None:
    ids = (
        "12D3KooWGzBXRwmwgv8WXnbQqbu9KvaNmSwgGAVjRkBYCxcW35MA",
        "12D3KooWGzBXRwmwgv8WXnbQqbu9KvaNmSwgGAVjRkBYCxcXy7Qp2",
    )
    tasks = [_task(sch.TaskState.LEASED, ComputeUnit.CPU_ONNX, device="vm").with_(peer_id=i) for i in ids]
    console = Console(record=True, width=80)
    console.print(task_table(tasks))
    text = console.export_text()
    assert "vm …cW35MA" in text
    assert "vm …Xy7Qp2" in text
    alone = task_table(tasks[:1])  # one worker of that name: the name alone
    console = Console(record=True, width=80)
    console.print(alone)
    assert "…" not in console.export_text()


def test_submit_names_its_campaign_when_it_starts() -> None:
    view = LiveView(enabled=False)
    out = io.StringIO()
    view._console = Console(file=out, width=80)  # the view's stderr console, read back
    view.event("uploads", campaign="c-1", bytes=3)
    view.event("campaign", campaign="campaign-17954409605958", submitter="12D3Koo")
    assert (
        out.getvalue()
        == "campaign campaign-17954409605958 running (sark-node status campaign-17954409605958)\n"
    )
    machine = LiveView(enabled=False, announce=False)  # --json: stdout's closing object names it
    silent = io.StringIO()
    machine._console = Console(file=silent, width=80)
    machine.event("campaign", campaign="campaign-17954409605958", submitter="12D3Koo")
    assert silent.getvalue() == ""


def test_status_tells_campaigns_apart_at_80_columns(tmp_path: Path) -> None:
    """`sark-node status` as a user runs it, in a terminal 80 columns wide: every id whole."""
    from node.datadir import DataDir
    from node.submitter.store import CampaignRecord, CampaignStatus, CampaignStore

    ids = [f"campaign-179544160797{n:02d}" for n in (58, 59)]  # the same up to their last digits
    store = CampaignStore(DataDir(tmp_path).campaigns)
    for cid in ids:
        record = CampaignRecord(
            cid,
            "smollm-summaries",
            "2026-11-23T13:46:00Z",
            "llm.yaml",
            "",
            {},
            None,
            CampaignStatus.FINISHED,
            "",
        )
        store.add_campaign(record)
    env = {**os.environ, "COLUMNS": "80"}
    done = zygote.run(
        [*SARK, "status", "--data-dir", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "…" not in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) <= 80
    for cid in ids:
        assert cid in done.stdout
    assert "smollm-summaries" in done.stdout
