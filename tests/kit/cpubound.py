"""A command bounded by the CPU its processes spend and by its progress, never by the wall clock.

A heavy command given a wall timeout fails for the machine's weather, not for what it does:
`sark-node info --no-calibrate` (every runtime imported and run on a tiny model, some 21 CPU-s) ran
past its test's 120 s beside the suite at load 9, and a test that lowers a model for ExecuTorch and
runs it past pytest's 300 s (a fresh clone's suite beside `kit.load 4`, 2026-11-30). What a test
must catch is a command that spins (more CPU than its work can take: `cpu_s`) or one that hangs (no
CPU spent by any of its processes for `idle_s`). A starved command still spends CPU, a hung one none,
whatever else runs: neither bound reads the load.

The command's processes are the tree under it (each live descendant, and what each has reaped), read
by psutil every `POLL_S`; a process that leaves the tree (reparented) is not counted
after it left, so a budget is a lower bound on what the command spent, never a higher one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import psutil

from kit import zygote

POLL_S: Final = 0.5
IDLE_S: Final = 120.0
"""No CPU spent by the command's processes for this long: it is hung (a starved one spends some at
every turn the kernel gives it, milliseconds a second at load 20 on 2 cores)."""


class OverBudget(AssertionError):
    """The command spun past its CPU budget or stopped spending CPU; what it printed is kept."""

    def __init__(self, argv: list[str], why: str, stdout: str, stderr: str) -> None:
        super().__init__(f"{' '.join(argv)[:200]}: {why}\n{stderr[-4000:]}")
        self.stdout, self.stderr = stdout, stderr


def children(pid: int) -> list[int]:
    """The live processes whose parent is `pid`."""
    with contextlib.suppress(psutil.NoSuchProcess):
        return [child.pid for child in psutil.Process(pid).children()]
    return []


def tree(root: int) -> dict[int, float]:
    """`root` and its live descendants: pid -> CPU seconds (its own and its reaped children's)."""
    found: dict[int, float] = {}
    with contextlib.suppress(psutil.NoSuchProcess):
        top = psutil.Process(root)
        for process in [top, *top.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                times = process.cpu_times()
                found[process.pid] = times.user + times.system + times.children_user + times.children_system
    return found


def run(
    argv: list[str],
    *,
    cpu_s: float,
    idle_s: float = IDLE_S,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` (forked from the kit's server where `zygote.forkable`), its output captured as text.

    Raises:
        OverBudget: its processes spent more than `cpu_s` CPU-seconds, or none for `idle_s`; the whole
            tree is killed first.
    """
    pipes: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "env": env, "cwd": cwd}
    child: Any = (
        zygote.popen(argv, **pipes) if zygote.forkable(argv) else subprocess.Popen(argv, text=True, **pipes)
    )
    out: list[tuple[str, str]] = []
    reader = threading.Thread(target=lambda: out.append(child.communicate()), daemon=True)
    reader.start()
    most, moved = 0.0, time.monotonic()
    while reader.is_alive():
        reader.join(POLL_S)
        processes = tree(child.pid)
        spent = sum(processes.values())
        if spent > most:
            most, moved = spent, time.monotonic()
        why = ""
        if spent > cpu_s:
            why = f"its processes spent {spent:.1f} CPU-s, over its budget of {cpu_s:g}"
        elif time.monotonic() - moved > idle_s:
            why = f"its processes spent no CPU for {idle_s:g} s (hung), {most:.1f} CPU-s in all"
        if why and reader.is_alive():
            for pid in processes:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            reader.join(30)
            stdout, stderr = out[0] if out else ("", "")
            raise OverBudget(argv, why, stdout, stderr)
    stdout, stderr = out[0]
    return subprocess.CompletedProcess(argv, child.wait(), stdout, stderr)
