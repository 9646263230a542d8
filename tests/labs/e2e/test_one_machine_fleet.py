"""Issue 41, scope 6 (e): the guide's advice for a fleet tried on one machine, as it writes it.

Workers on one machine share its cores: `examples/campaign.yaml`'s `devices: all` job offers every
worker its task at once. docs/guide/fleet.md (and README's fleet screen) says to add `max_inflight: 1`
to the campaign to measure one worker at a time; here that campaign runs on two workers (the embedded
swarm's `--workers 2`, the console script, a fresh HOME), and its event lines show each task offered
only after the one before it was accepted, both rows Complete. The same campaign without the line
offers both before either ends.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kit.procs import SCRIPT

ROOT = Path(__file__).resolve().parents[3]
GUIDE = (ROOT / "docs" / "guide" / "fleet.md").read_text()
README = (ROOT / "README.md").read_text()


def _events(tmp_path: Path, one_at_a_time: bool) -> list[dict[str, Any]]:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    campaign = tmp_path / "examples" / "campaign.yaml"
    text = campaign.read_text().replace("num_inference_runs: 200", "num_inference_runs: 40")
    campaign.write_text(text + ("max_inflight: 1\n" if one_at_a_time else ""))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SARK_", "XDG_"))}
    env["HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [*SCRIPT, "submit", "examples/campaign.yaml", "--workers", "2", "--events"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _cpu_tasks_at_once(events: list[dict[str, Any]]) -> int:
    """The most CPU job tasks (job 0) that were out at once: offered and not yet accepted."""
    out: set[str] = set()
    most = 0
    for event in events:
        task = str(event.get("task", ""))
        if "-job-0-" not in task:
            continue
        if event["event"] == "offered":
            out.add(task)
        elif event["event"] in ("accepted", "failed", "lost", "declined"):
            out.discard(task)
        most = max(most, len(out))
    return most


def test_the_guide_says_how_to_measure_one_worker_at_a_time_on_one_machine() -> None:
    assert "To measure one worker at a time, add `max_inflight: 1` to the campaign" in " ".join(GUIDE.split())
    assert "add `max_inflight: 1` to the campaign to measure one at a time" in " ".join(README.split())


@pytest.mark.parametrize("one_at_a_time", [True, False])
def test_max_inflight_1_measures_one_worker_at_a_time(tmp_path: Path, one_at_a_time: bool) -> None:
    events = _events(tmp_path, one_at_a_time)
    accepted = {e["task"] for e in events if e["event"] == "accepted" and "-job-0-" in e["task"]}
    assert len(accepted) == 2, events  # both workers measured the CPU job, each Complete
    assert _cpu_tasks_at_once(events) == (1 if one_at_a_time else 2), events
