"""The node's own clock (`node.owntime`): trio's timeouts count the seconds the node ran or slept, not the
seconds it waited for a CPU; the kernel's count of that wait is read. What it gave a starved submitter
among Sybils is measured in node/owntime.py's docstring."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import trio
import trio.testing

from node.owntime import OwnClock, real_time, run_delay_reader


class Waits:
    """A run delay the test sets (seconds), read as the kernel's would be."""

    def __init__(self) -> None:
        self.s = 0.0

    def __call__(self) -> float:
        return self.s


def test_the_time_is_the_monotonic_clock_less_the_waits_and_never_goes_back() -> None:
    now, waits = [100.0], Waits()
    clock = OwnClock(delay=waits, now=lambda: now[0])
    clock.start_clock()
    start = clock.current_time()
    now[0] += 1.0
    assert clock.current_time() - start == pytest.approx(1.0)
    now[0] += 1.0
    waits.s = 0.75  # of that second, 0.75 s runnable and not running
    assert clock.current_time() - start == pytest.approx(1.25)
    waits.s = 2.0  # a wait read larger than the time since the last read (read late): held, not back
    now[0] += 0.5
    assert clock.current_time() - start == pytest.approx(1.25)
    assert clock.deadline_to_sleep_time(start + 2.0) == pytest.approx(0.75)
    assert clock.counts


def test_a_timeout_lasts_its_seconds_plus_the_waits_counted_out_meanwhile() -> None:
    """0.3 s of wait counted out during a 0.2 s timeout: it ends no sooner than 0.5 s of real time (a
    lower bound, which a loaded machine only lengthens)."""
    waits = Waits()

    async def main() -> tuple[float, float, float]:
        real, own, measured = time.perf_counter(), trio.current_time(), real_time()
        with trio.move_on_after(0.2):
            await trio.sleep(0.05)
            waits.s += 0.3  # as if the process had waited 0.3 s for a CPU here
            await trio.sleep(10)
        return time.perf_counter() - real, trio.current_time() - own, real_time() - measured

    real_s, own_s, measured_s = trio.run(main, clock=OwnClock(delay=waits))
    assert real_s >= 0.5
    assert own_s >= 0.2
    assert measured_s >= 0.5  # what a challenge is timed on: the real seconds, the waits in them


def test_under_another_clock_a_measurement_is_timed_on_it() -> None:
    """A test's virtual clock times a challenge's lateness as it is waited (node/p2p's challenge tests)."""

    async def main() -> float:
        measured = real_time()
        await trio.sleep(30)
        return real_time() - measured

    assert trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)) == pytest.approx(30)


STARVED = """
import os, subprocess, sys, time
core = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {core})
spinner = subprocess.Popen([sys.executable, "-c", "print(flush=True)\\nwhile True: pass"],
                           stdout=subprocess.PIPE)  # on this process's one core, as it inherits it
spinner.stdout.readline()  # spinning from here on
import trio
from node.owntime import OwnClock, run_delay_reader
read = run_delay_reader()
clock = OwnClock()
async def main():
    waited, real, own, chunks = read(), time.perf_counter(), trio.current_time(), 0
    with trio.move_on_after(0.3):
        while True:
            sum(i * i for i in range(20_000))  # work: runnable all along, the core shared
            chunks += 1
            await trio.sleep(0)
    print(read() - waited, time.perf_counter() - real, trio.current_time() - own, chunks)
try:
    trio.run(main, clock=clock)
finally:
    spinner.kill()
"""


@pytest.mark.skipif(run_delay_reader() is None, reason="the kernel does not count a thread's run delay here")
def test_a_process_sharing_its_core_with_a_spinner_gets_its_seconds_back() -> None:
    """A child pinned to one core beside a spinner of its own works through a 0.3 s timeout: the kernel
    counts its waits (at least a tenth of a second: it had at most half the core), and the timeout
    lasts 0.3 s of its own time, that much longer in real time."""
    done = subprocess.run([sys.executable, "-c", STARVED], capture_output=True, text=True, timeout=120,
                          env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    waited, real, own, chunks = (float(x) for x in done.stdout.split())
    assert waited >= 0.1
    assert own >= 0.3
    assert real >= own + 0.1
    assert chunks > 0
