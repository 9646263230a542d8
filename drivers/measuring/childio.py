"""The trio side of a spawned child (`drivers.measuring.spawning.Child`): its next message awaited without
blocking the loop, and the child stopped and reaped even while the caller is cancelled."""

from __future__ import annotations

from typing import Any

import trio

from drivers.measuring.spawning import Child


async def next_message(child: Child) -> tuple[Any, ...] | None:
    """The child's next message once its pipe is readable (`Child.receive`: None when it ended,
    `NotStarted` when its start failed)."""
    await trio.lowlevel.wait_readable(child.receiver.fileno())
    return child.receive()


async def stopped(child: Child) -> None:
    """Kill the child if it runs and reap it (it has sent its last message, or is killed): moments,
    shielded so that a cancelled caller still reaps it."""
    with trio.CancelScope(shield=True):
        await trio.to_thread.run_sync(child.stop)


__all__ = ["next_message", "stopped"]
