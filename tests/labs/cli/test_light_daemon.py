"""A joined worker is a light daemon: no runtime (torch, onnxruntime, transformers, matplotlib, numpy)
is ever loaded into the long-running `join` process; the device probe and the measurements run in
spawned children.

A real gate and a real `join` (the device detected and calibrated, no `--profile`) run as processes
in this venv, which has torch and transformers installed; the worker's /proc/PID/maps is read once it
is ready and again after it measured a task. The import set of the daemon's code is pinned in a fresh
interpreter. Figures (RSS) are benchmarks/footprint.py's, never asserted here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kit.extras import needs
from kit.procs import SARK, Lab

ROOT = Path(__file__).resolve().parents[3]
MODEL = ROOT / "examples" / "models" / "tiny-convnet.onnx"
# The native libraries of each runtime: torch (libtorch*, libc10), onnxruntime, transformers' stack
# (tokenizers, safetensors), matplotlib (ft2font), numpy (_multiarray_umath), OpenVINO, LiteRT,
# ExecuTorch (its pybindings), llama.cpp (xllamacpp's extension module).
MAPPED = re.compile(
    r"libtorch|libc10|libonnxruntime|onnxruntime_pybind|tokenizers\.|_safetensors_rust|ft2font|_multiarray_umath"
    r"|libopenvino|libLiteRt|_pywrap_litert|executorch/extension/pybindings|xllamacpp"
)
HEAVY_MODULES = (
    "torch", "onnxruntime", "transformers", "matplotlib", "numpy", "onnx", "tokenizers",
    "openvino", "ai_edge_litert", "executorch", "xllamacpp",
)  # fmt: skip
CAMPAIGN = f"""
name: light
processes: 1
model:
  path: {MODEL}
jobs:
  - compute_unit: CPU (ONNX)
    num_inference_runs: 20
    warmup_runs: 3
    load_runs: 1
    devices: all
"""


def mapped_runtimes(pid: int) -> list[str]:
    """The runtime libraries mapped into a process, by file name."""
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return sorted({Path(line.split()[-1]).name for line in maps if MAPPED.search(line)})


def test_the_probe_reads_a_mapped_runtime() -> None:
    """The maps reader sees a runtime where one is loaded (so an empty answer means something)."""
    code = "import onnxruntime, os, sys; print(os.getpid()); sys.stdout.flush(); sys.stdin.read()"
    with subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdin is not None
        pid = int(proc.stdout.readline())
        found = mapped_runtimes(pid)
        proc.stdin.close()
    assert any(name.startswith("onnxruntime_pybind") for name in found)


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/PID/maps")
@needs("torch")  # the runtime the worker must not map: installed, or the test means nothing
def test_a_joined_worker_maps_no_runtime_while_idle_or_after_a_task(lab: Lab, tmp_path: Path) -> None:
    submitter = subprocess.run(
        [*SARK, "id", "--data-dir", str(tmp_path / "submitter")], capture_output=True, text=True, check=True
    ).stdout.strip()
    gate = lab.gate().ready["addrs"][0]
    argv = [*SARK, "join", "--gate", gate, "--allow", submitter, "--listen", "/ip4/127.0.0.1/tcp/0"]
    argv += ["--record-ttl", str(lab.record_ttl), "--data-dir", str(tmp_path / "worker"), "--events"]
    worker = lab.start("worker", argv, fresh=True)  # its own memory maps are read
    worker.ready = worker.wait_event("ready", 180)

    listed = lab.peers([gate])
    assert "CPU (ONNX)" in listed[0]["units"]  # the probe child really ran onnxruntime ...
    assert "CPU (PyTorch)" in listed[0]["units"]  # ... and torch
    assert mapped_runtimes(worker.popen.pid) == []

    campaign = tmp_path / "light.yaml"
    campaign.write_text(CAMPAIGN)
    argv = [*SARK, "submit", str(campaign), "--gate", gate, "--data-dir", str(tmp_path / "submitter")]
    done = subprocess.run(
        [*argv, "--out", str(tmp_path / "results"), "--json", "--wait-peers", "1"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    tasks = json.loads(done.stdout.strip().splitlines()[-1])["tasks"]
    assert [t["state"] for t in tasks] == ["done"], tasks
    assert worker.popen.poll() is None
    assert mapped_runtimes(worker.popen.pid) == []  # the measuring child loaded them, not the daemon


def test_the_daemon_code_imports_no_runtime_in_a_fresh_interpreter() -> None:
    """What `join` imports to run (CLI, worker role, gate, p2p) loads no runtime and no numpy."""
    code = (
        "import json, sys\n"
        "from node.cli import main  # noqa\n"
        "import node.cli.swarm, node.worker.role, node.worker.runner, node.worker.targets, gate\n"
        "import drivers, drivers.measuring.harness, drivers.probe.apart, drivers.endpoint.task\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    modules = json.loads(out.stdout)
    assert "drivers.probe.apart" in modules  # the probe ran
    assert sorted(m for m in modules if m.split(".")[0] in HEAVY_MODULES) == []
    assert "drivers.measuring.child" not in modules  # the measuring child's side
    assert "drivers.probe.profile" not in modules  # the probe child's side
