"""Issue 39, scope 3: no silent fallback. A LiteRT model with an op XNNPACK does not take (CUMSUM) runs
partly on LiteRT's built-in kernels; with the default `placement_share` (all nodes) the strict job fails
with reason `fallback` and the share, and the lenient job's row says `fallback` with the share and is
kept out of the matrix: in results.csv, on the terminal (`submit`'s output) and in report.html."""

from __future__ import annotations

import csv
import re
import subprocess
from pathlib import Path

from lab.procs import SCRIPT, user_env

from drivers.litemodels import write_mlp

CAMPAIGN = """name: fallback
model:
  path: models/cumsum-tail.tflite
jobs:
  - compute_unit: CPU (LiteRT)
    num_inference_runs: 10
    warmup_runs: 2
  - compute_unit: CPU (LiteRT)
    num_inference_runs: 10
    warmup_runs: 2
    strict_placement: false
"""
SHARES = "XNNPACK 86%, builtin 14%"


def test_a_forced_fallback_is_marked_with_its_share_everywhere(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    write_mlp(tmp_path / "models" / "cumsum-tail.tflite", unsupported_tail=True)
    (tmp_path / "campaign.yaml").write_text(CAMPAIGN)
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
    assert "86% of nodes on XNNPACK (least 100%)" in strict["Detail"]
    assert (lenient["Status"], lenient["Fallback"]) == ("Complete", "True")
    assert lenient["Providers"] == f"fallback: {SHARES}"
    terminal = " ".join(done.stdout.split())  # the matrix's cells wrap
    assert "86% of nodes on XNNPACK" in terminal
    assert f"fallback: {SHARES}".replace(" ", "") in terminal.replace(" ", "")
    html = (folder / "report.html").read_text()
    assert f"fallback: {SHARES}" in html
    assert "86% of nodes on XNNPACK" in html
