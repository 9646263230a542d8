"""The node's trio clock: its seconds are the ones the node ran or slept, not the ones it waited for a CPU.

Every node command runs under `OwnClock` (`node.cli.options.run`), so every timeout the node keeps
(a discovery look's 5 s, a probe's slot, a lease's silence, a walk's hop, libp2p's own) counts the
node's own seconds. On a busy laptop the scheduler can leave a runnable process waiting: what the
machine took from the process is not time the process had. On Linux the kernel counts it per thread,
the `run_delay` of `/proc/self/task/TID/schedstat` (the nanoseconds the thread was runnable on a run
queue and not running; sleeping in epoll is not counted), and this clock is the monotonic clock less
the run delay of the thread that runs trio. Idle, the two are the same clock.

Measured on 2026-11-29 (the Sybil-networks lab, tests/labs/swarm/test_sybil_networks.py, with its
`submit` at nice 10 on one core beside two spinners while it looked, the machine at load 7-10): on the
monotonic clock its 5 s look ran out before its walks and handshakes reached the honest level, exit 1,
"no worker found (no_answer): 20 peer(s) advertise any unit, but none answered", 2 runs of 2; on this
clock it found both workers 2 runs of 3 (23 s and 31 s of real time). In the third the workers were
starved too and did not answer within the look's own 5 s: the clock gives back this process's waits,
not its peers'. Not in the suite (a run that starves the machine's other labs too): the mechanism is
pinned by tests/unit/node/test_owntime.py (a timeout lasts its seconds plus the waits counted out; a
process sharing its core with a spinner gets them back).

What it does not stretch: the figures the node measures. A challenge's round trip and its compute time
are timed on `real_time` (`node.submitter.challenge`): a submitter's wait for a CPU may only make a
worker look slower, never quicker. The measuring children and the endpoint clients run their
own clocks in their own processes.

The cheater's view: a peer cannot make this process wait for a CPU; it can make it work (the limits on
what a stranger may ask for bound that), and work is counted as the node's own time. Where the kernel
does not say (macOS, a kernel without schedstats), the clock is the monotonic clock, and `OwnClock.counts`
says so.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Final

import trio

REREAD_S: Final = 0.001
"""The run delay is read again once the monotonic clock moved this far (trio asks for the time several
times an iteration; one read costs a few microseconds)."""


def run_delay_reader() -> Callable[[], float] | None:
    """A reader of the calling thread's run delay in seconds, or None where the kernel does not say.

    The file is opened at each read (a few microseconds, at most once per `REREAD_S`): no descriptor is
    held past a run. A read that fails later (the thread is gone) gives the last value again."""
    path = f"/proc/self/task/{threading.get_native_id()}/schedstat"
    try:
        last = _run_delay(path)
    except (OSError, ValueError, IndexError):
        return None

    def read() -> float:
        nonlocal last
        with contextlib.suppress(OSError, ValueError, IndexError):
            last = _run_delay(path)
        return last

    return read


def _run_delay(path: str) -> float:
    """The second field of a schedstat file (nanoseconds runnable and waiting), in seconds."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return int(os.read(fd, 128).split()[1]) / 1e9
    finally:
        os.close(fd)


class OwnClock(trio.abc.Clock):
    """The monotonic clock less the seconds the thread running trio waited, runnable, for a CPU.

    `delay` reads that wait (default: `run_delay_reader` of the thread that starts the clock) and `now`
    the monotonic clock; both are for tests. The time never goes back: a reading that would is held.
    """

    def __init__(
        self, delay: Callable[[], float] | None = None, now: Callable[[], float] = time.perf_counter
    ) -> None:
        self._delay, self._now = delay, now
        self._offset = random.uniform(10_000, 200_000)  # as trio's own: a clock compared with another shows
        self._waited, self._read_at, self._last = 0.0, -float("inf"), -float("inf")
        self.counts = delay is not None
        """Whether the waits are counted out (False: the kernel does not say; the monotonic clock)."""

    def start_clock(self) -> None:
        if self._delay is None:
            self._delay = run_delay_reader()
            self.counts = self._delay is not None

    def current_time(self) -> float:
        now = self._now()
        if self._delay is not None and now - self._read_at >= REREAD_S:
            self._waited, self._read_at = self._delay(), now
        self._last = max(self._last, self._offset + now - self._waited)
        return self._last

    def deadline_to_sleep_time(self, deadline: float) -> float:
        """Real seconds to sleep: at most the own seconds left (a wait meanwhile leaves some, slept next)."""
        return deadline - self.current_time()

    def real_time(self) -> float:
        """This clock's time with no wait counted out: the real seconds, on the same origin."""
        return self._offset + self._now()


def real_time() -> float:
    """The time a measurement is taken on in a trio run: the real clock under `OwnClock`, else trio's own
    (a test's virtual clock: its lateness is measured as it is waited)."""
    clock = trio.lowlevel.current_clock()
    return clock.real_time() if isinstance(clock, OwnClock) else clock.current_time()
