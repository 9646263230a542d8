"""A load of the test's own: processes spinning on the cores, so that a lab meets the weather a
user's busy machine has instead of whatever the machine happens to be doing.

    with Load(4):        # four processes, each a core's worth of busy loop, for the block
        run_the_lab()

    with Bursts(4):      # the same four, each busy and idle in turns of a few hundred ms
        run_the_lab()

    with Load(4, cores=own_core()):   # four on one core, the lab's processes there with them
        run_the_lab()

`python -m kit.load N SECONDS [bursty]` (from tests/) holds the same load from a shell, to time a
command beside it (README's fast tier and full suite at load 4 were measured so). `Bursts` is the
weather of a machine shared with other sessions' work (test runs, builds): a spell of every core
busy, then a spell of none, each of `ON_S`/`OFF_S` on average, drawn anew each time, so that a
measurement of a few hundred ms is hit whole, in part or not at all. Each spinner is a plain
busy loop in its own process at the caller's priority, as another user's work would be; they stop
when the block ends, when the caller dies (each watches its parent), or after `most_s` at the latest.

`cores`: the caller's thread and everything it starts in the block (its spinners, the lab's processes,
the kit's forked nodes: `kit.zygote` gives a child its caller's affinity) run on those cores alone,
with every thread of the processes `joining` names (already running, a lab's model server) for the
block.
A lab's weather is then its own: four spinners on one core press the lab's processes as eight on
two did (each spinner a session of its own: below), and the suite's other tests run on the other
core beside it instead of under it (eight spinners on both cores took some 270 of a suite's 2,760
CPU-seconds, docs/testing.md). `own_core()` is one core of this process's, a
different one for each xdist worker where there are enough.

Each spinner is a session of its own. Linux's autogroup (on where
`/proc/sys/kernel/sched_autogroup_enabled` is 1, as on the machines this suite runs on) shares a core
among sessions first, then among a session's processes, and every node `kit.procs` starts is a
session of its own too. With the spinners in the caller's session (before 2026-11-30) a process of
that session (a command the test runs with `subprocess.run`) met the four one by one and had a fifth
of the core, but a lab node met them as one competitor and had half: a busy loop beside
`Load(4, cores={0})` had 0.20 of the core in the caller's session and 0.50 in its own, and a 2.5x
liar's challenge, run by a node, passed against a calibration the recipe took in the caller's
session (tests/labs/e2e/test_verify_example.py). Now every process meets each spinner as one
competitor; the caller's session, all its processes together (an xdist run's workers and what they
start without a session of their own), is one more.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Final

MOST_S: Final = 3600.0
"""No spinner outlives this, whatever happens to the caller."""
ON_S: Final = 0.4
"""A burst's mean length (`Bursts`): drawn uniformly from half to one and a half times it."""
OFF_S: Final = 0.4
"""A quiet spell's mean length between bursts, drawn alike."""


def _spin(parent: int, until: float) -> None:
    """Busy until `until` (monotonic) or until `parent` is gone, checking a few times a second, in a
    session of its own (another user's work: the kernel's autogroup shares a core among sessions)."""
    os.setsid()
    while time.monotonic() < until:
        deadline = time.monotonic() + 0.25
        while time.monotonic() < deadline:
            pass
        if os.getppid() != parent:
            return


def _burst(parent: int, until: float, on_s: float, off_s: float, seed: int) -> None:
    """Busy for a drawn spell, idle for a drawn spell, in turns, until `until` or `parent` is gone.
    Every spinner of one `Bursts` draws the same spells (one seed): the cores are busy together."""
    os.setsid()
    draw = random.Random(seed)
    while time.monotonic() < until:
        deadline = time.monotonic() + on_s * draw.uniform(0.5, 1.5)
        while time.monotonic() < deadline:
            pass
        time.sleep(off_s * draw.uniform(0.5, 1.5))
        if os.getppid() != parent:
            return


def _move(pids: Sequence[int], cores: set[int]) -> dict[int, set[int]]:
    """Every thread of `pids` (processes already running: a lab's server) onto `cores`; each thread's
    cores before, to give back. A thread they start later inherits its starter's cores."""
    before = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError):  # a thread that ended meanwhile
                thread = int(task.name)
                before[thread] = os.sched_getaffinity(thread)
                os.sched_setaffinity(thread, cores)
    return before


class Load:
    """`processes` busy-looping processes for the `with` block (see the module docstring)."""

    def __init__(
        self,
        processes: int,
        most_s: float = MOST_S,
        cores: set[int] | None = None,
        joining: Sequence[int] = (),
    ) -> None:
        self.processes = processes
        self.most_s = most_s
        self.cores = cores
        self.joining = joining
        self._procs: list[multiprocessing.process.BaseProcess] = []
        self._before: set[int] | None = None
        self._threads: dict[int, set[int]] = {}

    @property
    def pids(self) -> list[int]:
        """The spinners' process ids (empty outside the block)."""
        return [p.pid for p in self._procs if p.pid is not None]

    def __enter__(self) -> Load:
        if self.cores is not None:
            self._before = os.sched_getaffinity(0)
            os.sched_setaffinity(0, self.cores)  # this thread's: what it starts inherits it
            self._threads = _move(self.joining, self.cores)
        context = multiprocessing.get_context("spawn")
        until = time.monotonic() + self.most_s
        for _ in range(self.processes):
            proc = context.Process(target=self._target, args=self._args(os.getpid(), until), daemon=True)
            proc.start()
            self._procs.append(proc)
        return self

    _target = staticmethod(_spin)

    def _args(self, parent: int, until: float) -> tuple[object, ...]:
        return parent, until

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        for proc in self._procs:
            proc.terminate()
        for proc in self._procs:
            proc.join(10)
        self._procs.clear()
        if self._before is not None:
            os.sched_setaffinity(0, self._before)
            self._before = None
        for thread, cores in self._threads.items():
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(thread, cores)
        self._threads = {}


class Bursts(Load):
    """`processes` spinners busy together in bursts (`ON_S` on, `OFF_S` off on average, drawn): the
    load of a machine shared with other sessions' bursty work (see the module docstring)."""

    def __init__(
        self, processes: int, most_s: float = MOST_S, on_s: float = ON_S, off_s: float = OFF_S, seed: int = 0
    ) -> None:
        super().__init__(processes, most_s)
        self.on_s, self.off_s, self.seed = on_s, off_s, seed

    _target = staticmethod(_burst)

    def _args(self, parent: int, until: float) -> tuple[object, ...]:
        return parent, until, self.on_s, self.off_s, self.seed


def own_core() -> set[int]:
    """One core of this process's: the xdist worker's index-th (gw0 the first, gw1 the second, ...,
    round the cores), so that two labs with loads of their own on two workers take two cores."""
    cores = sorted(os.sched_getaffinity(0))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    return {cores[index % len(cores)]}


def main(argv: list[str]) -> None:
    """`N SECONDS [bursty]`: hold a load of N spinners (bursting) for SECONDS (or until interrupted)."""
    processes, seconds = int(argv[0]), float(argv[1])
    kind = Bursts if argv[2:] == ["bursty"] else Load
    with kind(processes, most_s=seconds), contextlib.suppress(KeyboardInterrupt):
        time.sleep(seconds)


if __name__ == "__main__":
    main(sys.argv[1:])
