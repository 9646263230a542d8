"""Issue 49: a submitter that was not running when a lease's deadline passed listens before it
judges the silence (`node.submitter.loop.heard_within`).

README's recipe at load 20 on 2 cores: the embedded worker's lease lapsed, "no heartbeat for 10 s",
while its heartbeats sat unread in the submitter's own starved process. On trio's virtual clock a
stall is a jump of the clock past the deadline, the heartbeat sent just after the process runs
again: it is heard, where a plain wait to the deadline returned nothing. A worker that is gone is
still judged silent, one stall later.
"""

from __future__ import annotations

import trio
import trio.lowlevel
import trio.testing

from node.submitter.loop import STALL_S, heard_within


async def _stalled_then_heard(clock: trio.testing.MockClock, stall_s: float) -> str | None:
    """Waits 10 s for an event; at 9 s the process stalls `stall_s` (the clock jumps), then, once it
    runs again, a heartbeat is sent."""
    send, receive = trio.open_memory_channel[str](1)
    got: list[str | None] = []

    async def loop() -> None:
        got.append(await heard_within(receive, 10.0))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(loop)
        await trio.sleep(9.0)
        clock.jump(stall_s)  # the machine ran others: the deadline passed while this process slept
        await trio.lowlevel.checkpoint()  # the process runs again: the loop's deadline is seen first
        await trio.lowlevel.checkpoint()
        await send.send("heartbeat")
    return got[0]


async def test_a_heartbeat_behind_the_processs_own_stall_is_heard(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    assert await _stalled_then_heard(mock_clock, 5.0) == "heartbeat"


async def test_a_short_delay_is_not_a_stall_and_silence_is_judged_at_the_deadline(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    send, receive = trio.open_memory_channel[str](1)
    assert await heard_within(receive, 10.0) is None
    assert trio.current_time() < 10.0 + STALL_S
    send.close()


async def test_a_worker_gone_is_still_silent_one_stall_later(mock_clock: trio.testing.MockClock) -> None:
    _, receive = trio.open_memory_channel[str](1)

    async def stall() -> None:
        await trio.sleep(9.0)
        mock_clock.jump(6.0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(stall)
        mock_clock.autojump_threshold = 0
        assert await heard_within(receive, 10.0) is None
    assert 15.0 <= trio.current_time() <= 15.0 + 5.0 + 0.01  # the deadline, its lateness, as long again


async def test_what_is_already_heard_comes_before_a_deadline_already_past(
    mock_clock: trio.testing.MockClock,
) -> None:
    """The loop was busy past a lease's deadline while the worker's result was read and queued: it
    takes the result, where a wait of no time was cancelled before it took it, and the lease lapsed
    with its result in the queue (a 2.1 MB result at load 6, 2026-12-03)."""
    send, receive = trio.open_memory_channel[str](1)
    send.send_nowait("result")
    assert await heard_within(receive, 0.0) == "result"
    assert await heard_within(receive, 0.0) is None  # and nothing heard is still silence
