"""`kit.cpubound`: a command held to the CPU its processes spend and to its progress, not to the clock.

A spinning command is stopped past its CPU budget, also when the spinning is a grandchild's; a
sleeping one is stopped as hung once none of its processes spent CPU for the idle window; one that
does its work beside four spinners on its core (`kit.load`) finishes, slower, and is not stopped. No
timing of this machine is asserted: each outcome is the reason the command ended.
"""

from __future__ import annotations

import sys

import pytest
from kit import cpubound
from kit.load import Load, own_core

SPIN = "while True: pass"
WORK = "sum(i * i for i in range(3_000_000))"  # about a CPU-second


def test_a_spinning_command_is_stopped_past_its_budget() -> None:
    with pytest.raises(cpubound.OverBudget, match="over its budget of 1"):
        cpubound.run([sys.executable, "-c", SPIN], cpu_s=1.0)


def test_a_grandchilds_spinning_counts_to_the_command() -> None:
    """The parent only waits; its child spins: the tree's CPU is what is held to the budget."""
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {SPIN!r}])"
    with pytest.raises(cpubound.OverBudget, match="over its budget of 1"):
        cpubound.run([sys.executable, "-c", parent], cpu_s=1.0)


def test_a_sleeping_command_is_stopped_as_hung() -> None:
    with pytest.raises(cpubound.OverBudget, match="spent no CPU for 2 s"):
        cpubound.run([sys.executable, "-c", "import time; time.sleep(600)"], cpu_s=60.0, idle_s=2.0)


def test_a_command_starved_by_four_spinners_on_its_core_finishes() -> None:
    with Load(4, cores=own_core()):
        done = cpubound.run([sys.executable, "-c", f"print({WORK})"], cpu_s=30.0, idle_s=10.0)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 0
