"""A lease on trio's virtual clock: the submitter's attempt (node.submitter.attempt, unchanged) against
a worker that speaks the real wire over an in-memory stream and keeps its own cadence of heartbeats.

The attempt keeps its lease on trio's clock, so these run in virtual time (`MockClock`, autojump):
minutes of a lease pass in milliseconds, and each test reads the instant an event was heard, to the
millisecond, whatever the machine's load. What is pinned: a commit starts the lease at its ttl;
every heartbeat moves its deadline to heartbeat + ttl; a lease lapses exactly one ttl after the last
heartbeat, never before; a lapsed lease's late result is still read (the loop rejects it as stale);
the bytes of a message arriving in parts keep the lease as heartbeats do, and the scheduler hears of
them (`MessageArriving`) at most once a second.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

import scheduler as sch
from node.p2p.wire import Channel, memory_channel_pair
from node.submitter.attempt import ARRIVING_EVERY_S, Attempt, Heard, Identity, run_attempt
from protocol import (
    Cancel,
    Commit,
    ComputeUnit,
    Dispatch,
    ModelRef,
    Offer,
    Phase,
    Progress,
    TaskSpec,
)
from protocol.codec import encode
from protocol.framing import frame

TTL = 30.0
TASK = "camp-job-0-0"
LEASE = "lease-1"
WORKER = "12D3KooWorker"


def _attempt() -> Attempt:
    return Attempt(
        campaign_id="camp",
        task_id=TASK,
        peer_id=WORKER,
        addrs=(),
        spec=TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=10),
        model=ModelRef(name="m.onnx", size=1, sha256="ab" * 32, sources=("https://example.org/m.onnx",)),
    )


Worker = Callable[[Channel], Awaitable[None]]


async def _run(
    worker: Worker, react: dict[type, list[sch.Command]] | None = None
) -> list[tuple[float, object]]:
    """Run one attempt against `worker`; return each event heard with the virtual instant it came.

    `react` plays the scheduler: on the first event of a type, its commands go to the attempt.
    """
    mine, theirs = memory_channel_pair("submitter", WORKER, read_timeout=math.inf)
    me = Identity(peer_id="12D3KooSubmitter", private_key=bytes(range(32)), addrs=())
    inbox_send, inbox = trio.open_memory_channel[sch.Command](10)
    heard_send, heard = trio.open_memory_channel[Heard](10)
    react = dict(react or {})

    async def opened(peer_id: str, addrs: tuple[str, ...]) -> Channel:
        return mine

    events: list[tuple[float, object]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(worker, theirs)

        async def attempt() -> None:
            async with heard_send:
                await run_attempt(_attempt(), me, opened, inbox, heard_send)

        nursery.start_soon(attempt)
        async for item in heard:
            events.append((trio.current_time(), item.event))
            for command in react.pop(type(item.event), []):
                await inbox_send.send(command)
            if isinstance(item.event, sch.LeaseLapsed):
                break  # the attempt now reads on for a zombie's late result: the loop would end it here
        nursery.cancel_scope.cancel()
    return events


async def _committed(channel: Channel) -> float:
    """Read the offer, answer with a commit; the instant of the commit."""
    offer = await channel.receive()
    assert isinstance(offer, Offer)
    await channel.send(Commit(task_id=TASK, lease_id=LEASE, lease_ttl_s=TTL))
    return trio.current_time()


def _progress(done: int) -> Progress:
    return Progress(task_id=TASK, lease_id=LEASE, phase=Phase.MEASURING, done=done, total=10)


async def test_a_silent_worker_loses_its_lease_one_ttl_after_the_commit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    start: list[float] = []

    async def silent(channel: Channel) -> None:
        start.append(await _committed(channel))
        await trio.sleep_forever()

    events = await _run(silent)
    kinds = [type(event).__name__ for _, event in events]
    assert kinds == ["OfferCommitted", "LeaseLapsed"]
    at, lapsed = events[-1]
    assert isinstance(lapsed, sch.LeaseLapsed)
    assert lapsed.lease_id == LEASE
    assert "no heartbeat" in lapsed.detail
    assert at - start[0] == pytest.approx(TTL, abs=1e-3)


async def test_each_heartbeat_moves_the_deadline_and_the_lapse_comes_one_ttl_after_the_last(
    autojump_clock: trio.testing.MockClock,
) -> None:
    beats: list[float] = []

    async def beating(channel: Channel) -> None:
        await _committed(channel)
        for done in range(1, 6):  # five heartbeats 20 s apart: 100 s, past three ttls of 30 s
            await trio.sleep(20.0)
            await channel.send(_progress(done))
            beats.append(trio.current_time())
        await trio.sleep_forever()

    events = await _run(beating)
    kinds = [type(event).__name__ for _, event in events]
    assert kinds == ["OfferCommitted", *["ProgressReported"] * 5, "LeaseLapsed"]
    at, _ = events[-1]
    assert at - beats[-1] == pytest.approx(TTL, abs=1e-3)
    assert at - events[0][0] == pytest.approx(100.0 + TTL, abs=1e-3)


async def test_heartbeats_a_hair_inside_the_ttl_keep_the_lease(
    autojump_clock: trio.testing.MockClock,
) -> None:
    beats: list[float] = []

    async def late_but_in_time(channel: Channel) -> None:
        await _committed(channel)
        for done in range(1, 4):
            await trio.sleep(TTL - 0.01)
            await channel.send(_progress(done))
            beats.append(trio.current_time())
        await trio.sleep_forever()

    events = await _run(late_but_in_time)
    kinds = [type(event).__name__ for _, event in events]
    assert kinds == ["OfferCommitted", *["ProgressReported"] * 3, "LeaseLapsed"]
    assert events[-1][0] - beats[-1] == pytest.approx(TTL, abs=1e-3)


async def test_the_scheduler_s_dispatch_reaches_the_worker_and_its_cancel_ends_the_lease_unlapsed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    got: list[object] = []

    async def worker(channel: Channel) -> None:
        await _committed(channel)
        got.append(await channel.receive())
        await channel.send(_progress(1))
        got.append(await channel.receive())
        await trio.sleep_forever()

    react: dict[type, list[sch.Command]] = {
        sch.OfferCommitted: [sch.SendDispatch(task_id=TASK, lease_id=LEASE)],
        sch.ProgressReported: [
            sch.SendCancel(task_id=TASK, peer_id=WORKER, lease_id=LEASE, reason="campaign stopped")
        ],
    }
    with trio.fail_after(10 * TTL):
        events = await _run(worker, react)
    assert [type(message) for message in got] == [Dispatch, Cancel]
    assert not any(isinstance(event, sch.LeaseLapsed) for _, event in events)


async def _in_parts(channel: Channel, parts: int, gap_s: float) -> list[float]:
    """Send one heartbeat's bytes in `parts` pieces `gap_s` apart; the instant of each piece."""
    data = frame(encode(_progress(1)))
    assert len(data) >= parts
    cuts = [round(i * len(data) / parts) for i in range(parts + 1)]
    sent: list[float] = []
    for a, b in itertools.pairwise(cuts):
        await trio.sleep(gap_s)
        await channel.send_raw(data[a:b])
        sent.append(trio.current_time())
    return sent


async def test_a_message_arriving_in_parts_keeps_the_lease_until_a_ttl_after_its_last_byte(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A closed loop's result of 2.1 MB is one frame, and at load 6 it took longer than the lab's 3 s
    ttl to arrive after the last heartbeat: the lease lapsed with the result on its way. Here one
    message's bytes come in eight pieces 20 s apart, 160 s against a ttl of 30 s."""
    sent: list[float] = []

    async def slow_link(channel: Channel) -> None:
        await _committed(channel)
        sent.extend(await _in_parts(channel, 8, 20.0))
        await trio.sleep_forever()

    events = await _run(slow_link)
    kinds = [type(event).__name__ for _, event in events]
    assert kinds == ["OfferCommitted", *["MessageArriving"] * 7, "ProgressReported", "LeaseLapsed"]
    assert [at for at, _ in events[1:8]] == pytest.approx(sent[:7], abs=1e-3)  # each piece told
    assert events[-1][0] - sent[-1] == pytest.approx(TTL, abs=1e-3)


async def test_the_scheduler_hears_of_a_message_in_parts_once_a_second_at_most(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def quick_pieces(channel: Channel) -> None:
        await _committed(channel)
        await _in_parts(channel, 16, 0.25)  # the last piece at 4 s completes the message
        await trio.sleep_forever()

    events = await _run(quick_pieces)
    arriving = [at for at, event in events if isinstance(event, sch.MessageArriving)]
    start = events[0][0]
    assert [at - start for at in arriving] == pytest.approx([0.25, 1.25, 2.25, 3.25], abs=1e-3)
    assert ARRIVING_EVERY_S == 1.0
