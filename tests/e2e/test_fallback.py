"""Issue 39, scope 3: no silent fallback. A model with an op XNNPACK does not take runs partly on the
runtime's own CPU kernels: LiteRT (CUMSUM on its built-in kernels) and ExecuTorch (a cumsum left to
its portable kernels by the XNNPACK partitioner). With the default `placement_share` (all nodes) the
strict job fails with reason `fallback` and the share, and the lenient job's row says `fallback` with
the share and is kept out of the matrix: in results.csv, on the terminal (`submit`'s output) and in
report.html."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from lab.procs import SCRIPT, user_env

from drivers.litemodels import write_mlp

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = """name: fallback
processes: {processes}
model:
  path: models/{model}
jobs:
  - compute_unit: {unit}
    num_inference_runs: 10
    warmup_runs: 2
  - compute_unit: {unit}
    num_inference_runs: 10
    warmup_runs: 2
    strict_placement: false
"""

# What each runtime's C++ prints on fd 2 when it starts (drivers.notices keeps it off the terminal).
NOTICES = ("Created TensorFlow Lite XNNPACK delegate", "[cpuinfo_utils.cpp:", "[threadpool.cpp:")


def _litert(models: Path) -> str:
    write_mlp(models / "cumsum-tail.tflite", unsupported_tail=True)
    return "cumsum-tail.tflite"


def _executorch(models: Path) -> str:
    """Lowered in a child (`drivers.etmodels`): the export toolchain stays out of this process."""
    build = [sys.executable, "-m", "drivers.etmodels", str(models), "cumsum-tail"]
    done = subprocess.run(build, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    return "cumsum-tail.pte"


@pytest.mark.parametrize(
    ("unit", "build", "processes", "delegated", "shares"),
    [
        ("CPU (LiteRT)", _litert, 3, "86% of nodes on XNNPACK", "XNNPACK 86%, builtin 14%"),
        ("CPU (ExecuTorch)", _executorch, 1, "75% of nodes on XNNPACK", "XNNPACK 75%, portable 25%"),
    ],
    ids=["litert", "executorch"],
)
def test_a_forced_fallback_is_marked_with_its_share_everywhere(
    tmp_path: Path, unit: str, build: Callable[[Path], str], processes: int, delegated: str, shares: str
) -> None:
    (tmp_path / "models").mkdir()
    model = build(tmp_path / "models")
    campaign = CAMPAIGN.format(processes=processes, model=model, unit=unit)
    (tmp_path / "campaign.yaml").write_text(campaign)
    env = user_env(tmp_path / "home")
    done = subprocess.run(
        [*SCRIPT, "submit", "campaign.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    found = re.search(r"campaign (campaign-\d+)", done.stdout)
    assert found is not None, done.stdout + done.stderr
    folder = tmp_path / "sark-results" / found.group(1)
    with (folder / "results.csv").open(newline="") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: r["JobId"])
    strict, lenient = rows
    assert (strict["Status"], strict["FailureReason"]) == ("Failed", "fallback")
    assert f"{delegated} (least 100%)" in strict["Detail"]
    assert (lenient["Status"], lenient["Fallback"]) == ("Complete", "True")
    assert lenient["Providers"] == f"fallback: {shares}"
    terminal = " ".join(done.stdout.split())  # the matrix's cells wrap
    assert delegated in terminal
    assert f"fallback: {shares}".replace(" ", "") in terminal.replace(" ", "")
    html = (folder / "report.html").read_text()
    assert f"fallback: {shares}" in html
    assert delegated in html
    assert not any(note in done.stderr for note in NOTICES), done.stderr
