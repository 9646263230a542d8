"""`kit.owntime.fail_after`: a hang guard on the body's own seconds, not the machine's.

A body asleep for good is ended at its seconds; one spinning in the trio thread past them is ended
too (running is its own time); one that does a CPU-second of work beside four spinners on its core
(`kit.load`) holds under a guard of 2.5 s, where `trio.fail_after(2.5)` ends the same work under the
same load (the side by side: the load is real, the guard does not read it). Each outcome is the reason
the body ended, not a timing of this machine.
"""

from __future__ import annotations

import time

import pytest
import trio
import trio.lowlevel
from kit import owntime
from kit.load import Load, own_core

WORK_S = 1.0
"""CPU-seconds of work the body does in the trio thread (`time.thread_time`), in small steps."""
GUARD_S = 2.5


async def _work(cpu_s: float) -> None:
    """`cpu_s` of this thread's CPU, a few milliseconds at a time, yielding to trio between steps."""
    until = time.thread_time() + cpu_s
    while time.thread_time() < until:
        sum(i * i for i in range(20_000))
        await trio.lowlevel.checkpoint()


async def test_a_sleeping_body_is_ended_at_its_seconds() -> None:
    with pytest.raises(trio.TooSlowError, match="over 1 s of its own"), owntime.fail_after(1.0):
        await trio.sleep_forever()


async def test_a_body_spinning_past_its_seconds_is_ended() -> None:
    with pytest.raises(trio.TooSlowError, match="over 1 s of its own"), owntime.fail_after(1.0):
        await _work(600.0)


async def test_a_starved_body_holds_where_the_clocks_guard_ends_it() -> None:
    with Load(4, cores=own_core()):
        with pytest.raises(trio.TooSlowError), trio.fail_after(GUARD_S):
            await _work(WORK_S)  # the load is real: on trio's clock the same work is over its guard
        with owntime.fail_after(GUARD_S):
            await _work(WORK_S)
