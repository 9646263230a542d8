"""A worker's graceful leave: what `join` does on SIGTERM (a service manager stopping it) or SIGINT.

In order, each step bounded, so that the process exits within seconds (`LEAVE_S` is the promise):

1. no more offers: each is declined `shutting_down` (admission);
2. every lease not finished is handed back with a signed `Release` on its negotiate stream, so the
   submitter offers the task elsewhere at once instead of waiting for the lease to lapse; a running
   measurement's child is killed, a queued job never runs;
3. the advert is withdrawn: no more republishing, and a last advert that expires within seconds
   replaces the servers' copies (kad-dht has no unprovide: the provider records lapse with their TTL,
   and a submitter confirms each provider over `/sark/profile`, which stops with the host);
4. the caller leaves `open_worker`, which closes the host, so connected peers see us go at once (P15).

Results already signed wait in the outbox as always: a submitter that reclaims them later gets them.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Final

import trio

from node.events import EventSink, quiet
from node.worker.role import WorkerHandle

LEAVE_S: Final = 5.0
"""The promise: from the signal to the process's exit."""
HAND_BACK_S: Final = 2.0
"""How long the leave waits for the outcomes still owed (releases, fresh results) to reach their streams."""
LEAVE_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)


@dataclass(frozen=True)
class Left:
    """What a leave did: the leases handed back, how many releases reached their stream, how long it took."""

    released: tuple[str, ...]
    delivered: int
    seconds: float


async def leave(worker: WorkerHandle, *, events: EventSink = quiet) -> Left:
    """Take no more offers, hand back every unfinished lease, withdraw the advert (see the module)."""
    started = time.monotonic()
    released = worker.runner.leave("the worker is leaving the swarm")
    owed = worker.runner.owed()
    events("leaving", released=[job.task_id for job in released])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(worker.advertised.withdraw)
        with trio.move_on_after(HAND_BACK_S):
            for job in owed:
                await job.sent.wait()
    left = Left(
        released=tuple(job.task_id for job in released),
        delivered=sum(job.sent.is_set() for job in released),
        seconds=round(time.monotonic() - started, 3),
    )
    events("left", released=list(left.released), delivered=left.delivered, seconds=left.seconds)
    return left


async def serve_until_signalled(
    worker: AbstractAsyncContextManager[WorkerHandle],
    on_ready: Callable[[WorkerHandle], None],
    *,
    events: EventSink = quiet,
) -> Left | None:
    """Run a worker until SIGTERM or SIGINT, then leave gracefully; return what the leave did.

    A signal before the worker is ready stops the start-up at once (nothing to hand back yet): None.
    """
    asked, ready = trio.Event(), trio.Event()
    left: Left | None = None
    with trio.open_signal_receiver(*LEAVE_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                async for _ in signals:
                    asked.set()
                    if not ready.is_set():
                        nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(watch)
            async with worker as handle:
                ready.set()
                on_ready(handle)
                await asked.wait()
                left = await leave(handle, events=events)
            nursery.cancel_scope.cancel()
    return left


__all__ = ["HAND_BACK_S", "LEAVE_S", "Left", "leave", "serve_until_signalled"]
