"""`kit.cpuacct`: a test's figure is the CPU of every process it started, sessions of their own
included, whatever the machine's load (CPU time, not a timing: a busier machine only stretches the
wall time beside it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from kit.cpuacct import OUT_ENV, ROOT, report

TESTS = Path(__file__).resolve().parents[2]
SPIN_CPU_S = 0.4
TESTS_TEXT = f"""
import subprocess, sys, time

SPIN = "import time\\nwhile time.process_time() < {SPIN_CPU_S}: pass"

def test_spins_in_a_child_of_its_own_session():
    subprocess.run([sys.executable, "-c", SPIN], start_new_session=True, check=True)

def test_sleeps():
    time.sleep({SPIN_CPU_S})
"""


@pytest.mark.skipif(not os.access(ROOT, os.W_OK), reason=f"{ROOT} is not writable here (root and cgroup v1)")
def test_a_tests_cpu_is_its_whole_process_trees(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = pytester.path / "cpu"
    monkeypatch.setenv(OUT_ENV, str(out))
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    pytester.makepyfile(test_two=TESTS_TEXT)
    result = pytester.runpytest_subprocess("-p", "kit.cpuacct", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    (written,) = out.glob("*.json")
    rows = {test.split("::")[1]: (cpu, wall) for test, cpu, wall in json.loads(written.read_text())}
    spin, sleep = rows["test_spins_in_a_child_of_its_own_session"], rows["test_sleeps"]
    assert spin[0] >= SPIN_CPU_S  # the child's own CPU, counted though it is no child of pytest's session
    assert sleep[0] < SPIN_CPU_S / 2  # a sleep's wall time is not CPU
    assert sleep[1] >= SPIN_CPU_S
    assert "2 tests" in report(out, 5)
