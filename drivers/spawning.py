"""Children started apart leave Ctrl-C to their parent.

A terminal sends Ctrl-C's SIGINT to its whole foreground process group: the node and every child it
spawned. The parent decides what stops (the submitter withdraws its tasks, the worker cancels and
reaps its children); a child that took the signal itself would print a `KeyboardInterrupt` traceback
from wherever it was (importing torch, loading a model) and report a failure that is not one.
`start_apart` starts a child with SIGINT blocked in the starting thread, so the child begins life
with it blocked (the mask survives fork and exec, and Python then keeps its own handler unarmed);
the child's entry calls `ignore_interrupts` first, which ignores the signal (discarding one already
pending) and unblocks it.
"""

from __future__ import annotations

import signal
from multiprocessing import resource_tracker
from multiprocessing.process import BaseProcess


def start_apart(process: BaseProcess) -> None:
    """Start `process` with SIGINT blocked for it from its first instruction; this thread's mask is
    restored at once (a Ctrl-C that came meanwhile is delivered then).

    multiprocessing starts its resource tracker with the first spawned child and unblocks SIGINT in
    the starting thread when it has (resource_tracker.ensure_running): it is started first, here.
    """
    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def ignore_interrupts() -> None:
    """The first call of a child started by `start_apart`: SIGINT ignored from now on."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
