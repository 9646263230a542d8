"""Every script under benchmarks/ starts from a plain install: `--help` in a child that ignores
PYTHONPATH, run from the repository root, so a tests/ folder named after a package (tests/protocol)
cannot shadow the package the script imports (issue 23)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LIBRARIES = {
    "swarmlab.py",
    "peer_tools.py",
    "swarm_net.py",
    "swarm_fleet.py",
    "swarm_upkeep.py",
    "swarm_sybil.py",
    "bareloops.py",
    "pairs.py",
    "replication_fleet.py",
    "replication_claims.py",
}
"""Imported by the scripts, not run (swarm_sim.py's parts: its messages and walks, fleet, upkeep, Sybils;
harness_overhead.py's bare loops; replication_sim.py's fleet and its false claims; the in-process pairs of
llm_fidelity.py and llamacpp_timers.py)."""
SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if p.name not in LIBRARIES)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_script_starts(script: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-E", "-s", str(script.relative_to(ROOT)), "--help"],  # -E: no PYTHONPATH
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
    assert "Traceback" not in done.stderr


def test_the_libraries_import_the_packages_not_the_test_folders() -> None:
    code = (
        "import swarmlab, peer_tools, swarm_net, swarm_fleet, swarm_upkeep, swarm_sybil, replication_fleet, "
        "replication_claims, protocol, scheduler; "
        "print(protocol.__file__, scheduler.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-E", "-s", "-c", code],
        cwd=ROOT / "benchmarks",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert all(Path(f).parent.parent == ROOT for f in done.stdout.split()), done.stdout


def test_the_gpu_run_is_well_formed_and_says_why_it_measures_nothing_without_a_gpu(tmp_path: Path) -> None:
    """benchmarks/gpu_run.sh (issue 54), as far as it runs without a GPU: its scripts parse, a phase it
    does not know is a usage error (2), and a step says why it has nothing to measure (no CUDA device)
    and the phase still ends with its archive."""
    check = _gpu_run("check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "every script parses" in check.stdout
    wrong = _gpu_run("all")
    assert wrong.returncode == 2
    assert "usage: bash benchmarks/gpu_run.sh torch|onnx|llamacpp|llamagpu|check" in wrong.stderr
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OUT": str(tmp_path), "ONLY": "energy peaks",
           "GPU_SITE": str(tmp_path / "site"), "PYTHON": sys.executable}  # fmt: skip
    dry = _gpu_run("torch", env=env)
    assert dry.returncode == 0, dry.stderr
    if "no CUDA device" not in dry.stdout:
        pytest.skip("a CUDA device is here: benchmarks/gpu_run.sh measures it")
    assert "== energy: exit 1" in dry.stdout
    assert "== peaks: exit 0" in dry.stdout
    assert "fp32: unavailable (torch" in dry.stdout
    assert (tmp_path / "gpu-torch.tgz").stat().st_size > 0


def _gpu_run(phase: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = ["bash", "benchmarks/gpu_run.sh", phase]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
