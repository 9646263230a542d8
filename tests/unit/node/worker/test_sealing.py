"""A worker builds and seals its result off the node's loop (`node.worker.runner.sealed`).

A fleet member's result of some 5,000 request records took seconds of CPU to validate, cut and seal
at load 9, on the trio thread: its heartbeats stopped, its 3 s lease lapsed with the result in hand,
and the row said `lease_lapsed` instead of the refusal the lab waited for
(`tests/labs/e2e/test_fleet_floor.py` beside `kit.load 4`). The mechanism, not a time: while the seal
runs, the loop runs another task (a heartbeat's stand-in); with the seal on the loop it cannot, and
the seal gives up waiting for it.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import trio
from kit.data import make_profile

import node.worker.runner as runner


async def test_the_loop_runs_while_the_result_is_sealed(monkeypatch: pytest.MonkeyPatch) -> None:
    sealing, ticked = threading.Event(), threading.Event()

    def seal(*args: Any) -> bool:
        sealing.set()
        return ticked.wait(timeout=60)  # held until the loop has run a step of another task

    async def heartbeat() -> None:
        while not sealing.is_set():  # noqa: ASYNC110 (a thread sets it: a beat, then a look)
            await trio.sleep(0.001)
        ticked.set()

    monkeypatch.setattr(runner, "signed_result", seal)
    job: Any = None  # the stand-in seal reads neither
    measurement: Any = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(heartbeat)
        done: Any = await runner.sealed(job, "worker", b"k" * 32, make_profile(), measurement)
    assert done is True  # the other task ran while the seal held its thread
