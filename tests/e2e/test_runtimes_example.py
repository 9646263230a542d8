"""Issue 39's acceptance: README's runtimes command (`sark-node submit examples/runtimes.yaml`, after
installing the openvino, litert and executorch extras, and executorch without its dependencies) on
the embedded swarm gives a Complete row on every CPU unit of the new runtimes with its placement
share, and the OpenVINO row carries its largest output difference against the ONNX Runtime row of
the same model."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
from pathlib import Path

from lab.procs import SCRIPT, user_env

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_readmes_runtimes_command_gives_a_complete_row_per_runtime_with_its_share(tmp_path: Path) -> None:
    lines = README.splitlines()
    command = lines[lines.index("<!-- runtimes-command -->") + 2]
    assert command.endswith(".venv/bin/sark-node submit examples/runtimes.yaml")
    assert "pip install -q -e '.[openvino,litert,executorch]'" in command  # this venv has them: dev, llm
    assert "pip install -q --no-deps executorch==1.5.1" in command  # and the test command's line
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = user_env(tmp_path / "home")
    done = subprocess.run(
        [*SCRIPT, "submit", "examples/runtimes.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"campaign (campaign-\d+)", done.stdout)
    assert found is not None, done.stdout
    with (tmp_path / "sark-results" / found.group(1) / "results.csv").open(newline="") as f:
        rows = {r["ComputeUnits"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"CPU (ONNX)", "CPU (OpenVINO)", "CPU (LiteRT)", "CPU (ExecuTorch)"}
    assert {u: r["Status"] for u, r in rows.items()} == dict.fromkeys(rows, "Complete")
    assert rows["CPU (OpenVINO)"]["Providers"] == "CPU 100%"
    assert rows["CPU (LiteRT)"]["Providers"] == "XNNPACK 100%"
    assert rows["CPU (ExecuTorch)"]["Providers"] == "XNNPACK 100%"
    assert rows["CPU (ONNX)"]["OutputMaxDiff"] == "0 (reference)"
    diff, against = rows["CPU (OpenVINO)"]["OutputMaxDiff"].split(" vs ")
    assert against == "CPU (ONNX)"
    assert float(diff) < 1e-3  # the same network on two runtimes: fp32 rounding apart, not another answer
