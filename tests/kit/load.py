"""A load of the test's own: processes spinning on the cores, so that a lab meets the weather a
user's busy machine has instead of whatever the machine happens to be doing.

    with Load(4):        # four processes, each a core's worth of busy loop, for the block
        run_the_lab()

`python -m kit.load N SECONDS` (from tests/) holds the same load from a shell, to time a command
beside it (README's fast tier and full suite at load 4 were measured so). Each spinner is a plain
busy loop in its own process at the caller's priority, as another user's work would be; they stop
when the block ends, when the caller dies (each watches its parent), or after `most_s` at the latest.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import time
from types import TracebackType
from typing import Final

MOST_S: Final = 3600.0
"""No spinner outlives this, whatever happens to the caller."""


def _spin(parent: int, until: float) -> None:
    """Busy until `until` (monotonic) or until `parent` is gone, checking a few times a second."""
    while time.monotonic() < until:
        deadline = time.monotonic() + 0.25
        while time.monotonic() < deadline:
            pass
        if os.getppid() != parent:
            return


class Load:
    """`processes` busy-looping processes for the `with` block (see the module docstring)."""

    def __init__(self, processes: int, most_s: float = MOST_S) -> None:
        self.processes = processes
        self.most_s = most_s
        self._procs: list[multiprocessing.process.BaseProcess] = []

    @property
    def pids(self) -> list[int]:
        """The spinners' process ids (empty outside the block)."""
        return [p.pid for p in self._procs if p.pid is not None]

    def __enter__(self) -> Load:
        context = multiprocessing.get_context("spawn")
        until = time.monotonic() + self.most_s
        for _ in range(self.processes):
            proc = context.Process(target=_spin, args=(os.getpid(), until), daemon=True)
            proc.start()
            self._procs.append(proc)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        for proc in self._procs:
            proc.terminate()
        for proc in self._procs:
            proc.join(10)
        self._procs.clear()


def main(argv: list[str]) -> None:
    """`N SECONDS`: hold a load of N spinners for SECONDS (or until interrupted)."""
    processes, seconds = int(argv[0]), float(argv[1])
    with Load(processes, most_s=seconds), contextlib.suppress(KeyboardInterrupt):
        time.sleep(seconds)


if __name__ == "__main__":
    main(sys.argv[1:])
