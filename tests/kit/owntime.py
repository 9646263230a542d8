"""A hang guard on the test's own seconds: `trio.fail_after` less the seconds the machine took.

    with owntime.fail_after(60):      # in a trio test, where `trio.fail_after(60)` was
        await lab.add(7)

A lab that runs its hosts in the test's own trio thread (a gate, workers and a submitter on loopback,
`tests/labs/swarm/`) bounds its body against a hang. On trio's clock that bound read the machine's
load: at `kit.load 6` `test_shards.py`'s lookup lab took 55 s of its 60 quiet ones' 12, the thread
waiting for a core, and a busier machine ends it as hung while it is working. Here the seconds are the
body's own (as a submitter's look counts them, `node.p2p.looktime`): real ones less the thread's
run delay (the kernel's count of the time it was runnable and not running), so a starved body is
given the seconds the machine took from it and a hung one (asleep, waiting for an answer that does
not come) is not. No cap of real time (a look's `STRETCH_MAX`, 6x, ended a CPU-second's work that
had 15 s of real time beside four spinners and the suite): pytest's timeout is the backstop.
Where the kernel does not say, the seconds are real ones, as `trio.fail_after`'s.

A watcher (a trio system task, outside the body's cancel scopes) checks every `CHECK_S` at most and
cancels the body once its seconds are spent; the guard then raises `trio.TooSlowError` naming both
counts. Waits on child processes are the body's own seconds (its thread sleeps): a lab whose work is
in other processes is bounded by their CPU instead (`kit.cpubound`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import trio

from node.p2p.looktime import machine_run_delay

CHECK_S: Final = 0.5
"""The most the watcher sleeps between two looks at the body's seconds."""


@contextmanager
def fail_after(seconds: float) -> Iterator[trio.CancelScope]:
    """Cancel the body once it has had `seconds` of its own, then raise `trio.TooSlowError`."""
    waited = machine_run_delay()
    began, waited_before = trio.current_time(), waited()
    watching = trio.CancelScope()

    def spent() -> float:
        return trio.current_time() - began - (waited() - waited_before)

    async def watch() -> None:
        with watching:
            while True:
                left = seconds - spent()
                if left <= 0:
                    body.cancel()
                    return
                await trio.sleep(min(left, CHECK_S))

    with trio.CancelScope() as body:
        trio.lowlevel.spawn_system_task(watch, name=f"owntime.fail_after({seconds:g})")
        try:
            yield body
        finally:
            watching.cancel()
    if body.cancelled_caught:
        real = trio.current_time() - began
        said = f"{spent():.1f} s own, {real:.1f} s real"
        raise trio.TooSlowError(f"over {seconds:g} s of its own ({said})")
