"""Ctrl-C reaches a terminal's whole process group: a child started with `start_apart` must not take
it, even in its first instant (interpreter start-up, imports), and must go on to report its result."""

from __future__ import annotations

import multiprocessing
import os
import signal
from multiprocessing.connection import Connection

from drivers.spawning import ignore_interrupts, start_apart


def _child(conn: Connection, apart: bool) -> None:
    if apart:
        ignore_interrupts()
    conn.send("started")
    assert conn.poll(30)  # the parent's go, after it sent SIGINT to this process
    conn.recv()
    conn.send("survived")


def _run(apart: bool) -> tuple[list[str], int | None]:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_child, args=(child, apart), daemon=True)
    # A child inherits an ignored SIGINT (pytest-xdist's workers ignore it): start it as the CLI
    # would, with Python's own handler in place.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        if apart:
            start_apart(process)
        else:
            process.start()
    finally:
        signal.signal(signal.SIGINT, previous)
    child.close()  # the child's end is the child's alone: its death reads as EOF here, at once
    assert process.pid is not None
    os.kill(process.pid, signal.SIGINT)  # at once: the child is still starting its interpreter
    heard: list[str] = []
    try:
        if parent.poll(60):
            heard.append(parent.recv())
            os.kill(process.pid, signal.SIGINT)  # and once it runs
            parent.send("go")
            if parent.poll(60):
                heard.append(parent.recv())
    except EOFError:
        pass
    process.join(60)
    return heard, process.exitcode


def test_a_child_started_apart_ignores_sigint_from_its_first_instant() -> None:
    assert _run(apart=True) == (["started", "survived"], 0)


def test_a_plain_child_dies_of_the_same_sigint() -> None:
    heard, code = _run(apart=False)  # the hazard the mechanism removes, shown on the same path
    assert "survived" not in heard
    assert code != 0


def test_the_starting_threads_mask_is_restored() -> None:
    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    ctx = multiprocessing.get_context("spawn")
    process = ctx.Process(target=os.getpid, daemon=True)
    start_apart(process)
    process.join(60)
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == before
