"""Collecting the suite imports no torch where CUDA has no device: the checks that ask whether torch
sees a CUDA device (`kit.extras.no_cuda`, in the GPU lab's skip and the peak job's) look for the NVIDIA
driver's device file first. torch was a third of the imports each xdist worker made to collect the
suite; without it a collection took 0.77x the CPU (`pytest --collect-only`, 11.3 and 12.0 -> 9.1 and
8.9 CPU-s, interleaved, 2026-11-29)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[2]
IMPORTS = "labs.gpu.test_gpu", "unit.drivers.measuring.test_peakjob"


def test_the_cuda_checks_import_no_torch_without_an_nvidia_driver() -> None:
    if Path("/dev/nvidiactl").exists():
        pytest.skip("an NVIDIA driver is here: torch is asked whether it sees the device")
    code = f"import sys; import {', '.join(IMPORTS)}; print(sorted(m for m in sys.modules if m == 'torch'))"
    env = os.environ | {"PYTHONPATH": os.pathsep.join((str(TESTS), str(TESTS.parent)))}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=TESTS, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_the_unit_tiers_heavy_files_are_handed_out_before_its_others(request: pytest.FixtureRequest) -> None:
    """This run's own collection order, which `--dist loadfile` hands files out in (tests/conftest.py
    `_handed_out`): the labs, then the unit tier's files marked `heavy`, then its others; a heavy file
    last was the fast tier's tail."""
    unit = TESTS / "unit"
    order: dict[Path, tuple[bool, bool]] = {}
    for item in request.session.items:
        heavy = item.get_closest_marker("heavy") is not None
        order.setdefault(item.path, (item.path.is_relative_to(unit), not heavy))
    assert list(order.values()) == sorted(order.values())
